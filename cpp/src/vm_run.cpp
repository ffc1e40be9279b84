// The VM client's execution: a dispatch loop over VmCode on the Interp's state. Control
// transfers that the walker implements (calls and their arity errors, primitive rows, lane
// splits of if/or/assert, retries of lane-divergent structural arguments, joins, merges,
// lane failure) are the walker's own members; their Step results are read as "continue at
// this node's entry" (expr) or "return this value to the top frame" (val).
#include <utility>

#include "ndvm/prims.hpp"
#include "ndvm/vm.hpp"

namespace ndvm {

namespace {
constexpr uint32_t kVmArm = 1;  // Frame::node of a K_VM frame pushed for a lane split
constexpr uint64_t kCheckEvery = 4096;
}  // namespace

class VM {
 public:
  VM(Interp& I, const VmCode& c) : I_(I), c_(c), code_(c.code.data()) {}
  static RunOutput run(Interp& I, const RunRequest& req);
  void exec(Step s);

 private:
  enum class Pending : uint8_t { NONE, STEP, ERROR, DIVERGE };
  bool enter(Step s);
  bool loop();
  void checkpoint(bool returning);
  void split_overrun(uint32_t bad);
  Value local(int32_t depth, int32_t slot, uint32_t node) const;
  Value operand(const VmOperand& o) const;
  void push_frame(uint32_t kind, uint32_t pc);
  bool callee(Step s, bool tail);
  bool call(const VmIns& in);
  bool prim(const VmIns& in);
  void primk(const VmIns& in);
  bool branch(const VmIns& in);
  bool armend();
  bool or_test(const VmIns& in);
  bool assertion(const VmIns& in);
  void let(const VmIns& in);
  void let_more(const VmIns& in);
  void letrec(const VmIns& in);
  // One heap cell (Interp::alloc, whose out-of-line call only runs to raise the limit)
  void cell() {
    if (++I_.heap_count_ > I_.lim_.max_heap) {
      --I_.heap_count_;
      I_.alloc();
    }
  }
  Value pop() {
    const Value v = I_.vstack_.back();
    I_.vstack_.pop_back();
    return v;
  }

  Interp& I_;
  const VmCode& c_;
  const VmIns* code_;
  uint32_t pc_ = 0;
  uint32_t env_ = 0;
  int64_t resume_ = -1;  // the pc after the instruction calling into the Interp, or -1
};

// One thread until it finishes: a lane error, a divergence or a limit is handled as the next
// step of the same loop (as Interp::run_thread does), so handling it may fail in turn.
void VM::exec(Step s) {
  Pending pending = Pending::STEP;
  LaneError err;
  for (;;) {
    try {
      switch (pending) {
        case Pending::STEP: break;
        case Pending::ERROR: s = I_.fail(err); break;
        case Pending::DIVERGE: s = I_.split_retry(); break;
        case Pending::NONE: break;
      }
      if (pending != Pending::NONE) {
        pending = Pending::NONE;
        if (!enter(s)) return;
      }
      if (!loop()) return;
    } catch (Diverge& d) {
      I_.diverge_groups_ = std::move(d.groups);
      // the retried primitive's value returns to the instruction after it
      if (resume_ >= 0) push_frame(kVmArm, static_cast<uint32_t>(resume_));
      resume_ = -1;
      pending = Pending::DIVERGE;
    } catch (LaneError& e) {
      err = std::move(e);
      resume_ = -1;
      pending = Pending::ERROR;
    }
  }
}

// Continues at s: a node's entry, or a value returned to the top frame (a join delivers it).
// false: this thread has finished.
bool VM::enter(Step s) {
  for (;;) {
    if (s.done()) return false;
    if (s.expr >= 0) {
      const int32_t pc = c_.entry[static_cast<uint32_t>(s.expr)];
      if (pc < 0) throw std::logic_error("vm: no entry for node " + std::to_string(s.expr));
      pc_ = static_cast<uint32_t>(pc);
      env_ = s.env;
      return true;
    }
    const Frame f = I_.kont_.back();
    I_.kont_.pop_back();
    if (f.kind == K_JOIN) {
      s = I_.deliver(f.i, s.val);
      continue;
    }
    if (f.kind != K_VM) throw std::logic_error("vm: a walker frame on the VM's stack");
    pc_ = f.i;
    env_ = f.env;
    I_.vstack_.push_back(s.val);
    return true;
  }
}

void VM::push_frame(uint32_t kind, uint32_t pc) {
  I_.kont_.push_back(Frame{K_VM, kind, pc, env_, static_cast<uint32_t>(I_.vstack_.size())});
}

// Limits at a check point (Interp::run_thread's): depth and the deadline fail the running
// lanes (past the deadline, a lane only returning its value goes on); lanes past the step
// limit fail, alone when others are still within it.
void VM::checkpoint(bool returning) {
  LaneError e;
  const bool limit = I_.limit_error(e);
  uint32_t bad = 0;
  const int over = limit ? 0 : I_.overrun(bad);
  I_.check_at_ = I_.steps_ + (I_.expired_ ? 1 : kCheckEvery);
  if (limit) {
    if (e.cls != ErrClass::DEADLINE || !returning) throw e;
    return;
  }
  if (over == 2) throw I_.step_error();
  if (over == 1) split_overrun(bad);
}

// The lanes within the limit go on here under a join; an OVERRUN arm fails the others.
void VM::split_overrun(uint32_t bad) {
  MaskTable& masks = I_.masks_;
  const uint32_t active = I_.mask_;
  const uint32_t ok = masks.add();
  const uint8_t* act = masks.bits(active);
  const uint8_t* b = masks.bits(bad);
  uint8_t* out = masks.mutable_bits(ok);
  for (uint32_t l = 0; l < I_.W_; ++l) out[l] = static_cast<uint8_t>(act[l] && !b[l]);
  masks.seal(ok);
  const uint32_t js = I_.new_join(active);
  Arm arm;
  arm.mask = bad;
  arm.kind = ArmKind::OVERRUN;
  I_.joins_[js].arms.push_back(arm);
  I_.kont_.push_back(Frame{K_JOIN, 0, js, 0, static_cast<uint32_t>(I_.vstack_.size())});
  I_.set_mask(ok);
}

Value VM::local(int32_t depth, int32_t slot, uint32_t node) const {
  const EnvFrame* envs = I_.heap_.envs.data();
  uint32_t e = env_;
  for (int32_t d = 0; d < depth; ++d) e = envs[e].parent;
  const Value v = I_.heap_.slots[envs[e].off + static_cast<uint32_t>(slot)];
  if (v.tag == Tag::UNASSIGNED) I_.unassigned(I_.prog_->nodes[node], v);
  return v;
}

Value VM::operand(const VmOperand& o) const {
  switch (o.kind) {
    case NodeKind::CONST: return I_.consts_[static_cast<uint32_t>(o.a)];
    case NodeKind::LOCAL: return local(o.a, o.b, o.node);
    case NodeKind::PARAM: return I_.params_[static_cast<uint32_t>(o.a)];
    default: return I_.inputs_[static_cast<uint32_t>(o.a)];
  }
}

// The Step of a call: a closure's body (non-tail: behind a return frame) or a value.
bool VM::callee(Step s, bool tail) {
  if (s.expr >= 0 && !tail) {
    push_frame(0, pc_ + 1);
    if (I_.kont_.size() > I_.lim_.max_depth) {
      LaneError e;
      if (I_.limit_error(e)) throw e;
    }
  }
  if (s.expr >= 0 || tail) return enter(s);
  I_.vstack_.push_back(s.val);
  ++pc_;
  return true;
}

bool VM::call(const VmIns& in) {
  std::vector<Value>& vs = I_.vstack_;
  const uint32_t n = static_cast<uint32_t>(in.a);
  const size_t base = vs.size() - n - 1;
  const Value fn = vs[base];
  Step s;
  resume_ = pc_ + 1;
  if (fn.tag == Tag::CLOSURE) {
    s = I_.call(fn, vs.data() + base + 1, n, in.node);  // binds copies: the stack may shrink
    vs.resize(base);
  } else {
    I_.args_.assign(vs.begin() + static_cast<std::ptrdiff_t>(base + 1), vs.end());
    vs.resize(base);
    s = I_.call(fn, I_.args_.data(), n, in.node);
  }
  resume_ = -1;
  return callee(s, in.op == VmOp::TAILCALL);
}

bool VM::prim(const VmIns& in) {
  std::vector<Value>& vs = I_.vstack_;
  const uint32_t n = static_cast<uint32_t>(in.a);
  const size_t base = vs.size() - n;
  const PrimKind kind = prim_info(in.prim).kind;
  if (kind == PrimKind::NUMERIC || kind == PrimKind::PREDICATE) {
    I_.node_ = static_cast<int32_t>(in.node);
    const Value v = I_.numeric(in.prim, vs.data() + base, n);
    vs.resize(base);
    vs.push_back(v);
    ++pc_;
    return true;
  }
  I_.args_.assign(vs.begin() + static_cast<std::ptrdiff_t>(base), vs.end());
  vs.resize(base);
  resume_ = pc_ + 1;
  const Step s = I_.apply_prim(in.prim, I_.args_.data(), n, in.node);
  resume_ = -1;
  return callee(s, code_[pc_ + 1].op == VmOp::RET);  // (apply f ...) in tail position
}

void VM::primk(const VmIns& in) {
  Value args[kPrimkMaxArgs];
  const VmOperand* ops = c_.operands.data() + in.a;
  const uint32_t n = static_cast<uint32_t>(in.b);
  std::vector<Value>& vs = I_.vstack_;
  const size_t base = vs.size() - in.c;  // in.c operands were pushed, in order
  size_t next = base;
  for (uint32_t i = 0; i < n; ++i) {
    args[i] = ops[i].kind == NodeKind::CALL ? vs[next++] : operand(ops[i]);
  }
  I_.node_ = static_cast<int32_t>(in.node);
  const Value v = I_.numeric(in.prim, args, n);
  vs.resize(base);
  vs.push_back(v);
  ++pc_;
}

// IF: a lane-uniform test jumps; a per-lane one splits into two arms under a join (the
// walker's Interp::branch), which a non-tail if joins at its ARMEND.
bool VM::branch(const VmIns& in) {
  const Value test = pop();
  const int t = I_.truth(test);
  if (t != 2) {
    pc_ = t ? pc_ + 1 : static_cast<uint32_t>(in.a);
    return true;
  }
  const uint32_t active = I_.mask_;
  const uint32_t n_true = I_.count_true(active, test.id);
  if (n_true == 0 || n_true == I_.masks_.count(active)) {
    pc_ = n_true ? pc_ + 1 : static_cast<uint32_t>(in.a);
    return true;
  }
  const uint32_t* kids = I_.prog_->kids_of(I_.prog_->nodes[in.node]);
  uint32_t n_yes = 0;
  uint32_t n_no = 0;
  Arm arms[2];
  arms[0].mask = I_.lane_split(active, test.id, true, n_yes);
  arms[0].node = kids[1];
  arms[0].env = env_;
  arms[1].mask = I_.lane_split(active, test.id, false, n_no);
  arms[1].node = kids[2];
  arms[1].env = env_;
  if (I_.is_simple(kids[2]) && !I_.is_simple(kids[1])) std::swap(arms[0], arms[1]);
  if (in.b >= 0) push_frame(kVmArm, static_cast<uint32_t>(in.b) + 1);
  return enter(I_.split_masks(active, arms, 2));
}

// The end of a non-tail if/or: when this thread runs an arm of a split made here (a split
// frame for the next pc below the top join frames), its value goes to the join.
bool VM::armend() {
  const std::vector<Frame>& k = I_.kont_;
  size_t j = k.size();
  while (j > 0 && k[j - 1].kind == K_JOIN) --j;
  if (j == k.size() || j == 0 || k[j - 1].kind != K_VM || k[j - 1].node != kVmArm ||
      k[j - 1].i != pc_ + 1 || k[j - 1].env != env_) {
    ++pc_;
    return true;
  }
  Step s;
  s.val = pop();
  return enter(s);
}

// or: a true value ends the or; a per-lane one splits (true lanes keep it, the others go on
// with the next expression), as the walker's Interp::or_step.
bool VM::or_test(const VmIns& in) {
  std::vector<Value>& vs = I_.vstack_;
  const Value val = vs.back();
  const int t = I_.truth(val);
  const uint32_t active = I_.mask_;
  if (t == 1 || (t == 2 && I_.count_true(active, val.id) == I_.masks_.count(active))) {
    pc_ = static_cast<uint32_t>(in.a);
    return true;
  }
  vs.pop_back();
  if (t == 0) {
    ++pc_;
    return true;
  }
  uint32_t n_yes = 0;
  uint32_t n_no = 0;
  const uint32_t no = I_.lane_split(active, val.id, false, n_no);
  const uint32_t yes = I_.lane_split(active, val.id, true, n_yes);
  if (n_yes == 0) {
    I_.set_mask(no);
    ++pc_;
    return true;
  }
  Arm arms[2];
  arms[0].mask = yes;
  arms[0].kind = ArmKind::VALUE;
  arms[0].value = val;
  arms[1].mask = no;
  arms[1].node = I_.prog_->kids_of(I_.prog_->nodes[in.node])[in.b];
  arms[1].env = env_;
  if (in.c == 0) push_frame(kVmArm, static_cast<uint32_t>(in.a) + 1);
  return enter(I_.split_masks(active, arms, 2));
}

bool VM::assertion(const VmIns& in) {
  const Value val = pop();
  const bool per_lane = I_.truth(val) == 2;
  if (per_lane) push_frame(kVmArm, pc_ + 1);  // a split's lanes continue after the assert
  const Step s = I_.assert_step(in.node, val);
  if (per_lane) return enter(s);
  I_.vstack_.push_back(s.val);
  ++pc_;
  return true;
}

// LET: a frame for a chain of lets (the later ones fill it with LETX); each let is a cell.
void VM::let(const VmIns& in) {
  std::vector<Value>& vs = I_.vstack_;
  Heap& heap = I_.heap_;
  const uint32_t n = static_cast<uint32_t>(in.a);
  cell();
  env_ = heap.env(env_, vs.data() + vs.size() - n, n);
  vs.resize(vs.size() - n);
  const uint32_t total = static_cast<uint32_t>(in.b);
  for (uint32_t k = n; k < total; ++k) heap.slots.push_back(make_value(Tag::VOID));
  heap.envs[env_].size = total;
}

void VM::let_more(const VmIns& in) {
  std::vector<Value>& vs = I_.vstack_;
  const uint32_t n = static_cast<uint32_t>(in.a);
  cell();
  Value* slots = I_.heap_.slots.data() + I_.heap_.envs[env_].off + in.b;
  const Value* top = vs.data() + vs.size() - n;
  for (uint32_t k = 0; k < n; ++k) slots[k] = top[k];
  vs.resize(vs.size() - n);
}

void VM::letrec(const VmIns& in) {
  Heap& heap = I_.heap_;
  const Node& n = I_.prog_->nodes[in.node];
  const uint32_t ninit = static_cast<uint32_t>(in.a);
  cell();
  const uint32_t e = heap.env(env_, nullptr, 0);
  heap.envs[e].off = static_cast<uint32_t>(heap.slots.size());
  heap.envs[e].size = ninit;
  for (uint32_t i = 0; i < ninit; ++i) {
    heap.slots.push_back(
        make_value(Tag::UNASSIGNED, static_cast<uint32_t>(I_.prog_->aux[n.b + i])));
  }
  env_ = e;
}

// The dispatch loop; false when the thread has finished.
bool VM::loop() {
  Interp& I = I_;
  for (;;) {
    const VmIns& in = code_[pc_];
    if (++I.steps_ >= I.check_at_) checkpoint(in.op == VmOp::RET);
    switch (in.op) {
      case VmOp::CONST: I.vstack_.push_back(I.consts_[static_cast<uint32_t>(in.a)]); break;
      case VmOp::PARAM: I.vstack_.push_back(I.params_[static_cast<uint32_t>(in.a)]); break;
      case VmOp::INPUT: I.vstack_.push_back(I.inputs_[static_cast<uint32_t>(in.a)]); break;
      case VmOp::LOCAL: I.vstack_.push_back(local(in.a, in.b, in.node)); break;
      case VmOp::PRIMREF: I.vstack_.push_back(make_value(Tag::PRIMPROC, in.prim)); break;
      case VmOp::LAMBDA:
        cell();
        I.heap_.closures.push_back(ClosureCell{in.node, env_});
        I.vstack_.push_back(make_value(Tag::CLOSURE,
                                       static_cast<uint32_t>(I.heap_.closures.size() - 1)));
        break;
      case VmOp::PRIMK: primk(in); continue;
      case VmOp::PRIM:
        if (!prim(in)) return false;
        continue;
      case VmOp::CALL:
      case VmOp::TAILCALL:
        if (!call(in)) return false;
        continue;
      case VmOp::RET: {
        Step s;
        s.val = pop();
        if (!enter(s)) return false;
        continue;
      }
      case VmOp::JMP: pc_ = static_cast<uint32_t>(in.a); continue;
      case VmOp::IF:
        if (!branch(in)) return false;
        continue;
      case VmOp::ARMEND:
        if (!armend()) return false;
        continue;
      case VmOp::ORT:
        if (!or_test(in)) return false;
        continue;
      case VmOp::ASSERT:
        if (!assertion(in)) return false;
        continue;
      case VmOp::LET: let(in); break;
      case VmOp::LETX: let_more(in); break;
      case VmOp::LETREC: letrec(in); break;
      case VmOp::SETREC: {
        const Value v = pop();
        I.heap_.slots[I.heap_.envs[env_].off + static_cast<uint32_t>(in.a)] = v;
        break;
      }
      case VmOp::POPENV: env_ = I.heap_.envs[env_].parent; break;
      case VmOp::POP: I.vstack_.pop_back(); break;
    }
    ++pc_;
  }
}

// The walker's run (Interp::run) with the VM in place of run_thread: the same trace replay
// (the VM's tape and guards are the walker's), setup, result assembly and reverse mode.
RunOutput VM::run(Interp& I, const RunRequest& req) {
  const VmCode& code = vm_code(*req.program);
  I.ready_ = false;
  RunOutput out;
  if (I.replay(req, out)) return out;
  I.start_recording(req);
  I.reset(req);
  I.leaves_.clear();
  I.bind(req, I.leaves_);
  const uint32_t root = I.new_join(0);
  I.kont_.push_back(Frame{K_JOIN, 0, root, 0, 0});
  VM vm(I, code);
  Step s;
  s.expr = static_cast<int32_t>(req.program->root);
  vm.exec(s);
  while (!I.threads_.empty()) {  // groups of a join whose values differ in structure
    Thread t = std::move(I.threads_.back());
    I.threads_.pop_back();
    I.kont_ = std::move(t.kont);
    I.vstack_ = std::move(t.vstack);
    I.set_mask(t.mask);
    Step r;
    r.val = t.value;
    vm.exec(r);
  }
  I.finish_run(req, out);
  I.finish_recording(out);
  return out;
}

RunOutput vm_run(Interp& interp, const RunRequest& req) { return VM::run(interp, req); }

}  // namespace ndvm
