// Vector transcendental functions (vmath.hpp): glibc's libmvec loaded at run time, or libm.
#include "ndvm/vmath.hpp"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && defined(__GLIBC__) && \
    !defined(NDVM_NO_LIBMVEC)
#define NDVM_LIBMVEC 1
#include <dlfcn.h>
#include <immintrin.h>
#endif

namespace ndvm::vmath {
namespace {

enum Fn { EXP = 0, LOG, SIN, COS, NFN };

// The scalar C library: the fallback, and the meaning of every function here.
template <class R>
R scalar(int fn, R x) {
  switch (fn) {
    case EXP: return std::exp(x);
    case LOG: return std::log(x);
    case SIN: return std::sin(x);
    default: return std::cos(x);
  }
}

template <class R>
void scalar_array(int fn, const R* x, R* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = scalar(fn, x[i]);
}

#if NDVM_LIBMVEC

// libmvec's vector-ABI names: 'd' AVX2 (4 doubles / 8 floats), 'b' SSE2 (2 / 4).
constexpr const char* kAvx2[2][NFN] = {
    {"_ZGVdN4v_exp", "_ZGVdN4v_log", "_ZGVdN4v_sin", "_ZGVdN4v_cos"},
    {"_ZGVdN8v_expf", "_ZGVdN8v_logf", "_ZGVdN8v_sinf", "_ZGVdN8v_cosf"}};
constexpr const char* kSse2[2][NFN] = {
    {"_ZGVbN2v_exp", "_ZGVbN2v_log", "_ZGVbN2v_sin", "_ZGVbN2v_cos"},
    {"_ZGVbN4v_expf", "_ZGVbN4v_logf", "_ZGVbN4v_sinf", "_ZGVbN4v_cosf"}};

struct Table {
  void* fn[2][NFN] = {};  // [0] float64, [1] float32
  bool avx2 = false;
  const char* kind = "libm";
};

Table load() {
  Table t;
  if (std::getenv("NDVM_NO_LIBMVEC") != nullptr) return t;
  void* h = dlopen("libmvec.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return t;
  const bool avx2 = __builtin_cpu_supports("avx2");
  const auto& names = avx2 ? kAvx2 : kSse2;
  Table found;
  for (int d = 0; d < 2; ++d) {
    for (int f = 0; f < NFN; ++f) {
      found.fn[d][f] = dlsym(h, names[d][f]);
      if (found.fn[d][f] == nullptr) return t;  // an old libmvec: the scalar library
    }
  }
  found.avx2 = avx2;
  found.kind = avx2 ? "libmvec-avx2" : "libmvec-sse2";
  return found;
}

const Table& table() {
  static const Table t = load();
  return t;
}

// Whole vectors straight from x to y; the tail through a vector padded with 1 (a value every
// function takes without a special case), so each element's bits are those of a full vector.
// The loop and the call are one function (a macro, not a lambda: a lambda's own frame, stack
// realignment and vzeroupper would cost more than a libmvec call's work per vector).
#define NDVM_VMATH_CHUNKS(R, L, V, LOAD, STORE)                      \
  auto f = reinterpret_cast<V (*)(V)>(fp);                           \
  size_t i = 0;                                                      \
  for (; i + L <= n; i += L) STORE(y + i, f(LOAD(x + i)));           \
  if (i < n) {                                                       \
    alignas(32) R in[L], out[L];                                     \
    for (int k = 0; k < L; ++k) in[k] = R(1);                        \
    std::memcpy(in, x + i, (n - i) * sizeof(R));                     \
    STORE(out, f(LOAD(in)));                                         \
    std::memcpy(y + i, out, (n - i) * sizeof(R));                    \
  }

#pragma GCC push_options
#pragma GCC target("avx2")
void avx2_d(void* fp, const double* x, double* y, size_t n) {
  NDVM_VMATH_CHUNKS(double, 4, __m256d, _mm256_loadu_pd, _mm256_storeu_pd)
}
void avx2_f(void* fp, const float* x, float* y, size_t n) {
  NDVM_VMATH_CHUNKS(float, 8, __m256, _mm256_loadu_ps, _mm256_storeu_ps)
}
#pragma GCC pop_options

void sse2_d(void* fp, const double* x, double* y, size_t n) {
  NDVM_VMATH_CHUNKS(double, 2, __m128d, _mm_loadu_pd, _mm_storeu_pd)
}
void sse2_f(void* fp, const float* x, float* y, size_t n) {
  NDVM_VMATH_CHUNKS(float, 4, __m128, _mm_loadu_ps, _mm_storeu_ps)
}
#undef NDVM_VMATH_CHUNKS

// libmvec's AVX2 log ([0] float64, [1] float32), stored before a one-element form that calls
// it is published (log1_first)
std::atomic<void*> g_vlog[2] = {};

#pragma GCC push_options
#pragma GCC target("avx2")
// One element in lane 0 of a vector padded with 1 (as chunks' tail): no copies through memory.
double avx2_log1_d(double x) {
  auto f = reinterpret_cast<__m256d (*)(__m256d)>(g_vlog[0].load(std::memory_order_relaxed));
  return _mm256_cvtsd_f64(f(_mm256_set_pd(1.0, 1.0, 1.0, x)));
}
float avx2_log1_f(float x) {
  auto f = reinterpret_cast<__m256 (*)(__m256)>(g_vlog[1].load(std::memory_order_relaxed));
  return _mm256_cvtss_f32(f(_mm256_set_ps(1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, x)));
}
#pragma GCC pop_options

void run(int fn, const double* x, double* y, size_t n) {
  const Table& t = table();
  void* f = t.fn[0][fn];
  if (f == nullptr) return scalar_array(fn, x, y, n);
  if (t.avx2) return avx2_d(f, x, y, n);
  sse2_d(f, x, y, n);
}

void run(int fn, const float* x, float* y, size_t n) {
  const Table& t = table();
  void* f = t.fn[1][fn];
  if (f == nullptr) return scalar_array(fn, x, y, n);
  if (t.avx2) return avx2_f(f, x, y, n);
  sse2_f(f, x, y, n);
}

// The one-element log: the AVX2 vector call, else the array form on one element.
template <class R>
R log1_array(R x) {
  R y;
  run(LOG, &x, &y, 1);
  return y;
}

template <class R>
auto log1_pick() -> R (*)(R) {
  const Table& t = table();
  constexpr int d = sizeof(R) == sizeof(float) ? 1 : 0;
  void* f = t.fn[d][LOG];
  if (f == nullptr || !t.avx2) return &log1_array<R>;
  g_vlog[d].store(f, std::memory_order_release);
  if constexpr (d == 1) {
    return &avx2_log1_f;
  } else {
    return &avx2_log1_d;
  }
}

#else

template <class R>
void run(int fn, const R* x, R* y, size_t n) {
  scalar_array(fn, x, y, n);
}

template <class R>
auto log1_pick() -> R (*)(R) {
  return [](R x) { return scalar(LOG, x); };
}

#endif

// log1's implementation, chosen at its first call (then one indirect call per element)
template <class R>
R log1_first(R x);
std::atomic<double (*)(double)> g_log1_d{&log1_first<double>};
std::atomic<float (*)(float)> g_log1_f{&log1_first<float>};

template <class R>
R log1_first(R x) {
  R (*f)(R) = log1_pick<R>();
  if constexpr (sizeof(R) == sizeof(float)) {
    g_log1_f.store(f, std::memory_order_release);
  } else {
    g_log1_d.store(f, std::memory_order_release);
  }
  return f(x);
}

}  // namespace

void exp(const double* x, double* y, size_t n) { run(EXP, x, y, n); }
void log(const double* x, double* y, size_t n) { run(LOG, x, y, n); }
void sin(const double* x, double* y, size_t n) { run(SIN, x, y, n); }
void cos(const double* x, double* y, size_t n) { run(COS, x, y, n); }
void exp(const float* x, float* y, size_t n) { run(EXP, x, y, n); }
void log(const float* x, float* y, size_t n) { run(LOG, x, y, n); }
void sin(const float* x, float* y, size_t n) { run(SIN, x, y, n); }
void cos(const float* x, float* y, size_t n) { run(COS, x, y, n); }

double log1(double x) { return g_log1_d.load(std::memory_order_acquire)(x); }
float log1(float x) { return g_log1_f.load(std::memory_order_acquire)(x); }

const char* kind() {
#if NDVM_LIBMVEC
  return table().kind;
#else
  return "libm";
#endif
}

}  // namespace ndvm::vmath
