// Internal to the elementwise kernels (kernels.cpp): operand views broadcast to (S, W), the
// element maps the rows are written with (contiguous lane loops that vectorize), NumPy's
// conventions at kinks, and the argument records of a forward and a VJP row.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "ndvm/fast.hpp"
#include "ndvm/kernels.hpp"

namespace ndvm::ew {

constexpr Real kDmciEps = 1e-8;
constexpr Real kTwoOverSqrtPi = 1.1283791670955126;  // 2 / sqrt(pi)

// Element e of lane l of an operand broadcast to (S, W): p[e * es + l * ls].
struct Src {
  const Real* p;
  size_t es;
  size_t ls;
  Real at(size_t e, size_t l) const { return p[e * es + l * ls]; }
};

Src src_of(const Operand& o) {
  return {o.p, o.size() > 1 ? static_cast<size_t>(o.width) : 0, o.width > 1 ? size_t{1} : 0};
}

Src src_out(const Real* p, uint32_t W, size_t S) {
  return {p, S > 1 ? static_cast<size_t>(W) : 0, W > 1 ? size_t{1} : 0};
}

// One element row of W lanes: o[l] = f(a[l * als], ...) with als 1 (one value per lane) or
// 0 (one value for every lane). The maps below run the rows of S elements, S == 1 (a number
// per lane, the commonest case) without the element loop's setup.
template <class F>
NDVM_INLINE void row1(Real* __restrict o, uint32_t W, const Real* ap, size_t als, F f) {
  if (als) {
    for (uint32_t l = 0; l < W; ++l) o[l] = f(ap[l]);
  } else {
    const Real x = ap[0];
    for (uint32_t l = 0; l < W; ++l) o[l] = f(x);
  }
}

template <class F>
NDVM_INLINE void row2(Real* __restrict o, uint32_t W, const Real* ap, size_t als, const Real* bp,
                      size_t bls, F f) {
  if (als && bls) {
    for (uint32_t l = 0; l < W; ++l) o[l] = f(ap[l], bp[l]);
  } else if (als) {
    const Real y = bp[0];
    for (uint32_t l = 0; l < W; ++l) o[l] = f(ap[l], y);
  } else if (bls) {
    const Real x = ap[0];
    for (uint32_t l = 0; l < W; ++l) o[l] = f(x, bp[l]);
  } else {
    const Real x = ap[0];
    const Real y = bp[0];
    for (uint32_t l = 0; l < W; ++l) o[l] = f(x, y);
  }
}

template <class F>
NDVM_INLINE void row3(Real* __restrict o, uint32_t W, const Real* ap, size_t als, const Real* bp,
                      size_t bls, const Real* cp, size_t cls, F f) {
  if (als && bls && cls) {
    for (uint32_t l = 0; l < W; ++l) o[l] = f(ap[l], bp[l], cp[l]);
  } else {
    for (uint32_t l = 0; l < W; ++l) o[l] = f(ap[l * als], bp[l * bls], cp[l * cls]);
  }
}

// o = f(o, b) on one row, in place (o's own elements as the first operand).
template <class F>
NDVM_INLINE void row_into(Real* o, uint32_t W, const Real* bp, size_t bls, F f) {
  if (bls) {
    for (uint32_t l = 0; l < W; ++l) o[l] = f(o[l], bp[l]);
  } else {
    const Real y = bp[0];
    for (uint32_t l = 0; l < W; ++l) o[l] = f(o[l], y);
  }
}

// The maps write an output that none of their operands overlaps (restrict: their vector loops
// need no runtime overlap checks); map2_into updates its output in place.
template <class F>
NDVM_INLINE void map1(Real* __restrict o, uint32_t W, size_t S, Src a, F f) {
  if (S == 1) return row1(o, W, a.p, a.ls, f);
  for (size_t e = 0; e < S; ++e) row1(o + e * W, W, a.p + e * a.es, a.ls, f);
}

template <class F>
NDVM_INLINE void map2(Real* __restrict o, uint32_t W, size_t S, Src a, Src b, F f) {
  if (S == 1) return row2(o, W, a.p, a.ls, b.p, b.ls, f);
  for (size_t e = 0; e < S; ++e) {
    row2(o + e * W, W, a.p + e * a.es, a.ls, b.p + e * b.es, b.ls, f);
  }
}

template <class F>
NDVM_INLINE void map3(Real* __restrict o, uint32_t W, size_t S, Src a, Src b, Src c, F f) {
  if (S == 1) return row3(o, W, a.p, a.ls, b.p, b.ls, c.p, c.ls, f);
  for (size_t e = 0; e < S; ++e) {
    row3(o + e * W, W, a.p + e * a.es, a.ls, b.p + e * b.es, b.ls, c.p + e * c.es, c.ls, f);
  }
}

template <class F>
NDVM_INLINE void map2_into(Real* o, uint32_t W, size_t S, Src b, F f) {
  if (S == 1) return row_into(o, W, b.p, b.ls, f);
  for (size_t e = 0; e < S; ++e) row_into(o + e * W, W, b.p + e * b.es, b.ls, f);
}

// out = fold(op, init, args) left to right, as the reference's `_fold`/`_add`/`_mul`.
template <class F>
NDVM_INLINE void fold(Real* o, uint32_t W, size_t S, const Operand* args, int n, F f) {
  map1(o, W, S, src_of(args[0]), [](Real x) { return x; });
  for (int j = 1; j < n; ++j) map2_into(o, W, S, src_of(args[j]), f);
}

inline void fill_value(Real* o, uint32_t W, size_t S, Real v) {
  for (size_t k = 0; k < S * W; ++k) o[k] = v;
}

inline Real np_minimum(Real a, Real b) { return (a < b || a != a) ? a : b; }
inline Real np_maximum(Real a, Real b) { return (a > b || a != a) ? a : b; }
inline Real np_sign(Real x) {
  if (x > 0) return 1.0;
  if (x < 0) return -1.0;
  if (x == 0) return 0.0;
  return x;
}
inline Real np_mod(Real a, Real b) {
  Real mod = std::fmod(a, b);
  if (b == 0.0) return mod;
  if (mod != 0.0) {
    if ((b < 0) != (mod < 0)) mod += b;
  } else {
    mod = std::copysign(0.0, b);
  }
  return mod;
}
inline Real sigmoid(Real x) {
  const Real e = std::exp(-std::fabs(x));
  return x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}
inline Real softplus(Real x) { return np_maximum(x, 0.0) + std::log1p(std::exp(-std::fabs(x))); }
inline Real dmci_clamp(Real x) { return np_maximum(x, kDmciEps); }

// Arguments of a forward row: out has W lanes of S elements.
struct Fw {
  bool dmci;
  const Operand* args;
  int n;
  Real* out;
  uint32_t W;
  size_t S;
  Src a(int j) const { return src_of(args[j]); }
};

// Arguments of a VJP row: g, ans are (S, W) buffers of the output; ct gets (S, W).
struct Bw {
  bool dmci;
  const Real* gp;
  const Real* ansp;
  const Operand* args;
  int n;
  int which;
  Real* ct;
  uint32_t W;
  size_t S;
  Src g() const { return src_out(gp, W, S); }
  Src ans() const { return src_out(ansp, W, S); }
  Src a(int j) const { return src_of(args[j]); }
  Real x(int j, size_t e, uint32_t l) const { return src_of(args[j]).at(e, l); }
};

// ct = f(e, l, g, ans) element by element (the general VJP shape; operands read by index).
template <class F>
NDVM_INLINE Grad each(const Bw& c, F f) {
  const Src g = c.g();
  const Src ans = c.ans();
  for (size_t e = 0; e < c.S; ++e) {
    for (uint32_t l = 0; l < c.W; ++l) c.ct[e * c.W + l] = f(e, l, g.at(e, l), ans.at(e, l));
  }
  return Grad::WRITTEN;
}

}  // namespace ndvm::ew
