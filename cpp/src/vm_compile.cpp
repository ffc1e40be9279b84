// The VM's compiler: a lowered Program to stack bytecode, once per Program (cached on it).
// Every expression leaves exactly one value on the stack; an expression in tail position ends
// with RET (or TAILCALL + RET). Lambda bodies are compiled after the root, each at its entry.
#include <atomic>
#include <stdexcept>
#include <utility>

#include "ndvm/prims.hpp"
#include "ndvm/vm.hpp"

namespace ndvm {

namespace {

// The compiler recurses on the tree; the reader bounds source nesting far below this (2000)
constexpr uint32_t kMaxNesting = 20000;

bool is_leaf(NodeKind k) {
  return k == NodeKind::CONST || k == NodeKind::LOCAL || k == NodeKind::PARAM ||
         k == NodeKind::INPUT;
}

// A frame of the source's scopes: `level` is its environment frame's depth in the chain
// (a chain of lets, each the body of the one before, shares one frame: a let* is one frame),
// `offset` its first slot there; letrec: its slots may be read before they are assigned.
struct Scope {
  uint32_t level = 0;
  uint32_t offset = 0;
  uint8_t letrec = 0;
};

class Compiler {
 public:
  Compiler(const Program& p, VmCode& out) : p_(p), c_(out) {
    c_.entry.assign(p.nodes.size(), -1);
    // whether a node's subtree creates closures (children have larger ids than parents;
    // a table that breaks that rule is read conservatively)
    lambdas_in_.assign(p.nodes.size(), 0);
    for (size_t id = p.nodes.size(); id-- > 0;) {
      const Node& n = p.nodes[id];
      uint8_t v = n.kind == NodeKind::LAMBDA;
      for (uint32_t i = 0; i < n.nkids; ++i) {
        const uint32_t kid = p.kids_of(n)[i];
        v |= kid <= id || lambdas_in_[kid];
      }
      lambdas_in_[id] = v;
    }
  }

  void run() {
    c_.root_pc = pc();
    mark(p_.root);
    expr(p_.root, true);
    while (!lambdas_.empty()) {
      const uint32_t lam = lambdas_.back().first;
      scope_ = std::move(lambdas_.back().second);
      lambdas_.pop_back();
      const uint32_t body = kids(lam)[0];
      scope_.push_back(Scope{level() + 1, 0, 0});  // the parameters' frame
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
      case NodeKind::LOCAL: {
        const VmOperand o = leaf(id);
        emit(VmOp::LOCAL, id, o.a, o.b);
        return ret(tail, id);
      }
      case NodeKind::PARAM: emit(VmOp::PARAM, id, n.a); return ret(tail, id);
      case NodeKind::INPUT: emit(VmOp::INPUT, id, n.a); return ret(tail, id);
      case NodeKind::PRIMREF: emit(VmOp::PRIMREF, id, 0, 0, n.op); return ret(tail, id);
      case NodeKind::LAMBDA:
        if (n.nkids != 1) break;
        lambdas_.emplace_back(id, scope_);
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
        return let_chain(id, tail);
      case NodeKind::LETREC:
        if (n.nkids == 0) break;
        emit(VmOp::LETREC, id, nk - 1);
        scope_.push_back(Scope{level() + 1, 0, 1});
        for (int32_t i = 0; i < nk - 1; ++i) {
          expr(kids(id)[i], false);
          emit(VmOp::SETREC, id, i);
        }
        expr(kids(id)[nk - 1], tail);
        scope_.pop_back();
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

  uint32_t level() const { return scope_.empty() ? 0 : scope_.back().level; }

  // A leaf operand; a variable's (depth, slot) in the source's frames become its environment
  // frame's depth and the slot there.
  VmOperand leaf(uint32_t id) const {
    const Node& k = node(id);
    VmOperand o{k.kind, k.a, k.b, id};
    if (k.kind != NodeKind::LOCAL) return o;
    if (k.a < 0 || static_cast<size_t>(k.a) >= scope_.size()) {
      throw std::invalid_argument("vm: variable out of scope at node " + std::to_string(id));
    }
    const Scope& f = scope_[scope_.size() - 1 - static_cast<size_t>(k.a)];
    o.a = static_cast<int32_t>(level() - f.level);
    o.b = k.b + static_cast<int32_t>(f.offset);
    return o;
  }

  // The let that joins the frame of the let whose body it is: one without closures inside,
  // since a frame written after it is created must not be seen by a closure of a lane group
  // that forked off before the write (a later group's LETX would overwrite its slots).
  bool joins_chain(uint32_t body) const {
    return node(body).kind == NodeKind::LET && node(body).nkids > 0 && !lambdas_in_[body];
  }

  // let, and each let joining it: one environment frame of all their slots (LET creates it
  // with the first let's values, LETX stores each later let's); every let still counts its
  // heap cell.
  void let_chain(uint32_t id, bool tail) {
    uint32_t total = node(id).nkids - 1;
    for (uint32_t l = id; joins_chain(kids(l)[node(l).nkids - 1]);) {
      l = kids(l)[node(l).nkids - 1];
      total += node(l).nkids - 1;
    }
    const size_t outer = scope_.size();
    uint32_t off = 0;
    uint32_t l = id;
    for (;;) {
      const uint32_t n = node(l).nkids - 1;
      for (uint32_t i = 0; i < n; ++i) expr(kids(l)[i], false);
      if (l == id) {
        emit(VmOp::LET, l, static_cast<int32_t>(n), static_cast<int32_t>(total));
        scope_.push_back(Scope{level() + 1, 0, 0});
      } else {
        emit(VmOp::LETX, l, static_cast<int32_t>(n), static_cast<int32_t>(off));
        scope_.push_back(Scope{level(), off, 0});
      }
      off += n;
      const uint32_t body = kids(l)[n];
      if (!joins_chain(body)) {
        expr(body, tail);
        break;
      }
      l = body;
    }
    scope_.resize(outer);
    if (!tail) emit(VmOp::POPENV, id);
  }

  // A leaf read after the arguments that follow it are evaluated reads what the walker reads
  // in order, unless it can fail: a letrec slot may still be unassigned (the walker would
  // report that error before any later argument's).
  bool read_late_ok(uint32_t kid) const {
    const Node& k = node(kid);
    if (k.kind != NodeKind::LOCAL) return is_leaf(k.kind);
    return scope_[scope_.size() - 1 - static_cast<size_t>(k.a)].letrec == 0;
  }

  // A NUMERIC/PREDICATE call is PRIMK: the leaf operands are read in place; the others (and a
  // leaf before them that could fail) are pushed first and read from the stack.
  void prim_call(uint32_t id) {
    const Node& n = node(id);
    const PrimKind kind = prim_info(n.op).kind;
    if ((kind != PrimKind::NUMERIC && kind != PrimKind::PREDICATE) || n.nkids > kPrimkMaxArgs) {
      for (uint32_t i = 0; i < n.nkids; ++i) expr(kids(id)[i], false);
      emit(VmOp::PRIM, id, static_cast<int32_t>(n.nkids), 0, n.op);
      return;
    }
    uint32_t last = 0;  // one past the last argument that is not a leaf
    for (uint32_t i = 0; i < n.nkids; ++i) last = is_leaf(node(kids(id)[i]).kind) ? last : i + 1;
    VmOperand ops[kPrimkMaxArgs];
    uint8_t pushed = 0;
    for (uint32_t i = 0; i < n.nkids; ++i) {
      const uint32_t kid = kids(id)[i];
      const bool in_place = is_leaf(node(kid).kind) && (i >= last || read_late_ok(kid));
      ops[i] = leaf(kid);
      if (!in_place) ops[i].kind = NodeKind::CALL;
      if (in_place) continue;
      expr(kid, false);
      ++pushed;
    }
    const int32_t off = static_cast<int32_t>(c_.operands.size());
    c_.operands.insert(c_.operands.end(), ops, ops + n.nkids);
    emit(VmOp::PRIMK, id, off, static_cast<int32_t>(n.nkids), n.op, pushed);
  }

  const Program& p_;
  VmCode& c_;
  std::vector<std::pair<uint32_t, std::vector<Scope>>> lambdas_;  // with their scopes
  std::vector<Scope> scope_;  // the frames in scope, innermost last
  std::vector<uint8_t> lambdas_in_;
  uint32_t depth_ = 0;
};

}  // namespace

const char* vm_op_name(VmOp op) {
  static const char* const names[] = {
      "CONST", "PARAM", "INPUT", "LOCAL", "PRIMREF", "LAMBDA", "PRIM",   "PRIMK", "CALL", "TAILCALL",
      "RET",   "JMP",   "IF",    "ARMEND", "ORT",    "ASSERT", "LET",    "LETX",   "LETREC",
      "SETREC", "POPENV", "POP"};
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
