// Vector transcendental functions over arrays: y[i] = f(x[i]) for exp, log, sin and cos.
//
// Where glibc's vector math library (libmvec, glibc >= 2.22, x86-64) can be loaded at run
// time, these call its SIMD variants: 4 float64 / 8 float32 elements per call on AVX2, else 2
// / 4 on SSE2; elsewhere they call the scalar C library. libmvec's functions are accurate to
// 4 ulp (the scalar libm's to < 1 ulp) and about 4-7x faster. An element's result depends only
// on its value, never on n or on its position (the tail is padded to a whole vector), so a lane
// gives the same bits alone or in any batch, and every evaluator that calls these (walker, VM,
// replay, fast records) agrees bitwise. The choice is made once per process (`vmath::kind`).
#pragma once

#include <cstddef>

namespace ndvm::vmath {

void exp(const double* x, double* y, size_t n);
void log(const double* x, double* y, size_t n);
void sin(const double* x, double* y, size_t n);
void cos(const double* x, double* y, size_t n);
void exp(const float* x, float* y, size_t n);
void log(const float* x, float* y, size_t n);
void sin(const float* x, float* y, size_t n);
void cos(const float* x, float* y, size_t n);
// One element: the same bits as that element of the array forms.
double log1(double x);
float log1(float x);

// Which implementation this process uses: "libmvec-avx2", "libmvec-sse2" or "libm".
const char* kind();

}  // namespace ndvm::vmath
