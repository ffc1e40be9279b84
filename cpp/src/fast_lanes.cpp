// Lane forms (fast.hpp) of + - * (and scale): which records over W > 1 lanes qualify, and
// their kernels, which loop over the S x W output elements with the general kernels' rows'
// expression per element (an operand may also be a one-lane row of S elements: data); / and the elementwise unary primitives take kernels.cpp's lane
// kernels.
#include "ndvm/fast.hpp"

#include "ndvm/prims.hpp"

#include "fast_ew.hpp"

namespace ndvm {
namespace {

using fast_ew::ew_cotangent;
using fast_ew::ew_value;
using fast_ew::fits32;
using Kernels = FastKernels;

// ---- W lanes: elementwise + - * of up to three operands (kernels.cpp's map rows) ----------
// f.S counts the output's elements over its lanes (S x W, contiguous); operand i is read at the
// same index, or (bit i of BC, an untaped lane-uniform number) is one value for all of them.
// The rows of the general kernels evaluate the same expression element by element.

template <int N, unsigned BC>
struct LaneArgs {
  const Real* p[N];
  Real s[N];
  LaneArgs(const FastRec& f, const Real* v) {
    for (int i = 0; i < N; ++i) {
      p[i] = v + f.off[i];
      s[i] = p[i][0];
    }
  }
  Real operator()(int i, uint32_t k) const { return (BC >> i) & 1 ? s[i] : p[i][k]; }
};

template <FastOp OP, int N, unsigned BC>
NDVM_SIMD void lanes_forward(const FastRec& f, Real* v, LinalgScratch&) {
  const LaneArgs<N, BC> x(f, v);
  Real* __restrict o = v + f.out;
  const uint32_t n = f.S;
  for (uint32_t k = 0; k < n; ++k) o[k] = ew_value(OP, N, [&](int i) { return x(i, k); });
}

// Each taped operand (never a broadcast one) gets its cotangent, stored or added.
template <FastOp OP, int N, unsigned BC>
NDVM_SIMD void lanes_vjp(const FastRec& f, const Real* v, Real* adj, uint8_t* touched) {
  const LaneArgs<N, BC> x(f, v);
  const Real* g = adj + f.aout;
  for (int i = 0; i < N; ++i) {
    if (!((f.taped >> i) & 1) || fast_aliased(f, i, touched)) continue;
    bool first = false;
    Real* a = fast_target(f, i, adj, touched, first);
    fast_put(a, f.S, first, [&](uint32_t k) {
      return ew_cotangent(OP, N, i, g[k], [&](int j) { return x(j, k); });
    });
  }
}

// ---- W lanes: + - * of two operands, one of them a row (bit i of RB: operand i is an untaped
// one-lane payload of the output's S elements, element e shared by every lane; f.r: S, f.m:
// W). The other operand is full-width; the same expression per element as the rows above.

template <FastOp OP, unsigned RB>
NDVM_SIMD void rows_forward(const FastRec& f, Real* v, LinalgScratch&) {
  const Real* p[2] = {v + f.off[0], v + f.off[1]};
  const uint32_t W = f.m;
  for (uint32_t e = 0; e < f.r; ++e) {
    Real* __restrict o = v + f.out + size_t{e} * W;
    const Real* x = p[RB & 1 ? 1 : 0] + size_t{e} * W;
    const Real row = p[RB & 1 ? 0 : 1][e];
    for (uint32_t l = 0; l < W; ++l) {
      o[l] = ew_value(OP, 2, [&](int i) { return (RB >> i) & 1 ? row : x[l]; });
    }
  }
}

template <FastOp OP, unsigned RB>
NDVM_SIMD void rows_vjp(const FastRec& f, const Real* v, Real* adj, uint8_t* touched) {
  constexpr int kFull = RB & 1 ? 1 : 0;  // the taped operand
  if (!((f.taped >> kFull) & 1) || fast_aliased(f, kFull, touched)) return;
  const Real* p[2] = {v + f.off[0], v + f.off[1]};
  const uint32_t W = f.m;
  bool first = false;
  Real* a = fast_target(f, kFull, adj, touched, first);
  for (uint32_t e = 0; e < f.r; ++e) {
    const Real* g = adj + f.aout + size_t{e} * W;
    const Real* x = p[kFull] + size_t{e} * W;
    const Real row = p[1 - kFull][e];
    fast_put(a + size_t{e} * W, W, first, [&](uint32_t l) {
      return ew_cotangent(OP, 2, kFull, g[l], [&](int j) { return j == kFull ? x[l] : row; });
    });
  }
}

template <FastOp OP>
Kernels rows_kernels(unsigned rb) {
  if (rb == 1) return {&rows_forward<OP, 1>, &rows_vjp<OP, 1>};
  return {&rows_forward<OP, 2>, &rows_vjp<OP, 2>};
}

// The lane kernels of N operands with broadcast bits bc (every BC from B up instantiated).
template <FastOp OP, int N, unsigned B = 0>
Kernels lanes_bc(unsigned bc) {
  if constexpr (B + 1 < (1u << N)) {
    if (bc != B) return lanes_bc<OP, N, B + 1>(bc);
  }
  return {&lanes_forward<OP, N, B>, &lanes_vjp<OP, N, B>};
}

template <FastOp OP>
Kernels lanes_kernels(const FastRec& f) {
  if (f.n == 1) return lanes_bc<OP, 1>(f.scalar);
  return f.n == 2 ? lanes_bc<OP, 2>(f.scalar) : lanes_bc<OP, 3>(f.scalar);
}

// The lane form of + - * (and scale) over W-lane operands, of / (one or two operands), or of
// an elementwise unary primitive, sqrt or one-operand log (their kernels from kernels.cpp);
// false: none. Operands are of the output's shape and lanes, or untaped lane-uniform numbers
// (+ - * / only). The caller never asks for a dmci record.
bool resolve_lanes(int code, const Payload& out, const Payload* const* in, int n, FastRec& f) {
  if (code < 0 || code >= kPrimCodeLimit || n == 0 || n > 3 || out.width < 2 || !fits32(out)) {
    return false;
  }
  const Prim p = static_cast<Prim>(code);
  const bool arith = p == Prim::ADD || p == Prim::SUB || p == Prim::MUL || p == Prim::SCALE;
  const bool div = p == Prim::DIV;
  if (div && n > 2) return false;
  unsigned rows = 0;  // bit i: operand i is a row (rows_kernels)
  for (int i = 0; i < n; ++i) {
    const Payload& a = *in[i];
    const bool whole = a.width == out.width && a.size() == out.size();
    const bool uniform = (arith || div) && a.width == 1 && a.size() == 1 && !a.taped;
    const bool row = arith && n == 2 && a.width == 1 && a.size() == out.size() && !a.taped;
    if (!(whole || uniform || row) || !fits32(a)) return false;
    if (uniform) f.scalar |= static_cast<uint8_t>(1u << i);
    if (row && !uniform) rows |= 1u << i;
  }
  if (rows != 0 && (f.scalar != 0 || rows == 3)) return false;
  f.n = static_cast<uint8_t>(n);
  f.S = static_cast<uint32_t>(out.count());
  f.out = static_cast<uint32_t>(out.off);
  for (int i = 0; i < n; ++i) f.off[i] = static_cast<uint32_t>(in[i]->off);
  f.op = p == Prim::ADD ? FastOp::ADD : p == Prim::SUB ? FastOp::SUB : FastOp::MUL;
  if (!arith) f.op = FastOp::UNARY;
  Kernels k{nullptr, nullptr};
  if (div) k = div_lane_kernels(n, f.scalar);
  if (f.op == FastOp::UNARY && !div && n == 1) k = unary_lane_kernels(code);
  if (rows != 0) {
    f.r = static_cast<uint32_t>(out.size());
    f.m = out.width;
    if (f.op == FastOp::ADD) k = rows_kernels<FastOp::ADD>(rows);
    if (f.op == FastOp::SUB) k = rows_kernels<FastOp::SUB>(rows);
    if (f.op == FastOp::MUL) k = rows_kernels<FastOp::MUL>(rows);
  } else if (f.op == FastOp::ADD) {
    k = lanes_kernels<FastOp::ADD>(f);
  } else if (f.op == FastOp::SUB) {
    k = lanes_kernels<FastOp::SUB>(f);
  } else if (f.op == FastOp::MUL) {
    k = lanes_kernels<FastOp::MUL>(f);
  }
  f.forward = k.forward;
  f.vjp = k.vjp;
  return f.forward != nullptr;
}

}  // namespace

bool fast_resolve_lanes(int code, const Payload& out, const Payload* const* in, int n,
                        FastRec& f) {
  return fast_resolve_lane_products(code, out, in, n, f) ||
         fast_resolve_lane_square(code, out, in, n, f) || resolve_lanes(code, out, in, n, f);
}

}  // namespace ndvm
