// The normal equations' sums of Levenberg–Marquardt (optimize_lm.cpp): one lane's weighted
// Jacobian rows added to its J'J (lower triangle) and J'r; and the Cholesky solve of its damped
// normal equations.
//
// Every cell is summed in one order, on every path: four partial sums, partial j taking the
// data rows n = j (mod 4) in row order, then (p0 + p1) + (p2 + p3); rows past the last
// multiple of four go to partials 0, 1, 2 in turn. The AVX2 form keeps the four partials of a
// cell in one register (four data rows a turn, one multiply and one add per cell, no FMA);
// the portable form keeps them in arrays, so both give the same bits. A cell depends only on
// its lane's rows, never on the other lanes of the walk.
#include "lm_rows.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace ndvm {
namespace {

// The portable form: row n: cols[i][n], residual r[n * S], weight w[n * S]; acc [T][4] and
// g [p][4] the partial sums (T = p (p + 1) / 2); wr: p doubles of scratch.
void add_rows_any(const double* const* cols, uint32_t p, const double* __restrict w,
                  const double* __restrict r, uint32_t Ng, uint32_t S, double* __restrict acc,
                  double* __restrict g, double* __restrict wr) {
  const uint32_t T = p * (p + 1) / 2;
  for (uint32_t t = 0; t < 4 * T; ++t) acc[t] = 0.0;
  for (uint32_t i = 0; i < 4 * p; ++i) g[i] = 0.0;
  for (uint32_t n = 0; n < Ng; ++n) {
    const uint32_t j = n & 3u;
    const size_t m = static_cast<size_t>(n) * S;
    for (uint32_t i = 0; i < p; ++i) wr[i] = cols[i][n] * w[m];
    const double rm = r[m];
    for (uint32_t i = 0, t = 0; i < p; ++i) {
      g[4 * i + j] += wr[i] * rm;
      for (uint32_t k = 0; k <= i; ++k, ++t) acc[4 * t + j] += wr[i] * wr[k];
    }
  }
}

// The partials acc [T][4], g [P][4] added into jtj's lower triangle and jtr (first: into
// zeros, 0.0 + sum, as if they had been zeroed).
void reduce(const double* acc, const double* g, uint32_t P, double* jtj, double* jtr,
            bool first) {
  for (uint32_t i = 0, t = 0; i < P; ++i) {
    const double* gi = g + 4 * i;
    jtr[i] = (first ? 0.0 : jtr[i]) + ((gi[0] + gi[1]) + (gi[2] + gi[3]));
    for (uint32_t k = 0; k <= i; ++k, ++t) {
      const double* a = acc + 4 * t;
      jtj[i * P + k] = (first ? 0.0 : jtj[i * P + k]) + ((a[0] + a[1]) + (a[2] + a[3]));
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(NDVM_NO_CLONES)
#define NDVM_LM_AVX2 1
// Four data rows (x: their Jacobian entries, lane j row j) into the partials a and g.
template <uint32_t P>
__attribute__((target("avx2"), always_inline)) inline void add4(__m256d* x, __m256d wn,
                                                                 __m256d rn, __m256d* a,
                                                                 __m256d* g) {
  for (uint32_t i = 0; i < P; ++i) x[i] = _mm256_mul_pd(x[i], wn);
  for (uint32_t i = 0, t = 0; i < P; ++i) {
    g[i] = _mm256_add_pd(g[i], _mm256_mul_pd(x[i], rn));
    for (uint32_t k = 0; k <= i; ++k, ++t) a[t] = _mm256_add_pd(a[t], _mm256_mul_pd(x[i], x[k]));
  }
}

// Contiguous rows (S = 1) on AVX2: four data rows a turn, lane j of each register the
// partial j; the last Ng mod 4 rows loaded masked (the lanes past them 0: they add 0).
template <uint32_t P>
__attribute__((target("avx2"))) void add_rows_avx2(const double* const* cols,
                                                   const double* __restrict w,
                                                   const double* __restrict r, uint32_t Ng,
                                                   double* __restrict acc, double* __restrict g) {
  constexpr uint32_t T = P * (P + 1) / 2;
  __m256d a[T], gv[P], x[P];
  for (uint32_t t = 0; t < T; ++t) a[t] = _mm256_setzero_pd();
  for (uint32_t i = 0; i < P; ++i) gv[i] = _mm256_setzero_pd();
  const double* c[P];
  for (uint32_t i = 0; i < P; ++i) c[i] = cols[i];
  uint32_t n = 0;
  for (; n + 4 <= Ng; n += 4) {
    for (uint32_t i = 0; i < P; ++i) x[i] = _mm256_loadu_pd(c[i] + n);
    add4<P>(x, _mm256_loadu_pd(w + n), _mm256_loadu_pd(r + n), a, gv);
  }
  if (n < Ng) {
    const uint32_t left = Ng - n;
    const __m256i mask = _mm256_setr_epi64x(-1, left > 1 ? -1 : 0, left > 2 ? -1 : 0, 0);
    for (uint32_t i = 0; i < P; ++i) x[i] = _mm256_maskload_pd(c[i] + n, mask);
    add4<P>(x, _mm256_maskload_pd(w + n, mask), _mm256_maskload_pd(r + n, mask), a, gv);
  }
  for (uint32_t t = 0; t < T; ++t) _mm256_storeu_pd(acc + 4 * t, a[t]);
  for (uint32_t i = 0; i < P; ++i) _mm256_storeu_pd(g + 4 * i, gv[i]);
}

bool have_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}
#endif

template <uint32_t P>
void add_rows(const double* const* cols, const double* w, const double* r, uint32_t Ng,
              uint32_t S, double* jtj, double* jtr, bool first) {
  constexpr uint32_t T = P * (P + 1) / 2;
  double acc[4 * T], g[4 * P];
#if NDVM_LM_AVX2
  if (S == 1 && have_avx2()) {
    add_rows_avx2<P>(cols, w, r, Ng, acc, g);
    return reduce(acc, g, P, jtj, jtr, first);
  }
#endif
  double wr[P];
  add_rows_any(cols, P, w, r, Ng, S, acc, g, wr);
  reduce(acc, g, P, jtj, jtr, first);
}

}  // namespace

#if defined(__x86_64__) && defined(__ELF__) && defined(__GNUC__) && !defined(NDVM_NO_CLONES)
#define NDVM_LM_CLONES __attribute__((target_clones("default", "avx2")))
#else
#define NDVM_LM_CLONES
#endif

// The residuals in one loop (it vectorizes), their sum of squares in a second, in row order.
NDVM_LM_CLONES double lm_residuals(const double* __restrict v, const double* __restrict t,
                                   const double* __restrict w, size_t M, double* __restrict r) {
  if (w) {
    for (size_t m = 0; m < M; ++m) r[m] = (v[m] - t[m]) * w[m];
  } else {
    for (size_t m = 0; m < M; ++m) r[m] = v[m] - t[m];
  }
  double sum = 0.0;
  for (size_t m = 0; m < M; ++m) sum += r[m] * r[m];
  return sum;
}

void lm_add_rows(const double* const* cols, uint32_t P, const double* w, const double* r,
                 uint32_t Ng, uint32_t S, double* jtj, double* jtr, bool first,
                 std::vector<double>& scratch) {
  if (P >= 1 && P <= 6) {
    return with_small_p(P, [&](auto np) {
      if constexpr (kFixedP<decltype(np)>) {
        add_rows<std::decay_t<decltype(np)>::value>(cols, w, r, Ng, S, jtj, jtr, first);
      }
    });
  }
  const size_t T = static_cast<size_t>(P) * (P + 1) / 2;
  if (scratch.size() < 4 * T + 5 * static_cast<size_t>(P)) scratch.resize(4 * T + 5 * P);
  double* acc = scratch.data();
  double* g = acc + 4 * T;
  add_rows_any(cols, P, w, r, Ng, S, acc, g, g + 4 * P);
  reduce(acc, g, P, jtj, jtr, first);
}

namespace {

// Cholesky solve of the P x P SPD system a x = rhs in place (a is overwritten); false if
// not positive definite. Inlined with a constant P (cholesky_fixed) the loops unroll; the
// operations and their order are the same.
inline __attribute__((always_inline)) bool cholesky_solve(double* __restrict a,
                                                          double* __restrict x, uint32_t P) {
  for (uint32_t j = 0; j < P; ++j) {
    double d = a[j * P + j];
    for (uint32_t k = 0; k < j; ++k) d -= a[j * P + k] * a[j * P + k];
    if (!(d > 0.0) || !std::isfinite(d)) return false;
    d = std::sqrt(d);
    a[j * P + j] = d;
    for (uint32_t i = j + 1; i < P; ++i) {
      double s = a[i * P + j];
      for (uint32_t k = 0; k < j; ++k) s -= a[i * P + k] * a[j * P + k];
      a[i * P + j] = s / d;
    }
  }
  for (uint32_t i = 0; i < P; ++i) {  // L y = rhs
    double s = x[i];
    for (uint32_t k = 0; k < i; ++k) s -= a[i * P + k] * x[k];
    x[i] = s / a[i * P + i];
  }
  for (uint32_t i = P; i-- > 0;) {  // L' x = y
    double s = x[i];
    for (uint32_t k = i + 1; k < P; ++k) s -= a[k * P + i] * x[k];
    x[i] = s / a[i * P + i];
  }
  return true;
}

template <uint32_t N>
bool cholesky_fixed(double* a, double* x) {
  return cholesky_solve(a, x, N);
}

// The damped system (jtj + lam diag(max(jtj_ii, dfloor_i))) x = -g of P parameters into a
// (scratch [P, P]) and x, then its Cholesky solve.
inline __attribute__((always_inline)) bool damped_solve(const double* __restrict jtj,
                                                        const double* __restrict g,
                                                        uint32_t P, double lam,
                                                        const double* __restrict dfloor,
                                                        double* __restrict a,
                                                        double* __restrict x) {
  for (uint32_t i = 0; i < P; ++i) {
    for (uint32_t k = 0; k < P; ++k) a[i * P + k] = jtj[i * P + k];
    a[i * P + i] += lam * std::max(jtj[i * P + i], dfloor[i]);
    x[i] = -g[i];
  }
  return cholesky_solve(a, x, P);
}

template <uint32_t N>
bool damped_fixed(const double* jtj, const double* g, double lam, const double* dfloor, double* x) {
  double a[N * N];
  return damped_solve(jtj, g, N, lam, dfloor, a, x);
}

}  // namespace

bool lm_damped_solve(const double* jtj, const double* g, uint32_t P, double lam, const double* dfloor,
                     double* x, double* scratch) {
  return with_small_p(P, [&](auto np) {
    if constexpr (kFixedP<decltype(np)>) {
      return damped_fixed<std::decay_t<decltype(np)>::value>(jtj, g, lam, dfloor, x);
    } else {
      return damped_solve(jtj, g, P, lam, dfloor, scratch, x);
    }
  });
}

// MINPACK's step test in the scaled norm: |D delta| <= xtol |D theta|, D the running column
// norms of J (scale-free: data times 1e12 stop where the data do), each product divided by
// the largest before squaring so neither side under- or overflows
// (ndvm.calibrate.lm._small_step, in the same order). trial: the new point, from: the old.
bool lm_small_step(const double* d, const double* trial, const double* from, uint32_t P, double xtol) {
  double top = 0.0;
  for (uint32_t i = 0; i < P; ++i) {
    top = std::max(top, std::fabs(d[i] * (trial[i] - from[i])));
  }
  for (uint32_t i = 0; i < P; ++i) top = std::max(top, std::fabs(d[i] * trial[i]));
  if (!(top > 0.0) || !std::isfinite(top)) return top == 0.0;
  double dn = 0.0, tn = 0.0;
  for (uint32_t i = 0; i < P; ++i) {
    const double a = std::fabs(d[i] * (trial[i] - from[i])) / top;
    const double c = std::fabs(d[i] * trial[i]) / top;
    dn += a * a;
    tn += c * c;
  }
  return std::sqrt(dn) <= xtol * std::sqrt(tn);
}

// Each column's damping floor against its own running norm (scale-free: a column 1e12 times
// another's does not set the other's damping); a column never seen nonzero against the
// largest diagonal of jtj (ndvm.calibrate.lm._floors).
void lm_floors(const double* scale, const double* jtj, uint32_t P, double* out) {
  double dmax = 0.0;
  for (uint32_t i = 0; i < P; ++i) dmax = std::max(dmax, jtj[i * P + i]);
  for (uint32_t i = 0; i < P; ++i) {
    const double s = scale[i];
    out[i] = std::max(s > 0.0 ? 1e-12 * s * s : 1e-12 * dmax, std::numeric_limits<double>::min());
  }
}

bool lm_cholesky_solve(double* a, double* x, uint32_t P) {
  return with_small_p(P, [&](auto np) {
    if constexpr (kFixedP<decltype(np)>) {
      return cholesky_fixed<std::decay_t<decltype(np)>::value>(a, x);
    } else {
      return cholesky_solve(a, x, P);
    }
  });
}

}  // namespace ndvm
