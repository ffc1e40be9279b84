// Run results: the value grid and per-lane status, reverse mode over the tape, and the export
// of structural values (lists, symbols, ...) for the host.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "ndvm/interp.hpp"
#include "ndvm/prims.hpp"

namespace ndvm {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void mask_bytes(const MaskTable& masks, uint32_t id, std::vector<uint8_t>& out) {
  out.assign(masks.bits(id), masks.bits(id) + masks.W());
}

// Status 1 (non-finite value) on the lanes of a one-element result without a status yet.
NDVM_SIMD void mark_nonfinite(const double* value, size_t W, int8_t* status) {
  if (all_finite(value, W)) return;
  for (size_t l = 0; l < W; ++l) {
    const bool bad = !std::isfinite(value[l]) && status[l] == 0;
    status[l] = bad ? int8_t{1} : status[l];
  }
}

// A result group's cotangent into its adjoint a (S elements x W lanes): element e of lane l
// is cotangent[l * S + e] (1 without a cotangent) on the lanes of bits (nullptr: all), 0
// elsewhere; stored when `first`, else added.
NDVM_SIMD void seed_adjoint(Real* __restrict a, const double* cotangent, const uint8_t* bits,
                            size_t S, uint32_t W, bool first) {
  if (bits == nullptr && first && cotangent != nullptr && S == 1) {  // a copy
    for (uint32_t l = 0; l < W; ++l) a[l] = static_cast<Real>(cotangent[l]);
    return;
  }
  for (size_t e = 0; e < S; ++e) {
    for (uint32_t l = 0; l < W; ++l) {
      const bool on = bits == nullptr || bits[l];
      const Real c = on ? (cotangent ? static_cast<Real>(cotangent[l * S + e]) : 1) : 0;
      a[e * W + l] = first ? c : a[e * W + l] + c;
    }
  }
}

// ((a[0] + a[1]) + a[2]) + ... (n >= 1): np.sum's order over a lane row, eight terms a turn
// (a pointer walk: no index arithmetic per term).
Real ordered_sum(const Real* a, uint32_t n) {
  Real s = a[0];
  const Real* p = a + 1;
  const Real* const end = a + n;
  for (; end - p >= 8; p += 8) {
    s = (((s + p[0]) + p[1]) + p[2]) + p[3];
    s = (((s + p[4]) + p[5]) + p[6]) + p[7];
  }
  for (; p < end; ++p) s += *p;
  return s;
}

// A float64 payload as RunOutput::view (the float32 core has none: view_ is never set there).
template <class T>
const double* double_view(const T* p) {
  if constexpr (std::is_same_v<T, double>) return p;
  return nullptr;
}

// The cotangent of operand `which` of a MERGE, STACK or GATHER record, into ct; returns its
// element count (in_size: the operand's).
size_t structural_ct(const TapeRecord& rec, uint32_t which, const Real* g, size_t S, uint32_t W,
                     size_t in_size, const Tape& tape, const MaskTable& masks,
                     std::vector<Real>& ct) {
  if (rec.op == static_cast<uint16_t>(TapeOp::MERGE)) {
    ct.assign(S * W, 0.0);
    const uint8_t* bits = masks.bits(tape.extras[rec.extra + which]);
    for (size_t e = 0; e < S; ++e) {
      for (uint32_t l = 0; l < W; ++l) ct[e * W + l] = bits[l] ? g[e * W + l] : 0.0;
    }
    return S;
  }
  if (rec.op == static_cast<uint16_t>(TapeOp::STACK)) {
    const size_t elems = rec.extra;
    ct.assign(g + static_cast<size_t>(which) * elems * W,
              g + static_cast<size_t>(which + 1) * elems * W);
    return elems;
  }
  ct.assign(in_size * W, 0.0);  // GATHER
  for (size_t k = 0; k < static_cast<size_t>(rec.aux) * W; ++k) {
    ct[static_cast<size_t>(rec.extra) * W + k] = g[k];
  }
  return in_size;
}

}  // namespace

void Interp::assemble(RunOutput& out) {
  const size_t W = W_;
  out.status.assign(W, 0);
  for (auto& [mask, err] : errors_) {
    ErrorOut e;
    mask_bytes(masks_, mask, e.mask);
    for (size_t l = 0; l < W; ++l) {
      if (!e.mask[l]) continue;
      out.status[l] = 2;
      const int64_t b = static_cast<int64_t>(l / Ng_);
      if (e.lanes.empty() || e.lanes.back() != b) e.lanes.push_back(b);
    }
    e.cls = err.cls;
    e.message = std::move(err.message);
    e.line = err.line;
    e.column = err.column;
    e.error_prim = err.error_prim;
    e.irritants = std::move(err.irritants);
    out.errors.push_back(std::move(e));
  }
  bool numeric = true;
  Payload shape;
  for (size_t k = 0; k < groups_.size(); ++k) {
    const Value v = groups_[k].second;
    if (v.tag != Tag::NUM) {
      numeric = false;
      break;
    }
    const Payload& p = pay_[v.id];
    if (k == 0) shape = p;
    if (p.rank != shape.rank || p.rows != shape.rows || p.cols != shape.cols) numeric = false;
  }
  out.numeric = numeric;
  if (!numeric) {
    for (const auto& [mask, v] : groups_) {
      GroupOut g;
      mask_bytes(masks_, mask, g.mask);
      g.value = export_values(&v, 1);
      out.groups.push_back(std::move(g));
    }
    return;
  }
  const size_t S = groups_.empty() ? 1 : shape.size();
  out.value_shape = {static_cast<int64_t>(B_), static_cast<int64_t>(Ng_)};
  if (!groups_.empty() && shape.rank >= 1) out.value_shape.push_back(shape.rows);
  if (!groups_.empty() && shape.rank == 2) out.value_shape.push_back(shape.cols);
  if (groups_.size() == 1 && S == 1 && masks_.full(groups_[0].first) &&
      pay_[groups_[0].second.id].width > 1) {  // one value per lane on every lane: a copy
    const Real* src = pay_.ptr(groups_[0].second.id);
    out.view = view_ ? double_view(src) : nullptr;  // RunRequest::value_view: no copy,
    if (out.view) return;                            // no status 1
    out.value.assign(src, src + W);
    mark_nonfinite(out.value.data(), W, out.status.data());
    return;
  }
  out.value.assign(W * S, kNaN);
  double* value = out.value.data();
  for (const auto& [mask, v] : groups_) {
    const Payload& p = pay_[v.id];
    const Real* src = pay_.ptr(v.id);
    const uint8_t* bits = masks_.full(mask) ? nullptr : masks_.bits(mask);
    const size_t ls = p.width > 1 ? 1 : 0;
    if (!bits && S == 1 && ls) {  // one value per lane on every lane: a copy
      std::copy(src, src + W, value);
      continue;
    }
    for (size_t l = 0; l < W; ++l) {
      if (bits && !bits[l]) continue;
      for (size_t e = 0; e < S; ++e) value[l * S + e] = src[e * p.width + l * ls];
    }
  }
  auto* status = out.status.data();
  if (S == 1) return mark_nonfinite(value, W, status);
  for (size_t l = 0; l < W; ++l) {
    bool finite = true;
    for (size_t e = 0; e < S; ++e) finite = finite && std::isfinite(value[l * S + e]);
    if (!finite && !status[l]) status[l] = 1;
  }
}

void Interp::accumulate(uint32_t pid, const Real* ct, size_t ct_elems, uint32_t mask,
                        LineVec& adj) {
  const Payload& p = pay_[pid];
  const uint8_t* bits = (mask == 0 || masks_.full(mask)) ? nullptr : masks_.bits(mask);
  // the first cotangent is stored, later ones added: adjoints are never zeroed
  accumulate_lanes(adj.data() + p.off, ct, p.width, p.size(), ct_elems, bits, !touched_[pid]);
  touched_[pid] = 1;
}

void Interp::backward(const double* cotangent, std::vector<double>& grad) {
  reverse_sweep(cotangent);
  const std::vector<uint32_t>& leaves = leaves_;
  const LineVec& adj = adj_;
  const uint32_t P = static_cast<uint32_t>(leaves.size());
  grad.assign(static_cast<size_t>(B_) * P, 0.0);
  for (uint32_t i = 0; i < P; ++i) {
    const Real* a = adj.data() + pay_[leaves[i]].off;
    if (!touched_[leaves[i]]) continue;  // unused parameter: gradient 0
    for (uint32_t b = 0; b < B_; ++b) {  // sum over data lanes as np.sum (first term first)
      grad[b * P + i] = ordered_sum(a + static_cast<size_t>(b) * Ng_, Ng_);
    }
  }
  for (uint32_t b = 0; b < B_ && !errors_.empty(); ++b) {  // status 2 only where an error is
    bool failed = false;
    for (uint32_t k = 0; k < Ng_; ++k) failed = failed || status_[b * Ng_ + k] == 2;
    if (failed) {
      for (uint32_t i = 0; i < P; ++i) grad[b * P + i] = kNaN;
    }
  }
}

// value_and_grad's gradient: no reverse sweep once every parameter lane has a failed lane
// (each gradient is NaN then), and the sweep under the run's deadline (Limits.deadline, from
// the run's start): past it, every lane still standing fails with DeadlineExceeded (values
// kept, gradients NaN), as the reference's _gradient does.
void Interp::timed_backward(const double* cotangent, RunOutput& out) {
  const size_t P = leaves_.size();
  bool all_failed = true;
  for (uint32_t b = 0; b < B_ && all_failed; ++b) {
    bool failed = false;
    for (uint32_t k = 0; k < Ng_; ++k) failed = failed || status_[b * Ng_ + k] == 2;
    all_failed = failed;
  }
  if (all_failed) {
    out.grad.assign(static_cast<size_t>(B_) * P, kNaN);
    return;
  }
  sweep_timed_ = lim_.deadline > 0;
  sweep_count_ = 0;
  try {
    backward(cotangent, out.grad);
  } catch (const LimitError& e) {
    sweep_timed_ = false;
    if (e.kind != LimitKind::DEADLINE) throw;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", lim_.deadline);
    fail_standing(out, (std::string("evaluation exceeded its deadline of ") + buf + " s").c_str());
    out.grad.assign(static_cast<size_t>(B_) * P, kNaN);
    return;
  }
  sweep_timed_ = false;
}

// The lanes without an error fail with the deadline's error, raised in the reverse sweep.
void Interp::fail_standing(RunOutput& out, const char* message) {
  ErrorOut e;
  e.mask.assign(W_, 0);
  for (uint32_t l = 0; l < W_; ++l) {
    if (out.status[l] == 2) continue;
    e.mask[l] = 1;
    out.status[l] = 2;
    status_[l] = 2;
    const int64_t b = static_cast<int64_t>(l / Ng_);
    if (e.lanes.empty() || e.lanes.back() != b) e.lanes.push_back(b);
  }
  e.cls = ErrClass::DEADLINE;
  e.message = std::string(message) + " (in the reverse sweep)";
  out.errors.push_back(std::move(e));
}

// A timed sweep looks at the clock every 256 general records or 4096 fast ones.
void Interp::sweep_tick() {
  if (!sweep_timed_) return;
  sweep_count_ = 0;
  if (scratch_.clock.past()) {
    scratch_.clock.expired = true;
    scratch_.clock.raise_if_expired();
  }
}

void Interp::lane_jacobian(const double* cotangent, std::vector<double>& jac) {
  if (!can_differentiate()) throw std::logic_error("jacobian: no numeric result to differentiate");
  reverse_sweep(cotangent);
  const uint32_t P = static_cast<uint32_t>(leaves_.size());
  jac.resize(static_cast<size_t>(W_) * P);
  for (uint32_t i = 0; i < P; ++i) {
    double* col = jac.data() + static_cast<size_t>(i) * W_;
    if (!touched_[leaves_[i]]) {  // unused parameter: column 0
      std::fill_n(col, W_, 0.0);
      continue;
    }
    std::copy_n(adj_.data() + pay_[leaves_[i]].off, W_, col);
  }
  for (uint32_t l = 0; l < W_ && !errors_.empty(); ++l) {
    if (status_[l] != 2) continue;
    for (uint32_t i = 0; i < P; ++i) jac[static_cast<size_t>(i) * W_ + l] = kNaN;
  }
}

void Interp::lane_adjoints(const double* cotangent, std::vector<const Real*>& cols) {
  if (!can_differentiate()) throw std::logic_error("jacobian: no numeric result to differentiate");
  reverse_sweep(cotangent);
  cols.resize(leaves_.size());
  for (size_t i = 0; i < leaves_.size(); ++i) {
    cols[i] = touched_[leaves_[i]] ? adj_.data() + pay_[leaves_[i]].off : nullptr;
  }
}

// The seeding and the reverse sweep of ``backward``: afterwards adj_ holds, for each taped
// payload, d sum(cotangent * value) / d payload per lane (touched_ says which are set). No
// zeroing of adjoints: a payload's first cotangent is stored, later ones are added; untouched
// ones are never read (records with an untouched output are skipped; untouched leaves give 0).
void Interp::reverse_sweep(const double* cotangent) {
  LineVec& adj = adj_;
  if (adj.size() < pay_.elems()) adj.resize(pay_.elems());
  // a timed sweep (timed_backward) stops at the run's deadline; others run to completion
  // (at the later of the deadline and the sweep's start, plus a grace of a quarter of the
  // deadline, at most 0.25 s: the reference's reverse_grace, so a lane that finished before
  // the deadline keeps a short sweep, and no sweep runs long past the deadline)
  const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  const double stop = std::max(lim_.deadline, now) + std::min(0.25, 0.25 * lim_.deadline);
  scratch_.clock = WorkClock{sweep_timed_ ? stop : 0.0, t0_, 0, false};
  touched_.assign(pay_.count(), 0);
  find_inverses();
  const bool fast = fast_.size() == tape_.records.size();
  for (const auto& [mask, v] : groups_) {  // a seed's adjoint must be its own storage
    if (adj_plan_ == 1 && (v.id >= adj_moved_.size() || adj_moved_[v.id])) adj_plan_ = -1;
  }
  const bool share = fused_ && tape_sweeps_++ > 0;
  if (fast && adj_plan_ != static_cast<int8_t>(share)) plan_adjoints(share);
  const size_t S = value_elems_ / W_;
  for (const auto& [mask, v] : groups_) {
    const Payload& p = pay_[v.id];
    if (!p.taped) continue;
    const uint8_t* bits = masks_.full(mask) ? nullptr : masks_.bits(mask);
    seed_adjoint(adj.data() + p.off, cotangent, bits, S, W_, !touched_[v.id]);
    touched_[v.id] = 1;
  }
  if (fast) {
    const bool fused_forms = pairs_on_ || updates_on_;  // what the forward pass ran
    if (inv_pairs_fused_ != fused_) {  // the one-lane pairs' kernels, for fused_
      set_updates(false);  // the swap writes the members' own kernels
      for (const uint32_t r : inv_pairs_) fast_[r].vjp = slogdet2_vjp_kernel(fast_[r].op, fused_);
      inv_pairs_fused_ = fused_;
    }
    if (chain_fwd_) {
      vjp_chains();  // the chains' inner payloads hold no values: their VJPs recompute them
    } else {
      // a pair's VJP needs no value of the product's output; after a forward pass that ran
      // pairs their VJPs must run (a dot pair's output was never stored; an update's inner
      // values likewise), and the first sweep
      // of a tape that was not replayed does not plan them (as plan_adjoints: it would cost
      // that one sweep more than it saves)
      set_pairs(fused_forms || share);
      vjp_fast(fast_.data());
    }
  } else {
    for (size_t r = tape_.records.size(); r-- > 0;) {
      const TapeRecord& rec = tape_.records[r];
      if (touched_[rec.out]) vjp_record(rec, adj);
    }
  }
}

// Once per tape (a walk's tape is replayed unchanged, and differentiated again as it is): for
// each payload that a tape record inverted over all W > 1 lanes, that record's output
// (inverse_of_; the forward `inv` kernel runs on every lane, and values never change after a
// record writes them); at one lane, the fast 2 x 2 `logdet`/`det` records whose operand a fast
// `inv` record inverted (inv_pairs_, with the inverse's offset in their off[1]). Their VJPs
// read that inverse instead of recomputing it when fused_ (the buffered path recomputes it).
void Interp::find_inverses() {
  if (inverses_ready_) return;
  inverses_ready_ = true;
  inv_pairs_.clear();
  inv_pairs_fused_ = false;  // the fast records' kernels as resolved: they recompute
  inverse_of_.assign(pay_.count(), kNoInverse);
  if (W_ > 1) {
    for (const TapeRecord& rec : tape_.records) {
      if (rec.op != static_cast<uint16_t>(Prim::INV) || rec.nargs != 1) continue;
      const uint32_t in = tape_.operands[rec.args];
      if (pay_[in].width == W_ && pay_[rec.out].width == W_) inverse_of_[in] = rec.out;
    }
    for (FastRec& f : fast_) {  // the lane forms of logdet/det read it too (fast_square.cpp)
      if (f.op != FastOp::LANE_SLOGDET2 || inverse_of_[f.pid[0]] == kNoInverse) continue;
      const Payload& inv = pay_[inverse_of_[f.pid[0]]];
      if (inv.off + inv.count() > UINT32_MAX) continue;
      f.off[1] = static_cast<uint32_t>(inv.off);
      f.c = 1;
    }
    return;
  }
  if (fast_.size() == tape_.records.size()) {
    for (const FastRec& f : fast_) {
      if (f.op == FastOp::INV2 && f.forward) inverse_of_[f.pid[0]] = f.out_pid;
    }
    for (size_t r = 0; r < fast_.size(); ++r) {
      FastRec& f = fast_[r];
      const bool slogdet = f.op == FastOp::LOGDET2 || f.op == FastOp::DET2;
      if (!slogdet || !f.vjp || inverse_of_[f.pid[0]] == kNoInverse) continue;
      f.off[1] = static_cast<uint32_t>(pay_[inverse_of_[f.pid[0]]].off);
      inv_pairs_.push_back(static_cast<uint32_t>(r));
    }
  }
  inverse_of_.clear();  // at one lane the general path recomputes
}

// Once per tape and fused_ (and again if a seed's adjoint was moved): where the fast records'
// VJPs find each adjoint. share false: every payload's own storage. share true: a payload U
// whose first cotangent is, on every sweep, the cotangent g of a + or - record's output O
// (U an operand of it taken with sign +, of O's elements and lanes, named once there and by
// no later record) takes over O's adjoint storage, where g already is, instead of a copy of
// g: O's adjoint is never read again once its record's VJP ran, so each storage has one
// owner at a time and chains (P -> Pp -> P2 -> the next step's P, in a filter) share one.
// Only payloads that no general record (vjp_record, which addresses adjoints by the
// payloads' offsets), leaf or seed names are moved. The cotangents are the same values,
// added in the same order: the results are bitwise those of the unshared sweep.
void Interp::plan_adjoints(bool share) {
  adj_plan_ = static_cast<int8_t>(share);
  for (const std::unique_ptr<UpdateGroup>& g : updates_) g->storage = -1;  // planned anew
  for (FastRec& f : fast_) {
    f.aout = f.out;
    for (int i = 0; i < f.n; ++i) f.aoff[i] = f.off[i];
    f.alias = 0;
  }
  const size_t N = pay_.count();
  adj_moved_.assign(N, 0);
  if (!share) return;
  constexpr uint32_t kNone = 0xffffffffu;
  // per payload: bit 0 while only fast VJPs name it, bit 1 produced by one; its last reader
  std::vector<uint8_t> ok(N, 1);
  std::vector<uint32_t> last(N, kNone);
  std::vector<uint32_t> store(N, kNone);  // kNone: its own offset
  const GrowVec<TapeRecord>& recs = tape_.records;
  for (size_t r = 0; r < recs.size(); ++r) {
    const bool fast = fast_[r].vjp != nullptr;
    const uint32_t* ids = tape_.operands.data() + recs[r].args;
    for (uint32_t i = 0; i < recs[r].nargs; ++i) {
      if (!fast) ok[ids[i]] = 0;
      last[ids[i]] = static_cast<uint32_t>(r);
    }
    ok[recs[r].out] = fast ? ok[recs[r].out] | 2 : 0;
  }
  for (const uint32_t leaf : leaves_) ok[leaf] = 0;
  for (const auto& [mask, v] : groups_) ok[v.id] = 0;
  auto at = [&](uint32_t pid) {
    return store[pid] != kNone ? store[pid] : static_cast<uint32_t>(pay_[pid].off);
  };
  for (size_t r = recs.size(); r-- > 0;) {
    FastRec& f = fast_[r];
    if (f.vjp == nullptr) continue;
    f.aout = at(f.out_pid);
    const Payload& o = pay_[f.out_pid];
    bool given = f.op != FastOp::ADD && f.op != FastOp::SUB;  // O's storage handed on
    for (int i = 0; i < f.n; ++i) {
      const uint32_t pid = f.pid[i];
      int named = 0;
      for (int j = 0; j < f.n; ++j) named += f.pid[j] == pid;
      const bool plus = f.op == FastOp::ADD || (i == 0 && f.n > 1);
      if (!given && plus && ((f.taped >> i) & 1) && ok[pid] == 3 && last[pid] == r &&
          named == 1 && pay_[pid].count() == o.count() && pay_[pid].width == o.width) {
        store[pid] = f.aout;
        adj_moved_[pid] = 1;
        f.alias |= static_cast<uint8_t>(1u << i);
        given = true;
      }
      f.aoff[i] = at(pid);
    }
  }
}

// The reverse sweep with the records' fast forms (fast_[r] beside tape record r): the arena,
// the adjoints and the touched flags stay where they are while it runs. The general records
// (slow_vjp_) split it into runs of fast records, each a loop without a per-record check.
void Interp::vjp_fast(const FastRec* fast) {
  list_slow();
  const Real* v = pay_.base();
  Real* adj = adj_.data();
  uint8_t* touched = touched_.data();
  const uint32_t* slow = slow_vjp_.data() + (slow_vjp_.size() - 1);  // at kNoSlow
  for (size_t r = tape_.records.size(); r > 0;) {
    const size_t lo = slow == slow_vjp_.data() ? 0 : size_t{slow[-1]} + 1;
    while (r > lo) {  // the fast records after the previous general one, 4096 at a time
      const size_t cut = r - lo > 4096 ? r - 4096 : lo;
      for (const FastRec* f = fast + r; f != fast + cut;) {
        --f;
        if (touched[f->out_pid]) {
          in_register(f->vjp)(*f, v, adj, touched);
          f -= std::min<size_t>(f->skip_back, static_cast<size_t>(f - (fast + cut)));
        }
      }
      r = cut;
      sweep_tick();
    }
    if (r == 0) break;
    --slow;
    const TapeRecord& rec = tape_.records[--r];  // the general record *slow
    if (touched[rec.out]) vjp_record(rec, adj_);
  }
}

void Interp::vjp_record(const TapeRecord& rec, LineVec& adj) {
  const Payload outp = pay_[rec.out];
  const Real* g = adj.data() + outp.off;
  const Real* ans = pay_.ptr(rec.out);
  const uint32_t* ids = tape_.operands.data() + rec.args;
  const uint32_t n = rec.nargs;
  const size_t S = outp.size();
  const uint32_t W = outp.width;
  if (ops_.size() < n) ops_.resize(n);
  for (uint32_t i = 0; i < n; ++i) ops_[i] = pay_.operand(ids[i]);
  const bool all_lanes = rec.mask == 0 || masks_.full(rec.mask);
  if (++sweep_count_ >= 256) sweep_tick();
  const bool variadic = variadic_vjp_wanted(rec.op, static_cast<int>(n));
  if (variadic) {
    variadic_vjp_prepare(rec.op, ans, ops_.data(), static_cast<int>(n), W, S, variadic_,
                         scratch_.clock);
  }
  for (uint32_t which = 0; which < n; ++which) {
    const uint32_t pid = ids[which];
    const Payload& in = pay_[pid];
    if (!in.taped) continue;
    size_t elems = S;
    bool identity = false;  // the cotangent is g itself
    // a first cotangent on every lane, of the operand's own shape, is written by the kernel
    // straight into the operand's adjoint (no buffer, no accumulate pass)
    const bool direct = !touched_[pid] && all_lanes && in.width == W;
    Real* const direct_ct = adj.data() + in.off;
    if (rec.op == static_cast<uint16_t>(TapeOp::MERGE) ||
        rec.op == static_cast<uint16_t>(TapeOp::STACK) ||
        rec.op == static_cast<uint16_t>(TapeOp::GATHER)) {
      elems = structural_ct(rec, which, g, S, W, in.size(), tape_, masks_, ct_);
    } else if (prim_info(rec.op).shape == PrimShape::CUSTOM) {
      elems = in.size();
      const bool det = rec.op == static_cast<uint16_t>(Prim::DET);
      if ((det || rec.op == static_cast<uint16_t>(Prim::LOGDET)) && all_lanes && in.width == W &&
          fused_ && !inverse_of_.empty() && inverse_of_[pid] != kNoInverse) {
        // the operand's inverse from its forward `inv` record, not recomputed
        slogdet_vjp_from_inverse(det, g, ans, pay_.ptr(inverse_of_[pid]), in.rows, direct_ct,
                                 W, touched_[pid] != 0);
        touched_[pid] = 1;
        continue;
      }
      // a later cotangent on every lane, of the operand's own width: the lane kernels add it
      // into the operand's adjoint themselves (no buffer, no accumulate pass)
      if (fused_ && touched_[pid] && all_lanes && in.width == W &&
          lanes_vjp_add(rec.op, g, ans, ops_.data(), static_cast<int>(which), direct_ct, W,
                        scratch_)) {
        continue;
      }
      if (ct_.size() < elems * W) ct_.resize(elems * W);
      OutShape os{outp.rank, outp.rows, outp.cols};
      custom_vjp(rec.op, g, ans, os, ops_.data(), static_cast<int>(n), static_cast<int>(which),
                 direct ? direct_ct : ct_.data(), W, scratch_);
      if (direct) {
        touched_[pid] = 1;
        continue;
      }
    } else {
      if (ct_.size() < S * W) ct_.resize(S * W);
      const bool dmci = (rec.flags & 1) && prim_info(rec.op).domain == PrimDomain::POSITIVE;
      const bool into = direct && in.size() == S;
      Real* const ct = into ? direct_ct : ct_.data();
      Grad r = Grad::WRITTEN;
      if (variadic) {
        variadic_vjp(rec.op, g, ops_.data(), static_cast<int>(which), ct, W, S, variadic_);
      } else {
        r = elementwise_vjp(rec.op, dmci, g, ans, ops_.data(), static_cast<int>(n),
                            static_cast<int>(which), ct, W, S);
      }
      if (r == Grad::NONE) continue;
      identity = r == Grad::IDENTITY;
      if (into && !identity) {
        touched_[pid] = 1;
        continue;
      }
    }
    accumulate(pid, identity ? g : ct_.data(), elems, rec.mask, adj);
  }
}

Export Interp::export_values(const Value* vals, size_t n) {
  Export ex;
  std::unordered_map<uint32_t, int64_t> seen;
  std::vector<Value> todo(vals, vals + n);
  std::reverse(todo.begin(), todo.end());
  auto rec = [&](ExportTag tag, int64_t a, int64_t b, int64_t c) {
    ex.enc.insert(ex.enc.end(), {static_cast<int64_t>(tag), a, b, c});
  };
  while (!todo.empty()) {
    const Value v = todo.back();
    todo.pop_back();
    switch (v.tag) {
      case Tag::NUM:
      case Tag::BOOLS: {
        const Payload& p = pay_[v.id];
        const Real* src = pay_.ptr(v.id);
        const size_t S = p.size();
        std::vector<double> arr(S * p.width);
        for (size_t l = 0; l < p.width; ++l) {
          for (size_t e = 0; e < S; ++e) arr[l * S + e] = src[e * p.width + l];
        }
        std::vector<int64_t> shape = {p.width > 1 ? B_ : 1, p.width > 1 ? Ng_ : 1};
        if (p.rank >= 1) shape.push_back(p.rows);
        if (p.rank == 2) shape.push_back(p.cols);
        rec(v.tag == Tag::NUM ? ExportTag::NUM : ExportTag::BOOLS,
            static_cast<int64_t>(ex.arrays.size()), p.rank, p.taped ? 1 : 0);
        ex.arrays.push_back(std::move(arr));
        ex.shapes.push_back(std::move(shape));
        break;
      }
      case Tag::BOOL: rec(ExportTag::BOOL, v.id, 0, 0); break;
      case Tag::NIL: rec(ExportTag::NIL, 0, 0, 0); break;
      case Tag::VOID: rec(ExportTag::VOID, 0, 0, 0); break;
      case Tag::PAIR: {
        auto it = seen.find(v.id);
        if (it != seen.end()) {
          rec(ExportTag::SHARED, it->second, 0, 0);
          break;
        }
        seen[v.id] = static_cast<int64_t>(ex.enc.size() / 4);
        rec(ExportTag::PAIR, 0, 0, 0);
        todo.push_back(heap_.pairs[v.id].cdr);
        todo.push_back(heap_.pairs[v.id].car);
        break;
      }
      case Tag::SYMBOL: rec(ExportTag::SYMBOL, v.id, 0, 0); break;
      case Tag::STRING: rec(ExportTag::STRING, v.id, 0, 0); break;
      case Tag::CLOSURE:
        rec(ExportTag::CLOSURE, prog_->nodes[heap_.closures[v.id].lambda].c, 0, 0);
        break;
      case Tag::PRIMPROC: rec(ExportTag::PRIMPROC, v.id, 0, 0); break;
      default: rec(ExportTag::OTHER, 0, 0, 0); break;
    }
  }
  return ex;
}

}  // namespace ndvm
