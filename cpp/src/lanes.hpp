// Internal to the lane kernels (linalg_lanes.cpp, lu_lanes.cpp): operand views over lanes, the
// lane loops of sums of products, and the lane-parallel LU kernels. Payloads are element-major
// with the lane stride (kernels.hpp); every loop runs over contiguous lanes.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

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

// o[l] = a(l) * b(l); kAdd: o[l] = o[l] + a(l) * b(l) (the product added as
// accumulate_lanes adds a later cotangent).
template <bool kAdd = false>
inline void mul_lanes(Real* o, uint32_t W, const Real* a, size_t als, const Real* b,
                      size_t bls) {
  if (als && bls) {
    for (uint32_t l = 0; l < W; ++l) o[l] = kAdd ? o[l] + a[l] * b[l] : a[l] * b[l];
  } else {
    for (uint32_t l = 0; l < W; ++l) {
      o[l] = kAdd ? o[l] + a[l * als] * b[l * bls] : a[l * als] * b[l * bls];
    }
  }
}

// o[l] = 0.0 + x_0[l] y_0[l] + ... + x_{K-1}[l] y_{K-1}[l] with the sum in a register;
// kNeg: every term is (-x_t[l]) y_t[l]; kAdd: o[l] = o[l] + that sum (a later cotangent added
// into an adjoint: the same sum, then the addition accumulate_lanes would make). All rows
// full-width.
template <int K, bool kNeg, bool kAdd>
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
    o[l] = kAdd ? o[l] + acc : acc;
  }
}

// The sum over t < K of x_t(l) y_t(l) (0.0, then each term added in order) with rows of lane
// stride xls / yls (0: one value for every lane), added into o: o[l] = o[l] + sum. The sum is
// the one `fill(o, 0.0)` then `o[l] += x y` per term computes.
template <bool kNeg = false, class X, class Y>
NDVM_INLINE void add_sums(Real* o, uint32_t W, size_t K, X xrow, size_t xls, Y yrow,
                          size_t yls) {
  for (uint32_t l = 0; l < W; ++l) {
    Real acc = 0.0;
    for (size_t t = 0; t < K; ++t) {
      const Real xv = xrow(t)[l * xls];
      acc += (kNeg ? -xv : xv) * yrow(t)[l * yls];
    }
    o[l] = o[l] + acc;
  }
}

// The sum of products of K full-width row pairs (xrow(t), yrow(t)) into o (kAdd: added).
template <bool kNeg = false, bool kAdd = false, class X, class Y>
NDVM_INLINE void sop(Real* o, uint32_t W, size_t K, X xrow, Y yrow) {
  if (K >= 1 && K <= 4) {
    const Real* x[4];
    const Real* y[4];
    for (size_t t = 0; t < K; ++t) {
      x[t] = xrow(t);
      y[t] = yrow(t);
    }
    switch (K) {
      case 1: return sop_k<1, kNeg, kAdd>(o, W, x, y);
      case 2: return sop_k<2, kNeg, kAdd>(o, W, x, y);
      case 3: return sop_k<3, kNeg, kAdd>(o, W, x, y);
      default: return sop_k<4, kNeg, kAdd>(o, W, x, y);
    }
  }
  if (kAdd) return add_sums<kNeg>(o, W, K, xrow, 1, yrow, 1);
  fill(o, W, 0.0);
  for (size_t t = 0; t < K; ++t) {
    const Real* xp = xrow(t);
    const Real* yp = yrow(t);
    for (uint32_t l = 0; l < W; ++l) o[l] += (kNeg ? -xp[l] : xp[l]) * yp[l];
  }
}

// The sum of products of K row pairs into o (kAdd: added), rows of lane stride xls / yls: a
// register sum where both are full-width, else the output streamed term by term.
template <bool kAdd, class X, class Y>
NDVM_INLINE void sums_into(Real* o, uint32_t W, size_t K, X xrow, size_t xls, Y yrow,
                           size_t yls) {
  if (xls && yls) return sop<false, kAdd>(o, W, K, xrow, yrow);
  if (kAdd) return add_sums(o, W, K, xrow, xls, yrow, yls);
  fill(o, W, 0.0);
  for (size_t t = 0; t < K; ++t) fma_lanes(o, W, xrow(t), xls, yrow(t), yls);
}

// 2 x 2: lu_lanes.cpp's lane-parallel LU (factor + solve) for n = 2, operation for operation (partial pivoting with the
// first maximal row, l10 = a10 / a00, u11 = a11 - l10 a01, forward then back substitution),
// with each lane in registers and the pivoting as selects, so the lane loop vectorizes.
struct Lu2 {
  Real u00, u01, l10, u11;  // after the row swap: U = [u00 u01; 0 u11], L's multiplier l10
  bool swapped;
  bool singular;
};

NDVM_INLINE Lu2 lu2(Real a00, Real a01, Real a10, Real a11) {
  Lu2 f;
  f.swapped = std::fabs(a10) > std::fabs(a00);
  f.u00 = f.swapped ? a10 : a00;
  f.u01 = f.swapped ? a11 : a01;
  const Real r10 = f.swapped ? a00 : a10;
  const Real r11 = f.swapped ? a01 : a11;
  const bool zero = f.u00 == 0.0;  // singular column: the multiplier is not scaled
  const Real scaled = r10 / f.u00;  // computed on every lane (a select, not a branch)
  f.l10 = zero ? r10 : scaled;
  f.u11 = r11 - f.l10 * f.u01;
  f.singular = zero | (f.u11 == 0.0);
  return f;
}

struct Inv2 {
  Real b00, b01, b10, b11;
};

NDVM_INLINE Inv2 inverse2(Real a00, Real a01, Real a10, Real a11) {
  const Lu2 f = lu2(a00, a01, a10, a11);
  // B = P I; forward: B1 -= l10 B0; back: B1 /= u11; B0 -= u01 B1; B0 /= u00
  Real b00 = f.swapped ? 0.0 : 1.0, b01 = f.swapped ? 1.0 : 0.0;
  Real b10 = f.swapped ? 1.0 : 0.0, b11 = f.swapped ? 0.0 : 1.0;
  b10 -= f.l10 * b00;
  b11 -= f.l10 * b01;
  b10 /= f.u11;
  b11 /= f.u11;
  b00 -= f.u01 * b10;
  b01 -= f.u01 * b11;
  b00 /= f.u00;
  b01 /= f.u00;
  // singular, a non-finite entry, or an overflowing inverse: NaN (as linalg.py's _inv)
  const Real z = (a00 * 0.0 + a01 * 0.0) + (a10 * 0.0 + a11 * 0.0) +
                   ((b00 * 0.0 + b01 * 0.0) + (b10 * 0.0 + b11 * 0.0));  // NaN iff non-finite
  const bool bad = f.singular | (z != 0.0);
  const Real nan = std::numeric_limits<Real>::quiet_NaN();
  return {bad ? nan : b00, bad ? nan : b01, bad ? nan : b10, bad ? nan : b11};
}

// 2 x 2 slogdet: |u00|, |u11| (0 and 1 if singular, so that log|det| is -inf) and the sign
// (NaN for a matrix with a NaN entry, 0 if singular) of lu2's factorization.
struct Slogdet2 {
  Real d0, d1, sign;
};

NDVM_INLINE Slogdet2 slogdet2_parts(Real a00, Real a01, Real a10, Real a11) {
  const Lu2 f = lu2(a00, a01, a10, a11);
  // f.swapped, restated from the pivot itself (|a10| > |a00| <=> the pivot is a10 and not
  // a00): GCC 12 does not vectorize lane loops of this when the select reads the flag
  Real sign = (f.u00 == a10 && f.u00 != a00) ? -1.0 : 1.0;
  sign = f.u00 < 0 ? -sign : sign;
  sign = f.u11 < 0 ? -sign : sign;
  const bool nan = (a00 != a00) | (a01 != a01) | (a10 != a10) | (a11 != a11);
  Slogdet2 s;
  s.sign = nan ? std::numeric_limits<Real>::quiet_NaN() : (f.singular ? 0.0 : sign);
  s.d0 = f.singular ? 0.0 : std::fabs(f.u00);
  s.d1 = f.singular ? 1.0 : std::fabs(f.u11);
  return s;
}

// The result from log|det| and the sign: log|det|, or (det) the determinant sign *
// exp(log|det|); a NaN sign (a NaN entry) stays NaN.
NDVM_INLINE Real slogdet2_finish(Real logdet, Real sign, bool det) {
  const Real v = det ? sign * std::exp(logdet) : logdet;
  return sign != sign ? sign : v;
}

// log|det| (det: the determinant, sign * exp(log|det|)) from the parts; NaN stays NaN.
NDVM_INLINE Real slogdet2_value(const Slogdet2& s, bool det) {
  const Real logdet = log_abs_product(2, [&](int i) { return i == 0 ? s.d0 : s.d1; });
  return slogdet2_finish(logdet, s.sign, det);
}

// lu_lanes.cpp: out (n x n, W lanes) = inverse of m (transposed if asked); det or log|det|;
// and the VJPs of det/logdet (ct = f * inv(A)^T) and of inv (-ans^T G ans^T).
void soa_inverse(const Operand& m, Real* out, uint32_t W, LinalgScratch& s, bool transpose);
void soa_slogdet(const Operand& m, Real* out, uint32_t W, LinalgScratch& s, bool det);
// add: the cotangent is added into ct (an adjoint that already holds one) instead of stored.
void vjp_slogdet(bool det, const Real* g, const Real* ans, const Operand& A, Real* ct,
                 uint32_t W, LinalgScratch& s, bool add = false);
void vjp_inverse(const Real* g, const Real* ans, size_t n, Real* ct, uint32_t W,
                 LinalgScratch& s, bool add = false);

}  // namespace lanes
}  // namespace ndvm
