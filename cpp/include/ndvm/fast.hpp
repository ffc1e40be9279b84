// One-lane forms of the commonest numeric operations. An operation whose output and operands
// all have one lane (width 1) is resolved, when the walk runs it, into a FastRec (its kernels,
// sizes and element offsets); the walk runs its forward kernel and keeps the FastRec beside
// the operation's tape record (when the record ran on every lane). Replay's forward pass and
// the reverse sweep then run such records directly, without the per-record operand views,
// shape rules, table dispatch, scratch buffers and separate accumulation pass of the general
// path. Each fast kernel performs the same IEEE operations in the same order as the general
// kernel (kernels.cpp, linalg_lanes.cpp, lu_lanes.cpp), and adds a cotangent into an operand's
// adjoint exactly as accumulate_lanes does (the first one stored, later ones added; a
// one-element operand of a broadcast gets the sum of the cotangent's elements, in index
// order): results are bitwise those of the general path.
//
// Over W > 1 lanes, a taped + - * (and scale) of up to three operands (or of two, one an
// untaped one-lane row of the output's elements: data), / of one or two, and
// an elementwise unary primitive (sqrt and one-operand log included; their dmci records, which
// clamp, keep the general path) have lane forms (fast_resolve_lanes): the walk runs the
// general kernel and keeps the lane form beside the record (when it ran on every lane), for
// replay and the reverse sweep. Their kernels loop over the S x W output elements as the
// general kernels' rows do, with the same expression per element.
#pragma once

#include <cstdint>
#include <vector>

#include "ndvm/kernels.hpp"
#include "ndvm/payload.hpp"

namespace ndvm {

enum class FastOp : uint8_t {
  NONE,    // the general path
  ADD,     // elementwise +, -, * (and scale) of n <= kFastArgs operands
  SUB,
  MUL,
  DOT,     // sums of products: dot, matvec, matmul (at most kFastWork products)
  MATVEC,
  MATMUL,
  INV2,    // 2 x 2 inverse, log|det|, det
  LOGDET2,
  DET2,
  UNARY,   // W lanes: a unary row, sqrt, log or / (kernels.cpp's lane kernels)
  ROWS,    // W lanes: a unary row of an operand uniform over each row of f.m lanes (a
           // parameter's constraint; Interp::constrain): once per row, spread over its lanes
  // W lanes, fused forms (only when the run is fused: Interp::fused_form); every op from
  // LANE_PRODUCTS on is one
  LANE_PRODUCTS,  // dot, matvec, matmul of small full-width operands
  LANE_INV2,      // 2 x 2 inverse
  LANE_SLOGDET2,  // 2 x 2 log|det| or det
};

constexpr int kFastArgs = 4;
constexpr uint32_t kFastWork = 4096;

struct FastRec;
using FastForward = void (*)(const FastRec& f, Real* v, LinalgScratch& scratch);
using FastVjp = void (*)(const FastRec& f, const Real* v, Real* adj, uint8_t* touched);

struct FastRec {
  // The record's output from its operands (v: the payload arena), and its VJP: every taped
  // operand's adjoint gets its cotangent (stored when touched[pid] is 0, then marked, else
  // added; adj: the adjoints, at aout and aoff[i]). nullptr: the general path.
  FastForward forward = nullptr;
  FastVjp vjp = nullptr;
  FastOp op = FastOp::NONE;
  uint8_t n = 0;       // operands
  uint8_t taped = 0;   // bit i: operand i needs a cotangent
  uint8_t scalar = 0;  // bit i: operand i is one element broadcast over the S outputs
  uint32_t S = 1;      // output elements (a lane form: over all its lanes)
  uint32_t r = 1;      // sums of products: operand 0 is r x c, operand 1 is c x m
  uint32_t c = 1;
  uint32_t m = 1;
  uint32_t out = 0;              // element offset of the output (its value and its adjoint)
  uint32_t out_pid = 0;          // payload id of the output
  uint32_t off[kFastArgs] = {};  // element offsets of the operands
  uint32_t pid[kFastArgs] = {};  // payload ids of the operands (their touched flags)
  // Where the output's and the operands' adjoints live: the payloads' own offsets (out, off),
  // or, once the reverse sweep has planned its adjoint storage (Interp::plan_adjoints), the
  // storage a payload shares along a chain of + and - (bit i of `alias`: operand i's adjoint
  // is the output's own storage, taken over by this record; its cotangent, the output's
  // cotangent itself, is already there, so the VJP only marks it touched).
  uint32_t aout = 0;
  uint32_t aoff[kFastArgs] = {};
  uint8_t alias = 0;
  // The records a fused update's members (updates.cpp) let the replay and the sweep step over:
  // after the first member's forward (which does nothing), the replay goes on at the record
  // skip_fwd + 1 places on, the update's last; after the last member's VJP (the update's), the
  // sweep goes on skip_back places before it, before the first (the members between do nothing
  // once it has run). 0: the next record.
  uint8_t skip_fwd = 0;
  uint8_t skip_back = 0;
  // The fused update (fast_updates.cpp) whose last record this is; null otherwise.
  const struct UpdateGroup* update = nullptr;
};

// Kernel pointer f, loaded into a register for the call: without it GCC calls through the
// record's field (`call *mem`), with which the loops of replay and the reverse sweep measured
// 2-6% slower in wall time at one lane on the AMD EPYC here (paired runs, same instructions).
template <class F>
NDVM_INLINE F in_register(F f) {
#if defined(__GNUC__)
  asm("" : "+r"(f));
#endif
  return f;
}

// A FastRec as value-initialized, except the per-operand arrays (a resolve fills those of its
// operands; the others are never read): the walk resets its scratch record once per operation.
NDVM_INLINE void fast_clear(FastRec& f) {
  f.forward = nullptr;
  f.vjp = nullptr;
  f.op = FastOp::NONE;
  f.n = 0;
  f.taped = 0;
  f.scalar = 0;
  f.alias = 0;
  f.S = 1;
  f.r = 1;
  f.c = 1;
  f.m = 1;
  f.out = 0;
  f.out_pid = 0;
  f.aout = 0;
}

// Copies what a resolve set (the header, the n operands' offsets): the walk's scratch record into
// the tape's.
NDVM_INLINE void fast_copy(FastRec& to, const FastRec& from) {
  to.forward = from.forward;
  to.vjp = from.vjp;
  to.op = from.op;
  to.n = from.n;
  to.taped = from.taped;
  to.scalar = from.scalar;
  to.S = from.S;
  to.r = from.r;
  to.c = from.c;
  to.m = from.m;
  to.out = from.out;
  for (int i = 0; i < from.n; ++i) to.off[i] = from.off[i];
}

// Operand i's adjoint, and whether this is its first cotangent (it is marked touched).
NDVM_INLINE Real* fast_target(const FastRec& f, int i, Real* adj, uint8_t* touched, bool& first) {
  first = touched[f.pid[i]] == 0;
  touched[f.pid[i]] = 1;
  return adj + f.aoff[i];
}

// Whether operand i's adjoint is the output's (bit i of f.alias): then it is marked touched
// and its VJP has nothing to write.
NDVM_INLINE bool fast_aliased(const FastRec& f, int i, uint8_t* touched) {
  if (!((f.alias >> i) & 1)) return false;
  touched[f.pid[i]] = 1;
  return true;
}

// The adjoint `a` of an operand with `n` elements gets cotangent ct(e), e < n, rounded to Real
// (as the general path's buffer holds it): stored when `first`, else added (accumulate_lanes'
// equal-size case).
template <class F>
NDVM_INLINE void fast_put(Real* __restrict a, uint32_t n, bool first, F ct) {
  if (first) {
    for (uint32_t e = 0; e < n; ++e) a[e] = static_cast<Real>(ct(e));
  } else {
    for (uint32_t e = 0; e < n; ++e) a[e] = a[e] + static_cast<Real>(ct(e));
  }
}

// Fills f's kernels, sizes and offsets for primitive `code` with output `out` on the one-lane
// operands `in` (n of them); false: it has no fast form. The caller sets the payload ids and
// taped bits.
bool fast_resolve(int code, const Payload& out, const Payload* const* in, int n, FastRec& f);

// The same for an output of W > 1 lanes (its lane form; f.S: its elements over all lanes).
bool fast_resolve_lanes(int code, const Payload& out, const Payload* const* in, int n,
                        FastRec& f);

// The lane form of a dot (K <= 4), matvec (r, c <= 4) or n x n matmul (n <= 4) whose operands
// and output are all full-width over W > 1 lanes (fast_products.cpp: one lane loop per record,
// FastOp::LANE_PRODUCTS; f.m holds W); false: none. Such forms run only when the run is fused
// (Interp::fused_form).
bool fast_resolve_lane_products(int code, const Payload& out, const Payload* const* in, int n,
                                FastRec& f);

// The lane form of a 2 x 2 `inv`, `logdet` or `det` of a full-width operand over W > 1 lanes
// (fast_square.cpp; f.m holds W, and for logdet/det f.c = 1 once off[1] holds the operand's
// inverse, Interp::find_inverses); false: none.
bool fast_resolve_lane_square(int code, const Payload& out, const Payload* const* in, int n,
                              FastRec& f);

// The VJP of a 2 x 2 `logdet` or `det` record (op LOGDET2 or DET2) that computes the inverse
// of its operand (reuse false) or reads it at the record's off[1] (reuse true).
FastVjp slogdet2_vjp_kernel(FastOp op, bool reuse);

struct FastKernels {
  FastForward forward;
  FastVjp vjp;
};

// Fused pairs (fast_pairs.cpp): the kernels of lane-form product `prod` (primitive
// `prod_code`: dot, matvec or matmul of K x K, K = 2, 3, 4) fused with the next record `cons`
// (primitive `cons_code`), a lane-form + or - of two full-width operands, or (prod a matvec)
// a lane-form dot, whose operand `u` is prod's output (read by nothing else); they run at
// cons's place (reading prod's record just before cons's in the same array), and prod's own
// record runs fast_skip_forward. Null: no fused form.
FastKernels pair_lane_kernels(int prod_code, int cons_code, const FastRec& prod,
                              const FastRec& cons, int u);
void fast_skip_forward(const FastRec& f, Real* v, LinalgScratch& scratch);

// Fused Gaussian updates (docs/native.md, "Fused updates"; fast_updates.cpp): 13 consecutive
// lane-form records of a tape, in this order, each output inner (read by later members only)
// but m2, P2 and nll2:
//   S = Pp + R; Si = inv S; K = Pp Si; Kv = K v; m2 = m + Kv; KP = K Pp; P2 = Pp - KP;
//   ld = logdet S; Siv = Si v; q = dot(v, Siv); s = ld + q + c; h = a s; nll2 = nll + h
// (2 x 2 matrices, 2-vectors and numbers over W lanes, their lane forms, or their one-lane
// forms at W = 1; c and a lane-uniform numbers). The
// last record runs the whole update in one lane loop, the inner values in registers, and the
// others run nothing forward; its VJP recomputes the inner values and gives Pp, R, v, m and
// nll their cotangents in one lane loop, with the unfused kernels' expressions in the
// unfused sweep's order (the same bits), or, when the sweep's state is not the one that loop
// is written for (an output without a cotangent, adjoint storage not shared as expected), runs
// the members' own forward and VJP kernels in order.
constexpr int kUpdateRecords = 13;
enum UpdateMember : int {
  UPD_S, UPD_SI, UPD_K, UPD_KV, UPD_M2, UPD_KP, UPD_P2, UPD_LD, UPD_SIV, UPD_Q, UPD_SUM, UPD_H,
  UPD_NLL
};

// A planned update: its members' own kernels (for the fallback and to swap back) and the
// fallback's scratch. Owned by the Interp; the last member's FastRec::update points to it.
struct UpdateGroup {
  uint32_t first = 0;     // the tape index of member UPD_S
  bool one_lane = false;  // W = 1: the members are one-lane forms
  FastForward fwd[kUpdateRecords] = {};
  FastVjp vjp[kUpdateRecords] = {};
  mutable LinalgScratch scratch;
  mutable int8_t storage = -1;  // the adjoint storage as the one-loop VJP expects (-1: unknown)
};

// The kernels a member runs while its update is on (UpdateMember k; one_lane: W = 1).
FastKernels update_member_kernels(int k, bool one_lane);
FastKernels update_one_lane_kernels(int k);

// The lane kernels of elementwise unary primitive `code` (kernels.cpp: the rows' own
// expressions over f.S contiguous elements; sqrt and log: their one-operand non-dmci rows, so
// a caller passes no dmci record); null: it has none.
FastKernels unary_lane_kernels(int code);

// The row kernels of elementwise unary primitive `code` (FastOp::ROWS, kernels.cpp): over
// f.S elements whose operand repeats one value over each row of f.m lanes, the row's own
// expressions evaluated once per row (the value spread over the row's lanes; the VJP's
// derivative once per row, times each lane's cotangent, the lane form's product); null: none.
FastKernels unary_row_kernels(int code);

// The lane kernels of / with n operands (1 or 2), bit i of bc: operand i an untaped
// lane-uniform number; null: none.
FastKernels div_lane_kernels(int n, unsigned bc);

}  // namespace ndvm
