// The normal equations' sums of Levenberg–Marquardt (optimize_lm.cpp): one lane's weighted
// Jacobian rows added to its J'J (lower triangle) and J'r.
#include "lm_rows.hpp"

#include <cstddef>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace ndvm {
namespace {

// Adds the Ng weighted rows of jac (row n: jac[i * ld + n], i < P; residual r[n * S], weight
// w[n * S]) to the lower triangle of jtj and to jtr, each cell summed in row order. With the
// parameter count a template argument the cells stay in registers across the rows (P <= 6).
template <uint32_t P>
void add_rows(const double* __restrict jac, size_t ld, const double* __restrict w,
              const double* __restrict r, uint32_t Ng, uint32_t S, double* __restrict jtj,
              double* __restrict jtr) {
  double tri[P * (P + 1) / 2];
  double g[P];
  for (uint32_t i = 0, t = 0; i < P; ++i) {
    g[i] = jtr[i];
    for (uint32_t k = 0; k <= i; ++k) tri[t++] = jtj[i * P + k];
  }
  for (uint32_t n = 0; n < Ng; ++n) {
    const size_t m = static_cast<size_t>(n) * S;
    double wrow[P];
    for (uint32_t i = 0; i < P; ++i) wrow[i] = jac[i * ld + n] * w[m];
    const double rm = r[m];
    for (uint32_t i = 0, t = 0; i < P; ++i) {
      g[i] += wrow[i] * rm;
      for (uint32_t k = 0; k <= i; ++k) tri[t++] += wrow[i] * wrow[k];
    }
  }
  for (uint32_t i = 0, t = 0; i < P; ++i) {
    jtr[i] = g[i];
    for (uint32_t k = 0; k <= i; ++k) jtj[i * P + k] = tri[t++];
  }
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(NDVM_NO_CLONES)
#define NDVM_LM_AVX2 1
// One data row n into the accumulators a (rows of J'J) and g (J'r).
__attribute__((target("avx2"), always_inline)) inline void lm_row(
    const double* jac, size_t ld, const double* c3, __m256d keep, const double* w,
    const double* r, uint32_t S, uint32_t n, __m256d* a, __m256d& g) {
  const size_t m = static_cast<size_t>(n) * S;
  const __m256d col = _mm256_and_pd(
      _mm256_setr_pd(jac[n], jac[ld + n], jac[2 * ld + n], c3[n]), keep);
  const __m256d wr = _mm256_mul_pd(col, _mm256_set1_pd(w[m]));
  a[0] = _mm256_add_pd(a[0], _mm256_mul_pd(_mm256_permute4x64_pd(wr, 0x00), wr));
  a[1] = _mm256_add_pd(a[1], _mm256_mul_pd(_mm256_permute4x64_pd(wr, 0x55), wr));
  a[2] = _mm256_add_pd(a[2], _mm256_mul_pd(_mm256_permute4x64_pd(wr, 0xAA), wr));
  a[3] = _mm256_add_pd(a[3], _mm256_mul_pd(_mm256_permute4x64_pd(wr, 0xFF), wr));
  g = _mm256_add_pd(g, _mm256_mul_pd(wr, _mm256_set1_pd(r[m])));
}

// add_rows for 3 or 4 parameters on AVX2: each row of J'J whole in one register (padded to 4
// cells; the cells above the diagonal are computed and dropped), no FMA, and two sets of
// accumulators — the even data rows and the odd ones, added at the end — so that two rows are
// in flight (the sums' latency bounds this loop). A cell's value depends only on its lane's
// rows, never on the other lanes of the walk.
__attribute__((target("avx2"))) void add_rows_avx2(
    const double* __restrict jac, size_t ld, uint32_t P, const double* __restrict w,
    const double* __restrict r, uint32_t Ng, uint32_t S, double* __restrict jtj,
    double* __restrict jtr) {
  double init[4][4] = {};
  double g0[4] = {};
  for (uint32_t i = 0; i < P; ++i) {
    g0[i] = jtr[i];
    for (uint32_t k = 0; k <= i; ++k) init[i][k] = jtj[i * P + k];
  }
  __m256d a[2][4], g[2];
  for (int i = 0; i < 4; ++i) {
    a[0][i] = _mm256_loadu_pd(init[i]);
    a[1][i] = _mm256_setzero_pd();
  }
  g[0] = _mm256_loadu_pd(g0);
  g[1] = _mm256_setzero_pd();
  const double* c3 = jac + (P > 3 ? 3 * ld : 0);
  const __m256d keep = _mm256_castsi256_pd(_mm256_setr_epi64x(-1, -1, -1, P > 3 ? -1 : 0));
  uint32_t n = 0;
  for (; n + 2 <= Ng; n += 2) {
    lm_row(jac, ld, c3, keep, w, r, S, n, a[0], g[0]);
    lm_row(jac, ld, c3, keep, w, r, S, n + 1, a[1], g[1]);
  }
  if (n < Ng) lm_row(jac, ld, c3, keep, w, r, S, n, a[0], g[0]);
  for (int i = 0; i < 4; ++i) _mm256_storeu_pd(init[i], _mm256_add_pd(a[0][i], a[1][i]));
  _mm256_storeu_pd(g0, _mm256_add_pd(g[0], g[1]));
  for (uint32_t i = 0; i < P; ++i) {
    jtr[i] = g0[i];
    for (uint32_t k = 0; k <= i; ++k) jtj[i * P + k] = init[i][k];
  }
}

bool have_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}
#endif

}  // namespace

void lm_add_rows(const double* __restrict jac, size_t ld, uint32_t P, const double* __restrict w,
                 const double* __restrict r, uint32_t Ng, uint32_t S, double* __restrict jtj,
                 double* __restrict jtr, double* __restrict wrow) {
  switch (P) {
    case 1: return add_rows<1>(jac, ld, w, r, Ng, S, jtj, jtr);
    case 2: return add_rows<2>(jac, ld, w, r, Ng, S, jtj, jtr);
#if NDVM_LM_AVX2
    case 3:
    case 4:
      if (have_avx2()) return add_rows_avx2(jac, ld, P, w, r, Ng, S, jtj, jtr);
      if (P == 3) return add_rows<3>(jac, ld, w, r, Ng, S, jtj, jtr);
      return add_rows<4>(jac, ld, w, r, Ng, S, jtj, jtr);
#else
    case 3: return add_rows<3>(jac, ld, w, r, Ng, S, jtj, jtr);
    case 4: return add_rows<4>(jac, ld, w, r, Ng, S, jtj, jtr);
#endif
    case 5: return add_rows<5>(jac, ld, w, r, Ng, S, jtj, jtr);
    case 6: return add_rows<6>(jac, ld, w, r, Ng, S, jtj, jtr);
    default: break;
  }
  for (uint32_t n = 0; n < Ng; ++n) {
    const size_t m = static_cast<size_t>(n) * S;
    for (uint32_t i = 0; i < P; ++i) wrow[i] = jac[i * ld + n] * w[m];
    const double rm = r[m];
    for (uint32_t i = 0; i < P; ++i) {
      const double ji = wrow[i];
      jtr[i] += ji * rm;
      double* __restrict out = jtj + static_cast<size_t>(i) * P;
      for (uint32_t k = 0; k <= i; ++k) out[k] += ji * wrow[k];
    }
  }
}

}  // namespace ndvm
