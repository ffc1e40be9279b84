// Fused pairs (docs/native.md, "Fused pairs"; the kernels: fast_pairs.cpp). Once per tape, the
// lane-form products (dot, matvec, matmul of K x K, K = 2, 3, 4, over W > 1 lanes) whose
// output is read by one thing only, the very next record, a lane-form + or - of two
// full-width operands (or, for a matvec, a lane-form dot), are paired with it; so is a lane-form
// * of two factors (one may be a lane-uniform number) whose sole reader is such a + or -: the pair runs as one superinstruction at the
// consumer's place (the product in registers, never stored), in replay's forward pass and in
// the reverse sweep, and the product's record runs a kernel that does nothing. "Read" counts
// every tape record's operands, the guards (a guard reads a payload's value), the results and
// the parameter leaves, so the product's output is read by nothing else. Chosen from the
// trace's records and shapes, never from the program's text; the same bits as the unpaired
// path (fast_pairs.cpp). On when the run is fused (RunRequest::fused), asks for them
// (RunRequest::pairs, the default) and runs no fused chains (chains.cpp keeps its own copies
// of the records' kernels).
#include "ndvm/interp.hpp"

namespace ndvm {

void Interp::plan_pairs() {
  pairs_plan_ = 0;
  pairs_.clear();
  const size_t n = tape_.records.size();
  std::vector<uint8_t> member(n, 0);  // a record of a fused update (updates.cpp) pairs with none
  updates_planned_ = updates_req_;
  if (updates_req_) plan_updates(member);
  std::vector<uint8_t> reads(pay_.count(), 0);  // saturating at 2: read more than once
  auto outside = [&](uint32_t pid) { reads[pid] = 2; };
  for (const TapeRecord& rec : tape_.records) {
    const uint32_t* ids = tape_.operands.data() + rec.args;
    for (uint32_t i = 0; i < rec.nargs; ++i) reads[ids[i]] = reads[ids[i]] ? 2 : 1;
  }
  for (const Guard& g : trace_.guards) {
    if (g.kind != GuardKind::PRED_UNIFORM) outside(g.out);
    for (uint32_t i = 0; i < g.nargs; ++i) outside(trace_.operands[g.args + i]);
  }
  for (const auto& [mask, v] : groups_) outside(v.id);
  for (const uint32_t leaf : leaves_) outside(leaf);
  for (size_t r = 1; r < n; ++r) {
    if (member[r - 1] || member[r]) continue;
    const FastRec& p = fast_[r - 1];
    const FastRec& c = fast_[r];
    const bool sum = c.op == FastOp::ADD || c.op == FastOp::SUB;
    const bool scale = p.op == FastOp::MUL && sum && p.n == 2;  // a lane-form * into it
    if ((p.op != FastOp::LANE_PRODUCTS && !scale) || (!sum && c.op != FastOp::LANE_PRODUCTS) ||
        !p.forward || !p.vjp || !c.forward || !c.vjp || c.n != 2) {
      continue;
    }
    const uint32_t U = p.out_pid;
    const int u = c.pid[0] == U ? 0 : 1;
    const uint32_t X = c.pid[1 - u];
    if (reads[U] != 1 || c.pid[u] != U || X == U || !((c.taped >> u) & 1) ||
        (p.pid[0] == X && p.pid[1] == X)) {
      continue;
    }
    const Payload& x = pay_[X];
    const Payload& y = pay_[U];
    if (x.width != W_ || y.width != W_ || x.count() != y.count()) continue;
    bool factors = true;  // a *: each factor U's shape, or (its scalar bit) a lane-uniform number
    for (int i = 0; scale && i < 2; ++i) {
      const Payload& m = pay_[p.pid[i]];
      factors = factors && ((p.scalar >> i) & 1 ? m.width == 1 && m.size() == 1
                                                : m.width == W_ && m.count() == y.count());
    }
    if (!factors) continue;
    const FastKernels k = pair_lane_kernels(tape_.records[r - 1].op, tape_.records[r].op, p, c, u);
    if (k.forward == nullptr) continue;
    PairSwap s;
    s.r = static_cast<uint32_t>(r);
    s.prod_fwd = p.forward;
    s.cons_fwd = c.forward;
    s.cons_vjp = c.vjp;
    s.pair_fwd = k.forward;
    s.pair_vjp = k.vjp;
    pairs_.push_back(s);
    ++r;  // a pair's consumer (a dot) is no other pair's product
  }
  pairs_plan_ = pairs_.empty() && updates_.empty() ? 0 : 1;
}

// Puts the pairs' kernels into fast_ (on, when they apply to this run) or the records' own.
// The fused updates (updates.cpp) likewise, when the run asks for them.
void Interp::set_pairs(bool on) {
  on = on && fused_ && fast_.size() == tape_.records.size();
  if (on && pairs_plan_ >= 0 && updates_planned_ != updates_req_) {  // planned for the other
    set_updates(false);
    set_pairs(false);
    pairs_plan_ = -1;
  }
  if (on && (pairs_req_ || updates_req_) && pairs_plan_ < 0) plan_pairs();
  set_updates(on && updates_req_ && pairs_plan_ > 0);
  on = on && pairs_req_ && W_ > 1;
  if (on == pairs_on_) return;
  for (const PairSwap& s : pairs_) {
    FastRec& p = fast_[s.r - 1];
    FastRec& c = fast_[s.r];
    p.forward = on ? &fast_skip_forward : s.prod_fwd;
    c.forward = on ? s.pair_fwd : s.cons_fwd;
    c.vjp = on ? s.pair_vjp : s.cons_vjp;
  }
  pairs_on_ = on;
}

}  // namespace ndvm
