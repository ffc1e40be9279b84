// Trace replay: the numeric path of the last evaluation, kept so that the next evaluation of
// the same program with the same inputs and new parameters re-runs only its kernels.
//
// A walk records, in order, the tape (every parameter-dependent numeric operation) and guards
// (every place the walk read the value of a parameter-dependent payload to decide something:
// a predicate's outcome, a number used as an index, a structural equality). Replay writes the
// new parameters into the leaves, re-runs the tape records forward in their order, and checks
// each guard once the records before it have run; the first failed guard (or a kernel error,
// or the deadline) abandons the replay and the evaluation is walked again. Payloads that do
// not depend on the parameters are untouched, so the arena, masks, heap and result groups of
// the recorded walk stay valid, and the results are bitwise those of a walk.
#pragma once

#include <cstdint>
#include <vector>

#include "ndvm/grow.hpp"
#include "ndvm/kernels.hpp"

namespace ndvm {

enum class GuardKind : uint8_t {
  PRED_UNIFORM,  // a predicate with one lane: its outcome (expect) must repeat
  PRED_LANES,    // a predicate over lanes: its 0/1 payload `out` must repeat bitwise
  READ,          // the payload `out` was read as data: its contents must repeat bitwise
};

struct Guard {
  GuardKind kind = GuardKind::READ;
  uint16_t code = 0;    // PRED_*: the predicate's opcode
  uint32_t at = 0;      // checked after this many tape records have run
  uint32_t args = 0;    // PRED_*: offset of the operand payload ids in Trace::operands
  uint32_t nargs = 0;
  uint32_t out = 0;     // PRED_LANES, READ: payload id
  uint32_t snap = 0;    // READ: offset of the recorded contents in Trace::snapshots
  uint8_t expect = 0;   // PRED_UNIFORM: 0 or 1
};

// What an evaluation must share with the recorded one to replay it (besides the parameters).
struct TraceKey {
  const void* program = nullptr;
  uint64_t serial = 0;
  uint32_t B = 0;
  uint32_t Ng = 0;
  bool dmci = false;
  uint8_t client = 0;  // the walker and the VM count steps differently
  uint64_t max_steps = 0;
  uint64_t max_heap = 0;
  uint64_t max_depth = 0;
  std::vector<int32_t> transforms;
  std::vector<int64_t> input_meta;  // kind, rows, cols, rank per input
  std::vector<double> input_data;   // every input's elements, concatenated
};

// A walk stops recording (and its evaluation is not replayed) once its guards' snapshots or its
// inputs would exceed these many elements, or its guards this count: a trace never costs
// more memory than a bounded copy.
constexpr size_t kMaxTraceElems = size_t{1} << 22;
constexpr size_t kMaxTraceGuards = size_t{1} << 22;

struct Trace {
  bool valid = false;
  TraceKey key;
  GrowVec<Guard> guards;  // (grow.hpp: no copy when they grow)
  GrowVec<uint32_t> operands;
  GrowVec<Real> snapshots;
  uint32_t failures = 0;  // consecutive failed replays (replay is retried less often)
  uint64_t skipped = 0;   // evaluations walked without trying since the last failure
  uint64_t replays = 0;   // successful replays of this trace (for tests and benchmarks)

  void clear_record() {
    guards.clear();
    operands.clear();
    snapshots.clear();
  }
};

}  // namespace ndvm
