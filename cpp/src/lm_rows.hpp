// Levenberg–Marquardt's normal-equation sums and their Cholesky solve (lm_rows.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace ndvm {

// f(std::integral_constant<uint32_t, P>{}) for P <= 6 (loops whose bound is then known at
// compile time: the same operations in the same order), else f(P).
template <class F>
decltype(auto) with_small_p(uint32_t P, F&& f) {
  switch (P) {
    case 1: return f(std::integral_constant<uint32_t, 1>{});
    case 2: return f(std::integral_constant<uint32_t, 2>{});
    case 3: return f(std::integral_constant<uint32_t, 3>{});
    case 4: return f(std::integral_constant<uint32_t, 4>{});
    case 5: return f(std::integral_constant<uint32_t, 5>{});
    case 6: return f(std::integral_constant<uint32_t, 6>{});
    default: return f(P);
  }
}

// True for the integral_constant that with_small_p passes (false for a plain count).
template <class Np>
inline constexpr bool kFixedP = !std::is_same_v<std::decay_t<Np>, uint32_t>;

// Residuals r[m] = (v[m] - t[m]) * w[m] (w nullptr: v[m] - t[m]) for m < M, and their sum of
// squares, added in order m = 0, 1, ... (the sum a scalar loop would give).
double lm_residuals(const double* v, const double* t, const double* w, size_t M, double* r);

// Adds Ng weighted Jacobian rows of one lane — row n: cols[i][n] for parameter i < P,
// residual r[n * S], weight w[n * S] — to the lower triangle of jtj [P, P] and to jtr [P]
// (first: to zeros, whatever they hold; the upper triangle is not written).
// Each cell is four partial sums over the rows n = 0, 1, 2, 3 (mod 4), then added pairwise:
// the same bits on every path (AVX2 for S = 1 and P <= 6); scratch serves P > 6. A lane's
// sums depend only on its own rows.
void lm_add_rows(const double* const* cols, uint32_t P, const double* w, const double* r,
                 uint32_t Ng, uint32_t S, double* jtj, double* jtr, bool first,
                 std::vector<double>& scratch);

// Cholesky solve of the P x P SPD system a x = x in place (a is overwritten, x holds the
// right-hand side and then the solution); false if a is not positive definite. Unrolled for
// P <= 6, with the same operations in the same order as for any P.
bool lm_cholesky_solve(double* a, double* x, uint32_t P);

// Levenberg–Marquardt's damped system over all P parameters, (jtj + lam D) x = -g with
// D = diag(max(jtj_ii, dfloor[i])) (a floor per column), assembled and solved as lm_cholesky_solve solves it (the same
// operations in the same order; unrolled for P <= 6); scratch: P * P doubles for P > 6. False
// if the damped matrix is not positive definite.
bool lm_damped_solve(const double* jtj, const double* g, uint32_t P, double lam, const double* dfloor,
                     double* x, double* scratch);

// MINPACK's step test in the scaled norm: |D (trial - from)| <= xtol |D trial|, D (d) the
// running column norms of J; scale-free and safe from under- and overflow.
// Levenberg–Marquardt's damping floor of each column (out [P]) from its running norm scale[i]
// (1e-12 scale²; a column never seen nonzero: 1e-12 of jtj's largest diagonal).
void lm_floors(const double* scale, const double* jtj, uint32_t P, double* out);

bool lm_small_step(const double* d, const double* trial, const double* from, uint32_t P,
                   double xtol);

}  // namespace ndvm
