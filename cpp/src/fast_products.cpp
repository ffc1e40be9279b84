// Lane forms (fast.hpp) of the small sums of products over W > 1 lanes: dot of vectors of up
// to 4 elements, matvec of an r x c matrix (r, c <= 4) and matmul of n x n matrices (n <= 4),
// every operand full-width (one value per lane). The general kernels (linalg_lanes.cpp's
// forward_sums / vjp_sums) run one lane loop per output element; these run one lane loop per
// record, with every element of a lane in registers, so a record costs one loop's overhead
// instead of one per element. Each element is the same expression in the same order as there:
// 0.0, then + x_t y_t for t = 0, 1, ... with the same factors in the same order; a cotangent
// is stored into an operand's adjoint when it is the first, else added (o + sum), as
// vjp_sums<false> / vjp_sums<true> write it. Operands are handled in order (operand 0's
// cotangent lands before operand 1's is computed), so an operand given twice gets the sum the
// general sweep gives it.
//
// These forms are the "fused" path: with RunOptions.fused off, replay and the reverse sweep
// run such records through the general path instead (Interp::fused_form), which is what
// tests/native/test_fused_vjp.py compares them against, bitwise.
#include "ndvm/fast.hpp"
#include "ndvm/prims.hpp"

#include "fast_ew.hpp"

namespace ndvm {
namespace {

// Operand `i`'s element e of lane l: v[off[i] + e * W + l]; kernels read W from f.m (the
// lanes: a record's sizes live in its template arguments).
struct Rows {
  const Real* __restrict p;
  uint32_t W;
  const Real* row(uint32_t e) const { return p + size_t{e} * W; }
};

// One lane loop writing (kFirst) or adding the K-term sums of products of every output
// element; X / Y give the factor pointers of output element e, term t.
template <int E, int K, bool kFirst, class X, class Y>
NDVM_INLINE void sums_lanes(Real* __restrict o, uint32_t W, X x, Y y) {
  const Real* xs[E][K];
  const Real* ys[E][K];
  for (int e = 0; e < E; ++e) {
    for (int t = 0; t < K; ++t) {
      xs[e][t] = x(e, t);
      ys[e][t] = y(e, t);
    }
  }
#pragma GCC ivdep
  for (uint32_t l = 0; l < W; ++l) {
    for (int e = 0; e < E; ++e) {
      Real acc = 0.0;
      for (int t = 0; t < K; ++t) acc += xs[e][t][l] * ys[e][t][l];
      Real* oe = o + size_t(e) * W;
      oe[l] = kFirst ? acc : oe[l] + acc;
    }
  }
}

// One lane loop of the products o(e) = x(e) y(e) (kFirst: stored, else added).
template <int E, bool kFirst, class X, class Y>
NDVM_INLINE void products_lanes(Real* __restrict o, uint32_t W, X x, Y y) {
  const Real* xs[E];
  const Real* ys[E];
  for (int e = 0; e < E; ++e) {
    xs[e] = x(e);
    ys[e] = y(e);
  }
#pragma GCC ivdep
  for (uint32_t l = 0; l < W; ++l) {
    for (int e = 0; e < E; ++e) {
      const Real v = xs[e][l] * ys[e][l];
      Real* oe = o + size_t(e) * W;
      oe[l] = kFirst ? v : oe[l] + v;
    }
  }
}

// Operand i's adjoint (and whether this is its first cotangent) if it is taped, else null.
NDVM_INLINE Real* target(const FastRec& f, int i, Real* adj, uint8_t* touched, bool& first) {
  if (!((f.taped >> i) & 1)) return nullptr;
  return fast_target(f, i, adj, touched, first);
}

// ---- dot of two K-vectors ------------------------------------------------------------------

template <int K>
NDVM_SIMD void dot_forward(const FastRec& f, Real* v, LinalgScratch&) {
  const Rows a{v + f.off[0], f.m}, b{v + f.off[1], f.m};
  sums_lanes<1, K, true>(v + f.out, f.m, [&](int, int t) { return a.row(t); },
                         [&](int, int t) { return b.row(t); });
}

// ct_i = g other_i (vjp_sums: mul_lanes of g by the other operand)
template <int K>
NDVM_SIMD void dot_vjp(const FastRec& f, const Real* v, Real* adj, uint8_t* touched) {
  const uint32_t W = f.m;
  const Rows g{adj + f.aout, W};
  for (int i = 0; i < 2; ++i) {
    bool first = false;
    Real* ct = target(f, i, adj, touched, first);
    if (ct == nullptr) continue;
    const Rows other{v + f.off[1 - i], W};
    auto x = [&](int) { return g.row(0); };
    auto y = [&](int e) { return other.row(static_cast<uint32_t>(e)); };
    if (first) {
      products_lanes<K, true>(ct, W, x, y);
    } else {
      products_lanes<K, false>(ct, W, x, y);
    }
  }
}

// ---- matvec of an R x C matrix and a C-vector ----------------------------------------------

template <int R, int C>
NDVM_SIMD void matvec_forward(const FastRec& f, Real* v, LinalgScratch&) {
  const Rows a{v + f.off[0], f.m}, x{v + f.off[1], f.m};
  sums_lanes<R, C, true>(v + f.out, f.m,
                         [&](int i, int j) { return a.row(static_cast<uint32_t>(i * C + j)); },
                         [&](int, int j) { return x.row(static_cast<uint32_t>(j)); });
}

// which 0: ct(i, j) = g_i x_j; which 1: ct_j = sum_i a(i, j) g_i
template <int R, int C>
NDVM_SIMD void matvec_vjp(const FastRec& f, const Real* v, Real* adj, uint8_t* touched) {
  const uint32_t W = f.m;
  const Rows g{adj + f.aout, W}, a{v + f.off[0], W}, x{v + f.off[1], W};
  bool first = false;
  if (Real* ct = target(f, 0, adj, touched, first)) {
    auto gx = [&](int e) { return g.row(static_cast<uint32_t>(e / C)); };
    auto xx = [&](int e) { return x.row(static_cast<uint32_t>(e % C)); };
    if (first) {
      products_lanes<R * C, true>(ct, W, gx, xx);
    } else {
      products_lanes<R * C, false>(ct, W, gx, xx);
    }
  }
  if (Real* ct = target(f, 1, adj, touched, first)) {
    auto ax = [&](int j, int i) { return a.row(static_cast<uint32_t>(i * C + j)); };
    auto gy = [&](int, int i) { return g.row(static_cast<uint32_t>(i)); };
    if (first) {
      sums_lanes<C, R, true>(ct, W, ax, gy);
    } else {
      sums_lanes<C, R, false>(ct, W, ax, gy);
    }
  }
}

// ---- matmul of N x N matrices --------------------------------------------------------------

template <int N>
NDVM_SIMD void matmul_forward(const FastRec& f, Real* v, LinalgScratch&) {
  const Rows a{v + f.off[0], f.m}, b{v + f.off[1], f.m};
  sums_lanes<N * N, N, true>(
      v + f.out, f.m, [&](int e, int k) { return a.row(static_cast<uint32_t>(e / N * N + k)); },
      [&](int e, int k) { return b.row(static_cast<uint32_t>(k * N + e % N)); });
}

// which 0: ct(i, k) = sum_j g(i, j) b(k, j); which 1: ct(k, j) = sum_i a(i, k) g(i, j)
template <int N>
NDVM_SIMD void matmul_vjp(const FastRec& f, const Real* v, Real* adj, uint8_t* touched) {
  const uint32_t W = f.m;
  const Rows g{adj + f.aout, W}, a{v + f.off[0], W}, b{v + f.off[1], W};
  bool first = false;
  if (Real* ct = target(f, 0, adj, touched, first)) {
    auto gx = [&](int e, int j) { return g.row(static_cast<uint32_t>(e / N * N + j)); };
    auto by = [&](int e, int j) { return b.row(static_cast<uint32_t>(e % N * N + j)); };
    if (first) {
      sums_lanes<N * N, N, true>(ct, W, gx, by);
    } else {
      sums_lanes<N * N, N, false>(ct, W, gx, by);
    }
  }
  if (Real* ct = target(f, 1, adj, touched, first)) {
    auto ax = [&](int e, int i) { return a.row(static_cast<uint32_t>(i * N + e / N)); };
    auto gy = [&](int e, int i) { return g.row(static_cast<uint32_t>(i * N + e % N)); };
    if (first) {
      sums_lanes<N * N, N, true>(ct, W, ax, gy);
    } else {
      sums_lanes<N * N, N, false>(ct, W, ax, gy);
    }
  }
}

// ---- kernel tables -------------------------------------------------------------------------

template <int K>
FastKernels dot_k(uint32_t k) {
  if constexpr (K < 4) {
    if (k != K) return dot_k<K + 1>(k);
  }
  return {&dot_forward<K>, &dot_vjp<K>};
}

template <int R, int C>
FastKernels matvec_k(uint32_t r, uint32_t c) {
  if constexpr (C < 4) {
    if (c != C) return matvec_k<R, C + 1>(r, c);
  }
  if constexpr (R < 4) {
    if (r != R) return matvec_k<R + 1, 1>(r, c);
  }
  return {&matvec_forward<R, C>, &matvec_vjp<R, C>};
}

template <int N>
FastKernels matmul_k(uint32_t n) {
  if constexpr (N < 4) {
    if (n != N) return matmul_k<N + 1>(n);
  }
  return {&matmul_forward<N>, &matmul_vjp<N>};
}

bool full_width(const Payload& p, uint32_t W) { return p.width == W && fast_ew::fits32(p); }

}  // namespace

bool fast_resolve_lane_products(int code, const Payload& out, const Payload* const* in, int n,
                                FastRec& f) {
  const uint32_t W = out.width;
  if (n != 2 || W < 2 || !full_width(out, W) || !full_width(*in[0], W) ||
      !full_width(*in[1], W)) {
    return false;
  }
  const Prim p = static_cast<Prim>(code);
  const uint32_t r = in[0]->rows, c = in[0]->cols;
  const auto small = [](uint32_t k) { return k >= 1 && k <= 4; };
  FastKernels k{nullptr, nullptr};
  if (p == Prim::DOT && in[0]->rank == 1 && small(r) && in[1]->rows == r) k = dot_k<1>(r);
  if (p == Prim::MATVEC && in[0]->rank == 2 && small(r) && small(c) && in[1]->rows == c) {
    k = matvec_k<1, 1>(r, c);
  }
  if (p == Prim::MATMUL && in[0]->rank == 2 && small(r) && r == c && in[1]->rows == c &&
      in[1]->cols == c) {
    k = matmul_k<1>(r);
  }
  if (k.forward == nullptr) return false;
  f.op = FastOp::LANE_PRODUCTS;
  f.n = 2;
  f.r = r;
  f.c = c;
  f.m = W;
  f.S = static_cast<uint32_t>(out.count());
  f.out = static_cast<uint32_t>(out.off);
  f.off[0] = static_cast<uint32_t>(in[0]->off);
  f.off[1] = static_cast<uint32_t>(in[1]->off);
  f.forward = k.forward;
  f.vjp = k.vjp;
  return true;
}

}  // namespace ndvm
