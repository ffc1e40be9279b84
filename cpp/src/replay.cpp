// Trace replay (trace.hpp): recording the guards of a walk, the key an evaluation must share
// with the recorded one, and the replay itself (the tape's records forward, guards checked in
// order, the result assembled from the recorded result groups).
#include <algorithm>
#include <cstring>

#include "ndvm/interp.hpp"
#include "ndvm/prims.hpp"

namespace ndvm {

namespace {

constexpr uint32_t kMaxBackoffShift = 6;  // after failures, try one evaluation in 2^k (<= 64)

size_t input_elems(const InputSpec& in, uint32_t Ng) {
  if (in.kind == InputKind::SCALAR) return 1;
  if (in.kind == InputKind::DATA) return Ng;
  return static_cast<size_t>(in.rows) * in.cols;
}

void fill_meta(const InputSpec& in, std::vector<int64_t>& meta) {
  meta.insert(meta.end(), {static_cast<int64_t>(in.kind), in.rows, in.cols, in.rank});
}

}  // namespace

void Interp::guard_predicate(int code, const Value* args, uint32_t n, Value out) {
  if (!recording_) return;
  if (trace_.guards.size() >= kMaxTraceGuards) {
    recording_ = false;  // too long a trace: this evaluation is not replayed
    return;
  }
  Guard g;
  g.code = static_cast<uint16_t>(code);
  g.at = static_cast<uint32_t>(tape_.records.size());
  g.args = static_cast<uint32_t>(trace_.operands.size());
  g.nargs = n;
  for (uint32_t i = 0; i < n; ++i) trace_.operands.push_back(args[i].id);
  if (out.tag == Tag::BOOL) {
    g.kind = GuardKind::PRED_UNIFORM;
    g.expect = static_cast<uint8_t>(out.id != 0);
  } else {
    g.kind = GuardKind::PRED_LANES;
    g.out = out.id;
  }
  trace_.guards.push_back(g);
}

void Interp::guard_read(uint32_t pid) {
  if (!recording_ || !pay_[pid].taped) return;
  if (trace_.guards.size() >= kMaxTraceGuards ||
      trace_.snapshots.size() + pay_[pid].count() > kMaxTraceElems) {
    recording_ = false;  // too big a trace: this evaluation is not replayed
    return;
  }
  Guard g;
  g.kind = GuardKind::READ;
  g.at = static_cast<uint32_t>(tape_.records.size());
  g.out = pid;
  g.snap = static_cast<uint32_t>(trace_.snapshots.size());
  const Real* p = pay_.ptr(pid);
  trace_.snapshots.append(p, p + pay_[pid].count());
  trace_.guards.push_back(g);
}

bool Interp::guard_holds(const Guard& g) {
  if (g.kind == GuardKind::READ) {
    const size_t bytes = pay_[g.out].count() * sizeof(Real);
    return std::memcmp(pay_.ptr(g.out), trace_.snapshots.data() + g.snap, bytes) == 0;
  }
  const uint32_t* ids = trace_.operands.data() + g.args;
  if (ops_.size() < g.nargs) ops_.resize(g.nargs);
  for (uint32_t i = 0; i < g.nargs; ++i) ops_[i] = pay_.operand(ids[i]);
  const uint32_t width = g.kind == GuardKind::PRED_LANES ? W_ : 1;
  guard_buf_.resize(width);
  predicate_forward(g.code, ops_.data(), static_cast<int>(g.nargs), guard_buf_.data(), width);
  if (g.kind == GuardKind::PRED_UNIFORM) return (guard_buf_[0] != 0.0) == (g.expect != 0);
  return std::memcmp(guard_buf_.data(), pay_.ptr(g.out), width * sizeof(Real)) == 0;
}

// The forward computation of one tape record, into its (already allocated) output payload:
// the same kernel on the same operands as when the walk recorded it.
void Interp::forward_record(const TapeRecord& rec) {
  const uint32_t* ids = tape_.operands.data() + rec.args;
  switch (static_cast<TapeOp>(rec.op)) {
    case TapeOp::MERGE: merge_into(rec.out, ids, tape_.extras.data() + rec.extra, rec.nargs); return;
    case TapeOp::STACK: stack_into(rec.out, ids, rec.nargs, rec.extra); return;
    case TapeOp::GATHER: gather_into(rec.out, ids[0], rec.extra, rec.aux); return;
    default: break;
  }
  const uint32_t n = rec.nargs;
  if (ops_.size() < n) ops_.resize(n);
  for (uint32_t i = 0; i < n; ++i) ops_[i] = pay_.operand(ids[i]);
  const Payload& out = pay_[rec.out];
  const PrimInfo& info = prim_info(rec.op);
  if (info.shape == PrimShape::CUSTOM) {
    custom_forward(rec.op, ops_.data(), static_cast<int>(n), pay_.ptr(rec.out), out.width,
                   scratch_);
    return;
  }
  const bool dmci = (rec.flags & 1) && info.domain == PrimDomain::POSITIVE;
  elementwise_forward(rec.op, dmci, ops_.data(), static_cast<int>(n), pay_.ptr(rec.out),
                      out.width, out.size());
}

// Lists the general records of the tape for fused_ (slow_fwd_, slow_vjp_), once per tape and
// fused_.
void Interp::list_slow() {
  const size_t n = fast_.size();
  if (slow_fused_ == static_cast<int8_t>(fused_) && slow_n_ == n) return;
  slow_fwd_.clear();
  slow_vjp_.clear();
  for (size_t r = 0; r < n; ++r) {
    const FastRec& f = fast_[r];
    const bool form = fused_ ? fused_form<true>(f) : fused_form<false>(f);
    if (!f.forward || !form) slow_fwd_.push_back(static_cast<uint32_t>(r));
    if (!f.vjp || !form) slow_vjp_.push_back(static_cast<uint32_t>(r));
  }
  slow_fwd_.push_back(kNoSlow);
  slow_vjp_.push_back(kNoSlow);
  slow_fused_ = static_cast<int8_t>(fused_);
  slow_n_ = n;
}

// Records [r, end) forward, each by its fast form where it has one; returns end. `slow` points
// into slow_fwd_ at or before the first general record at or after r, and is moved along.
size_t Interp::forward_span(const FastRec* fast, const uint32_t*& slow, size_t r, size_t end) {
  Real* base = pay_.base();  // fast kernels write into allocated payloads: it stays put
  while (r < end) {
    while (*slow < r) ++slow;
    const size_t stop = std::min<size_t>(end, *slow);  // fast records up to the next general one
    while (r < stop) {  // a fused update's members: its first, then its last (skip_fwd)
      const FastRec& f = fast[r];
      in_register(f.forward)(f, base, scratch_);
      r = std::min<size_t>(stop, r + 1 + f.skip_fwd);
    }
    if (r < end) {
      forward_record(tape_.records[r++]);
      base = pay_.base();
    }
  }
  return end;
}

size_t Interp::forward_general(size_t r, size_t end) {
  for (; r < end; ++r) forward_record(tape_.records[r]);
  return end;
}

bool Interp::replay_forward() {
  const GrowVec<TapeRecord>& recs = tape_.records;
  const GrowVec<Guard>& guards = trace_.guards;
  const FastRec* fast = fast_.size() == recs.size() ? fast_.data() : nullptr;
  if (fast) list_slow();
  chain_fwd_ = fast && chains_apply();  // the sweep after this pass must run them too
  if (fast) set_pairs(!chain_fwd_);
  const uint32_t* slow = slow_fwd_.data();
  size_t g = 0;
  try {
    for (size_t r = 0, clock = 1023;;) {
      for (; g < guards.size() && guards[g].at == r; ++g) {
        if (!guard_holds(guards[g])) return false;
      }
      if (r == recs.size()) return true;
      const size_t stop = g < guards.size() ? guards[g].at : recs.size();  // the next guard
      while (r < stop) {
        if (r >= clock) {  // at every 1024 records (a chain may step over record 1023 mod 1024)
          if (scratch_.clock.past()) return false;  // the walk reports it
          clock = (r + 1) | 1023;
        }
        const size_t end = std::min(stop, (r + 1) | 1023);
        if (chain_fwd_) {
          r = forward_chains(r, end);
        } else {
          r = fast ? forward_span(fast, slow, r, end) : forward_general(r, end);
        }
      }
    }
  } catch (const LimitError&) {
    return false;
  } catch (const LaneError&) {
    return false;
  }
}

bool Interp::key_matches(const RunRequest& req) const {
  const TraceKey& k = trace_.key;
  if (k.program != req.program || k.serial != req.program->serial || k.B != req.B ||
      k.Ng != req.Ng || k.dmci != req.dmci || k.client != req.client ||
      k.max_steps != req.limits.max_steps ||
      k.max_heap != req.limits.max_heap || k.max_depth != req.limits.max_depth ||
      req.inputs.size() * 4 != k.input_meta.size()) {
    return false;
  }
  const uint32_t P = req.program->n_params;
  for (uint32_t i = 0; i < P; ++i) {
    if ((req.transforms ? req.transforms[i] : 0) != k.transforms[i]) return false;
  }
  size_t at = 0;
  for (size_t i = 0; i < req.inputs.size(); ++i) {
    const InputSpec& in = req.inputs[i];
    const int64_t* m = k.input_meta.data() + 4 * i;
    if (m[0] != static_cast<int64_t>(in.kind) || m[1] != in.rows || m[2] != in.cols ||
        m[3] != in.rank) {
      return false;
    }
    const size_t n = input_elems(in, req.Ng);
    if (at + n > k.input_data.size() ||
        std::memcmp(in.data, k.input_data.data() + at, n * sizeof(double)) != 0) {
      return false;
    }
    at += n;
  }
  return at == k.input_data.size();
}

void Interp::start_recording(const RunRequest& req) {
  recording_ = req.replay;
  if (trace_.key.serial != req.program->serial || trace_.key.B != req.B) {
    trace_.failures = 0;
    trace_.skipped = 0;
  }
  trace_.valid = false;
  trace_.clear_record();
  if (!recording_) return;
  TraceKey& k = trace_.key;
  k.program = req.program;
  k.serial = req.program->serial;
  k.B = req.B;
  k.Ng = req.Ng;
  k.dmci = req.dmci;
  k.client = req.client;
  k.max_steps = req.limits.max_steps;
  k.max_heap = req.limits.max_heap;
  k.max_depth = req.limits.max_depth;
  const uint32_t P = req.program->n_params;
  k.transforms.assign(P, 0);
  if (req.transforms) k.transforms.assign(req.transforms, req.transforms + P);
  k.input_meta.clear();
  k.input_data.clear();
  size_t total = 0;
  for (const InputSpec& in : req.inputs) total += input_elems(in, req.Ng);
  if (total > kMaxTraceElems) {
    recording_ = false;  // inputs too big to keep a copy of: this evaluation is not replayed
    return;
  }
  for (const InputSpec& in : req.inputs) {
    fill_meta(in, k.input_meta);
    k.input_data.insert(k.input_data.end(), in.data, in.data + input_elems(in, req.Ng));
  }
}

void Interp::finish_recording(const RunOutput& out) {
  if (!recording_) return;
  recording_ = false;
  trace_.valid = out.numeric && out.errors.empty() && !expired_ && !groups_.empty();
}

// Replays the recorded trace for `req` if it applies and its guards hold; false: walk it.
bool Interp::replay(const RunRequest& req, RunOutput& out) {
  if (!req.replay || !trace_.valid || !key_matches(req)) return false;
  if (trace_.failures > 1) {  // the path keeps changing: try one evaluation in 2^(k-1)
    const uint64_t every = uint64_t{1} << std::min(trace_.failures - 1, kMaxBackoffShift);
    if (++trace_.skipped < every) return false;
    trace_.skipped = 0;
  }
  lim_ = req.limits;
  t0_ = req.start != std::chrono::steady_clock::time_point{} ? req.start
                                                             : std::chrono::steady_clock::now();
  scratch_.clock = WorkClock{lim_.deadline, t0_, 0, false};
  for (uint32_t i = 0; i < leaves_.size(); ++i) fill_leaf(req, i, leaves_[i]);
  if (!replay_forward()) {
    ++trace_.failures;
    trace_.valid = false;
    return false;
  }
  trace_.failures = 0;
  ++trace_.replays;
  finish_run(req, out);
  out.replayed = true;
  out.chains = chain_fwd_ ? static_cast<uint32_t>(chains_.size()) : 0;
  out.pairs = pairs_on_ ? static_cast<uint32_t>(pairs_.size()) : 0;
  out.updates = updates_on_ ? static_cast<uint32_t>(updates_.size()) : 0;
  return true;
}

}  // namespace ndvm
