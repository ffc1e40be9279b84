// The VM's compiler: a lowered Program to stack bytecode, once per Program (cached on it).
// Every expression leaves exactly one value on the stack; an expression in tail position ends
// with RET (or TAILCALL + RET). Lambda bodies are compiled after the root, each at its entry.
#include <atomic>
#include <stdexcept>

#include "ndvm/prims.hpp"
#include "ndvm/vm.hpp"

namespace ndvm {

namespace {

constexpr uint32_t kMaxLeafArgs = 8;  // PRIMK reads at most this many operands in place
// The compiler recurses on the tree; the reader bounds source nesting far below this (2000)
constexpr uint32_t kMaxNesting = 20000;

bool is_leaf(NodeKind k) {
  return k == NodeKind::CONST || k == NodeKind::LOCAL || k == NodeKind::PARAM ||
         k == NodeKind::INPUT;
}

class Compiler {
 public:
  Compiler(const Program& p, VmCode& out) : p_(p), c_(out) {
    c_.entry.assign(p.nodes.size(), -1);
  }

  void run() {
    c_.root_pc = pc();
    mark(p_.root);
    expr(p_.root, true);
    while (!lambdas_.empty()) {
      const uint32_t lam = lambdas_.back();
      lambdas_.pop_back();
      const uint32_t body = kids(lam)[0];
      mark(body);
      expr(body, true);
    }
  }

 private:
  const Node& node(uint32_t id) const { return p_.nodes[id]; }
  const uint32_t* kids(uint32_t id) const { return p_.kids_of(node(id)); }
  uint32_t pc() const { return static_cast<uint32_t>(c_.code.size()); }
  void mark(uint32_t id) { c_.entry[id] = static_cast<int32_t>(pc()); }

  uint32_t emit(VmOp op, uint32_t nd, int32_t a = 0, int32_t b = 0, uint16_t prim = 0,
                uint8_t c = 0) {
    VmIns in;
    in.op = op;
    in.node = nd;
    in.a = a;
    in.b = b;
    in.prim = prim;
    in.c = c;
    c_.code.push_back(in);
    return pc() - 1;
  }
  void ret(bool tail, uint32_t nd) {
    if (tail) emit(VmOp::RET, nd);
  }

  void expr(uint32_t id, bool tail) {
    if (++depth_ > kMaxNesting) throw std::invalid_argument("vm: program nested too deeply");
    expr_at(id, tail);
    --depth_;
  }

  void expr_at(uint32_t id, bool tail) {
    const Node& n = node(id);
    const int32_t nk = static_cast<int32_t>(n.nkids);
    switch (n.kind) {
      case NodeKind::CONST: emit(VmOp::CONST, id, n.a); return ret(tail, id);
      case NodeKind::LOCAL: emit(VmOp::LOCAL, id, n.a, n.b); return ret(tail, id);
      case NodeKind::PARAM: emit(VmOp::PARAM, id, n.a); return ret(tail, id);
      case NodeKind::INPUT: emit(VmOp::INPUT, id, n.a); return ret(tail, id);
      case NodeKind::PRIMREF: emit(VmOp::PRIMREF, id, 0, 0, n.op); return ret(tail, id);
      case NodeKind::LAMBDA:
        if (n.nkids != 1) break;
        lambdas_.push_back(id);
        emit(VmOp::LAMBDA, id);
        return ret(tail, id);
      case NodeKind::IF:
        if (n.nkids != 3) break;
        return if_expr(id, tail);
      case NodeKind::SEQ:
        if (n.nkids == 0) break;
        for (int32_t i = 0; i < nk; ++i) {
          expr(kids(id)[i], tail && i == nk - 1);
          if (i < nk - 1) emit(VmOp::POP, id);
        }
        return;
      case NodeKind::OR:
        if (n.nkids == 0) break;
        return or_expr(id, tail);
      case NodeKind::LET:
        if (n.nkids == 0) break;
        for (int32_t i = 0; i < nk - 1; ++i) expr(kids(id)[i], false);
        emit(VmOp::LET, id, nk - 1);
        expr(kids(id)[nk - 1], tail);
        if (!tail) emit(VmOp::POPENV, id);
        return;
      case NodeKind::LETREC:
        if (n.nkids == 0) break;
        emit(VmOp::LETREC, id, nk - 1);
        for (int32_t i = 0; i < nk - 1; ++i) {
          expr(kids(id)[i], false);
          emit(VmOp::SETREC, id, i);
        }
        expr(kids(id)[nk - 1], tail);
        if (!tail) emit(VmOp::POPENV, id);
        return;
      case NodeKind::CALL:
        if (n.nkids == 0) break;
        for (int32_t i = 0; i < nk; ++i) expr(kids(id)[i], false);
        if (!tail) {
          emit(VmOp::CALL, id, nk - 1);
          return;
        }
        emit(VmOp::TAILCALL, id, nk - 1);
        return ret(true, id);
      case NodeKind::PRIMCALL: prim_call(id); return ret(tail, id);
      case NodeKind::ASSERT:
        if (n.nkids != 1) break;
        expr(kids(id)[0], false);
        emit(VmOp::ASSERT, id);
        return ret(tail, id);
    }
    throw std::invalid_argument("vm: malformed node " + std::to_string(id));
  }

  // test; IF else; then; [JMP join]; else: else; [join: ARMEND]   (brackets: not in tail)
  void if_expr(uint32_t id, bool tail) {
    const uint32_t* k = kids(id);
    expr(k[0], false);
    const uint32_t br = emit(VmOp::IF, id, 0, -1);
    mark(k[1]);
    expr(k[1], tail);
    uint32_t jmp = 0;
    if (!tail) jmp = emit(VmOp::JMP, id);
    c_.code[br].a = static_cast<int32_t>(pc());
    mark(k[2]);
    expr(k[2], tail);
    if (tail) return;
    const uint32_t join = emit(VmOp::ARMEND, id);
    c_.code[jmp].a = static_cast<int32_t>(join);
    c_.code[br].b = static_cast<int32_t>(join);
  }

  // k0; ORT; k1; ORT; ...; k_last; end: RET (tail) or ARMEND
  void or_expr(uint32_t id, bool tail) {
    const uint32_t* k = kids(id);
    const uint32_t nk = node(id).nkids;
    std::vector<uint32_t> tests;
    for (uint32_t i = 0; i < nk; ++i) {
      if (i > 0) mark(k[i]);
      expr(k[i], tail && i + 1 == nk);
      if (i + 1 < nk) {
        tests.push_back(emit(VmOp::ORT, id, 0, static_cast<int32_t>(i + 1), 0, tail ? 1 : 0));
      }
    }
    const uint32_t end = emit(tail ? VmOp::RET : VmOp::ARMEND, id);
    for (uint32_t t : tests) c_.code[t].a = static_cast<int32_t>(end);
  }

  void prim_call(uint32_t id) {
    const Node& n = node(id);
    const PrimKind kind = prim_info(n.op).kind;
    bool leaves = (kind == PrimKind::NUMERIC || kind == PrimKind::PREDICATE) &&
                  n.nkids <= kMaxLeafArgs;
    for (uint32_t i = 0; leaves && i < n.nkids; ++i) leaves = is_leaf(node(kids(id)[i]).kind);
    if (leaves) {
      const int32_t off = static_cast<int32_t>(c_.operands.size());
      for (uint32_t i = 0; i < n.nkids; ++i) {
        const uint32_t kid = kids(id)[i];
        c_.operands.push_back(VmOperand{node(kid).kind, node(kid).a, node(kid).b, kid});
      }
      emit(VmOp::PRIMK, id, off, static_cast<int32_t>(n.nkids), n.op);
      return;
    }
    for (uint32_t i = 0; i < n.nkids; ++i) expr(kids(id)[i], false);
    emit(VmOp::PRIM, id, static_cast<int32_t>(n.nkids), 0, n.op);
  }

  const Program& p_;
  VmCode& c_;
  std::vector<uint32_t> lambdas_;
  uint32_t depth_ = 0;
};

}  // namespace

const char* vm_op_name(VmOp op) {
  static const char* const names[] = {
      "CONST", "PARAM", "INPUT", "LOCAL", "PRIMREF", "LAMBDA", "PRIM",   "PRIMK", "CALL", "TAILCALL",
      "RET",   "JMP",   "IF",    "ARMEND", "ORT",    "ASSERT", "LET",    "LETREC", "SETREC",
      "POPENV", "POP"};
  const size_t k = static_cast<size_t>(op);
  return k < sizeof names / sizeof names[0] ? names[k] : "?";
}

std::shared_ptr<const VmCode> compile_vm(const Program& prog) {
  auto out = std::make_shared<VmCode>();
  Compiler(prog, *out).run();
  return out;
}

const VmCode& vm_code(const Program& prog) {
  std::shared_ptr<const VmCode> c = std::atomic_load(&prog.vm_code);
  if (!c) {
    c = compile_vm(prog);  // two threads may both compile: the same code, one is kept
    std::shared_ptr<const VmCode> none;
    if (!std::atomic_compare_exchange_strong(&prog.vm_code, &none, c)) c = none;
  }
  return *c;
}

}  // namespace ndvm
