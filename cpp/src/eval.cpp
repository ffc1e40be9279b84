// The CEK machine: evaluation steps, continuation frames, lane splits and joins, lane failure.
// Mirrors src/ndvm/eval/treewalk.py frame by frame (the reference is the specification).
#include <algorithm>
#include <cstdio>

#include "ndvm/interp.hpp"
#include "ndvm/prims.hpp"

namespace ndvm {

namespace {
constexpr uint64_t kCheckEvery = 4096;

[[noreturn]] void deadline_exceeded(double deadline) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", deadline);
  throw LimitError(LimitKind::DEADLINE,
                   std::string("evaluation exceeded its deadline of ") + buf + " s");
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

bool WorkClock::past() const { return deadline > 0 && seconds_since(t0) > deadline; }

void WorkClock::raise_if_expired() const {
  if (expired) deadline_exceeded(deadline);
}

// Steps are charged to the lanes that ran them (at every mask switch and check point), so
// Limits.max_steps bounds each lane's own path: a runaway lane fails alone, as in a batch of
// one. Depth and the deadline fail the running lanes; after the deadline every lane still
// running fails. The reference's LaneClock (src/ndvm/eval/clock.py) is the specification.
void Interp::charge() {
  const uint64_t d = steps_ - charged_;
  charged_ = steps_;
  if (d == 0) return;
  if (mask_ == 0 || masks_.full(mask_)) {
    all_steps_ += d;
    return;
  }
  const uint8_t* bits = masks_.bits(mask_);
  for (uint32_t l = 0; l < W_; ++l) lane_steps_[l] += bits[l] ? d : 0;
  lane_steps_max_ += d;
}

void Interp::set_mask(uint32_t m) {
  charge();
  mask_ = m;
}

LaneError Interp::step_error() const {
  LaneError e;
  e.cls = ErrClass::STEPS;
  e.message = "step limit of " + std::to_string(lim_.max_steps) + " exceeded";
  return e;
}

bool Interp::limit_error(LaneError& out) {
  poll_interrupt();
  if (kont_.size() > lim_.max_depth) {
    out = LaneError{};
    out.cls = ErrClass::DEPTH;
    out.message = "control stack deeper than " + std::to_string(lim_.max_depth) +
                  " frames (non-tail recursion too deep?)";
    return true;
  }
  if (!expired_ && lim_.deadline > 0) expired_ = seconds_since(t0_) > lim_.deadline;
  if (expired_) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", lim_.deadline);
    out = LaneError{};
    out.cls = ErrClass::DEADLINE;
    out.message = std::string("evaluation exceeded its deadline of ") + buf + " s";
    return true;
  }
  charge();
  return false;
}

// Running lanes past the step limit: 0 none, 2 all, 1 some (then `bad` is their new mask).
int Interp::overrun(uint32_t& bad) {
  if (all_steps_ + lane_steps_max_ <= lim_.max_steps) return 0;  // no lane can be over
  const uint8_t* act = masks_.bits(mask_);
  uint32_t n = 0;
  for (uint32_t l = 0; l < W_; ++l) n += act[l] && all_steps_ + lane_steps_[l] > lim_.max_steps;
  if (n == 0) return 0;
  if (n == masks_.count(mask_)) return 2;
  const uint32_t m = masks_.add();
  act = masks_.bits(mask_);
  uint8_t* out = masks_.mutable_bits(m);
  for (uint32_t l = 0; l < W_; ++l) {
    out[l] = static_cast<uint8_t>(act[l] && all_steps_ + lane_steps_[l] > lim_.max_steps);
  }
  masks_.seal(m);
  bad = m;
  return 1;
}

// The lanes of `mask` whose own steps passed the limit when they end (an error or a value):
// 0 none, 2 all, 1 some (then `bad` and `ok` are the two new masks).
int Interp::split_by_steps(uint32_t mask, uint32_t& bad, uint32_t& ok) {
  charge();
  if (all_steps_ + lane_steps_max_ <= lim_.max_steps) return 0;  // no lane can be over
  const uint8_t* act = masks_.bits(mask);
  uint32_t n = 0;
  for (uint32_t l = 0; l < W_; ++l) n += act[l] && all_steps_ + lane_steps_[l] > lim_.max_steps;
  if (n == 0) return 0;
  if (n == masks_.count(mask)) return 2;
  bad = masks_.add();
  ok = masks_.add();
  act = masks_.bits(mask);
  uint8_t* b = masks_.mutable_bits(bad);
  uint8_t* o = masks_.mutable_bits(ok);
  for (uint32_t l = 0; l < W_; ++l) {
    const bool over = act[l] && all_steps_ + lane_steps_[l] > lim_.max_steps;
    b[l] = static_cast<uint8_t>(over);
    o[l] = static_cast<uint8_t>(act[l] && !over);
  }
  masks_.seal(bad);
  masks_.seal(ok);
  return 1;
}

void Interp::spend(uint64_t n) {
  steps_ += n;
  if (steps_ < check_at_) return;
  check_at_ = steps_ + kCheckEvery;
  LaneError e;
  if (limit_error(e)) throw e;
  uint32_t bad = 0;
  if (overrun(bad) != 0) throw step_error();
}

Step Interp::split_overrun(const Step& s, uint32_t bad) {
  const uint32_t active = mask_;
  const uint32_t ok = masks_.add();
  const uint8_t* act = masks_.bits(active);
  const uint8_t* b = masks_.bits(bad);
  uint8_t* out = masks_.mutable_bits(ok);
  for (uint32_t l = 0; l < W_; ++l) out[l] = static_cast<uint8_t>(act[l] && !b[l]);
  masks_.seal(ok);
  Arm arms[2];
  arms[0].mask = ok;
  arms[0].kind = ArmKind::RESUME;
  arms[0].node = static_cast<uint32_t>(s.expr >= 0 ? s.expr : 0);
  arms[0].i = s.expr >= 0 ? 1 : 0;
  arms[0].env = s.env;
  arms[0].value = s.val;
  arms[1].mask = bad;
  arms[1].kind = ArmKind::OVERRUN;
  return split_masks(active, arms, 2);
}

// One thread until it finishes or waits on a join. A lane error, a divergence or a limit of
// the running lanes is handled as the next step inside the same try (handling it may start
// another arm, which may fail in turn).
void Interp::run_thread(Step s) {
  for (;;) {
    ++steps_;
    uint32_t bad = 0;
    if ((steps_ >= check_at_ || kont_.size() > lim_.max_depth) && !err_pending_ &&
        !diverge_pending_) {
      if (limit_error(pending_err_)) {
        // past the deadline, lanes that hold their value and only return it through pending
        // frames go on; the first expression left to evaluate fails them
        err_pending_ = s.expr >= 0 || pending_err_.cls != ErrClass::DEADLINE;
      } else if (overrun(bad) == 2) {
        pending_err_ = step_error();
        err_pending_ = true;
        bad = 0;
      }
      check_at_ = steps_ + (expired_ ? 1 : kCheckEvery);
    }
    try {
      if (err_pending_ || bad != 0 || diverge_pending_) {
        s = recover(s, bad);
      } else if (s.expr >= 0) {
        s = eval(static_cast<uint32_t>(s.expr), s.env);
        continue;
      } else {
        const Frame f = kont_.back();
        kont_.pop_back();
        s = f.kind == K_JOIN ? deliver(f.i, s.val) : resume(f, s.val);
      }
      if (s.done()) return;
    } catch (Diverge& d) {
      diverge_groups_ = std::move(d.groups);
      diverge_pending_ = true;
    } catch (LaneError& err) {
      pending_err_ = std::move(err);
      err_pending_ = true;
    }
  }
}

// The step after a lane error, a limit or a divergence of the running lanes.
Step Interp::recover(const Step& s, uint32_t bad) {
  if (err_pending_) {
    err_pending_ = false;
    LaneError e = std::move(pending_err_);
    return fail(e);
  }
  if (bad != 0) return split_overrun(s, bad);
  diverge_pending_ = false;
  return split_retry();
}

void Interp::unassigned(const Node& n, Value v) {
  node_ = static_cast<int32_t>(&n - prog_->nodes.data());
  throw error("variable '" + prog_->strings[v.id] + "' used before its definition");
}

inline Value Interp::local(const Node& n, uint32_t env) {
  const EnvFrame* envs = heap_.envs.data();
  for (int32_t d = 0; d < n.a; ++d) env = envs[env].parent;
  const Value v = heap_.slots[envs[env].off + static_cast<uint32_t>(n.b)];
  if (v.tag == Tag::UNASSIGNED) unassigned(n, v);
  return v;
}

// A leaf: a constant, a variable, a parameter, an input or a primitive (ir._SIMPLE in the
// reference's treewalk.py).
bool Interp::is_simple(uint32_t node) const {
  switch (prog_->nodes[node].kind) {
    case NodeKind::CONST:
    case NodeKind::LOCAL:
    case NodeKind::PARAM:
    case NodeKind::INPUT: return true;
    default: return false;
  }
}

bool Interp::simple(uint32_t node, uint32_t env, Value& out) {
  const Node& n = prog_->nodes[node];
  switch (n.kind) {
    case NodeKind::CONST: out = consts_[static_cast<uint32_t>(n.a)]; return true;
    case NodeKind::LOCAL: out = local(n, env); return true;
    case NodeKind::PARAM: out = params_[static_cast<uint32_t>(n.a)]; return true;
    case NodeKind::INPUT: out = inputs_[static_cast<uint32_t>(n.a)]; return true;
    case NodeKind::PRIMREF: out = make_value(Tag::PRIMPROC, n.op); return true;
    default: return false;
  }
}

Step Interp::collect(FrameKind k, uint32_t node, uint32_t from, uint32_t env, uint32_t base) {
  const Node& n = prog_->nodes[node];
  const uint32_t count = k == K_LET ? n.nkids - 1 : n.nkids;
  const uint32_t* kids = prog_->kids_of(n);
  for (uint32_t i = from; i < count; ++i) {
    Value v;
    if (simple(kids[i], env, v)) {
      vstack_.push_back(v);
      continue;
    }
    kont_.push_back(Frame{k, node, i, env, base});
    Step s;
    s.expr = static_cast<int32_t>(kids[i]);
    s.env = env;
    return s;
  }
  return finish(k, node, env, base);
}

Step Interp::finish(FrameKind k, uint32_t node, uint32_t env, uint32_t base) {
  const Node& n = prog_->nodes[node];
  const uint32_t count = static_cast<uint32_t>(vstack_.size()) - base;
  if (k == K_LET) {
    alloc();
    const uint32_t e = heap_.env(env, vstack_.data() + base, count);
    vstack_.resize(base);
    Step s;
    s.expr = static_cast<int32_t>(prog_->kids_of(n)[n.nkids - 1]);
    s.env = e;
    return s;
  }
  if (k == K_PRIM) {
    const PrimKind kind = prim_info(n.op).kind;
    if (kind == PrimKind::NUMERIC || kind == PrimKind::PREDICATE) {
      // numeric primitives neither keep their arguments nor touch the value stack: apply them
      // in place (no copy to args_), as apply_prim would
      node_ = static_cast<int32_t>(node);
      Step s;
      s.val = numeric(n.op, vstack_.data() + base, count);
      vstack_.resize(base);
      return s;
    }
  }
  args_.assign(vstack_.begin() + base, vstack_.end());
  vstack_.resize(base);
  if (k == K_PRIM) return apply_prim(n.op, args_.data(), count, node);
  return call(args_[0], args_.data() + 1, count - 1, node);
}

Step Interp::eval(uint32_t node, uint32_t env) {
  const Node& n = prog_->nodes[node];
  const uint32_t* kids = prog_->kids_of(n);
  Step s;
  s.env = env;
  Value v;
  if (simple(node, env, v)) {
    s.val = v;
    return s;
  }
  const uint32_t base = static_cast<uint32_t>(vstack_.size());
  switch (n.kind) {
    case NodeKind::IF:
      if (simple(kids[0], env, v)) return branch(node, env, v);
      kont_.push_back(Frame{K_IF, node, 0, env, base});
      s.expr = static_cast<int32_t>(kids[0]);
      return s;
    case NodeKind::CALL: return collect(K_CALL, node, 0, env, base);
    case NodeKind::PRIMCALL: return collect(K_PRIM, node, 0, env, base);
    case NodeKind::LAMBDA:
      alloc();
      heap_.closures.push_back(ClosureCell{node, env});
      s.val = make_value(Tag::CLOSURE, static_cast<uint32_t>(heap_.closures.size() - 1));
      return s;
    case NodeKind::SEQ:
    case NodeKind::OR:
      if (n.nkids > 1) {
        kont_.push_back(Frame{n.kind == NodeKind::SEQ ? K_SEQ : K_OR, node, 1, env, base});
      }
      s.expr = static_cast<int32_t>(kids[0]);
      return s;
    case NodeKind::LET:
      if (n.nkids == 1) {
        alloc();
        s.env = heap_.env(env, nullptr, 0);
        s.expr = static_cast<int32_t>(kids[0]);
        return s;
      }
      return collect(K_LET, node, 0, env, base);
    case NodeKind::LETREC: {
      alloc();
      const uint32_t ninit = n.nkids - 1;
      const uint32_t e = heap_.env(env, nullptr, 0);
      heap_.envs[e].off = static_cast<uint32_t>(heap_.slots.size());
      heap_.envs[e].size = ninit;
      for (uint32_t i = 0; i < ninit; ++i) {
        heap_.slots.push_back(make_value(Tag::UNASSIGNED, static_cast<uint32_t>(
                                                              prog_->aux[n.b + i])));
      }
      s.env = e;
      if (ninit == 0) {
        s.expr = static_cast<int32_t>(kids[0]);
        return s;
      }
      kont_.push_back(Frame{K_LETREC, node, 0, e, base});
      s.expr = static_cast<int32_t>(kids[0]);
      return s;
    }
    case NodeKind::ASSERT:
      kont_.push_back(Frame{K_ASSERT, node, 0, env, base});
      s.expr = static_cast<int32_t>(kids[0]);
      return s;
    default: break;
  }
  throw error("internal: unknown node kind");
}

Step Interp::resume(const Frame& f, Value val) {
  const Node& n = prog_->nodes[f.node];
  const uint32_t* kids = prog_->kids_of(n);
  Step s;
  s.env = f.env;
  switch (f.kind) {
    case K_PRIM:
    case K_CALL:
    case K_LET:
      vstack_.push_back(val);
      return collect(f.kind, f.node, f.i + 1, f.env, f.base);
    case K_IF: return branch(f.node, f.env, val);
    case K_SEQ:
      if (f.i + 1 < n.nkids) kont_.push_back(Frame{K_SEQ, f.node, f.i + 1, f.env, f.base});
      s.expr = static_cast<int32_t>(kids[f.i]);
      return s;
    case K_OR: return or_step(f.node, f.i, f.env, val);
    case K_LETREC: {
      const EnvFrame& e = heap_.envs[f.env];
      heap_.slots[e.off + f.i] = val;
      const uint32_t ninit = n.nkids - 1;
      if (f.i + 1 < ninit) {
        kont_.push_back(Frame{K_LETREC, f.node, f.i + 1, f.env, f.base});
        s.expr = static_cast<int32_t>(kids[f.i + 1]);
      } else {
        s.expr = static_cast<int32_t>(kids[ninit]);
      }
      return s;
    }
    case K_ASSERT: return assert_step(f.node, val);
    default: break;
  }
  throw error("internal: bad continuation frame");
}

int Interp::truth(Value v) const {
  if (v.tag == Tag::BOOL) return v.id ? 1 : 0;
  if (v.tag == Tag::BOOLS) return 2;
  return 1;
}

// A new mask: active lanes where the bool payload equals `want`; n_yes gets its lane count.
uint32_t Interp::lane_split(uint32_t active, uint32_t pid, bool want, uint32_t& n_yes) {
  const uint32_t m = masks_.add();
  // locals, so that the byte stores below alias nothing the loops read
  const uint32_t W = W_;
  const Real* __restrict b = pay_.ptr(pid);
  const uint8_t* __restrict act = masks_.bits(active);
  uint8_t* __restrict out = masks_.mutable_bits(m);
  uint32_t n = 0;
  if (pay_[pid].width > 1) {
    for (uint32_t l = 0; l < W; ++l) {
      const auto v = static_cast<uint8_t>((act[l] != 0) & ((b[l] != 0.0) == want));
      out[l] = v;
      n += v;
    }
  } else {
    const bool t = (b[0] != 0.0) == want;
    for (uint32_t l = 0; l < W; ++l) {
      const auto v = static_cast<uint8_t>((act[l] != 0) & t);
      out[l] = v;
      n += v;
    }
  }
  masks_.set_count(m, n);
  n_yes = n;
  return m;
}

uint32_t Interp::count_true(uint32_t active, uint32_t pid) const {
  const uint32_t W = W_;
  const Real* b = pay_.ptr(pid);
  const uint8_t* act = masks_.bits(active);
  uint32_t n = 0;
  if (pay_[pid].width > 1) {
    for (uint32_t l = 0; l < W; ++l) n += static_cast<uint32_t>((act[l] != 0) & (b[l] != 0.0));
    return n;
  }
  return b[0] != 0.0 ? masks_.count(active) : 0;
}

Step Interp::branch(uint32_t node, uint32_t env, Value test) {
  const uint32_t* kids = prog_->kids_of(prog_->nodes[node]);
  Step s;
  s.env = env;
  const int t = truth(test);
  if (t != 2) {
    s.expr = static_cast<int32_t>(kids[t ? 1 : 2]);
    return s;
  }
  const uint32_t active = mask_;
  const uint32_t n_true = count_true(active, test.id);
  if (n_true == 0 || n_true == masks_.count(active)) {
    s.expr = static_cast<int32_t>(kids[n_true ? 1 : 2]);
    return s;
  }
  uint32_t n_yes = 0;
  uint32_t n_no = 0;
  const uint32_t yes = lane_split(active, test.id, true, n_yes);
  const uint32_t no = lane_split(active, test.id, false, n_no);
  Arm arms[2];
  arms[0].mask = yes;
  arms[0].node = kids[1];
  arms[0].env = env;
  arms[1].mask = no;
  arms[1].node = kids[2];
  arms[1].env = env;
  if (is_simple(kids[2]) && !is_simple(kids[1])) {
    std::swap(arms[0], arms[1]);  // an arm that is a value finishes first (before a deadline)
  }
  return split_masks(active, arms, 2);
}

Step Interp::or_step(uint32_t node, uint32_t i, uint32_t env, Value val) {
  const Node& n = prog_->nodes[node];
  Step s;
  s.env = env;
  const int t = truth(val);
  if (t == 1 || i >= n.nkids) {
    s.val = val;
    return s;
  }
  if (t == 0) {
    if (i + 1 < n.nkids) {
      kont_.push_back(Frame{K_OR, node, i + 1, env, static_cast<uint32_t>(vstack_.size())});
    }
    s.expr = static_cast<int32_t>(prog_->kids_of(n)[i]);
    return s;
  }
  const uint32_t active = mask_;
  if (count_true(active, val.id) == masks_.count(active)) {
    s.val = val;
    return s;
  }
  uint32_t n_yes = 0;
  uint32_t n_no = 0;
  const uint32_t no = lane_split(active, val.id, false, n_no);
  const uint32_t yes = lane_split(active, val.id, true, n_yes);
  Arm arms[2];
  arms[0].mask = yes;
  arms[0].kind = ArmKind::VALUE;
  arms[0].value = val;
  arms[1].mask = no;
  arms[1].kind = ArmKind::OR_FROM;
  arms[1].node = node;
  arms[1].i = i;
  arms[1].env = env;
  if (n_yes == 0) return start_arm(arms[1]);
  return split_masks(active, arms, 2);
}

Step Interp::assert_step(uint32_t node, Value val) {
  node_ = static_cast<int32_t>(node);
  const Node& n = prog_->nodes[node];
  Step s;
  s.val = make_value(Tag::VOID);
  const int t = truth(val);
  if (t == 1) return s;
  if (t == 0) throw error("assertion failed: " + prog_->strings[static_cast<uint32_t>(n.c)]);
  const uint32_t active = mask_;
  if (count_true(active, val.id) == masks_.count(active)) return s;
  uint32_t n_bad = 0;
  uint32_t n_ok = 0;
  const uint32_t bad = lane_split(active, val.id, false, n_bad);
  const uint32_t ok = lane_split(active, val.id, true, n_ok);
  Arm arms[2];
  arms[0].mask = ok;
  arms[0].kind = ArmKind::VALUE;
  arms[0].value = make_value(Tag::VOID);
  arms[1].mask = bad;
  arms[1].kind = ArmKind::RAISE;
  arms[1].node = node;
  return split_masks(active, arms, 2);
}

uint32_t Interp::new_join(uint32_t mask) {
  if (n_joins_ == joins_.size()) joins_.emplace_back();
  JoinState& js = joins_[n_joins_];
  js.mask = mask;
  js.outstanding = masks_.count(mask);
  js.arms.clear();
  js.results.clear();
  return n_joins_++;
}

Step Interp::split_masks(uint32_t active, const Arm* arms, size_t n) {
  const uint32_t js = new_join(active);
  for (size_t k = n; k-- > 1;) joins_[js].arms.push_back(arms[k]);
  kont_.push_back(Frame{K_JOIN, 0, js, 0, static_cast<uint32_t>(vstack_.size())});
  return start_arm(arms[0]);
}

Step Interp::split_retry() {
  const uint32_t off = static_cast<uint32_t>(retry_args_.size());
  retry_args_.insert(retry_args_.end(), pending_args_, pending_args_ + pending_n_);
  std::vector<Arm> arms(diverge_groups_.size());
  for (size_t k = 0; k < arms.size(); ++k) {
    arms[k].mask = diverge_groups_[k];
    arms[k].kind = ArmKind::RETRY;
    arms[k].node = pending_node_;
    arms[k].args = off;
    arms[k].nargs = pending_n_;
    arms[k].code = static_cast<uint16_t>(pending_code_);
  }
  return split_masks(mask_, arms.data(), arms.size());
}

Step Interp::start_arm(const Arm& arm) {
  set_mask(arm.mask);
  Step s;
  s.env = arm.env;
  switch (arm.kind) {
    case ArmKind::EVAL: s.expr = static_cast<int32_t>(arm.node); return s;
    case ArmKind::VALUE: s.val = arm.value; return s;
    case ArmKind::RAISE:
      node_ = static_cast<int32_t>(arm.node);
      throw error("assertion failed: " +
                  prog_->strings[static_cast<uint32_t>(prog_->nodes[arm.node].c)]);
    case ArmKind::RETRY: {
      args_.assign(retry_args_.begin() + arm.args, retry_args_.begin() + arm.args + arm.nargs);
      return call(make_value(Tag::PRIMPROC, arm.code), args_.data(), arm.nargs, arm.node);
    }
    case ArmKind::RESUME:
      s.expr = arm.i ? static_cast<int32_t>(arm.node) : -1;
      s.val = arm.value;
      return s;
    case ArmKind::OVERRUN: throw step_error();
    case ArmKind::OR_FROM: {
      const Node& n = prog_->nodes[arm.node];
      if (arm.i + 1 < n.nkids) {
        kont_.push_back(Frame{K_OR, arm.node, arm.i + 1, arm.env,
                              static_cast<uint32_t>(vstack_.size())});
      }
      s.expr = static_cast<int32_t>(prog_->kids_of(n)[arm.i]);
      return s;
    }
  }
  return s;
}

Step Interp::deliver(uint32_t js, Value val) {
  joins_[js].results.emplace_back(mask_, val);
  joins_[js].outstanding -= masks_.count(mask_);
  return service(js);
}

Step Interp::service(uint32_t js) {
  Step s;
  for (;;) {
    JoinState& j = joins_[js];
    if (!j.arms.empty()) {
      kont_.push_back(Frame{K_JOIN, 0, js, 0, static_cast<uint32_t>(vstack_.size())});
      const Arm arm = j.arms.back();
      j.arms.pop_back();
      return start_arm(arm);
    }
    if (j.outstanding > 0) {
      s.expr = Step::kDone;
      return s;
    }
    if (!j.results.empty()) {
      set_mask(j.mask);
      // merged from the join's own vector (merging touches no join), which keeps its
      // capacity for the join's next use
      std::vector<std::pair<uint32_t, Value>> groups = merge_groups(j.results);
      joins_[js].results.clear();
      if (kont_.empty()) {  // the lanes' values; a lane past the step limit fails instead
        for (const auto& g : groups) {
          uint32_t bad = 0, ok = 0;
          const int over = split_by_steps(g.first, bad, ok);
          if (over == 2) {
            errors_.emplace_back(g.first, step_error());
          } else if (over == 1) {
            errors_.emplace_back(bad, step_error());
            groups_.emplace_back(ok, g.second);
          } else {
            groups_.push_back(g);
          }
        }
        s.expr = Step::kDone;
        return s;
      }
      for (size_t k = 1; k < groups.size(); ++k) {
        threads_.push_back(Thread{kont_, vstack_, groups[k].first, groups[k].second});
      }
      set_mask(masks_.full(groups[0].first) ? 0 : groups[0].first);
      s.val = groups[0].second;
      return s;
    }
    while (!kont_.empty() && kont_.back().kind != K_JOIN) kont_.pop_back();
    if (kont_.empty()) {
      s.expr = Step::kDone;
      return s;
    }
    js = kont_.back().i;
    vstack_.resize(std::min<size_t>(vstack_.size(), kont_.back().base));
    kont_.pop_back();
  }
}

Step Interp::fail(LaneError& err) {
  const uint32_t n = masks_.count(mask_);
  for (const Frame& f : kont_) {
    if (f.kind == K_JOIN) joins_[f.i].outstanding -= n;
  }
  uint32_t bad = 0, ok = 0;
  const bool own = err.cls == ErrClass::PROGRAM || err.cls == ErrClass::SHAPE;
  const int over = own ? split_by_steps(mask_, bad, ok) : 0;
  if (over == 2) {
    errors_.emplace_back(mask_, step_error());
  } else if (over == 1) {
    errors_.emplace_back(bad, step_error());
    errors_.emplace_back(ok, std::move(err));
  } else {
    errors_.emplace_back(mask_, std::move(err));
  }
  while (!kont_.empty() && kont_.back().kind != K_JOIN) kont_.pop_back();
  Step s;
  if (kont_.empty()) {
    s.expr = Step::kDone;
    return s;
  }
  const uint32_t js = kont_.back().i;
  vstack_.resize(std::min<size_t>(vstack_.size(), kont_.back().base));
  kont_.pop_back();
  return service(js);
}

}  // namespace ndvm
