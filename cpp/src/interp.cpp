// Evaluation setup, application (closures, primitives, apply/error), numeric dispatch with
// taping, and the per-run entry point.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "ndvm/interp.hpp"
#include "ndvm/prims.hpp"
#include "ndvm/vm.hpp"

namespace ndvm {

namespace {

std::string shape_str(const Payload& p) {
  char buf[64];
  if (p.rank == 1) {
    std::snprintf(buf, sizeof buf, "(%u,)", p.rows);
  } else if (p.rank == 2) {
    std::snprintf(buf, sizeof buf, "(%u, %u)", p.rows, p.cols);
  } else {
    std::snprintf(buf, sizeof buf, "()");
  }
  return buf;
}

std::string describe_arity(const PrimInfo& info) {
  if (info.max_args == info.min_args) return "exactly " + std::to_string(info.min_args);
  if (info.max_args < 0) return "at least " + std::to_string(info.min_args);
  return std::to_string(info.min_args) + " to " + std::to_string(info.max_args);
}

const char* const kRankNoun[3] = {"a number", "a vector", "a matrix"};

// The opcode a primitive runs as under the dmci dialect (DMCI_RUNS_AS in
// src/ndvm/prims/numeric.py): modulo and remainder trade places, normalize floors its norm.
// Errors still name the primitive the program called.
int dmci_code(int code) {
  switch (static_cast<Prim>(code)) {
    case Prim::MODULO: return static_cast<int>(Prim::REMAINDER);
    case Prim::REMAINDER: return static_cast<int>(Prim::MODULO);
    case Prim::NORMALIZE: return static_cast<int>(Prim::INTERNAL_DMCI_NORMALIZE);
    default: return code;
  }
}

}  // namespace

LaneError Interp::error(const std::string& msg, ErrClass cls) const {
  LaneError e;
  e.cls = cls;
  e.message = msg;
  if (node_ >= 0 && static_cast<size_t>(node_) < prog_->nodes.size()) {
    const Node& n = prog_->nodes[static_cast<size_t>(node_)];
    e.line = n.line;
    e.column = n.line ? n.column : 0;
  }
  return e;
}

// Big numeric work between steps: the deadline is checked every kClockEvery payload doubles
// (the reference's Runtime.payload_alloc does the same).
void Interp::mind_clock() {
  if (pay_.elems() < clock_at_) return;
  clock_at_ = pay_.elems() + kClockEvery;
  if (lim_.deadline <= 0 || kont_.empty()) return;  // not inside the machine yet
  LaneError e;
  if (limit_error(e)) throw e;
}

void Interp::alloc(uint64_t n) {
  heap_count_ += n;
  if (heap_count_ > lim_.max_heap) {
    throw LimitError(LimitKind::HEAP,
                     "heap limit of " + std::to_string(lim_.max_heap) + " cells exceeded");
  }
}

std::string Interp::type_name(Value v) const {
  switch (v.tag) {
    case Tag::NUM: return v.rank == 0 ? "a number" : v.rank == 1 ? "a vector" : "a matrix";
    case Tag::BOOL:
    case Tag::BOOLS: return "a boolean";
    case Tag::PAIR: return "a pair";
    case Tag::NIL: return "the empty list";
    case Tag::SYMBOL: return "the symbol " + prog_->strings[v.id];
    case Tag::STRING: return "a string";
    case Tag::CLOSURE:
    case Tag::PRIMPROC: return "a procedure";
    case Tag::VOID: return "void";
    default: return "Unassigned";
  }
}

Value Interp::number(double x) {
  const uint32_t pid = pay_.alloc(1, 0, 1, 1, false);
  pay_.ptr(pid)[0] = x;
  return make_value(Tag::NUM, pid);
}

uint32_t Interp::tape_op(TapeOp op, const uint32_t* ins, uint32_t n, uint32_t out,
                         uint32_t extra, uint32_t aux) {
  TapeRecord r;
  r.op = static_cast<uint16_t>(op);
  r.flags = dmci_ ? 1 : 0;
  r.nargs = n;
  r.mask = mask_;
  r.out = out;
  r.args = static_cast<uint32_t>(tape_.operands.size());
  r.extra = extra;
  r.aux = aux;
  tape_.operands.append(ins, ins + n);
  tape_.records.push_back(r);
  note_fast(false, n, out);
  return static_cast<uint32_t>(tape_.records.size() - 1);
}

// The record of a primitive applied to numbers: its operands are the arguments' payloads.
void Interp::tape_values(int op, const Value* args, uint32_t n, uint32_t out) {
  TapeRecord r;
  r.op = static_cast<uint16_t>(op);
  r.flags = dmci_ ? 1 : 0;
  r.nargs = n;
  r.mask = mask_;
  r.out = out;
  r.args = static_cast<uint32_t>(tape_.operands.size());
  for (uint32_t i = 0; i < n; ++i) tape_.operands.push_back(args[i].id);
  tape_.records.push_back(r);
}

// fast_ keeps in step with the tape: for the record just taped, its fast form (one lane) or lane
// form (W_ > 1) when it has one (fast: op_fast_ is the one of its operation) and ran on every
// lane, else none.
void Interp::note_fast(bool fast, uint32_t n, uint32_t out) {
  FastRec& f = fast_.emplace_back();
  if (!fast || !(mask_ == 0 || masks_.full(mask_))) return;
  const uint32_t* ids = tape_.operands.data() + tape_.records.back().args;
  fast_copy(f, op_fast_);
  f.out_pid = out;
  f.aout = f.out;
  for (uint32_t i = 0; i < n; ++i) {
    f.pid[i] = ids[i];
    f.aoff[i] = f.off[i];
    if (pay_[ids[i]].taped) f.taped |= static_cast<uint8_t>(1u << i);
  }
}

Value Interp::numeric(int code, const Value* args, uint32_t n) {
  const PrimInfo& info = prim_info(code);
  for (uint32_t i = 0; i < n; ++i) {
    if (args[i].tag != Tag::NUM) {
      throw error(std::string(info.name) + ": argument " + std::to_string(i + 1) +
                  " must be a number, got " + type_name(args[i]));
    }
  }
  if (info.shape == PrimShape::CUSTOM) return custom(code, args, n);
  uint32_t width = 1;
  bool taped = false;
  int first = -1;
  for (uint32_t i = 0; i < n; ++i) {
    const Payload& p = pay_[args[i].id];
    if (p.width > 1) width = W_;
    taped = taped || p.taped;
    if (!p.rank) continue;
    if (first < 0) {
      first = static_cast<int>(i);
      continue;
    }
    const Payload& f = pay_[args[first].id];
    if (p.rank != f.rank || p.rows != f.rows || p.cols != f.cols) {
      throw error(std::string(info.name) + ": shapes " + shape_str(f) + " and " + shape_str(p) +
                      " differ",
                  ErrClass::SHAPE);
    }
  }
  if (first >= 0 && info.shape == PrimShape::SCALAR) {
    throw error(std::string(info.name) + ": expects numbers, got a vector/matrix",
                ErrClass::SHAPE);
  }
  if (ops_.size() < n) ops_.resize(n);
  if (info.kind == PrimKind::PREDICATE) {
    for (uint32_t i = 0; i < n; ++i) ops_[i] = pay_.operand(args[i].id);
    if (width == 1) {
      Real out = 0.0;
      predicate_forward(code, ops_.data(), static_cast<int>(n), &out, 1);
      const Value r = make_value(Tag::BOOL, out != 0.0 ? 1 : 0);
      if (taped) guard_predicate(code, args, n, r);
      return r;
    }
    const uint32_t pid = pay_.alloc(W_, 0, 1, 1, false);
    for (uint32_t i = 0; i < n; ++i) ops_[i] = pay_.operand(args[i].id);
    predicate_forward(code, ops_.data(), static_cast<int>(n), pay_.ptr(pid), W_);
    const Value r = make_value(Tag::BOOLS, pid);
    if (taped) guard_predicate(code, args, n, r);
    return r;
  }
  const Payload shape = first >= 0 ? pay_[args[first].id] : Payload{};
  const uint32_t out = pay_.alloc(width, shape.rank, shape.rows, shape.cols, taped);
  mind_clock();
  const bool dmci = dmci_ && info.domain == PrimDomain::POSITIVE;
  const int run = dmci_ ? dmci_code(code) : code;
  const bool fast = W_ == 1 && !dmci && forward_one_lane(run, args, n, out);
  if (!fast) {
    for (uint32_t i = 0; i < n; ++i) ops_[i] = pay_.operand(args[i].id);
    elementwise_forward(run, dmci, ops_.data(), static_cast<int>(n), pay_.ptr(out), width,
                        pay_[out].size());
  }
  if (taped) {
    tape_values(run, args, n, out);
    note_fast(fast || (W_ > 1 && !dmci && lane_form(run, args, n, out)), n, out);
  }
  return make_value(Tag::NUM, out, shape.rank);
}

Value Interp::custom(int code, const Value* args, uint32_t n) {
  const PrimInfo& info = prim_info(code);
  if (ops_.size() < n) ops_.resize(n);
  uint32_t width = 1;
  bool taped = false;
  for (uint32_t i = 0; i < n; ++i) {
    const Payload& p = pay_[args[i].id];
    const int need = custom_in_rank(code, static_cast<int>(i));
    if (p.rank != need) {
      throw error(std::string(info.name) + ": argument " + std::to_string(i + 1) + " must be " +
                      kRankNoun[need] + ", got " + kRankNoun[p.rank],
                  ErrClass::SHAPE);
    }
    if (p.width > 1) width = W_;
    taped = taped || p.taped;
    ops_[i] = pay_.operand(args[i].id);
  }
  OutShape shape;
  const std::string bad = custom_shape(code, ops_.data(), static_cast<int>(n), shape);
  if (!bad.empty()) throw error(bad, ErrClass::SHAPE);
  const uint32_t out = pay_.alloc(width, shape.rank, shape.rows, shape.cols, taped);
  mind_clock();
  // the allocation may have moved the arena: only the data pointers change
  for (uint32_t i = 0; i < n; ++i) ops_[i].p = pay_.ptr(args[i].id);
  const int run = dmci_ ? dmci_code(code) : code;
  const bool fast = W_ == 1 && forward_one_lane(run, args, n, out);
  if (!fast) custom_forward(run, ops_.data(), static_cast<int>(n), pay_.ptr(out), width, scratch_);
  if (taped) {
    tape_values(run, args, n, out);
    note_fast(fast || (W_ > 1 && !dmci_ && lane_form(run, args, n, out)), n, out);
  }
  return make_value(Tag::NUM, out, shape.rank);
}

// At one lane, an operation with a fast form (fast.hpp) runs it; false: the general kernel runs.
bool Interp::forward_one_lane(int code, const Value* args, uint32_t n, uint32_t out) {
  if (pay_[out].width != 1 || n == 0 || n > kFastArgs) return false;
  const Payload* in[kFastArgs];
  for (uint32_t i = 0; i < n; ++i) in[i] = &pay_[args[i].id];
  fast_clear(op_fast_);
  if (!fast_resolve(code, pay_[out], in, static_cast<int>(n), op_fast_)) return false;
  op_fast_.forward(op_fast_, pay_.base(), scratch_);
  return true;
}

// Over W_ > 1 lanes, the lane form (fast.hpp) of the operation just run by its general kernel,
// into op_fast_; false: it has none.
bool Interp::lane_form(int code, const Value* args, uint32_t n, uint32_t out) {
  if (n == 0 || n > kFastArgs) return false;
  const Payload* in[kFastArgs];
  for (uint32_t i = 0; i < n; ++i) in[i] = &pay_[args[i].id];
  fast_clear(op_fast_);
  return fast_resolve_lanes(code, pay_[out], in, static_cast<int>(n), op_fast_);
}

Step Interp::call(Value fn, const Value* args, uint32_t n, uint32_t node) {
  if (fn.tag == Tag::CLOSURE) {
    const ClosureCell cell = heap_.closures[fn.id];
    const Node& lam = prog_->nodes[cell.lambda];
    const uint32_t nreq = static_cast<uint32_t>(lam.a);
    const bool rest = lam.b != 0;
    Step s;
    s.expr = static_cast<int32_t>(prog_->kids_of(lam)[0]);
    if (n == nreq && !rest) {
      alloc();
      s.env = heap_.env(cell.env, args, n);
      return s;
    }
    if (rest && n >= nreq) {
      const Value lst = list_from(args + nreq, n - nreq, make_value(Tag::NIL));
      alloc(n - nreq);
      alloc();
      s.env = heap_.env(cell.env, args, nreq);
      heap_.slots.push_back(lst);
      heap_.envs[s.env].size = nreq + 1;
      return s;
    }
    node_ = static_cast<int32_t>(node);
    const std::string want = rest ? "at least " + std::to_string(nreq) : std::to_string(nreq);
    throw error(prog_->strings[static_cast<uint32_t>(lam.c)] + ": expects " + want +
                " argument(s), got " + std::to_string(n));
  }
  if (fn.tag == Tag::PRIMPROC) {
    const PrimInfo& info = prim_info(fn.id);
    const int k = static_cast<int>(n);
    if (k < info.min_args || (info.max_args >= 0 && k > info.max_args)) {
      node_ = static_cast<int32_t>(node);
      throw error(std::string(info.name) + " expects " + describe_arity(info) +
                  " argument(s), got " + std::to_string(n));
    }
    return apply_prim(static_cast<int>(fn.id), args, n, node);
  }
  node_ = static_cast<int32_t>(node);
  throw error("cannot call " + type_name(fn) + ": it is not a procedure");
}

// One row per STRUCTURAL and CONTROL primitive: the member that applies it, expanded from the
// generated prims.inc, so a primitive of the Python table without its row here does not
// compile (NUMERIC and PREDICATE rows: kernels.cpp, linalg.cpp). PRELUDE primitives have none:
// the front end compiles their ndvm source with the program.
const Interp::Rows& Interp::rows() {
  static const Rows table = [] {
    Rows t{};
#define NDVM_CXR(UP) constexpr StructuralRow row_##UP = &Interp::cxr;
    NDVM_CXR(CAR) NDVM_CXR(CDR) NDVM_CXR(CAAR) NDVM_CXR(CADR) NDVM_CXR(CDAR) NDVM_CXR(CDDR)
    NDVM_CXR(CAAAR) NDVM_CXR(CAADR) NDVM_CXR(CADAR) NDVM_CXR(CADDR) NDVM_CXR(CDAAR)
    NDVM_CXR(CDADR) NDVM_CXR(CDDAR) NDVM_CXR(CDDDR)
#define NDVM_LIST(UP) constexpr StructuralRow row_##UP = &Interp::structural;
    NDVM_LIST(CONS) NDVM_LIST(LIST) NDVM_LIST(LENGTH) NDVM_LIST(APPEND) NDVM_LIST(REVERSE)
    NDVM_LIST(LIST_TAIL) NDVM_LIST(LIST_REF) NDVM_LIST(IOTA) NDVM_LIST(IS_NUMBER)
    NDVM_LIST(IS_BOOLEAN) NDVM_LIST(IS_SYMBOL) NDVM_LIST(IS_STRING) NDVM_LIST(IS_PAIR)
    NDVM_LIST(IS_NULL) NDVM_LIST(IS_VECTOR) NDVM_LIST(IS_MATRIX) NDVM_LIST(IS_LIST)
    NDVM_LIST(IS_PROCEDURE) NDVM_LIST(NOT) NDVM_LIST(IS_EQ) NDVM_LIST(IS_EQV)
    NDVM_LIST(IS_EQUAL) NDVM_LIST(VOID)
#define NDVM_MAKE(UP) constexpr StructuralRow row_##UP = &Interp::make_vectors;
    NDVM_MAKE(VEC) NDVM_MAKE(MAT) NDVM_MAKE(MAKE_VECTOR) NDVM_MAKE(ZEROS) NDVM_MAKE(ONES)
    NDVM_MAKE(EYE)
#define NDVM_READ(UP) constexpr StructuralRow row_##UP = &Interp::read_vectors;
    NDVM_READ(REF) NDVM_READ(VLEN) NDVM_READ(ROWS) NDVM_READ(COLS) NDVM_READ(VECTOR_TO_LIST)
    NDVM_READ(LIST_TO_VECTOR)
    constexpr ControlRow row_APPLY = &Interp::apply_list;
    constexpr ControlRow row_ERROR = &Interp::apply_error;
#undef NDVM_CXR
#undef NDVM_LIST
#undef NDVM_MAKE
#undef NDVM_READ
#define NDVM_ROW_STRUCTURAL_ELEMENTWISE(upper, code) t.structural[code] = row_##upper;
#define NDVM_ROW_CONTROL_ELEMENTWISE(upper, code) t.control[code] = row_##upper;
#include "ndvm/prim_rows.hpp"
#include "ndvm/prims.inc"
#undef NDVM_PRIM
    return t;
  }();
  return table;
}

bool Interp::has_row(int code) {
  if (code < 0 || code >= kPrimCodeLimit) return false;
  const PrimInfo& info = prim_info(code);
  if (info.kind == PrimKind::STRUCTURAL) return rows().structural[code] != nullptr;
  return info.kind == PrimKind::CONTROL && rows().control[code] != nullptr;
}

LaneError Interp::no_row(int code) const {
  return error(std::string("primitive ") + (prim_info(code).name ? prim_info(code).name : "?") +
               " cannot be applied here");
}

Step Interp::apply_prim(int code, const Value* args, uint32_t n, uint32_t node) {
  node_ = static_cast<int32_t>(node);
  const PrimInfo& info = prim_info(code);
  Step s;
  switch (info.kind) {
    case PrimKind::NUMERIC:
    case PrimKind::PREDICATE: s.val = numeric(code, args, n); return s;
    case PrimKind::STRUCTURAL:
      if (rows().structural[code] == nullptr) break;
      pending_args_ = args;
      pending_n_ = n;
      pending_code_ = code;
      pending_node_ = node;
      s.val = (this->*rows().structural[code])(code, args, n);
      return s;
    case PrimKind::CONTROL:
      if (rows().control[code] == nullptr) break;
      return (this->*rows().control[code])(code, args, n, node);
    default: break;
  }
  throw no_row(code);
}

Step Interp::apply_error(int, const Value* args, uint32_t n, uint32_t) {
  LaneError e = error("error");
  e.error_prim = true;
  e.irritants = export_values(args, n);
  throw e;
}

Step Interp::apply_list(int, const Value* args, uint32_t n, uint32_t node) {
  apply_flip_ ^= 1;
  std::vector<Value>& buf = apply_bufs_[apply_flip_];
  buf.assign(args + 1, args + n - 1);
  Value x = args[n - 1];
  while (x.tag == Tag::PAIR) {
    buf.push_back(heap_.pairs[x.id].car);
    x = heap_.pairs[x.id].cdr;
  }
  if (x.tag != Tag::NIL) throw error("apply: the last argument must be a proper list");
  return call(args[0], buf.data(), static_cast<uint32_t>(buf.size()), node);
}

void Interp::materialize_constants() {
  consts_.resize(prog_->consts.size());
  for (size_t i = 0; i < prog_->consts.size(); ++i) {
    const Const& c = prog_->consts[i];
    const uint32_t a = static_cast<uint32_t>(c.a);
    switch (c.kind) {
      case ConstKind::NUM: consts_[i] = number(c.num); break;
      case ConstKind::BOOL: consts_[i] = make_value(Tag::BOOL, c.a ? 1 : 0); break;
      case ConstKind::NIL: consts_[i] = make_value(Tag::NIL); break;
      case ConstKind::VOID: consts_[i] = make_value(Tag::VOID); break;
      case ConstKind::SYMBOL: consts_[i] = make_value(Tag::SYMBOL, a); break;
      case ConstKind::STRING: consts_[i] = make_value(Tag::STRING, a); break;
      case ConstKind::PAIR:
        consts_[i] = make_value(Tag::PAIR, heap_.pair(consts_[a], consts_[c.b]));
        break;
    }
  }
}

void Interp::reset(const RunRequest& req) {
  prog_ = req.program;
  B_ = req.B;
  Ng_ = req.Ng;
  W_ = B_ * Ng_;
  lim_ = req.limits;
  dmci_ = req.dmci;
  pay_.reset();
  masks_.reset(W_);
  heap_.reset();
  tape_.reset();
  fast_.clear();
  slow_fused_ = -1;
  inverses_ready_ = false;
  chains_plan_ = -1;
  chain_fwd_ = false;
  pairs_plan_ = -1;  // fast_ is new: its records' own kernels
  pairs_on_ = false;
  updates_on_ = false;
  updates_.clear();
  adj_plan_ = 0;  // note_fast sets each record's own storage
  tape_sweeps_ = 0;
  kont_.clear();
  vstack_.clear();
  retry_args_.clear();
  threads_.clear();
  groups_.clear();
  errors_.clear();
  params_.clear();
  inputs_.clear();
  n_joins_ = 0;
  steps_ = 0;
  check_at_ = 4096;
  clock_at_ = kClockEvery;
  charged_ = 0;
  all_steps_ = 0;
  lane_steps_.assign(W_, 0);
  lane_steps_max_ = 0;
  expired_ = false;
  err_pending_ = false;
  heap_count_ = 0;
  mask_ = 0;
  node_ = -1;
  diverge_pending_ = false;
  t0_ = req.start != std::chrono::steady_clock::time_point{} ? req.start
                                                             : std::chrono::steady_clock::now();
  scratch_.clock = WorkClock{lim_.deadline, t0_, 0, false};
  materialize_constants();
}

// Parameter i's raw value on every lane of its leaf payload (theta is [B, P]). Leaf payloads
// are written only here (replay and the kernels write record outputs): a row whose value has
// the same bits as the one it holds since the last bind (leaf_theta_) is left as it is.
void Interp::fill_leaf(const RunRequest& req, uint32_t i, uint32_t pid) {
  const uint32_t P = prog_->n_params;
  Real* p = pay_.ptr(pid);
  for (uint32_t b = 0; b < B_; ++b) {
    const double x = req.theta[static_cast<size_t>(b) * P + i];
    double& held = leaf_theta_[static_cast<size_t>(b) * P + i];
    if (leaf_theta_ok_ && std::memcmp(&held, &x, sizeof x) == 0) continue;
    fill_lanes(p + static_cast<size_t>(b) * Ng_, Ng_, static_cast<Real>(x));
    held = x;
  }
}

// A parameter's constraint transform (unary primitive `code`) of its leaf `v`, which holds
// one value per row of Ng_ lanes: by its row form (FastOp::ROWS), which evaluates the
// transform and, in the sweep, its derivative once per row, where one exists (the same values
// as the lane form's, lane by lane); else as any primitive.
Value Interp::constrain(int code, Value v) {
  const FastKernels k = unary_row_kernels(code);
  const bool dmci =  // a dmci record of its own (the lane forms leave those out too)
      dmci_ && (dmci_code(code) != code || prim_info(code).domain == PrimDomain::POSITIVE);
  if (Ng_ < 2 || k.forward == nullptr || dmci) return numeric(code, &v, 1);
  const uint32_t out = pay_.alloc(W_, 0, 1, 1, true);
  const Payload& o = pay_[out];
  const Payload& in = pay_[v.id];
  if (o.off + o.count() > UINT32_MAX || in.off + in.count() > UINT32_MAX) {
    return numeric(code, &v, 1);  // (the unused output stays allocated)
  }
  fast_clear(op_fast_);
  op_fast_.forward = k.forward;
  op_fast_.vjp = k.vjp;
  op_fast_.op = FastOp::ROWS;
  op_fast_.n = 1;
  op_fast_.S = W_;
  op_fast_.m = Ng_;
  op_fast_.out = static_cast<uint32_t>(o.off);
  op_fast_.off[0] = static_cast<uint32_t>(in.off);
  mind_clock();
  op_fast_.forward(op_fast_, pay_.base(), scratch_);
  tape_values(code, &v, 1, out);
  note_fast(true, 1, out);
  return make_value(Tag::NUM, out);
}

void Interp::bind(const RunRequest& req, std::vector<uint32_t>& leaves) {
  const uint32_t P = prog_->n_params;
  leaf_theta_ok_ = false;  // new leaf payloads: every row is written
  leaf_theta_.resize(static_cast<size_t>(B_) * P);
  for (uint32_t i = 0; i < P; ++i) {
    const uint32_t pid = pay_.alloc(W_, 0, 1, 1, true);
    fill_leaf(req, i, pid);
    leaves.push_back(pid);
    Value v = make_value(Tag::NUM, pid);
    const int32_t t = req.transforms ? req.transforms[i] : 0;
    if (t > 0) v = constrain(static_cast<int>(t), v);
    params_.push_back(v);
  }
  leaf_theta_ok_ = true;
  for (const InputSpec& in : req.inputs) {
    if (in.kind == InputKind::SCALAR) {
      inputs_.push_back(number(in.data[0]));
    } else if (in.kind == InputKind::DATA) {
      const uint32_t pid = pay_.alloc(W_, 0, 1, 1, false);
      Real* p = pay_.ptr(pid);
      for (uint32_t l = 0; l < W_; ++l) p[l] = in.data[l % Ng_];
      inputs_.push_back(make_value(Tag::NUM, pid));
    } else {
      const uint32_t pid = pay_.alloc(1, in.rank, in.rows, in.cols, false);
      Real* p = pay_.ptr(pid);
      for (size_t e = 0; e < pay_[pid].size(); ++e) p[e] = in.data[e];
      inputs_.push_back(make_value(Tag::NUM, pid, in.rank));
    }
  }
}

void Interp::poll_interrupt() {
  if (poll_ == nullptr) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - polled_ < kPollEvery) return;
  polled_ = now;
  if (poll_(poll_ctx_)) throw Interrupted{};
}

void RunOutput::clear() {
  numeric = true;
  value.clear();
  view = nullptr;
  value_shape.clear();
  status.clear();
  has_grad = false;
  grad_needs_numeric = false;
  grad.clear();
  errors.clear();
  groups.clear();
  steps = tape = heap = 0;
  replayed = false;
  blocks = 0;
  chains = 0;
  pairs = 0;
  updates = 0;
}

RunOutput Interp::run(const RunRequest& req) {
  RunOutput out;
  run(req, out);
  return out;
}

void Interp::run(const RunRequest& req, RunOutput& out) {
  const uint32_t rows = choose_block_rows(req);
  const bool timed = tune_.now != 0;  // a run of the block tuning (blocks.cpp, tune_rows)
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = timed ? Clock::now() : Clock::time_point{};
  ran_blocked_ = rows != 0 && run_blocked(req, rows, out);
  if (!ran_blocked_) run_whole(req, out);
  if (timed) {
    const std::chrono::duration<double> took = Clock::now() - t0;
    note_tune_time(took.count(), out);
  }
}

void Interp::run_whole(const RunRequest& req, RunOutput& out) {
  out.clear();
  ready_ = false;
  fused_ = req.fused;
  chain_req_ = req.chain_lanes;
  pairs_req_ = req.pairs;
  updates_req_ = req.updates;
  view_ = req.value_view && std::is_same_v<Real, double>;
  if (req.interrupted != poll_ || req.interrupt_ctx != poll_ctx_) {
    poll_ = req.interrupted;
    poll_ctx_ = req.interrupt_ctx;
    polled_ = std::chrono::steady_clock::now();
  }
  if (replay(req, out)) return;
  start_recording(req);
  reset(req);
  leaves_.clear();
  bind(req, leaves_);
  const uint32_t root = new_join(0);
  kont_.push_back(Frame{K_JOIN, 0, root, 0, 0});
  if (req.client == 1) {
    vm_run(*this, req);  // the bytecode client (vm_run.cpp)
  } else {
    walk();
  }
  finish_run(req, out);
  finish_recording(out);
  note_lane_bytes(req);
}

// The tree walker's part of an evaluation: the root expression, then the threads of joins
// whose groups' values differ in structure.
void Interp::walk() {
  Step s;
  s.expr = static_cast<int32_t>(prog_->root);
  run_thread(s);
  while (!threads_.empty()) {
    Thread t = std::move(threads_.back());
    threads_.pop_back();
    kont_ = std::move(t.kont);
    vstack_ = std::move(t.vstack);
    set_mask(t.mask);
    Step resume_step;
    resume_step.val = t.value;
    run_thread(resume_step);
  }
}

void Interp::finish_run(const RunRequest& req, RunOutput& out) {
  assemble(out);
  status_ = out.status;
  value_elems_ = out.view ? W_ : out.value.size();
  last_numeric_ = out.numeric;
  ready_ = true;
  if (req.grad && out.numeric) {
    timed_backward(req.cotangent, out);
    out.has_grad = true;
  }
  out.grad_needs_numeric = req.grad && !out.numeric;
  out.steps = steps_;
  out.tape = tape_.records.size();
  out.heap = heap_count_;
}

std::vector<double> Interp::gradient(const double* cotangent) {
  std::vector<double> grad;
  gradient(cotangent, grad);
  return grad;
}

void Interp::gradient(const double* cotangent, std::vector<double>& grad) {
  if (!can_differentiate()) throw std::logic_error("gradient: no numeric result to differentiate");
  backward(cotangent, grad);
}

}  // namespace ndvm
