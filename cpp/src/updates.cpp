// Fused Gaussian updates (docs/native.md, "Fused updates"; the kernels and their bits:
// fast_updates.hpp). Once per tape, with the pairs and before them, every run of 13
// consecutive records in their lane forms (or one-lane forms at W = 1) that computes a 2 x 2
// measurement update (fast.hpp's UpdateMember order) becomes one: its last record runs the
// update's forward and VJP, the others nothing. Chosen from the trace's records, operands and shapes, never from the
// program's text: an update's inner payloads (S, Si, K, Kv, KP, ld, Siv, q, s, h) must be read
// by its own members only (no other record, guard, result or parameter leaf), no guard may
// fall inside it, and its outer operands (Pp, R, v, m, nll) must be taped, distinct
// payloads. On when the run is fused, asks for them (RunRequest::updates, the default) and
// runs no fused chains.
#include <memory>

#include "ndvm/interp.hpp"
#include "ndvm/prims.hpp"

namespace ndvm {

namespace {

constexpr uint8_t kOutside = 255;  // read by a guard, a result or a leaf

bool full(const Payload& p, uint32_t W, uint32_t rows, uint32_t cols) {
  return p.width == W && p.rows == rows && p.cols == cols && p.taped;
}

bool uniform_number(const Payload& p) { return p.width == 1 && p.size() == 1 && !p.taped; }

}  // namespace

// Whether the 13 records ending at r (r >= 12) form an update; reads: per payload, the tape
// records that name it (saturating; kOutside: also a guard, result or leaf).
bool Interp::update_at(size_t r, const std::vector<uint8_t>& reads) const {
  const size_t r0 = r + 1 - kUpdateRecords;
  const FastRec* m = fast_.data() + r0;
  static constexpr Prim kCode[kUpdateRecords] = {
      Prim::ADD, Prim::INV, Prim::MATMUL, Prim::MATVEC, Prim::ADD, Prim::MATMUL, Prim::SUB,
      Prim::LOGDET, Prim::MATVEC, Prim::DOT, Prim::ADD, Prim::MUL, Prim::ADD};
  // the lane forms over W > 1 lanes, the one-lane forms at W = 1 (fast.hpp)
  static constexpr FastOp kLanes[kUpdateRecords] = {
      FastOp::ADD, FastOp::LANE_INV2, FastOp::LANE_PRODUCTS, FastOp::LANE_PRODUCTS, FastOp::ADD,
      FastOp::LANE_PRODUCTS, FastOp::SUB, FastOp::LANE_SLOGDET2, FastOp::LANE_PRODUCTS,
      FastOp::LANE_PRODUCTS, FastOp::ADD, FastOp::MUL, FastOp::ADD};
  static constexpr FastOp kOne[kUpdateRecords] = {
      FastOp::ADD, FastOp::INV2, FastOp::MATMUL, FastOp::MATVEC, FastOp::ADD, FastOp::MATMUL,
      FastOp::SUB, FastOp::LOGDET2, FastOp::MATVEC, FastOp::DOT, FastOp::ADD, FastOp::MUL,
      FastOp::ADD};
  static constexpr uint8_t kTaped[kUpdateRecords] = {3, 1, 3, 3, 3, 3, 3, 1, 3, 3, 3, 2, 3};
  // broadcast bits of the lane forms; at one lane the one-element operands' bits do not
  // matter (a one-element record's kernels read and write element 0 either way)
  static constexpr uint8_t kScalar[kUpdateRecords] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 1, 0};
  const bool one = W_ == 1;
  for (int k = 0; k < kUpdateRecords; ++k) {
    const Prim code = static_cast<Prim>(tape_.records[r0 + k].op);
    const bool mul = k == UPD_H && code == Prim::SCALE;
    if ((code != kCode[k] && !mul) || m[k].op != (one ? kOne[k] : kLanes[k]) || !m[k].forward ||
        !m[k].vjp || m[k].taped != kTaped[k] || m[k].update != nullptr ||
        (m[k].scalar != kScalar[k] && !(one && m[k].S == 1))) {
      return false;
    }
  }
  const uint32_t W = W_;
  auto out = [&](int k) { return m[k].out_pid; };
  auto arg = [&](int k, int i) { return m[k].pid[i]; };
  const uint32_t Pp = arg(UPD_S, 0), R = arg(UPD_S, 1), v = arg(UPD_KV, 1), mv = arg(UPD_M2, 0),
                 nll = arg(UPD_NLL, 0);
  const bool wired =
      arg(UPD_SI, 0) == out(UPD_S) && arg(UPD_K, 0) == Pp && arg(UPD_K, 1) == out(UPD_SI) &&
      arg(UPD_KV, 0) == out(UPD_K) && arg(UPD_M2, 1) == out(UPD_KV) &&
      arg(UPD_KP, 0) == out(UPD_K) && arg(UPD_KP, 1) == Pp && arg(UPD_P2, 0) == Pp &&
      arg(UPD_P2, 1) == out(UPD_KP) && arg(UPD_LD, 0) == out(UPD_S) &&
      arg(UPD_SIV, 0) == out(UPD_SI) && arg(UPD_SIV, 1) == v && arg(UPD_Q, 0) == v &&
      arg(UPD_Q, 1) == out(UPD_SIV) && arg(UPD_SUM, 0) == out(UPD_LD) &&
      arg(UPD_SUM, 1) == out(UPD_Q) && arg(UPD_H, 1) == out(UPD_SUM) &&
      arg(UPD_NLL, 1) == out(UPD_H);
  if (!wired || m[UPD_S].n != 2 || m[UPD_M2].n != 2 || m[UPD_P2].n != 2 || m[UPD_SUM].n != 3 ||
      m[UPD_H].n != 2 || m[UPD_NLL].n != 2) {
    return false;
  }
  const uint32_t outer[5] = {Pp, R, v, mv, nll};
  for (int i = 0; i < 5; ++i) {
    for (int j = i + 1; j < 5; ++j) {
      if (outer[i] == outer[j]) return false;
    }
  }
  if (!full(pay_[Pp], W, 2, 2) || !full(pay_[R], W, 2, 2) || !full(pay_[v], W, 2, 1) ||
      !full(pay_[mv], W, 2, 1) || !full(pay_[nll], W, 1, 1) || pay_[v].rank != 1 ||
      pay_[mv].rank != 1 || pay_[Pp].rank != 2 || pay_[R].rank != 2 ||
      !full(pay_[out(UPD_M2)], W, 2, 1) || !full(pay_[out(UPD_P2)], W, 2, 2) ||
      !full(pay_[out(UPD_NLL)], W, 1, 1) || !uniform_number(pay_[arg(UPD_SUM, 2)]) ||
      !uniform_number(pay_[arg(UPD_H, 0)])) {
    return false;
  }
  // the inner payloads and how many member records read each
  static constexpr int kInner[10] = {UPD_S, UPD_SI, UPD_K, UPD_KV, UPD_KP,
                                     UPD_LD, UPD_SIV, UPD_Q, UPD_SUM, UPD_H};
  static constexpr uint8_t kReads[10] = {2, 2, 2, 1, 1, 1, 1, 1, 1, 1};
  for (int i = 0; i < 10; ++i) {
    if (reads[out(kInner[i])] != kReads[i]) return false;
  }
  for (const Guard& g : trace_.guards) {
    if (g.at > r0 && g.at <= r) return false;
  }
  return true;
}

// Plans the tape's updates (member[r] = 1 for each member record) and keeps each one's own
// kernels.
void Interp::plan_updates(std::vector<uint8_t>& member) {
  set_updates(false);
  updates_.clear();
  const size_t n = tape_.records.size();
  if (n < static_cast<size_t>(kUpdateRecords)) return;
  std::vector<uint8_t> reads(pay_.count(), 0);
  for (const TapeRecord& rec : tape_.records) {
    const uint32_t* ids = tape_.operands.data() + rec.args;
    for (uint32_t i = 0; i < rec.nargs; ++i) {
      if (reads[ids[i]] < kOutside - 1) ++reads[ids[i]];
    }
  }
  for (const Guard& g : trace_.guards) {
    reads[g.out] = kOutside;
    for (uint32_t i = 0; i < g.nargs; ++i) reads[trace_.operands[g.args + i]] = kOutside;
  }
  for (const auto& [mask, val] : groups_) reads[val.id] = kOutside;
  for (const uint32_t leaf : leaves_) reads[leaf] = kOutside;
  for (size_t r = kUpdateRecords - 1; r < n; ++r) {
    if (fast_[r].op != FastOp::ADD || !update_at(r, reads)) continue;
    auto g = std::make_unique<UpdateGroup>();
    g->first = static_cast<uint32_t>(r + 1 - kUpdateRecords);
    g->one_lane = W_ == 1;
    for (int k = 0; k < kUpdateRecords; ++k) member[g->first + k] = 1;
    updates_.push_back(std::move(g));
    r += kUpdateRecords - 1;  // updates do not overlap
  }
}

// Puts the updates' kernels into fast_ (on: the members' own kept in their UpdateGroup, as
// they are then) or the members' own back.
void Interp::set_updates(bool on) {
  if (on == updates_on_) return;
  for (const std::unique_ptr<UpdateGroup>& g : updates_) {
    FastRec* m = fast_.data() + g->first;
    for (int k = 0; k < kUpdateRecords; ++k) {
      if (on) {
        g->fwd[k] = m[k].forward;
        g->vjp[k] = m[k].vjp;
      }
      const FastKernels u = update_member_kernels(k, g->one_lane);
      m[k].forward = on ? u.forward : g->fwd[k];
      m[k].vjp = on ? u.vjp : g->vjp[k];
    }
    m[UPD_NLL].update = on ? g.get() : nullptr;
    m[0].skip_fwd = on ? static_cast<uint8_t>(kUpdateRecords - 2) : 0;
    m[UPD_NLL].skip_back = on ? static_cast<uint8_t>(kUpdateRecords - 1) : 0;
  }
  updates_on_ = on;
}

}  // namespace ndvm
