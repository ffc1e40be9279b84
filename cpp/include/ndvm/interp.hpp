// The evaluator: a CEK machine over a lowered Program, batched over W = B x Ng lanes, with an
// explicit control stack, proper tail calls, lane masks and join frames, per-lane errors, a
// numeric tape and reverse mode. One Interp per thread; its arenas are reused across runs.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ndvm/fast.hpp"
#include "ndvm/grow.hpp"
#include "ndvm/heap.hpp"
#include "ndvm/payload.hpp"
#include "ndvm/prims.hpp"
#include "ndvm/program.hpp"
#include "ndvm/tape.hpp"
#include "ndvm/trace.hpp"
#include "ndvm/value.hpp"

namespace ndvm {

// PROGRAM/SHAPE: ProgramError/ShapeError; the others are the limits that fail only the lanes
// running when they are hit (StepLimitExceeded, DepthLimitExceeded, DeadlineExceeded).
enum class ErrClass : uint8_t { PROGRAM = 0, SHAPE = 1, STEPS = 2, DEPTH = 3, DEADLINE = 4 };

// The tag of one exported record (tag, a, b, c); bound as _core.ExportTag for the decoder.
enum class ExportTag : int64_t {
  NUM = 0,        // a: array index, b: rank, c: 1 when taped (lane-varying)
  BOOL = 1,       // a: 0 or 1
  BOOLS = 2,      // a: array index of 0.0/1.0 per lane
  NIL = 3,
  VOID = 4,
  PAIR = 5,       // followed by the car's records, then the cdr's
  SYMBOL = 6,     // a: string id
  STRING = 7,     // a: string id
  CLOSURE = 8,    // a: string id of the procedure's name
  PRIMPROC = 9,   // a: opcode
  OTHER = 10,     // a value without an export form
  SHARED = 11,    // a: record index of a pair exported earlier
};

// Exported value: preorder records of 4 int64 (tag, a, b, c) plus numeric arrays.
struct Export {
  std::vector<int64_t> enc;
  std::vector<std::vector<double>> arrays;
  std::vector<std::vector<int64_t>> shapes;
};

// A runtime error of the lanes running now (thrown inside the machine, caught per thread).
struct LaneError {
  ErrClass cls = ErrClass::PROGRAM;
  std::string message;
  int32_t line = 0;
  int32_t column = 0;
  bool error_prim = false;  // raised by (error ...): the host formats the message
  Export irritants;
};

// A structural argument differs across active lanes: split into these lane groups (masks).
struct Diverge {
  std::vector<uint32_t> groups;
};

// The host asked the evaluation to stop (Ctrl-C): thrown out of Interp::run and
// optimize_adam, never a lane error; the context stays reusable.
struct Interrupted {};

struct Limits {
  uint64_t max_steps = 50000000;
  uint64_t max_heap = 20000000;
  uint64_t max_depth = 200000;
  double deadline = 0.0;  // seconds; <= 0: none
};

enum class InputKind : uint8_t { SCALAR = 0, DATA = 1, CONST = 2 };

struct InputSpec {
  InputKind kind = InputKind::SCALAR;
  const double* data = nullptr;
  uint32_t rows = 1;
  uint32_t cols = 1;
  uint8_t rank = 0;
};

struct RunRequest {
  const Program* program = nullptr;
  uint32_t B = 1;
  uint32_t Ng = 1;
  const double* theta = nullptr;        // [B, P] row-major
  // [P]: opcode of the unary NUMERIC primitive a parameter's constraint applies to its raw
  // value (the host's table: softplus for positive, ...), or 0 for a free parameter
  const int32_t* transforms = nullptr;
  std::vector<InputSpec> inputs;
  bool grad = false;
  const double* cotangent = nullptr;  // [B, Ng, *struct] or nullptr (ones)
  Limits limits;
  bool dmci = false;
  bool replay = true;  // replay the last walk's trace when it applies (trace.hpp)
  // The caller reads a one-number-per-lane value where the machine left it: RunOutput::view
  // instead of a copy in RunOutput::value, and no status 1 for non-finite values (status
  // marks the lanes with errors). Only the float64 core; other results are copied as ever.
  bool value_view = false;
  // Polled at most every kPollEvery of evaluation (at the machine's check points and between
  // optimizer steps): true stops the run with Interrupted. nullptr: never polled.
  bool (*interrupted)(void*) = nullptr;
  void* interrupt_ctx = nullptr;
  uint8_t client = 0;  // 0: the tree walker (CEK), 1: the bytecode VM (vm.hpp)
  // reverse mode: the lane kernels add a later cotangent into an operand's adjoint themselves
  // (lanes_vjp_add); false: through a buffer and the accumulate pass (the same bits; tests)
  bool fused = true;
  // Lane blocking (blocks.cpp): 0 chooses the rows per block from the cache size (or the
  // NDVM_BLOCK_ROWS environment variable); k > 0 runs blocks of k parameter rows; the results
  // are the same bits either way.
  uint32_t block_rows = 0;
  // Fused chains (chains.cpp): 0 chooses them from the tape's size (or the NDVM_CHAIN_LANES
  // environment variable); k > 0 runs them over blocks of k lanes whatever the size; the
  // results are the same bits either way.
  uint32_t chain_lanes = 0;
  // Fused pairs (pairs.cpp): a lane-form product and the + or - that alone reads it run as
  // one superinstruction in replay and the reverse sweep (when fused); the same bits either way.
  bool pairs = true;
  // Fused Gaussian updates (updates.cpp, fast_updates.cpp): the 13 records of a 2 x 2
  // Kalman-type measurement update run as one superinstruction (when fused); the same bits
  // either way.
  bool updates = true;
  // The evaluation's start for its deadline (a block of a blocked run); default: now.
  std::chrono::steady_clock::time_point start{};
};

struct ErrorOut {
  std::vector<uint8_t> mask;  // [B * Ng]
  ErrClass cls = ErrClass::PROGRAM;
  std::string message;
  int32_t line = 0;
  int32_t column = 0;
  std::vector<int64_t> lanes;
  bool error_prim = false;
  Export irritants;
};

struct GroupOut {
  std::vector<uint8_t> mask;
  Export value;
};

struct RunOutput {
  bool numeric = true;
  std::vector<double> value;  // numeric: [B, Ng, *struct]
  // RunRequest::value_view: the value [B, Ng] in the machine's arena (value stays empty),
  // valid until the machine's next run; nullptr otherwise
  const double* view = nullptr;
  std::vector<int64_t> value_shape;
  std::vector<int8_t> status;  // [B, Ng]
  bool has_grad = false;
  bool grad_needs_numeric = false;  // grad requested on a non-numeric result
  std::vector<double> grad;        // [B, P]
  std::vector<ErrorOut> errors;
  std::vector<GroupOut> groups;  // non-numeric results
  // a blocked run's steps, tape and heap are its largest block's
  uint64_t steps = 0;
  uint64_t tape = 0;
  uint64_t heap = 0;
  bool replayed = false;  // the result came from replaying the recorded trace
  uint32_t blocks = 0;    // lane blocks it ran as (blocks.cpp); 0: the batch whole
  uint32_t chains = 0;    // fused chains its replay ran (chains.cpp; a blocked run: its blocks')
  uint32_t pairs = 0;     // fused pairs its replay ran (pairs.cpp; a blocked run: its blocks')
  uint32_t updates = 0;   // fused updates its replay ran (updates.cpp; likewise)

  // Empties every field and keeps the vectors' capacity (a reused output allocates nothing).
  void clear();
};

// K_VM: a return point of the bytecode VM (i: pc, env; node: kVmArm for a lane split's)
enum FrameKind : uint8_t {
  K_IF, K_SEQ, K_OR, K_LET, K_LETREC, K_CALL, K_PRIM, K_ASSERT, K_JOIN, K_VM
};

struct Frame {
  FrameKind kind = K_IF;
  uint32_t node = 0;
  uint32_t i = 0;  // K_JOIN: join id
  uint32_t env = 0;
  uint32_t base = 0;  // value-stack height when pushed
};

// RESUME continues the interrupted step (node: expr, i: 1 if expr is set); OVERRUN fails the
// lanes past the step limit.
enum class ArmKind : uint8_t { EVAL, VALUE, RAISE, RETRY, OR_FROM, RESUME, OVERRUN };

struct Arm {
  uint32_t mask = 0;
  ArmKind kind = ArmKind::EVAL;
  uint32_t node = 0;
  uint32_t i = 0;
  uint32_t env = 0;
  Value value;
  uint32_t args = 0;  // RETRY: offset into retry_args_
  uint32_t nargs = 0;
  uint16_t code = 0;  // RETRY: opcode
};

struct JoinState {
  uint32_t mask = 0;
  int64_t outstanding = 0;
  std::vector<Arm> arms;
  std::vector<std::pair<uint32_t, Value>> results;
};

struct Thread {
  std::vector<Frame> kont;
  std::vector<Value> vstack;
  uint32_t mask = 0;
  Value value;
};

// 16 bytes, so that the machine's step functions return it in registers.
struct Step {
  static constexpr int32_t kDone = -2;
  int32_t expr = -1;  // >= 0: evaluate this node in env; -1: return val; kDone: finished
  uint32_t env = 0;
  Value val;
  bool done() const { return expr == kDone; }  // this thread has finished
};
static_assert(sizeof(Step) == 16, "Step is returned in two registers");

class VM;

class Interp {
  friend class VM;  // the bytecode client (vm_run.cpp) runs on this machine's state

 public:
  RunOutput run(const RunRequest& req);
  // The same into `out` (cleared first), reusing its capacity: no allocation once warm.
  void run(const RunRequest& req, RunOutput& out);
  // Reverse mode over the tape of the last run (which must have had a numeric result):
  // the gradient [B, P] of sum(cotangent * value); cotangent [B, Ng, *struct] or nullptr.
  std::vector<double> gradient(const double* cotangent);
  void gradient(const double* cotangent, std::vector<double>& grad);  // into grad's capacity
  // d value / d theta per lane for the last run: jac [P, B * Ng] (parameter-major: column i
  // holds parameter i's adjoint over the value's lanes, copied as it lies) of sum(cotangent *
  // value) — with a one-hot cotangent over the value's elements, one column block of the
  // Jacobian per element. NaN entries for lanes that failed.
  void lane_jacobian(const double* cotangent, std::vector<double>& jac);
  // The same columns read in place: cols[i] points at parameter i's adjoint over the W lanes
  // (valid until the next run or sweep), nullptr for a parameter the value does not use (a
  // zero column). Lanes that failed are not masked: their entries are whatever the sweep left.
  void lane_adjoints(const double* cotangent, std::vector<const Real*>& cols);
  uint32_t value_elements() const { return static_cast<uint32_t>(value_elems_ / W_); }
  bool can_differentiate() const { return ready_ && last_numeric_; }
  bool ran_blocked() const { return ran_blocked_; }  // the last run ran in lane blocks
  size_t value_size() const { return value_elems_; }
  const Trace& trace() const { return trace_; }
  uint32_t lanes_b() const { return B_; }

  // -- used by the structural primitives and merge (structural.cpp, vectors.cpp, merge.cpp) --
  LaneError error(const std::string& msg, ErrClass cls = ErrClass::PROGRAM) const;
  void alloc(uint64_t n = 1);
  std::string type_name(Value v) const;
  Value number(double x);  // a lane-uniform constant
  Value numeric(int code, const Value* args, uint32_t n);
  Value constrain(int code, Value v);
  // STRUCTURAL rows (Interp::rows): c[ad]+r, lists/tests/equality, vector construction and
  // vector indexing; each throws no_row for an opcode that is not its own.
  Value cxr(int code, const Value* args, uint32_t n);
  Value structural(int code, const Value* args, uint32_t n);
  Value make_vectors(int code, const Value* args, uint32_t n);
  Value read_vectors(int code, const Value* args, uint32_t n);
  LaneError no_row(int code) const;
  // Whether STRUCTURAL or CONTROL opcode `code` has its row.
  static bool has_row(int code);
  double uniform(Value x, const char* what);
  int64_t index(Value x, const char* what);
  Value list_from(const Value* items, size_t n, Value tail);
  bool list_items(Value lst, std::vector<Value>& out, const char* who, bool raise);
  uint32_t tape_op(TapeOp op, const uint32_t* ins, uint32_t n, uint32_t out, uint32_t extra,
                   uint32_t aux);
  void tape_values(int op, const Value* args, uint32_t n, uint32_t out);
  void note_fast(bool fast, uint32_t n, uint32_t out);
  bool lane_form(int code, const Value* args, uint32_t n, uint32_t out);
  // Trace guards (replay.cpp): a predicate of parameter-dependent operands, and a read of a
  // payload's values; both record nothing unless a walk is recording.
  void guard_predicate(int code, const Value* args, uint32_t n, Value out);
  void guard_read(uint32_t pid);
  // The forward computations of the generic tape records (merge.cpp, vectors.cpp), shared by
  // the walk and replay.
  void merge_into(uint32_t out, const uint32_t* ids, const uint32_t* masks, uint32_t n);
  void stack_into(uint32_t out, const uint32_t* ids, uint32_t n, uint32_t m);
  void gather_into(uint32_t out, uint32_t src, uint32_t first, uint32_t count);
  std::vector<std::pair<uint32_t, Value>> merge_groups(
      const std::vector<std::pair<uint32_t, Value>>& results);
  Export export_values(const Value* vals, size_t n);
  Value iota(const Value* args, uint32_t n);
  Value logical_not(Value x);
  double lane_bool(Value v, uint32_t l) const;
  Value bools_from(Value a, Value b, bool conj);
  Value eqv(Value a, Value b);
  Value bool_and(Value a, Value b);
  Value equal(Value a, Value b);
  Value array_equal(Value x, Value y);
  Value stack(const Value* items, uint32_t n, const char* who, int axis_rank);
  Value gather(Value v, uint32_t first, uint32_t count, uint8_t rank);
  uint32_t size_arg(Value x, const char* who);
  // Work inside a primitive: n steps of the running lanes; throws their limit LaneError.
  void spend(uint64_t n);
  void mind_clock();
  // Asks the host whether to stop (RunRequest::interrupted), at most once per kPollEvery.
  void poll_interrupt();
  static constexpr std::chrono::milliseconds kPollEvery{20};

  PayloadTable pay_;
  MaskTable masks_;
  Heap heap_;
  Tape tape_;
  const Program* prog_ = nullptr;
  uint32_t B_ = 1;
  uint32_t Ng_ = 1;
  uint32_t W_ = 1;
  uint32_t mask_ = 0;  // lanes of the running thread (0: all)
  int32_t node_ = -1;  // node being applied, for error positions
  bool dmci_ = false;

 private:
  void reset(const RunRequest& req);
  void bind(const RunRequest& req, std::vector<uint32_t>& leaves);
  void fill_leaf(const RunRequest& req, uint32_t i, uint32_t pid);
  void materialize_constants();
  void run_thread(Step s);
  Step recover(const Step& s, uint32_t bad);
  Step eval(uint32_t node, uint32_t env);
  Step resume(const Frame& f, Value val);
  Step collect(FrameKind k, uint32_t node, uint32_t from, uint32_t env, uint32_t base);
  Step finish(FrameKind k, uint32_t node, uint32_t env, uint32_t base);
  bool simple(uint32_t node, uint32_t env, Value& out);
  bool is_simple(uint32_t node) const;
  Value local(const Node& n, uint32_t env);
  [[noreturn]] void unassigned(const Node& n, Value v);
  Step branch(uint32_t node, uint32_t env, Value test);
  Step or_step(uint32_t node, uint32_t i, uint32_t env, Value val);
  Step assert_step(uint32_t node, Value val);
  Step split_masks(uint32_t active, const Arm* arms, size_t n);
  Step split_retry();
  Step start_arm(const Arm& arm);
  Step deliver(uint32_t js, Value val);
  Step service(uint32_t js);
  Step fail(LaneError& err);
  void set_mask(uint32_t m);
  void charge();
  bool limit_error(LaneError& out);
  int overrun(uint32_t& bad);
  int split_by_steps(uint32_t mask, uint32_t& bad, uint32_t& ok);
  Step split_overrun(const Step& s, uint32_t bad);
  LaneError step_error() const;
  Step call(Value fn, const Value* args, uint32_t n, uint32_t node);
  Step apply_prim(int code, const Value* args, uint32_t n, uint32_t node);
  Step apply_error(int code, const Value* args, uint32_t n, uint32_t node);
  Step apply_list(int code, const Value* args, uint32_t n, uint32_t node);
  using StructuralRow = Value (Interp::*)(int, const Value*, uint32_t);
  using ControlRow = Step (Interp::*)(int, const Value*, uint32_t, uint32_t);
  struct Rows {
    StructuralRow structural[kPrimCodeLimit];
    ControlRow control[kPrimCodeLimit];
  };
  static const Rows& rows();
  uint32_t new_join(uint32_t mask);
  uint32_t count_true(uint32_t active, uint32_t pid) const;
  uint32_t lane_split(uint32_t active, uint32_t pid, bool want, uint32_t& n_yes);
  int truth(Value v) const;  // 0 false, 1 true, 2 per lane
  Value custom(int code, const Value* args, uint32_t n);
  bool forward_one_lane(int code, const Value* args, uint32_t n, uint32_t out);
  void backward(const double* cotangent, std::vector<double>& grad);
  void timed_backward(const double* cotangent, RunOutput& out);
  void fail_standing(RunOutput& out, const char* message);
  void sweep_tick();
  void reverse_sweep(const double* cotangent);
  void vjp_record(const TapeRecord& rec, LineVec& adj);
  void vjp_fast(const FastRec* fast);
  // whether replay and the reverse sweep run f's form: the fused lane forms (fast.hpp's
  // LANE_PRODUCTS and after) only when the run is fused (kFused: fused_), else their records
  // take the general path
  template <bool kFused>
  static bool fused_form(const FastRec& f) { return kFused || f.op < FastOp::LANE_PRODUCTS; }
  void accumulate(uint32_t pid, const Real* ct, size_t ct_elems, uint32_t mask,
                  LineVec& adj);
  void assemble(RunOutput& out);
  void finish_run(const RunRequest& req, RunOutput& out);
  void walk();
  // replay.cpp
  bool replay(const RunRequest& req, RunOutput& out);
  bool replay_forward();
  size_t forward_span(const FastRec* fast, const uint32_t*& slow, size_t r, size_t end);
  size_t forward_general(size_t r, size_t end);
  void forward_record(const TapeRecord& rec);
  bool guard_holds(const Guard& g);
  void start_recording(const RunRequest& req);
  void finish_recording(const RunOutput& out);
  bool key_matches(const RunRequest& req) const;
  // blocks.cpp
  uint32_t choose_block_rows(const RunRequest& req);
  uint32_t tune_rows(const RunRequest& req, uint32_t rows);
  void note_tune_time(double seconds, const RunOutput& out);
  bool run_blocked(const RunRequest& req, uint32_t rows, RunOutput& out);
  void note_lane_bytes(const RunRequest& req);
  void run_whole(const RunRequest& req, RunOutput& out);
  // chains.cpp: fused chains of lane-form records (replay's forward pass and the sweep after it)
  struct ChainIo {
    uint32_t pid = 0;    // the payload (its index in the chain: its place in chain_io_)
    uint32_t rec = 0;    // a tape record naming it: where its adjoint lives (fast_[rec])
    uint8_t slot = 0;    // that record's operand slot, or kOutSlot: the record's output
    uint8_t kind = 0;    // kChainIn (made before the chain), kChainOut (read after), kChainInner
    uint8_t taped = 0;
    uint8_t lanes = 0;   // 1: W lanes wide, 0: one lane
    uint32_t at = 0;     // scratch element offset: per lane (lanes) or past the lanes' part
    uint32_t size = 0;   // elements (per lane)
  };
  struct Chain {
    uint32_t lo = 0, hi = 0;  // tape records [lo, hi)
    uint32_t io = 0;          // its payloads: chain_io_[io, io + n_local)
    uint32_t n_local = 0;
    uint32_t per_lane = 0;  // scratch elements per lane (W-wide payloads)
    uint32_t fixed = 0;     // scratch elements of one-lane payloads
  };
  static constexpr uint8_t kChainIn = 0, kChainOut = 1, kChainInner = 2;
  static constexpr uint8_t kOutSlot = 0xff, kValueSlot = 0xfe;
  static constexpr uint32_t kNoChain = 0xffffffffu;
  void plan_chains();
  void chain_runs(const std::vector<uint8_t>& guard_at, std::vector<uint32_t>& rec_chain,
                  std::vector<uint32_t>& made_in);
  const Chain& add_chain(size_t lo, size_t hi, const std::vector<uint8_t>& outside,
                         std::vector<uint32_t>& local, std::vector<uint32_t>& where);
  bool chains_apply();
  void chain_layout(const Chain& c, uint32_t L, FastRec* recs);
  void chain_gather(const Chain& c, uint32_t w0, uint32_t L, Real* s);
  void chain_forward(const Chain& c);
  void chain_vjp(const Chain& c);
  size_t forward_chains(size_t r, size_t end);
  void vjp_chains();
  // pairs.cpp: fused pairs (a product and its sole reader, a + or -) of lane-form records
  struct PairSwap {
    uint32_t r = 0;  // the consumer's record (the product's is r - 1)
    FastForward prod_fwd = nullptr, cons_fwd = nullptr, pair_fwd = nullptr;
    FastVjp cons_vjp = nullptr, pair_vjp = nullptr;
  };
  void plan_pairs();
  void set_pairs(bool on);
  // updates.cpp: fused Gaussian updates (fast.hpp), planned with the pairs (before them: a
  // member of an update is in no pair); set_updates swaps their kernels in or out of fast_
  void plan_updates(std::vector<uint8_t>& member);
  bool update_at(size_t r, const std::vector<uint8_t>& reads) const;
  void set_updates(bool on);

  Limits lim_;
  uint64_t steps_ = 0;
  uint64_t check_at_ = 0;
  static constexpr size_t kClockEvery = size_t{1} << 22;
  size_t clock_at_ = kClockEvery;
  uint64_t charged_ = 0;             // steps_ already charged to lanes
  uint64_t all_steps_ = 0;           // steps charged to every lane (mask 0)
  std::vector<uint64_t> lane_steps_;  // [W] steps charged to each lane beyond all_steps_
  uint64_t lane_steps_max_ = 0;       // >= every lane_steps_[l] (no lane over: no scan)
  bool expired_ = false;             // the deadline has passed: every running lane fails
  bool err_pending_ = false;
  LaneError pending_err_;
  uint64_t heap_count_ = 0;
  std::chrono::steady_clock::time_point t0_;
  std::vector<Value> params_;
  std::vector<Value> inputs_;
  std::vector<Value> consts_;
  std::vector<Frame> kont_;
  std::vector<Value> vstack_;
  std::vector<Value> args_;
  std::vector<Value> apply_bufs_[2];
  int apply_flip_ = 0;
  std::vector<Value> retry_args_;
  const Value* pending_args_ = nullptr;
  uint32_t pending_n_ = 0;
  int pending_code_ = 0;
  uint32_t pending_node_ = 0;
  bool diverge_pending_ = false;
  std::vector<uint32_t> diverge_groups_;
  std::vector<JoinState> joins_;
  uint32_t n_joins_ = 0;
  std::vector<Thread> threads_;
  std::vector<std::pair<uint32_t, Value>> groups_;
  // merge_groups' scratch, kept between calls: each group's first result, each result's
  // group, one group's results
  std::vector<uint32_t> merge_first_, merge_group_;
  std::vector<std::pair<uint32_t, Value>> merge_items_;
  std::vector<std::pair<uint32_t, LaneError>> errors_;
  std::vector<Operand> ops_;
  LinalgScratch scratch_;
  VariadicVjp variadic_;  // the linear-time VJPs of a variadic * / min / max record
  // value_and_grad's reverse sweep looks at the run's deadline (timed_backward); others run
  // to completion. sweep_count_: records since its last look at the clock
  bool sweep_timed_ = false;
  uint32_t sweep_count_ = 0;
  std::vector<uint32_t> ids_;
  std::vector<Real> ct_;
  LineVec adj_;  // the adjoints, at the payloads' offsets (rows on lines, as theirs)
  std::vector<uint8_t> touched_;
  // per payload: the output of a taped `inv` of it over all W > 1 lanes (kNoInverse: none),
  // which the det/logdet VJPs read instead of recomputing the inverse (when fused_); at one
  // lane, the fast_ indices of the logdet/det records with a taped inverse of their operand
  // and the fused_ their kernels were set for (find_inverses: once per tape)
  std::vector<uint32_t> inverse_of_;
  std::vector<uint32_t> inv_pairs_;
  bool inv_pairs_fused_ = false;
  bool inverses_ready_ = false;
  GrowVec<FastRec> fast_;  // per tape record, its fast or lane form (fast.hpp)
  // The records of fast_'s tape that take the general path (no form, or a fused lane form in
  // a run that is not fused), ascending, then kNoSlow: of the forward pass (slow_fwd_) and of
  // the reverse sweep (slow_vjp_), listed for fused_ == slow_fused_ (-1: not listed) over
  // slow_n_ records, so that the fast records between them run without a per-record check.
  std::vector<uint32_t> slow_fwd_, slow_vjp_;
  int8_t slow_fused_ = -1;
  size_t slow_n_ = 0;
  static constexpr uint32_t kNoSlow = 0xffffffffu;
  void list_slow();
  FastRec op_fast_;            // the fast or lane form of the operation just run
  std::vector<uint32_t> leaves_;
  // [B, P]: the theta values the leaf payloads hold on every lane of their rows (fill_leaf
  // writes a row only where its value changed); leaf_theta_ok_: since the last bind
  std::vector<double> leaf_theta_;
  bool leaf_theta_ok_ = false;
  bool view_ = false;  // the run's RunRequest::value_view (float64 core)
  std::vector<int8_t> status_;
  size_t value_elems_ = 0;
  bool ready_ = false;
  bool last_numeric_ = false;
  Trace trace_;
  bool recording_ = false;
  bool fused_ = true;  // the last run's RunRequest::fused (its reverse sweeps use it)
  static constexpr uint32_t kNoInverse = 0xffffffffu;
  void find_inverses();
  // the adjoint storage of the fast records' reverse sweep (FastRec::aout, aoff, alias):
  // shared along chains of + and - when planned for a fused sweep, else each payload's own;
  // adj_plan_: what fast_ holds (-1: to be planned again, 0: own storage, 1: shared), and
  // per payload whether its adjoint lives in another payload's storage (seeds must not).
  // The first sweep of a tape keeps its own storage (a walk that is not replayed sweeps its
  // tape once: planning would cost it more than it saves); later ones (replays, further
  // gradients or Jacobians of the same tape) share.
  int8_t adj_plan_ = 0;
  uint32_t tape_sweeps_ = 0;
  std::vector<uint8_t> adj_moved_;
  void plan_adjoints(bool share);
  bool (*poll_)(void*) = nullptr;
  void* poll_ctx_ = nullptr;
  std::chrono::steady_clock::time_point polled_;
  std::vector<Real> guard_buf_;
  // lane blocking (blocks.cpp): the machines of the blocks (full ones, a shorter last one),
  // and the bytes per lane of the last program walked whole (for the block size); no_block_:
  // a blocked run of it fell back to the whole batch
  std::unique_ptr<Interp> kids_[2];
  bool ran_blocked_ = false;
  RunOutput kid_out_;
  RunRequest sub_;
  const Program* lane_prog_ = nullptr;
  uint64_t lane_serial_ = 0;
  uint32_t lane_Ng_ = 0;
  double lane_bytes_ = 0.0;
  bool no_block_ = false;
  // the rows per block tried and chosen for the last program and batch (blocks.cpp, "Size")
  struct BlockTune {
    uint32_t B = 0;                // the batch the candidates are for; 0: none yet
    uint32_t at = 0;               // the candidate being tried
    uint32_t runs = 0;             // runs at it so far (the first warms it, untimed)
    bool done = false;             // chosen holds the choice
    uint32_t chosen = 0;
    uint8_t now = 0;               // this run: 0 not tuning, 1 warming, 2 timed
    double spent = 0.0;            // the timed runs' seconds at this candidate
    std::vector<uint32_t> rows;    // candidates, rows per block (0: the whole batch)
    std::vector<double> best;      // the fastest run at each, seconds
  } tune_;
  // fused chains (chains.cpp): planned once per tape (chains_plan_: -1 not planned, 0 none,
  // 1 some), each chain's records laid out for full blocks of chain_lanes_ lanes
  // (chain_recs_[0]) and for the last, shorter block (chain_recs_[1]); chain_at_[r]: the chain
  // that starts (forward) at record r; chain_end_[r]: the chain whose last record is r.
  // chain_fwd_: the last forward pass ran them (their inner payloads hold no values).
  int8_t chains_plan_ = -1;
  bool chain_fwd_ = false;
  uint32_t chain_lanes_ = 0;
  uint32_t chain_req_ = 0;      // the run's RunRequest::chain_lanes
  uint32_t chain_planned_ = 0;  // the chain_req_ the plan was made for
  std::vector<Chain> chains_;
  std::vector<ChainIo> chain_io_;
  std::vector<FastRec> chain_recs_[2];
  std::vector<uint32_t> chain_at_, chain_end_;
  std::vector<Real> chain_val_, chain_adj_;
  std::vector<uint8_t> chain_touched_, chain_touched0_;
  // fused pairs (pairs.cpp): planned once per tape (pairs_plan_ -1: not planned); pairs_on_:
  // fast_ holds their kernels (else the records' own); pairs_req_: the run's RunRequest::pairs
  int8_t pairs_plan_ = -1;
  bool pairs_on_ = false;
  bool pairs_req_ = true;
  std::vector<PairSwap> pairs_;
  // fused updates (updates.cpp): planned with the pairs; updates_on_: fast_ holds their
  // kernels; updates_req_: the run's RunRequest::updates
  bool updates_on_ = false;
  bool updates_req_ = true;
  bool updates_planned_ = true;  // the updates_req_ the plan was made for
  std::vector<std::unique_ptr<UpdateGroup>> updates_;
};

}  // namespace ndvm
