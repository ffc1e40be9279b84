// Internal to the lane kernels (linalg_lanes.cpp, lu_lanes.cpp): operand views over lanes, the
// lane loops of sums of products, and the lane-parallel LU kernels. Payloads are element-major
// with the lane stride (kernels.hpp); every loop runs over contiguous lanes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ndvm/kernels.hpp"

namespace ndvm {
namespace lanes {

struct Lanes {
  const Real* p;
  size_t es;
  size_t ls;
  const Real* row(size_t e) const { return p + e * es; }
};

inline Lanes lanes_of(const Operand& o) {
  return {o.p, o.size() > 1 ? static_cast<size_t>(o.width) : 0, o.width > 1 ? size_t{1} : 0};
}

inline Lanes lanes_out(const Real* p, uint32_t W) { return {p, W, 1}; }

// o[l] = init; o[l] += a(ea, l) * b(eb, l)
inline void fill(Real* o, uint32_t W, Real v) {
  for (uint32_t l = 0; l < W; ++l) o[l] = v;
}

inline void fma_lanes(Real* o, uint32_t W, const Real* a, size_t als, const Real* b,
                      size_t bls) {
  if (als && bls) {
    for (uint32_t l = 0; l < W; ++l) o[l] += a[l] * b[l];
  } else if (als) {
    const Real y = b[0];
    for (uint32_t l = 0; l < W; ++l) o[l] += a[l] * y;
  } else if (bls) {
    const Real x = a[0];
    for (uint32_t l = 0; l < W; ++l) o[l] += x * b[l];
  } else {
    for (uint32_t l = 0; l < W; ++l) o[l] += a[0] * b[0];
  }
}

inline void mul_lanes(Real* o, uint32_t W, const Real* a, size_t als, const Real* b,
                      size_t bls) {
  if (als && bls) {
    for (uint32_t l = 0; l < W; ++l) o[l] = a[l] * b[l];
  } else {
    for (uint32_t l = 0; l < W; ++l) o[l] = a[l * als] * b[l * bls];
  }
}

// o[l] = 0.0 + x_0[l] y_0[l] + ... + x_{K-1}[l] y_{K-1}[l] with the sum in a register;
// kNeg: every term is (-x_t[l]) y_t[l]. All rows full-width.
template <int K, bool kNeg>
NDVM_INLINE void sop_k(Real* __restrict o, uint32_t W, const Real* const* x,
                       const Real* const* y) {
  const Real* xs[K];
  const Real* ys[K];
  for (int t = 0; t < K; ++t) {
    xs[t] = x[t];
    ys[t] = y[t];
  }
  for (uint32_t l = 0; l < W; ++l) {
    Real acc = 0.0;
    for (int t = 0; t < K; ++t) acc += (kNeg ? -xs[t][l] : xs[t][l]) * ys[t][l];
    o[l] = acc;
  }
}

// The sum of products of K full-width row pairs (xrow(t), yrow(t)) into o.
template <bool kNeg = false, class X, class Y>
NDVM_INLINE void sop(Real* o, uint32_t W, size_t K, X xrow, Y yrow) {
  if (K >= 1 && K <= 4) {
    const Real* x[4];
    const Real* y[4];
    for (size_t t = 0; t < K; ++t) {
      x[t] = xrow(t);
      y[t] = yrow(t);
    }
    switch (K) {
      case 1: return sop_k<1, kNeg>(o, W, x, y);
      case 2: return sop_k<2, kNeg>(o, W, x, y);
      case 3: return sop_k<3, kNeg>(o, W, x, y);
      default: return sop_k<4, kNeg>(o, W, x, y);
    }
  }
  fill(o, W, 0.0);
  for (size_t t = 0; t < K; ++t) {
    const Real* xp = xrow(t);
    const Real* yp = yrow(t);
    for (uint32_t l = 0; l < W; ++l) o[l] += (kNeg ? -xp[l] : xp[l]) * yp[l];
  }
}

// lu_lanes.cpp: out (n x n, W lanes) = inverse of m (transposed if asked); det or log|det|;
// and the VJPs of det/logdet (ct = f * inv(A)^T) and of inv (-ans^T G ans^T).
void soa_inverse(const Operand& m, Real* out, uint32_t W, LinalgScratch& s, bool transpose);
void soa_slogdet(const Operand& m, Real* out, uint32_t W, LinalgScratch& s, bool det);
void vjp_slogdet(bool det, const Real* g, const Real* ans, const Operand& A, Real* ct,
                 uint32_t W, LinalgScratch& s);
void vjp_inverse(const Real* g, const Real* ans, size_t n, Real* ct, uint32_t W,
                 LinalgScratch& s);

}  // namespace lanes
}  // namespace ndvm
