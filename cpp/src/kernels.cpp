// Elementwise forward and VJP kernels, one row per primitive: each NUMERIC elementwise
// primitive is a `fwd_X` / `vjp_X` pair defined next to each other below, and the table
// indexed by opcode is built from the generated primitive list (prims.inc), so a primitive
// without its row does not compile. Every formula mirrors the float64 reference rule next to
// the primitive's declaration in src/ndvm/prims/numeric.py (same operation order, same
// conventions at kinks, IEEE results, never a trap). Lane loops are contiguous and call
// nothing through pointers, so they vectorize (see NDVM_SIMD).
#include <array>
#include <cmath>
#include <limits>
#include <new>

#include "ndvm/fast.hpp"
#include "ndvm/kernels.hpp"
#include "ndvm/prims.hpp"
#include "ndvm/vmath.hpp"
#include "kernel_maps.hpp"

namespace ndvm {
namespace {

using namespace ew;  // NOLINT: the maps and records of kernel_maps.hpp

// ---- unary rows: forward value FWD(x), derivative DER(ans, x); the VJP is g * DER ---------
// Each row also has its lane form (fast.hpp): the same expressions over a record's f.S
// contiguous elements, the cotangent (rounded to Real, as the general path's buffer holds it)
// stored into the operand's adjoint (its first) or added (as accumulate_lanes does).

template <class F>
NDVM_INLINE void lanes_map(Real* __restrict o, const Real* x, uint32_t n, F fn) {
  for (uint32_t k = 0; k < n; ++k) o[k] = fn(x[k]);
}

// Operand i's adjoint gets ct(k), k < f.S: stored when it is its first cotangent, else added.
template <class F>
NDVM_INLINE void lanes_put(const FastRec& f, int i, Real* adj, uint8_t* touched, F ct) {
  bool first = false;
  Real* a = fast_target(f, i, adj, touched, first);
  fast_put(a, f.S, first, ct);
}

template <class F>
NDVM_INLINE void lanes_vjp(const FastRec& f, const Real* v, Real* adj, uint8_t* touched, F ct) {
  if (!(f.taped & 1)) return;
  const Real* g = adj + f.aout;
  const Real* ans = v + f.out;
  const Real* x = v + f.off[0];
  lanes_put(f, 0, adj, touched, [&](uint32_t k) { return ct(g[k], ans[k], x[k]); });
}

// Row forms (FastOp::ROWS): the operand holds one value per row of f.m lanes (a parameter's
// leaf), so FWD and DER are evaluated once per row and spread over its lanes; each lane's
// cotangent is still g * DER, the lane form's product of the same values.
template <class F>
NDVM_INLINE void rows_map(Real* __restrict o, const Real* x, uint32_t S, uint32_t m, F fn) {
  for (uint32_t k0 = 0; k0 < S; k0 += m) {
    const Real y = fn(x[k0]);
    Real* __restrict row = o + k0;  // (o[k0 + k] in 32 bits would not vectorize)
    for (uint32_t k = 0; k < m; ++k) row[k] = y;
  }
}

template <class F>
NDVM_INLINE void rows_vjp(const FastRec& f, const Real* v, Real* adj, uint8_t* touched, F der) {
  if (!(f.taped & 1)) return;
  bool first = false;
  Real* a = fast_target(f, 0, adj, touched, first);
  for (uint32_t k0 = 0; k0 < f.S; k0 += f.m) {
    const auto d = der(v[f.out + k0], v[f.off[0] + k0]);  // DER(ans, x) of the row
    const Real* __restrict g = adj + f.aout + k0;
    fast_put(a + k0, f.m, first, [&](uint32_t e) { return g[e] * d; });
  }
}

#define NDVM_UNARY(UP, FWD, DER)                                                              \
  NDVM_SIMD void fwd_##UP(const Fw& k) {                                                      \
    map1(k.out, k.W, k.S, k.a(0), [](Real x) { return FWD; });                              \
  }                                                                                           \
  NDVM_SIMD Grad vjp_##UP(const Bw& k) {                                                      \
    map3(k.ct, k.W, k.S, k.g(), k.ans(), k.a(0),                                              \
         [](Real g, [[maybe_unused]] Real ans, [[maybe_unused]] Real x) {               \
           return g * (DER);                                                                  \
         });                                                                                  \
    return Grad::WRITTEN;                                                                     \
  }                                                                                           \
  NDVM_SIMD void lanes_fwd_##UP(const FastRec& f, Real* v, LinalgScratch&) {                  \
    lanes_map(v + f.out, v + f.off[0], f.S, [](Real x) { return FWD; });                      \
  }                                                                                           \
  NDVM_SIMD void lanes_vjp_##UP(const FastRec& f, const Real* v, Real* adj, uint8_t* t) {    \
    lanes_vjp(f, v, adj, t, [](Real g, [[maybe_unused]] Real ans, [[maybe_unused]] Real x) {  \
      return g * (DER);                                                                       \
    });                                                                                       \
  }                                                                                           \
  NDVM_SIMD void rows_fwd_##UP(const FastRec& f, Real* v, LinalgScratch&) {                   \
    rows_map(v + f.out, v + f.off[0], f.S, f.m, [](Real x) { return FWD; });                  \
  }                                                                                           \
  NDVM_SIMD void rows_vjp_##UP(const FastRec& f, const Real* v, Real* adj, uint8_t* t) {     \
    rows_vjp(f, v, adj, t, []([[maybe_unused]] Real ans, [[maybe_unused]] Real x) {           \
      return DER;                                                                           \
    });                                                                                     \
  }

// piecewise-constant: no gradient flows
#define NDVM_PIECEWISE(UP, FWD)                                                               \
  NDVM_SIMD void fwd_##UP(const Fw& k) {                                                      \
    map1(k.out, k.W, k.S, k.a(0), [](Real x) { return FWD; });                              \
  }                                                                                           \
  Grad vjp_##UP(const Bw&) { return Grad::NONE; }

#define NDVM_UNARY_ROWS(X)  \
  X(ABS, std::fabs(x), np_sign(x)) \
  X(LOG1P, std::log1p(x), 1.0 / (1.0 + x)) \
  X(EXPM1, std::expm1(x), ans + 1.0) \
  X(CBRT, std::cbrt(x), 1.0 / (3.0 * ans * ans)) \
  X(SQUARE, x * x, 2.0 * x) \
  X(TAN, std::tan(x), 1.0 + ans * ans) \
  X(ASIN, std::asin(x), 1.0 / std::sqrt(1.0 - x * x)) \
  X(ACOS, std::acos(x), -1.0 / std::sqrt(1.0 - x * x)) \
  X(SINH, std::sinh(x), std::cosh(x)) \
  X(COSH, std::cosh(x), std::sinh(x)) \
  X(TANH, std::tanh(x), 1.0 - ans * ans) \
  X(ASINH, std::asinh(x), 1.0 / std::sqrt(x * x + 1.0)) \
  X(ACOSH, std::acosh(x), 1.0 / std::sqrt(x * x - 1.0)) \
  X(ATANH, std::atanh(x), 1.0 / (1.0 - x * x)) \
  X(SIGMOID, sigmoid(x), ans * (1.0 - ans)) \
  X(SOFTPLUS, softplus(x), sigmoid(x)) \
  X(ERF, std::erf(x), kTwoOverSqrtPi * std::exp(-x * x))

NDVM_UNARY_ROWS(NDVM_UNARY)

// ---- exp, sin, cos (and log below): through vmath's vector functions, whole rows at a time
// (an element's bits do not depend on its neighbours, so every path and batch agrees) --------

using VecFn = void (*)(const Real*, Real*, size_t);
constexpr VecFn kVexp = &vmath::exp;
constexpr VecFn kVlog = &vmath::log;
constexpr VecFn kVsin = &vmath::sin;
constexpr VecFn kVcos = &vmath::cos;

// o = vf(a) element by element: the operand gathered into o (any strides), then vf in place.
NDVM_INLINE void vmap1(Real* __restrict o, uint32_t W, size_t S, Src a, VecFn vf) {
  map1(o, W, S, a, [](Real x) { return x; });
  vf(o, o, S * W);
}

// The lane-form VJP ct(g, vf(x)) of a one-operand record: vf over blocks of a stack buffer.
template <class F>
NDVM_INLINE void lanes_vjp_vec(const FastRec& f, const Real* v, Real* adj, uint8_t* touched,
                               VecFn vf, F ct) {
  if (!(f.taped & 1)) return;
  const Real* g = adj + f.aout;
  const Real* x = v + f.off[0];
  bool first = false;
  Real* a = fast_target(f, 0, adj, touched, first);
  constexpr uint32_t kBlock = 256;
  Real buf[kBlock];
  for (uint32_t k0 = 0; k0 < f.S; k0 += kBlock) {
    const uint32_t m = f.S - k0 < kBlock ? f.S - k0 : kBlock;
    const Real* __restrict gk = g + k0;  // (g[k0 + e] in 32 bits would not vectorize)
    vf(x + k0, buf, m);
    fast_put(a + k0, m, first, [&](uint32_t e) { return ct(gk[e], buf[e]); });
  }
}

void fwd_EXP(const Fw& k) { vmap1(k.out, k.W, k.S, k.a(0), kVexp); }
NDVM_SIMD Grad vjp_EXP(const Bw& k) {
  map2(k.ct, k.W, k.S, k.g(), k.ans(), [](Real g, Real ans) { return g * ans; });
  return Grad::WRITTEN;
}
void lanes_fwd_EXP(const FastRec& f, Real* v, LinalgScratch&) { kVexp(v + f.off[0], v + f.out, f.S); }
NDVM_SIMD void lanes_vjp_EXP(const FastRec& f, const Real* v, Real* adj, uint8_t* t) {
  lanes_vjp(f, v, adj, t, [](Real g, Real ans, Real) { return g * ans; });
}

// sin' = cos, cos' = -sin: the VJP writes vf(x) into ct, then multiplies by g in place
void fwd_SIN(const Fw& k) { vmap1(k.out, k.W, k.S, k.a(0), kVsin); }
NDVM_SIMD Grad vjp_SIN(const Bw& k) {
  vmap1(k.ct, k.W, k.S, k.a(0), kVcos);
  map2_into(k.ct, k.W, k.S, k.g(), [](Real c, Real g) { return g * c; });
  return Grad::WRITTEN;
}
void lanes_fwd_SIN(const FastRec& f, Real* v, LinalgScratch&) { kVsin(v + f.off[0], v + f.out, f.S); }
NDVM_SIMD void lanes_vjp_SIN(const FastRec& f, const Real* v, Real* adj, uint8_t* t) {
  lanes_vjp_vec(f, v, adj, t, kVcos, [](Real g, Real c) { return g * c; });
}

void fwd_COS(const Fw& k) { vmap1(k.out, k.W, k.S, k.a(0), kVcos); }
NDVM_SIMD Grad vjp_COS(const Bw& k) {
  vmap1(k.ct, k.W, k.S, k.a(0), kVsin);
  map2_into(k.ct, k.W, k.S, k.g(), [](Real s, Real g) { return g * -s; });
  return Grad::WRITTEN;
}
void lanes_fwd_COS(const FastRec& f, Real* v, LinalgScratch&) { kVcos(v + f.off[0], v + f.out, f.S); }
NDVM_SIMD void lanes_vjp_COS(const FastRec& f, const Real* v, Real* adj, uint8_t* t) {
  lanes_vjp_vec(f, v, adj, t, kVsin, [](Real g, Real s) { return g * -s; });
}
NDVM_PIECEWISE(FLOOR, std::floor(x))
NDVM_PIECEWISE(CEILING, std::ceil(x))
NDVM_PIECEWISE(ROUND, std::nearbyint(x))
NDVM_PIECEWISE(TRUNCATE, std::trunc(x))
NDVM_PIECEWISE(SIGN, np_sign(x))

#undef NDVM_UNARY
#define NDVM_UNARY_CASE(UP, FWD, DER) \
  case Prim::UP: return {&lanes_fwd_##UP, &lanes_vjp_##UP};
#define NDVM_ROWS_CASE(UP, FWD, DER) \
  case Prim::UP: return {&rows_fwd_##UP, &rows_vjp_##UP};
#undef NDVM_PIECEWISE

// sqrt: the dmci dialect clamps at 1e-8 and passes no gradient below it
NDVM_SIMD void fwd_SQRT(const Fw& k) {
  if (k.dmci) return map1(k.out, k.W, k.S, k.a(0), [](Real x) { return std::sqrt(dmci_clamp(x)); });
  map1(k.out, k.W, k.S, k.a(0), [](Real x) { return std::sqrt(x); });
}
NDVM_SIMD Grad vjp_SQRT(const Bw& k) {
  if (k.dmci) {
    map3(k.ct, k.W, k.S, k.g(), k.ans(), k.a(0),
         [](Real g, Real a, Real x) { return x < kDmciEps ? 0.0 : 0.5 * g / a; });
  } else {
    map2(k.ct, k.W, k.S, k.g(), k.ans(), [](Real g, Real a) { return 0.5 * g / a; });
  }
  return Grad::WRITTEN;
}
// its lane form: the non-dmci row (a dmci record keeps the general path)
NDVM_SIMD void lanes_fwd_SQRT(const FastRec& f, Real* v, LinalgScratch&) {
  lanes_map(v + f.out, v + f.off[0], f.S, [](Real x) { return std::sqrt(x); });
}
NDVM_SIMD void lanes_vjp_SQRT(const FastRec& f, const Real* v, Real* adj, uint8_t* touched) {
  lanes_vjp(f, v, adj, touched, [](Real g, Real a, Real) { return 0.5 * g / a; });
}

// ---- variadic arithmetic ------------------------------------------------------------------

NDVM_SIMD void fwd_ADD(const Fw& k) {
  if (k.n == 0) return fill_value(k.out, k.W, k.S, 0.0);
  if (k.n == 2) {  // (0.0 + x) + y in one pass
    return map2(k.out, k.W, k.S, k.a(0), k.a(1), [](Real x, Real y) { return (0.0 + x) + y; });
  }
  if (k.n == 3) {  // ((0.0 + x) + y) + z in one pass
    return map3(k.out, k.W, k.S, k.a(0), k.a(1), k.a(2),
                [](Real x, Real y, Real z) { return ((0.0 + x) + y) + z; });
  }
  map1(k.out, k.W, k.S, k.a(0), [](Real x) { return 0.0 + x; });
  for (int j = 1; j < k.n; ++j) {
    map2_into(k.out, k.W, k.S, k.a(j), [](Real x, Real y) { return x + y; });
  }
}
Grad vjp_ADD(const Bw&) { return Grad::IDENTITY; }

NDVM_SIMD void fwd_SUB(const Fw& k) {
  if (k.n == 1) return map1(k.out, k.W, k.S, k.a(0), [](Real x) { return -x; });
  if (k.n == 2) return map2(k.out, k.W, k.S, k.a(0), k.a(1), [](Real x, Real y) { return x - y; });
  fold(k.out, k.W, k.S, k.args, k.n, [](Real x, Real y) { return x - y; });
}
NDVM_SIMD Grad vjp_SUB(const Bw& k) {
  if (k.n > 1 && k.which == 0) return Grad::IDENTITY;
  map1(k.ct, k.W, k.S, k.g(), [](Real g) { return -g; });
  return Grad::WRITTEN;
}

NDVM_SIMD void fwd_MUL(const Fw& k) {
  if (k.n == 0) return fill_value(k.out, k.W, k.S, 1.0);
  if (k.n == 2) {  // (1.0 * x) * y in one pass
    return map2(k.out, k.W, k.S, k.a(0), k.a(1), [](Real x, Real y) { return (1.0 * x) * y; });
  }
  if (k.n == 3) {  // ((1.0 * x) * y) * z in one pass
    return map3(k.out, k.W, k.S, k.a(0), k.a(1), k.a(2),
                [](Real x, Real y, Real z) { return ((1.0 * x) * y) * z; });
  }
  map1(k.out, k.W, k.S, k.a(0), [](Real x) { return 1.0 * x; });
  for (int j = 1; j < k.n; ++j) {
    map2_into(k.out, k.W, k.S, k.a(j), [](Real x, Real y) { return x * y; });
  }
}
// product of the other operands (not ans / x_i, which breaks when some x_i is 0)
NDVM_SIMD Grad vjp_MUL(const Bw& k) {
  if (k.n == 2) {
    map2(k.ct, k.W, k.S, k.g(), k.a(1 - k.which), [](Real g, Real y) { return g * (1.0 * y); });
    return Grad::WRITTEN;
  }
  if (k.n == 3) {  // g * ((1.0 * x_p) * x_q), p < q the other two, in one pass
    const int p = k.which == 0 ? 1 : 0;
    const int q = k.which == 2 ? 1 : 2;
    map3(k.ct, k.W, k.S, k.g(), k.a(p), k.a(q),
         [](Real g, Real x, Real y) { return g * ((1.0 * x) * y); });
    return Grad::WRITTEN;
  }
  // rest = ((1.0 * x_0) * x_1) ... over j != which, one operand per pass; then g * rest
  fill_value(k.ct, k.W, k.S, 1.0);
  for (int j = 0; j < k.n; ++j) {
    if (j != k.which) map2_into(k.ct, k.W, k.S, k.a(j), [](Real r, Real x) { return r * x; });
  }
  map2_into(k.ct, k.W, k.S, k.g(), [](Real r, Real g) { return g * r; });
  return Grad::WRITTEN;
}

// scale: binary * (a scalar broadcasts against a vector or matrix in either position)
void fwd_SCALE(const Fw& k) { fwd_MUL(k); }
Grad vjp_SCALE(const Bw& k) { return vjp_MUL(k); }

NDVM_SIMD void fwd_DIV(const Fw& k) {
  if (k.n == 1) return map1(k.out, k.W, k.S, k.a(0), [](Real x) { return 1.0 / x; });
  fold(k.out, k.W, k.S, k.args, k.n, [](Real x, Real y) { return x / y; });
}
NDVM_SIMD Grad vjp_DIV(const Bw& k) {
  if (k.n == 1) {
    map2(k.ct, k.W, k.S, k.g(), k.ans(), [](Real g, Real ans) { return -g * ans * ans; });
    return Grad::WRITTEN;
  }
  if (k.which == 0) {
    return each(k, [&](size_t e, uint32_t l, Real g, Real) {
      Real den = 1.0;
      for (int j = 1; j < k.n; ++j) den = den * k.x(j, e, l);
      return g / den;
    });
  }
  map3(k.ct, k.W, k.S, k.g(), k.ans(), k.a(k.which),
       [](Real g, Real ans, Real y) { return -g * ans / y; });
  return Grad::WRITTEN;
}

// The lane forms of / : (/ x) as the n == 1 rows; (/ x y) as the fold (x copied, then x / y)
// and the VJP's den = 1.0 * y and -g * ans / y. Bit i of BC: operand i is an untaped
// lane-uniform number, its one value read for every element.
NDVM_SIMD void lanes_fwd_DIV1(const FastRec& f, Real* v, LinalgScratch&) {
  lanes_map(v + f.out, v + f.off[0], f.S, [](Real x) { return 1.0 / x; });
}
NDVM_SIMD void lanes_vjp_DIV1(const FastRec& f, const Real* v, Real* adj, uint8_t* touched) {
  lanes_vjp(f, v, adj, touched, [](Real g, Real ans, Real) { return -g * ans * ans; });
}

template <unsigned BC>
struct DivArgs {
  const Real* x;
  const Real* y;
  DivArgs(const FastRec& f, const Real* v) : x(v + f.off[0]), y(v + f.off[1]) {}
  Real a(uint32_t k) const { return (BC & 1) ? x[0] : x[k]; }
  Real b(uint32_t k) const { return (BC & 2) ? y[0] : y[k]; }
};

template <unsigned BC>
NDVM_SIMD void lanes_fwd_DIV2(const FastRec& f, Real* v, LinalgScratch&) {
  const DivArgs<BC> d(f, v);
  Real* __restrict o = v + f.out;
  const uint32_t n = f.S;
  for (uint32_t k = 0; k < n; ++k) o[k] = d.a(k) / d.b(k);
}

template <unsigned BC>
NDVM_SIMD void lanes_vjp_DIV2(const FastRec& f, const Real* v, Real* adj, uint8_t* touched) {
  const DivArgs<BC> d(f, v);
  const Real* g = adj + f.aout;
  const Real* ans = v + f.out;
  if (f.taped & 1) {
    lanes_put(f, 0, adj, touched, [&](uint32_t k) {
      Real den = 1.0;
      den = den * d.b(k);
      return g[k] / den;
    });
  }
  if (f.taped & 2) {
    lanes_put(f, 1, adj, touched, [&](uint32_t k) { return -g[k] * ans[k] / d.b(k); });
  }
}

// min/max: the gradient goes to the FIRST operand equal to the result
Grad vjp_extremal(const Bw& k) {
  return each(k, [&](size_t e, uint32_t l, Real g, Real ans) {
    for (int j = 0; j < k.which; ++j) {
      if (k.x(j, e, l) == ans) return g * 0.0;
    }
    return g * (k.x(k.which, e, l) == ans ? 1.0 : 0.0);
  });
}
NDVM_SIMD void fwd_MIN(const Fw& k) { fold(k.out, k.W, k.S, k.args, k.n, np_minimum); }
Grad vjp_MIN(const Bw& k) { return vjp_extremal(k); }
NDVM_SIMD void fwd_MAX(const Fw& k) { fold(k.out, k.W, k.S, k.args, k.n, np_maximum); }
Grad vjp_MAX(const Bw& k) { return vjp_extremal(k); }

// ---- binary and ternary -------------------------------------------------------------------

void fwd_LOG(const Fw& k) {
  if (k.n == 1) {
    if (k.dmci) {
      map1(k.out, k.W, k.S, k.a(0), [](Real v) { return dmci_clamp(v); });
      return kVlog(k.out, k.out, k.S * k.W);
    }
    return vmap1(k.out, k.W, k.S, k.a(0), kVlog);
  }
  if (k.dmci) {
    return map2(k.out, k.W, k.S, k.a(0), k.a(1),
                [](Real v, Real base) { return std::log(dmci_clamp(v)) / std::log(base); });
  }
  map2(k.out, k.W, k.S, k.a(0), k.a(1), [](Real v, Real base) { return std::log(v) / std::log(base); });
}
// its lane form: the one-operand non-dmci rows (a dmci record keeps the general path)
void lanes_fwd_LOG(const FastRec& f, Real* v, LinalgScratch&) {
  kVlog(v + f.off[0], v + f.out, f.S);
}
NDVM_SIMD void lanes_vjp_LOG(const FastRec& f, const Real* v, Real* adj, uint8_t* touched) {
  lanes_vjp(f, v, adj, touched, [](Real g, Real, Real x) { return g / x; });
}
NDVM_SIMD Grad vjp_LOG(const Bw& k) {
  if (k.n == 1 && !k.dmci) {
    map2(k.ct, k.W, k.S, k.g(), k.a(0), [](Real g, Real x) { return g / x; });
    return Grad::WRITTEN;
  }
  return each(k, [&](size_t e, uint32_t l, Real g, Real ans) {
    const Real raw = k.x(0, e, l);
    const Real x = k.dmci ? dmci_clamp(raw) : raw;
    Real out;
    if (k.n == 1) {
      out = g / x;
    } else {
      const Real b = k.x(1, e, l);
      const Real lb = std::log(b);
      out = k.which == 0 ? g / (x * lb) : -g * ans / (b * lb);
    }
    if (k.dmci && k.which == 0 && raw < kDmciEps) return 0.0;
    return out;
  });
}

void fwd_EXPT(const Fw& k) {
  map2(k.out, k.W, k.S, k.a(0), k.a(1), [](Real x, Real y) { return std::pow(x, y); });
}
Grad vjp_EXPT(const Bw& k) {
  return each(k, [&](size_t e, uint32_t l, Real g, Real ans) {
    const Real a = k.x(0, e, l);
    const Real b = k.x(1, e, l);
    if (k.which == 0) return g * (b == 0 ? 0.0 : b * std::pow(a, b - 1.0));
    return g * (a > 0 ? ans * std::log(a > 0 ? a : 1.0) : 0.0);
  });
}

void fwd_HYPOT(const Fw& k) {
  map2(k.out, k.W, k.S, k.a(0), k.a(1), [](Real x, Real y) { return std::hypot(x, y); });
}
NDVM_SIMD Grad vjp_HYPOT(const Bw& k) {
  map3(k.ct, k.W, k.S, k.g(), k.ans(), k.a(k.which),
       [](Real g, Real ans, Real v) { return g * (ans == 0 ? 0.0 : v / ans); });
  return Grad::WRITTEN;
}

// logaddexp: max(a, b) + log1p(e^-|a-b|), so neither exponential overflows
void fwd_LOGADDEXP(const Fw& k) {
  map2(k.out, k.W, k.S, k.a(0), k.a(1), [](Real x, Real y) {
    if (x == y) return x + static_cast<Real>(0.69314718055994530942);  // also +-inf
    const Real m = x > y ? x : y;
    return m + std::log1p(std::exp(-std::fabs(x - y)));
  });
}
NDVM_SIMD Grad vjp_LOGADDEXP(const Bw& k) {
  map3(k.ct, k.W, k.S, k.g(), k.ans(), k.a(k.which),
       [](Real g, Real ans, Real v) { return g * std::exp(v - ans); });
  return Grad::WRITTEN;
}

void fwd_ATAN(const Fw& k) {
  if (k.n == 1) return map1(k.out, k.W, k.S, k.a(0), [](Real x) { return std::atan(x); });
  map2(k.out, k.W, k.S, k.a(0), k.a(1), [](Real y, Real x) { return std::atan2(y, x); });
}
NDVM_SIMD Grad vjp_ATAN(const Bw& k) {
  return each(k, [&](size_t e, uint32_t l, Real g, Real) {
    const Real y = k.x(0, e, l);
    if (k.n == 1) return g / (1.0 + y * y);
    const Real x = k.x(1, e, l);
    const Real r2 = x * x + y * y;
    return k.which == 0 ? g * x / r2 : -g * y / r2;
  });
}

NDVM_SIMD void fwd_QUOTIENT(const Fw& k) {
  map2(k.out, k.W, k.S, k.a(0), k.a(1), [](Real x, Real y) { return std::trunc(x / y); });
}
Grad vjp_QUOTIENT(const Bw&) { return Grad::NONE; }

// remainder/modulo: d/da = 1, d/db = -trunc(a/b) resp. -floor(a/b)
template <bool kRem>
Grad vjp_rem_mod(const Bw& k) {
  if (k.which == 0) return Grad::IDENTITY;
  return each(k, [&](size_t e, uint32_t l, Real g, Real) {
    const Real q = k.x(0, e, l) / k.x(1, e, l);
    return -g * (kRem ? std::trunc(q) : std::floor(q));
  });
}
void fwd_REMAINDER(const Fw& k) {
  map2(k.out, k.W, k.S, k.a(0), k.a(1), [](Real x, Real y) { return std::fmod(x, y); });
}
Grad vjp_REMAINDER(const Bw& k) { return vjp_rem_mod<true>(k); }
void fwd_MODULO(const Fw& k) { map2(k.out, k.W, k.S, k.a(0), k.a(1), np_mod); }
Grad vjp_MODULO(const Bw& k) { return vjp_rem_mod<false>(k); }

NDVM_SIMD void fwd_CLAMP(const Fw& k) {
  map3(k.out, k.W, k.S, k.a(0), k.a(1), k.a(2),
       [](Real x, Real lo, Real hi) { return np_minimum(np_maximum(x, lo), hi); });
}
NDVM_SIMD Grad vjp_CLAMP(const Bw& k) {
  return each(k, [&](size_t e, uint32_t l, Real g, Real) {
    const Real x = k.x(0, e, l);
    const Real lo = k.x(1, e, l);
    const Real hi = k.x(2, e, l);
    const bool take_x = x >= lo;
    const Real inner = take_x ? x : lo;
    const bool take_inner = inner <= hi;
    bool hit = !take_inner;
    if (k.which == 0) hit = take_x && take_inner;
    if (k.which == 1) hit = !take_x && take_inner;
    return g * (hit ? 1.0 : 0.0);
  });
}

// ---- predicates: one row each (rank-0 operands; out[l] = 0.0 or 1.0) ---------------------

using PredFn = void (*)(const Operand* args, int n, Real* out, uint32_t W);

// (p x0 x1 ... ) holds when p holds for every adjacent pair, as the reference's chain
template <class F>
NDVM_INLINE void chain(const Operand* args, int n, Real* out, uint32_t W, F holds) {
  for (uint32_t l = 0; l < W; ++l) out[l] = 1.0;
  for (int j = 0; j + 1 < n; ++j) {
    const Src a = src_of(args[j]);
    const Src b = src_of(args[j + 1]);
    for (uint32_t l = 0; l < W; ++l) out[l] = holds(a.at(0, l), b.at(0, l)) ? out[l] : 0.0;
  }
}

#define NDVM_CHAIN(UP, OP)                                                          \
  NDVM_SIMD void pred_##UP(const Operand* args, int n, Real* out, uint32_t W) {   \
    chain(args, n, out, W, [](Real x, Real y) { return x OP y; });              \
  }
#define NDVM_TEST(UP, EXPR)                                                          \
  NDVM_SIMD void pred_##UP(const Operand* args, int, Real* out, uint32_t W) {      \
    map1(out, W, 1, src_of(args[0]), [](Real x) { return (EXPR) ? 1.0 : 0.0; });   \
  }

NDVM_CHAIN(NUM_EQ, ==)
NDVM_CHAIN(LT, <)
NDVM_CHAIN(GT, >)
NDVM_CHAIN(LE, <=)
NDVM_CHAIN(GE, >=)
NDVM_TEST(IS_ZERO, x == 0)
NDVM_TEST(IS_POSITIVE, x > 0)
NDVM_TEST(IS_NEGATIVE, x < 0)
NDVM_TEST(IS_FINITE, std::isfinite(x))
NDVM_TEST(IS_NAN, std::isnan(x))

#undef NDVM_CHAIN
#undef NDVM_TEST

// ---- the tables: one row per NUMERIC elementwise primitive and per predicate, by opcode ---

struct Row {
  void (*fwd)(const Fw&) = nullptr;
  Grad (*vjp)(const Bw&) = nullptr;
};

struct Tables {
  std::array<Row, kPrimCodeLimit> ew{};
  std::array<PredFn, kPrimCodeLimit> pred{};
};

#define NDVM_ROW_NUMERIC_ELEMENTWISE(upper, code) t.ew[code] = Row{&fwd_##upper, &vjp_##upper};
#define NDVM_ROW_NUMERIC_SCALAR(upper, code) NDVM_ROW_NUMERIC_ELEMENTWISE(upper, code)
#define NDVM_ROW_PREDICATE_SCALAR(upper, code) t.pred[code] = &pred_##upper;
#define NDVM_ROW_PREDICATE_ELEMENTWISE(upper, code) NDVM_ROW_PREDICATE_SCALAR(upper, code)
#include "ndvm/prim_rows.hpp"

const Tables& tables() {
  static const Tables table = [] {
    Tables t;
#include "ndvm/prims.inc"
    return t;
  }();
  return table;
}
#undef NDVM_PRIM

// One lane (W == 1) of a vector/matrix: its S elements are contiguous, so run them as S lanes
// of one element. Elementwise kernels treat every element alike, so results are identical;
// this only skips the per-element lane-loop overhead (the B=1 hot path).
constexpr int kMaxFlat = 8;

// Storage for flattened operands that is not initialised (flatten constructs what it uses).
struct FlatOperands {
  union {
    Operand ops[kMaxFlat];
  };
  FlatOperands() {}
};

bool flatten(const Operand* args, int n, uint32_t& W, size_t& S, Operand* flat) {
  if (W != 1 || S <= 1 || n > kMaxFlat || S > 0xffffffffu) return false;
  for (int i = 0; i < n; ++i) {
    new (&flat[i]) Operand(args[i]);
    if (args[i].size() > 1) {
      flat[i].width = static_cast<uint32_t>(S);
      flat[i].rows = flat[i].cols = 1;
      flat[i].rank = 0;
    }
  }
  W = static_cast<uint32_t>(S);
  S = 1;
  return true;
}

}  // namespace

bool has_numeric_kernels(int code) {
  const PrimInfo& info = prim_info(code);
  if (info.name == nullptr || info.kind != PrimKind::NUMERIC) return false;
  if (info.shape == PrimShape::CUSTOM) return has_custom_row(code);
  const Row& r = tables().ew[static_cast<size_t>(code)];
  return r.fwd != nullptr && r.vjp != nullptr;
}

FastKernels unary_lane_kernels(int code) {
  switch (static_cast<Prim>(code)) {
    NDVM_UNARY_ROWS(NDVM_UNARY_CASE)
    case Prim::EXP: return {&lanes_fwd_EXP, &lanes_vjp_EXP};
    case Prim::SIN: return {&lanes_fwd_SIN, &lanes_vjp_SIN};
    case Prim::COS: return {&lanes_fwd_COS, &lanes_vjp_COS};
    case Prim::SQRT: return {&lanes_fwd_SQRT, &lanes_vjp_SQRT};
    case Prim::LOG: return {&lanes_fwd_LOG, &lanes_vjp_LOG};
    default: return {nullptr, nullptr};
  }
}

FastKernels unary_row_kernels(int code) {
  switch (static_cast<Prim>(code)) {
    NDVM_UNARY_ROWS(NDVM_ROWS_CASE)
    default: return {nullptr, nullptr};
  }
}

FastKernels div_lane_kernels(int n, unsigned bc) {
  if (n == 1) return {&lanes_fwd_DIV1, &lanes_vjp_DIV1};
  if (n != 2) return {nullptr, nullptr};
  if (bc == 0) return {&lanes_fwd_DIV2<0>, &lanes_vjp_DIV2<0>};
  if (bc == 1) return {&lanes_fwd_DIV2<1>, &lanes_vjp_DIV2<1>};
  if (bc == 2) return {&lanes_fwd_DIV2<2>, &lanes_vjp_DIV2<2>};
  return {nullptr, nullptr};
}
#undef NDVM_UNARY_CASE
#undef NDVM_ROWS_CASE
#undef NDVM_UNARY_ROWS

bool has_predicate_row(int code) {
  const PrimInfo& info = prim_info(code);
  return info.name != nullptr && info.kind == PrimKind::PREDICATE &&
         tables().pred[static_cast<size_t>(code)] != nullptr;
}

void elementwise_forward(int code, bool dmci, const Operand* args, int n, Real* out,
                         uint32_t W, size_t S) {
  FlatOperands flat;
  if (flatten(args, n, W, S, flat.ops)) args = flat.ops;
  tables().ew[static_cast<size_t>(code)].fwd(Fw{dmci, args, n, out, W, S});
}

Grad elementwise_vjp(int code, bool dmci, const Real* g, const Real* ans,
                     const Operand* args, int n, int which, Real* ct, uint32_t W, size_t S) {
  FlatOperands flat;
  if (flatten(args, n, W, S, flat.ops)) args = flat.ops;
  return tables().ew[static_cast<size_t>(code)].vjp(Bw{dmci, g, ans, args, n, which, ct, W, S});
}

void predicate_forward(int code, const Operand* args, int n, Real* out, uint32_t W) {
  tables().pred[static_cast<size_t>(code)](args, n, out, W);
}

NDVM_SIMD void accumulate_lanes(Real* adj, const Real* ct, uint32_t W, size_t S,
                                size_t ct_elems, const uint8_t* bits, bool first) {
  if (S != ct_elems) {  // a scalar adjoint receiving a vector cotangent: sum elements first
    for (uint32_t l = 0; l < W; ++l) {
      Real v = ct[l];
      for (size_t k = 1; k < ct_elems; ++k) v += ct[k * W + l];
      if (bits && !bits[l]) v = 0.0;
      adj[l] = first ? v : adj[l] + v;
    }
    return;
  }
  const size_t n = S * W;
  if (bits == nullptr) {
    if (first) {
      for (size_t k = 0; k < n; ++k) adj[k] = ct[k];
    } else {
      for (size_t k = 0; k < n; ++k) adj[k] += ct[k];
    }
    return;
  }
  for (size_t e = 0; e < S; ++e) {
    Real* __restrict a = adj + e * W;
    const Real* c = ct + e * W;
    if (first) {
      for (uint32_t l = 0; l < W; ++l) a[l] = bits[l] ? c[l] : 0.0;
    } else {
      for (uint32_t l = 0; l < W; ++l) a[l] += bits[l] ? c[l] : 0.0;
    }
  }
}

NDVM_SIMD void fill_lanes(Real* p, size_t n, Real x) {
  for (size_t k = 0; k < n; ++k) p[k] = x;
}

// x - x is 0 for a finite x and NaN for an infinite or NaN one; four sums of those (0 unless
// a NaN joins them) keep the loop free of branches and of a serial dependency.
NDVM_SIMD bool all_finite(const double* v, size_t n) {
  double acc[4] = {0, 0, 0, 0};
  size_t k = 0;
  for (; k + 4 <= n; k += 4) {
    for (size_t j = 0; j < 4; ++j) acc[j] += v[k + j] - v[k + j];
  }
  for (; k < n; ++k) acc[0] += v[k] - v[k];
  return (acc[0] + acc[1]) + (acc[2] + acc[3]) == 0;
}

}  // namespace ndvm
