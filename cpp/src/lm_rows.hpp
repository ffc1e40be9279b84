// Levenberg–Marquardt's normal-equation sums (lm_rows.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ndvm {

// Adds Ng weighted Jacobian rows of one lane — row n: jac[i * ld + n] for parameter i < P,
// residual r[n * S], weight w[n * S] — to the lower triangle of jtj [P, P] and to jtr [P].
// P <= 6 keeps the cells in registers (3 or 4 on AVX2: whole rows, even and odd data rows
// summed apart, then added); wrow: P doubles of scratch for larger P. A lane's sums depend
// only on its own rows.
void lm_add_rows(const double* jac, size_t ld, uint32_t P, const double* w, const double* r,
                 uint32_t Ng, uint32_t S, double* jtj, double* jtr, double* wrow);

}  // namespace ndvm
