// Levenberg–Marquardt's normal-equation sums and their Cholesky solve (lm_rows.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ndvm {

// Adds Ng weighted Jacobian rows of one lane — row n: cols[i][n] for parameter i < P,
// residual r[n * S], weight w[n * S] — to the lower triangle of jtj [P, P] and to jtr [P].
// Each cell is four partial sums over the rows n = 0, 1, 2, 3 (mod 4), then added pairwise:
// the same bits on every path (AVX2 for S = 1 and P <= 6); scratch serves P > 6. A lane's
// sums depend only on its own rows.
void lm_add_rows(const double* const* cols, uint32_t P, const double* w, const double* r,
                 uint32_t Ng, uint32_t S, double* jtj, double* jtr, std::vector<double>& scratch);

// Cholesky solve of the P x P SPD system a x = x in place (a is overwritten, x holds the
// right-hand side and then the solution); false if a is not positive definite. Unrolled for
// P <= 6, with the same operations in the same order as for any P.
bool lm_cholesky_solve(double* a, double* x, uint32_t P);

}  // namespace ndvm
