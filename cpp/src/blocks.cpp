// Lane blocking: a batch of many parameter rows runs as consecutive blocks of rows, each an
// evaluation of its own on a child machine (its own arena, tape and trace), so that the working
// set (the payloads of a block's tape and their adjoints) is one block's, not the batch's,
// through its walk or replay and its reverse sweep. Lanes never interact: every kernel is
// elementwise over lanes and a row's gradient sums only over the row's own data lanes, which a
// block keeps together, so each lane's value, status and gradient are the bits of the whole
// batch's. A block with an error or a non-numeric result (whose grouping and reporting span
// the batch) sends the whole batch to the unblocked path, which then reports exactly what it
// always does; the statistics of a blocked run (steps, tape, heap) are its largest block's.
//
// Only a run that takes its gradient in the same request (RunRequest::grad, the cotangent
// ones) is blocked: the blocks share two child machines (full blocks, a shorter last one; each
// replays its own trace from block to block), and no tape of the whole batch stays for a later
// gradient or lane_jacobian (a blocked run leaves the machine not differentiable). A run
// without grad may be differentiated after it (the fits' runs, whose cotangents depend on the
// values): it runs whole.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>

#include "ndvm/interp.hpp"

namespace ndvm {

namespace {

// A block's working set: the payloads of its tape and their adjoints, written by the forward
// pass and read back in reverse by the sweep, should stay near the core between the two, and a
// block should be wide enough to spread each record's fixed cost. Which weighs more depends on
// the machine. Kalman-80, forward and gradient replaying, B = 256, microseconds per lane
// against the rows per block: on a Xeon with AVX-512 (2 MB L2 per core, 480 MB of L3 shared in
// a VM), float64 (48 KB per lane) 2.72 at 32 rows (1.5 MB), 3.64 at 64, 3.90 at 128, 4.14
// whole, float32 (24 KB) 1.34 at 32, 1.46 at 64, 1.88 at 128; on an EPYC (Zen 3, 512 KB L2,
// 32 MB L3), float64 2.64 at 16 rows, 2.33 at 32, 2.11 at 64, 2.09 at 128, 2.25 whole,
// float32 1.82 at 16, 1.33 at 32, 1.13 at 64, 1.02 at 128, 1.01 whole. So the first choice
// fits three quarters of the L2, and then the rows are tuned by timing (tune_rows).
constexpr size_t kDefaultBudget = size_t{3} << 19;  // 1.5 MB when neither sysfs nor sysconf says
constexpr uint32_t kMinBlockLanes = 16;             // below this, per-record costs dominate
constexpr double kTuneCap = double(size_t{16} << 20);  // the largest block tuning tries, bytes
constexpr uint32_t kTuneTimed = 2;      // timed runs per candidate (after one warm), at least,
constexpr uint32_t kTuneMost = 16;      // and at most, until they add up to kTuneSpan seconds
constexpr double kTuneSpan = 2e-3;
constexpr double kTuneWorse = 1.25;  // a candidate this much slower than the best ends the tuning

// The size of cpu0's cache `index` (sysfs: index2 is the L2 on Linux), 0 when unknown.
size_t sysfs_cache(int index) {
  char path[64];
  std::snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
  std::FILE* f = std::fopen(path, "r");
  if (f == nullptr) return 0;
  unsigned long n = 0;
  char unit = 0;
  const int got = std::fscanf(f, "%lu%c", &n, &unit);
  std::fclose(f);
  if (got < 1) return 0;
  return unit == 'K' ? n << 10 : unit == 'M' ? n << 20 : n;
}

// The bytes a block's working set may take: NDVM_BLOCK_BYTES, else three quarters of the L2
// (sysfs's cpu0 index2, else sysconf), else kDefaultBudget.
size_t block_budget() {
  static const size_t bytes = [] {
    if (const char* s = std::getenv("NDVM_BLOCK_BYTES")) {
      const unsigned long long v = std::strtoull(s, nullptr, 10);
      if (v > 0) return static_cast<size_t>(v);
    }
    size_t n = sysfs_cache(2);  // sysfs first: glibc's cpuid reading can be far off in a VM
#ifdef _SC_LEVEL2_CACHE_SIZE
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (n == 0 && l2 > 0) n = static_cast<size_t>(l2);
#endif
    return n > 0 ? std::max(n / 4 * 3, size_t{256} << 10) : kDefaultBudget;
  }();
  return bytes;
}

// NDVM_BLOCK_ROWS: rows per block for every automatic choice (tests); 0 when unset.
uint32_t forced_rows() {
  static const uint32_t rows = [] {
    const char* s = std::getenv("NDVM_BLOCK_ROWS");
    return s ? static_cast<uint32_t>(std::strtoul(s, nullptr, 10)) : 0u;
  }();
  return rows;
}

// NDVM_BLOCK_TUNE=0: keep the first choice (no timing); tuning is on otherwise.
bool tune_enabled() {
  static const bool on = [] {
    const char* s = std::getenv("NDVM_BLOCK_TUNE");
    return s == nullptr || std::strcmp(s, "0") != 0;
  }();
  return on;
}

}  // namespace

// The bytes per lane of the walk just finished (its arena, and as much again for adjoints),
// kept per program and data width for choosing later runs' blocks.
void Interp::note_lane_bytes(const RunRequest& req) {
  if (req.program != lane_prog_ || req.program->serial != lane_serial_ || req.Ng != lane_Ng_) {
    lane_prog_ = req.program;
    lane_serial_ = req.program->serial;
    lane_Ng_ = req.Ng;
    no_block_ = false;
    tune_ = BlockTune{};
  }
  // the payloads' own elements, without the padding that puts rows on lines (payload.hpp):
  // at a few lanes it would count several times what it costs at a block's width
  size_t elems = 0;
  for (size_t pid = 0; pid < pay_.count(); ++pid) elems += pay_[static_cast<uint32_t>(pid)].count();
  lane_bytes_ = 2.0 * static_cast<double>(elems * sizeof(Real)) / W_;
}

// Rows per block for `req`, or 0 to run it whole: RunRequest::block_rows, else NDVM_BLOCK_ROWS,
// else, once a whole walk of the program has measured its bytes per lane, as many rows as fit
// the budget but at least kMinBlockLanes lanes, rounded down to whole 64-byte lines of lanes
// (the last block takes the rest). Only a run with its gradient and the cotangent ones is
// blocked.
uint32_t Interp::choose_block_rows(const RunRequest& req) {
  tune_.now = 0;
  if (!req.grad || req.cotangent != nullptr) return 0;
  uint32_t rows = req.block_rows != 0 ? req.block_rows : forced_rows();
  if (rows != 0) return rows >= req.B ? 0 : rows;
  if (req.program != lane_prog_ || req.program->serial != lane_serial_ || req.Ng != lane_Ng_ ||
      no_block_ || lane_bytes_ <= 0.0) {
    return 0;
  }
  const double fit = static_cast<double>(block_budget()) / (lane_bytes_ * req.Ng);
  const double least = std::ceil(static_cast<double>(kMinBlockLanes) / req.Ng);
  const double r = std::max(fit, least);
  if (r >= static_cast<double>(req.B)) return 0;
  // whole lines of lanes per block (W = rows * Ng a multiple of kLineElems, so every row of
  // its payloads is whole vectors), the last block taking what is left
  const uint32_t unit = static_cast<uint32_t>(kLineElems / std::gcd<size_t>(req.Ng, kLineElems));
  rows = std::max(unit, static_cast<uint32_t>(r) / unit * unit);
  return rows >= req.B ? 0 : tune_rows(req, rows);
}

// Tuning the rows per block of a program and batch by timing, from the first choice `rows`:
// the candidates are rows, 2 rows, 4 rows, ... below the batch, then the whole batch, while a
// block's working set stays within kTuneCap. Each candidate runs once to warm (its machines
// walk their trace), then is timed at least kTuneTimed times and until its timed runs add up to
// kTuneSpan (at most kTuneMost), keeping its fastest; a candidate kTuneWorse slower than the
// best so far ends the search, and the fastest is kept for every later run of this program, data width
// and batch. Every lane's bits are the same in blocks of any size, so only the time changes.
uint32_t Interp::tune_rows(const RunRequest& req, uint32_t rows) {
  BlockTune& t = tune_;
  if (!tune_enabled()) return rows;
  if (t.B != req.B) {
    t = BlockTune{};
    t.B = req.B;
    const double per_row = lane_bytes_ * req.Ng;
    for (uint64_t r = rows; r < req.B && static_cast<double>(r) * per_row <= kTuneCap; r *= 2) {
      t.rows.push_back(static_cast<uint32_t>(r));
    }
    if (static_cast<double>(req.B) * per_row <= kTuneCap) t.rows.push_back(0);
    t.best.assign(t.rows.size(), HUGE_VAL);
    t.done = t.rows.size() < 2;
    t.chosen = rows;
  }
  if (t.done) return t.chosen;
  t.now = t.runs == 0 ? 1 : 2;
  return t.rows[t.at];
}

// After a run that tune_rows chose: keep its time, move to the next candidate when this one has
// had its runs, and choose when the candidates are done. A run with a lane error or a value
// that is not numbers ends the tuning at the first choice.
void Interp::note_tune_time(double seconds, const RunOutput& out) {
  BlockTune& t = tune_;
  t.now = 0;
  if (!out.numeric || !out.errors.empty()) {
    t.done = true;
    return;
  }
  if (t.runs++ > 0) {
    t.best[t.at] = std::min(t.best[t.at], seconds);
    t.spent += seconds;
  }
  if (t.runs <= kTuneTimed || (t.spent < kTuneSpan && t.runs <= kTuneMost)) return;
  const auto first = t.best.begin();
  const double fastest = *std::min_element(first, first + t.at + 1);
  const bool worse = t.best[t.at] > kTuneWorse * fastest;
  t.runs = 0;
  t.spent = 0.0;
  if (!worse && ++t.at < t.rows.size()) return;
  t.done = true;
  t.chosen = t.rows[static_cast<size_t>(std::min_element(t.best.begin(), t.best.end()) - first)];
}

bool Interp::run_blocked(const RunRequest& req, uint32_t rows, RunOutput& out) {
  out.clear();
  ready_ = false;  // no tape of the whole batch stays for a later gradient
  trace_.valid = false;  // nor this machine's arena its trace's walk
  const uint32_t n = (req.B + rows - 1) / rows;
  const uint32_t last = req.B - (n - 1) * rows;
  for (auto& kid : kids_) {
    if (!kid) kid = std::make_unique<Interp>();
  }
  RunRequest& sub = sub_;
  sub = req;
  sub.block_rows = UINT32_MAX;  // a block is never blocked again
  sub.value_view = false;       // the blocks' values are gathered into out.value
  if (sub.start == std::chrono::steady_clock::time_point{}) {
    sub.start = std::chrono::steady_clock::now();  // one deadline for the whole batch
  }
  // a fallback also stops the automatic choice from blocking this program again
  const auto fall_back = [this] {
    no_block_ = true;
    return false;
  };
  const size_t P = req.program->n_params;
  bool replayed = true;
  for (uint32_t k = 0; k < n; ++k) {
    sub.B = k + 1 < n ? rows : last;
    sub.theta = req.theta + static_cast<size_t>(k) * rows * P;
    // full blocks on one machine, a shorter last one on the other: each replays its trace
    Interp& kid = *kids_[sub.B == rows ? 0 : 1];
    RunOutput& o = kid_out_;
    kid.run(sub, o);
    if (!o.numeric || !o.errors.empty()) return fall_back();
    if (k == 0) {
      out.value_shape = o.value_shape;
      out.value_shape[0] = req.B;
      out.value.reserve(o.value.size() / sub.B * req.B);
      out.status.reserve(static_cast<size_t>(req.B) * req.Ng);
      if (req.grad) out.grad.reserve(req.B * P);
    } else if (!std::equal(o.value_shape.begin() + 1, o.value_shape.end(),
                           out.value_shape.begin() + 1, out.value_shape.end())) {
      return fall_back();
    }
    out.value.insert(out.value.end(), o.value.begin(), o.value.end());
    out.status.insert(out.status.end(), o.status.begin(), o.status.end());
    if (req.grad) out.grad.insert(out.grad.end(), o.grad.begin(), o.grad.end());
    out.steps = std::max(out.steps, o.steps);
    out.tape = std::max(out.tape, o.tape);
    out.heap = std::max(out.heap, o.heap);
    replayed = replayed && o.replayed;
    out.chains = std::max(out.chains, o.chains);
    out.pairs = std::max(out.pairs, o.pairs);
    out.updates = std::max(out.updates, o.updates);
  }
  out.replayed = replayed;
  out.has_grad = req.grad;
  out.blocks = n;
  return true;
}

}  // namespace ndvm
