// Fused chains of lane-form records (docs/native.md, "Fused chains"). A replayed tape over many
// lanes streams every intermediate of every record through memory twice (written by the
// forward pass, read back by the reverse sweep), where a forward-mode hand-written filter keeps
// a step in registers. A chain is a run of consecutive lane-form records (fast.hpp; e.g. a
// filter step's products, inverse, log-determinant and sums) whose "inner" payloads are read
// by no record, guard or result outside it. Replay runs a chain one block of lanes at a time in a small scratch arena: its
// inputs copied in, its records' own kernels run there, and only its outputs copied back, so
// the inner payloads never reach the arena. The sweep after such a replay runs the chain's
// VJP block by block the same way: it recomputes the chain's forward in the scratch
// (checkpointing inside the chain), copies in the outputs' adjoints and the inputs' adjoints
// as they stand, runs the records' VJPs in reverse order, and copies the inputs' adjoints back.
//
// Every kernel is the one the unfused path runs, on the same operands, and each element of a
// lane depends on that lane only: values, adjoints (first cotangent stored, later ones added,
// in the same order) and gradients are bitwise the unfused path's (tests/native/
// test_chains.py). Chains are chosen from the trace's shapes once per tape, never from the
// program's text. They are opt-in: RunRequest::chain_lanes (Python: RunOptions.chain_lanes) or
// the NDVM_CHAIN_LANES environment variable sets the lanes per block; a run uses them when it
// is fused and spans at least two blocks. Measured on Kalman-80 (docs/native.md, "Fused
// chains"), the scratch copies, the recomputation and the per-block record calls cost more
// than the arena traffic they save while a lane block of the tape fits the cache, so the default
// (0) runs none.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "ndvm/interp.hpp"

namespace ndvm {
namespace {

constexpr uint32_t kMaxChainRecs = 48;  // records per chain
constexpr uint32_t kMaxPerLane = 160;   // scratch elements per lane (values; as many adjoints)
constexpr uint32_t kMaxFixed = 4096;    // scratch elements of one-lane inputs (data rows)
constexpr uint32_t kMaxChainLanes = 4096;  // lanes per block at most (the scratch stays small)

// NDVM_CHAIN_LANES: lanes per block for runs that do not set RunRequest::chain_lanes; 0 when
// unset.
uint32_t env_lanes() {
  static const uint32_t lanes = [] {
    const char* s = std::getenv("NDVM_CHAIN_LANES");
    return s ? static_cast<uint32_t>(std::strtoul(s, nullptr, 10)) : 0u;
  }();
  return lanes;
}

// rows x L elements between two element-major layouts (row strides `ts` and `fs`): a loop the
// compiler vectorizes, where a memcpy call per row of a few lanes costs more than the copy.
NDVM_INLINE void copy_rows(Real* __restrict to, size_t ts, const Real* __restrict from, size_t fs,
                           uint32_t rows, uint32_t L) {
  for (uint32_t e = 0; e < rows; ++e) {
    Real* t = to + e * ts;
    const Real* f = from + e * fs;
    for (uint32_t l = 0; l < L; ++l) t[l] = f[l];
  }
}

}  // namespace

// Whether this tape's replay and sweeps run chains (planned on first use).
bool Interp::chains_apply() {
  if (chains_plan_ < 0 || chain_planned_ != chain_req_) plan_chains();
  return chains_plan_ > 0 && fused_;
}

// Once per tape and chain_req_: the chains (chains_, chain_io_), their records laid out for the
// scratch, and the scratch buffers. None unless asked for, when the run is not fused, or when
// it spans fewer than two blocks of lanes.
void Interp::plan_chains() {
  set_pairs(false);  // the chains copy the records' own kernels
  chains_plan_ = 0;
  chain_planned_ = chain_req_;
  chains_.clear();
  chain_io_.clear();
  const size_t n = tape_.records.size();
  chain_lanes_ = std::min(chain_req_ != 0 ? chain_req_ : env_lanes(), kMaxChainLanes);
  if (chain_lanes_ == 0 || !fused_ || fast_.size() != n || W_ / 2 < chain_lanes_) return;
  find_inverses();  // the logdet/det lane forms read the inverse's payload (off[1])
  const size_t N = pay_.count();
  std::vector<uint32_t> rec_chain(n, kNoChain), made_in(N, kNoChain);
  std::vector<uint8_t> outside(N, 0), guard_at(n + 1, 0);
  for (const Guard& g : trace_.guards) {
    guard_at[std::min<size_t>(g.at, n)] = 1;
    if (g.kind != GuardKind::PRED_UNIFORM) outside[g.out] = 1;
    for (uint32_t i = 0; i < g.nargs; ++i) outside[trace_.operands[g.args + i]] = 1;
  }
  for (const auto& [mask, v] : groups_) outside[v.id] = 1;
  for (const uint32_t inv : inverse_of_) {
    if (inv != kNoInverse) outside[inv] = 1;
  }
  chain_runs(guard_at, rec_chain, made_in);
  // Payloads read outside the run that made them are its outputs.
  for (size_t r = 0; r < n; ++r) {
    const TapeRecord& rec = tape_.records[r];
    const uint32_t* ids = tape_.operands.data() + rec.args;
    for (uint32_t i = 0; i < rec.nargs; ++i) {
      if (made_in[ids[i]] != rec_chain[r]) outside[ids[i]] = 1;
    }
  }
  std::vector<uint32_t> local(N, kNoChain), where(N, 0);
  chain_at_.assign(n, kNoChain);
  chain_end_.assign(n, kNoChain);
  size_t val_need = 0;
  for (size_t r = 0; r < n;) {
    size_t hi = r + 1;
    while (rec_chain[r] != kNoChain && hi < n && rec_chain[hi] == rec_chain[r]) ++hi;
    bool inner = false;
    for (size_t k = r; k < hi && rec_chain[r] != kNoChain; ++k) {
      inner = inner || !outside[fast_[k].out_pid];
    }
    if (inner && hi - r > 1) {
      const Chain& c = add_chain(r, hi, outside, local, where);
      val_need = std::max<size_t>(val_need, size_t{c.per_lane} * chain_lanes_ + c.fixed);
    }
    r = hi;
  }
  if (chains_.empty()) return;
  // Each chain's records, laid out for a full block and for the last one.
  const uint32_t tail = W_ % chain_lanes_;
  for (int t = 0; t < 2; ++t) {
    chain_recs_[t].resize(n);
    const uint32_t L = t == 0 ? chain_lanes_ : tail;
    if (L == 0) continue;
    for (const Chain& c : chains_) chain_layout(c, L, chain_recs_[t].data());
  }
  chain_val_.resize(val_need);
  chain_adj_.resize(val_need);
  chains_plan_ = 1;
}

// The candidate runs: consecutive lane forms with no guard between them, cut at the size
// limits (rec_chain: each record's run; made_in: each payload's).
void Interp::chain_runs(const std::vector<uint8_t>& guard_at, std::vector<uint32_t>& rec_chain,
                        std::vector<uint32_t>& made_in) {
  const size_t n = fast_.size();
  auto eligible = [&](size_t r) {
    const FastRec& f = fast_[r];
    // (a row form reads its operand once per row of Ng lanes, not per block of lanes)
    return f.forward && f.vjp && f.op != FastOp::NONE && f.op != FastOp::ROWS &&
           pay_[f.out_pid].width == W_;
  };
  std::vector<uint32_t> stamp(pay_.count(), kNoChain);
  uint32_t cand = 0;
  for (size_t r = 0; r < n;) {
    const size_t lo = r;
    uint32_t per_lane = 0, fixed = 0;
    for (; r < n && eligible(r) && (r == lo || !guard_at[r]) && r - lo < kMaxChainRecs; ++r) {
      const FastRec& f = fast_[r];
      uint32_t lane_add = 0, fix_add = 0;
      auto count = [&](uint32_t pid) {
        if (stamp[pid] == cand) return;
        const Payload& p = pay_[pid];
        (p.width == W_ ? lane_add : fix_add) += static_cast<uint32_t>(p.size());
      };
      for (int i = 0; i < f.n; ++i) count(f.pid[i]);
      count(f.out_pid);
      if (per_lane + lane_add > kMaxPerLane || fixed + fix_add > kMaxFixed) break;
      per_lane += lane_add;
      fixed += fix_add;
      for (int i = 0; i < f.n; ++i) stamp[f.pid[i]] = cand;
      stamp[f.out_pid] = cand;
      rec_chain[r] = cand;
      made_in[f.out_pid] = cand;
    }
    if (r == lo) ++r;  // not a lane form, or one over the limits alone
    ++cand;
  }
}

// Chain [lo, hi) of the tape: its payloads in the order its records name them (inputs, outputs
// read outside it, inner ones), each at its scratch place.
const Interp::Chain& Interp::add_chain(size_t lo, size_t hi, const std::vector<uint8_t>& outside,
                                       std::vector<uint32_t>& local,
                                       std::vector<uint32_t>& where) {
  Chain c;
  c.lo = static_cast<uint32_t>(lo);
  c.hi = static_cast<uint32_t>(hi);
  c.io = static_cast<uint32_t>(chain_io_.size());
  const uint32_t mark = static_cast<uint32_t>(chains_.size());
  // slot kValueSlot: the inverse a logdet/det VJP reads (its value only, no cotangent)
  auto name = [&](uint32_t pid, size_t rr, uint8_t slot) {
    if (local[pid] == mark) {
      ChainIo& had = chain_io_[where[pid]];
      if (had.slot == kValueSlot && slot != kValueSlot) {  // a cotangent after all
        had.rec = static_cast<uint32_t>(rr);
        had.slot = slot;
        had.taped = pay_[pid].taped;
      }
      return;
    }
    local[pid] = mark;
    where[pid] = static_cast<uint32_t>(chain_io_.size());
    ChainIo io;
    io.pid = pid;
    io.rec = static_cast<uint32_t>(rr);
    io.slot = slot;
    io.kind = slot != kOutSlot ? kChainIn : outside[pid] ? kChainOut : kChainInner;
    const Payload& p = pay_[pid];
    io.taped = slot != kValueSlot && p.taped;
    io.lanes = p.width == W_;
    io.size = static_cast<uint32_t>(p.size());
    io.at = io.lanes ? c.per_lane : c.fixed;
    (io.lanes ? c.per_lane : c.fixed) += io.size;
    chain_io_.push_back(io);
    ++c.n_local;
  };
  for (size_t k = lo; k < hi; ++k) {
    const FastRec& f = fast_[k];
    for (int i = 0; i < f.n; ++i) name(f.pid[i], k, static_cast<uint8_t>(i));
    if (f.op == FastOp::LANE_SLOGDET2 && f.c == 1) name(inverse_of_[f.pid[0]], k, kValueSlot);
    name(f.out_pid, k, kOutSlot);
  }
  chain_at_[lo] = mark;
  chain_end_[hi - 1] = mark;
  chains_.push_back(c);
  return chains_.back();
}

// The records of chain c, as they run in the scratch over L lanes (at the tape indices of
// `recs`): every operand, output and adjoint at its scratch place, payload ids the chain's
// local indices, adjoints each payload's own (no shared storage inside a chain).
void Interp::chain_layout(const Chain& c, uint32_t L, FastRec* recs) {
  const ChainIo* io = chain_io_.data() + c.io;
  auto where = [&](uint32_t pid, uint32_t& at, uint32_t& id) {
    for (uint32_t k = 0; k < c.n_local; ++k) {
      if (io[k].pid != pid) continue;
      at = io[k].lanes ? io[k].at * L : c.per_lane * L + io[k].at;
      id = k;
      return;
    }
    throw std::logic_error("chain_layout: a payload outside its chain");
  };
  for (uint32_t k = c.lo; k < c.hi; ++k) {
    FastRec g = fast_[k];
    uint32_t at = 0, id = 0;
    for (int i = 0; i < g.n; ++i) {
      where(g.pid[i], at, id);
      g.off[i] = at;
      g.aoff[i] = at;
      g.pid[i] = id;
    }
    if (g.op == FastOp::LANE_SLOGDET2 && g.c == 1) {
      where(inverse_of_[fast_[k].pid[0]], at, id);
      g.off[1] = at;
    }
    g.S = static_cast<uint32_t>(pay_[g.out_pid].size()) * L;
    where(g.out_pid, at, id);
    g.out = at;
    g.aout = at;
    g.out_pid = id;
    if (g.m == W_) g.m = L;
    g.alias = 0;
    recs[k] = g;
  }
}

// Lanes [w0, w0 + L) of the chain's inputs (kind kChainIn; values) into the scratch s, laid out
// for L lanes.
void Interp::chain_gather(const Chain& c, uint32_t w0, uint32_t L, Real* s) {
  const Real* base = pay_.base();
  const ChainIo* io = chain_io_.data() + c.io;
  for (uint32_t k = 0; k < c.n_local; ++k) {
    if (io[k].kind != kChainIn) continue;
    const Real* src = base + pay_[io[k].pid].off;
    if (!io[k].lanes) {
      std::memcpy(s + size_t{c.per_lane} * L + io[k].at, src, io[k].size * sizeof(Real));
      continue;
    }
    copy_rows(s + size_t{io[k].at} * L, L, src + w0, W_, io[k].size, L);
  }
}

// Chain c forward, block by block: inputs in, the records' kernels in the scratch, the
// outputs (kind kChainOut) back to the arena.
void Interp::chain_forward(const Chain& c) {
  Real* base = pay_.base();
  Real* s = chain_val_.data();
  const ChainIo* io = chain_io_.data() + c.io;
  for (uint32_t w0 = 0; w0 < W_; w0 += chain_lanes_) {
    const uint32_t L = std::min(chain_lanes_, W_ - w0);
    const FastRec* recs = chain_recs_[L == chain_lanes_ ? 0 : 1].data();
    chain_gather(c, w0, L, s);
    for (uint32_t k = c.lo; k < c.hi; ++k) in_register(recs[k].forward)(recs[k], s, scratch_);
    for (uint32_t k = 0; k < c.n_local; ++k) {
      if (io[k].kind != kChainOut) continue;
      copy_rows(base + pay_[io[k].pid].off + w0, W_, s + size_t{io[k].at} * L, L, io[k].size, L);
    }
  }
}

// Chain c's VJP, block by block: its forward recomputed in the scratch, the adjoints of its
// inputs and outputs copied in where set (the touched flags as they stand before the chain,
// in every block), the records' VJPs in reverse order (each when its output has a cotangent),
// the inputs' adjoints copied back.
void Interp::chain_vjp(const Chain& c) {
  const ChainIo* io = chain_io_.data() + c.io;
  uint8_t* touched = touched_.data();
  bool any = false;
  chain_touched0_.assign(c.n_local, 0);
  for (uint32_t k = 0; k < c.n_local; ++k) {
    if (io[k].kind == kChainInner || !io[k].taped || !touched[io[k].pid]) continue;
    chain_touched0_[k] = 1;
    any = any || io[k].kind == kChainOut;
  }
  if (!any) return;  // no output has a cotangent: no record of the chain runs
  Real* adj = adj_.data();
  Real* s = chain_val_.data();
  Real* sa = chain_adj_.data();
  auto adj_at = [&](const ChainIo& x) {
    const FastRec& f = fast_[x.rec];
    return adj + (x.slot == kOutSlot ? f.aout : f.aoff[x.slot]);
  };
  for (uint32_t w0 = 0; w0 < W_; w0 += chain_lanes_) {
    const uint32_t L = std::min(chain_lanes_, W_ - w0);
    const FastRec* recs = chain_recs_[L == chain_lanes_ ? 0 : 1].data();
    chain_gather(c, w0, L, s);
    for (uint32_t k = c.lo; k < c.hi; ++k) in_register(recs[k].forward)(recs[k], s, scratch_);
    chain_touched_.assign(chain_touched0_.begin(), chain_touched0_.end());
    for (uint32_t k = 0; k < c.n_local; ++k) {
      if (!chain_touched0_[k] || !io[k].lanes) continue;
      copy_rows(sa + size_t{io[k].at} * L, L, adj_at(io[k]) + w0, W_, io[k].size, L);
    }
    uint8_t* t = chain_touched_.data();
    for (uint32_t k = c.hi; k-- > c.lo;) {
      if (t[recs[k].out_pid]) in_register(recs[k].vjp)(recs[k], s, sa, t);
    }
    for (uint32_t k = 0; k < c.n_local; ++k) {
      if (io[k].kind != kChainIn || !io[k].taped || !t[k]) continue;
      copy_rows(adj_at(io[k]) + w0, W_, sa + size_t{io[k].at} * L, L, io[k].size, L);
    }
  }
  for (uint32_t k = 0; k < c.n_local; ++k) {
    if (io[k].kind == kChainIn && io[k].taped) touched[io[k].pid] = chain_touched_[k];
  }
}

// Replay's records [r, end) with chains: a chain starting in the span runs whole (it may end
// past `end`; chains never contain a guard); returns where it stopped.
size_t Interp::forward_chains(size_t r, size_t end) {
  while (r < end) {
    const uint32_t ch = chain_at_[r];
    if (ch != kNoChain) {
      chain_forward(chains_[ch]);
      r = chains_[ch].hi;
      continue;
    }
    const FastRec& f = fast_[r];
    if (f.forward && fused_form<true>(f)) {
      in_register(f.forward)(f, pay_.base(), scratch_);
    } else {
      forward_record(tape_.records[r]);
    }
    ++r;
  }
  return r;
}

// The reverse sweep with chains (after a replay that ran them): each chain's VJP as one step,
// the other records as vjp_fast runs them, under the same deadline: a timed sweep looks at the
// clock every 4096 fast records' worth of work (a chain counts twice its records: its forward
// is recomputed) and after the last record, as vjp_fast does (general records also count
// themselves, in vjp_record).
void Interp::vjp_chains() {
  constexpr size_t kTickEvery = 4096;
  const Real* v = pay_.base();
  Real* adj = adj_.data();
  uint8_t* touched = touched_.data();
  size_t work = 0;
  for (size_t r = tape_.records.size(); r-- > 0;) {
    const uint32_t ch = chain_end_[r];
    if (ch != kNoChain) {
      chain_vjp(chains_[ch]);
      work += 2 * (chains_[ch].hi - chains_[ch].lo);
      r = chains_[ch].lo;
    } else {
      const FastRec& f = fast_[r];
      if (f.vjp && fused_form<true>(f)) {
        if (touched[f.out_pid]) in_register(f.vjp)(f, v, adj, touched);
      } else if (touched_[tape_.records[r].out]) {
        vjp_record(tape_.records[r], adj_);
        adj = adj_.data();
        touched = touched_.data();
      }
      ++work;
    }
    if (work >= kTickEvery || r == 0) {
      work = 0;
      sweep_tick();
    }
  }
}

}  // namespace ndvm
