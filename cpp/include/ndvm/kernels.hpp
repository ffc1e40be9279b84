// Numeric kernels: forward lane loops and VJP lane loops for every NUMERIC primitive, plus
// the predicates. Payloads are element-major: element e of lane l sits at p[e * width + l];
// width is 1 (the same on every lane) or W (one value per lane).
#pragma once

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ndvm/vmath.hpp"

// SIMD over lanes: the lane loops are written to auto-vectorize (contiguous lanes, no calls
// through pointers inside the loop). The wheel is built for baseline x86-64; on x86-64 ELF
// targets the hot kernels are also cloned for AVX2 and for x86-64-v4 (AVX-512: 8 float64 or
// 16 float32 lanes per instruction) and the loader picks the best clone the CPU runs (ifunc),
// so a portable build still runs its lanes at the CPU's vector width. The clones perform the
// same IEEE operations in the same order (no FMA: -ffp-contract=off), so every clone gives
// bitwise the same results.
#if defined(__x86_64__) && defined(__ELF__) && defined(__GNUC__) && !defined(NDVM_NO_CLONES)
#define NDVM_SIMD __attribute__((target_clones("default", "avx2", "arch=x86-64-v4")))
#else
#define NDVM_SIMD
#endif
#if defined(__GNUC__)
#define NDVM_INLINE inline __attribute__((always_inline))
#else
#define NDVM_INLINE inline
#endif

namespace ndvm {

// The payload element type: float64, or float32 in the `_core32` build (NDVM_FLOAT32), which
// compiles the same sources with Real = float (docs/native.md, "float32").
#if defined(NDVM_FLOAT32)
using Real = float;
#else
using Real = double;
#endif

struct Operand {
  const Real* p = nullptr;
  uint32_t width = 1;
  uint32_t rows = 1;
  uint32_t cols = 1;
  uint8_t rank = 0;
  size_t size() const { return static_cast<size_t>(rows) * cols; }
};

struct OutShape {
  uint8_t rank = 0;
  uint32_t rows = 1;
  uint32_t cols = 1;
};

// Forward of an ELEMENTWISE/SCALAR numeric primitive: out has width W_out, S elements.
void elementwise_forward(int code, bool dmci, const Operand* args, int n, Real* out,
                         uint32_t W_out, size_t S);

// Predicate (= < > <= >= zero? ...) on rank-0 operands: out[l] = 0.0 or 1.0.
void predicate_forward(int code, const Operand* args, int n, Real* out, uint32_t W_out);

// What a VJP kernel produced: nothing (no gradient flows: piecewise-constant), a cotangent
// in ct, or a cotangent equal to g itself (ct untouched; the caller reads g).
enum class Grad : uint8_t { NONE, WRITTEN, IDENTITY };

// VJP of an elementwise primitive w.r.t. argument `which`: ct gets S x W values (the
// output's shape).
Grad elementwise_vjp(int code, bool dmci, const Real* g, const Real* ans,
                     const Operand* args, int n, int which, Real* ct, uint32_t W, size_t S);

// adj (S elements x W lanes) += ct (ct_elems x W; ct_elems == S, or S == 1 and the ct
// elements are summed first, in index order, as the reference's unbroadcast). `first`: adj
// holds garbage and is stored, not added to (no zero-then-add). bits: lane mask or nullptr.
void accumulate_lanes(Real* adj, const Real* ct, uint32_t W, size_t S, size_t ct_elems,
                      const uint8_t* bits, bool first);

// p[0..n) = x, and whether every v[0..n) is finite (vectorized helpers of the hot paths).
void fill_lanes(Real* p, size_t n, Real x);
bool all_finite(const double* v, size_t n);

// The deadline inside long kernels: big linear algebra counts its element work and looks at
// the clock every kClockWork operations (a 1500 x 1500 matmul checks ~800 times). Kernels
// built as NDVM_SIMD clones never throw (an exception unwinding through a target_clones
// function terminates in some builds): they `poll`, stop early when it returns true, and
// their non-cloned caller calls `raise_if_expired`. Other kernels `tick`, which throws.
struct WorkClock {
  static constexpr uint64_t kClockWork = uint64_t{1} << 22;
  double deadline = 0.0;  // seconds since t0; 0: no deadline
  std::chrono::steady_clock::time_point t0;
  uint64_t work = 0;
  bool expired = false;
  bool poll(uint64_t n) {
    work += n;
    if (work >= kClockWork) {
      work = 0;
      expired = expired || past();
    }
    return expired;
  }
  void tick(uint64_t n) {
    if (poll(n)) raise_if_expired();
  }
  bool past() const;              // whether the deadline has passed
  void raise_if_expired() const;  // throws LimitError(DEADLINE) once expired
};

// log(d_0 d_1 ... d_{n-1}) of the |u_ii| of an LU factorization, d(i) >= 0: one log of the
// product (left to right) when it is a normal number, else NumPy's sum 0.0 + log d_0 + ...
// (also the singular case, log 0 = -inf). Differs from NumPy's sum of logs by rounding only.
// Every log here is vmath's (vmath.hpp), whose result depends only on its argument: the
// lane kernels take the logs of a whole block of products in one vector call
// (`log_product_normal`, then this formula's fallback per lane) and get the same bits as a
// lane alone through this function.
inline bool log_product_normal(Real p) {
  return p >= std::numeric_limits<Real>::min() && p <= std::numeric_limits<Real>::max();
}

template <class D>
inline Real log_abs_sum(int n, D d) {
  Real s = 0.0;
  for (int i = 0; i < n; ++i) s += vmath::log1(d(i));
  return s;
}

template <class D>
inline Real log_abs_product(int n, D d) {
  Real p = 1.0;
  for (int i = 0; i < n; ++i) p *= d(i);
  if (log_product_normal(p)) return vmath::log1(p);
  return log_abs_sum(n, d);
}

// Reusable buffers of the per-lane linear-algebra kernels (one per evaluator: no
// allocation per operation once warm, no thread-local state).
struct LinalgScratch {
  WorkClock clock;
  std::vector<Real> buf;
  std::vector<Real> g;
  std::vector<Real> ans;
  std::vector<Real> ct;
  std::vector<int> piv;
};

// The VJPs of a variadic `*` (n >= 4 operands) or `min`/`max` (n >= 3), linear in n
// (variadic_vjp.cpp): `variadic_vjp_prepare` runs once per record (the suffix products
// Q_j = x_j Q_(j+1), Q_n = 1; or, per element and lane, the index of the first operand equal
// to the result), then `variadic_vjp` gives operand `which`'s cotangent, the operands asked
// in increasing order: g (P_which Q_(which+1)) with the running prefix P_(i+1) = P_i x_i,
// P_0 = 1 (the reference's _mul_vjp, product for product); g where `which` is that first
// index, else 0 (g * 0.0). ct gets S x W values.
struct VariadicVjp {
  std::vector<Real> suffix;   // Q at block ends, one block's Q_j, a scratch row (.cpp)
  std::vector<Real> prefix;   // P_next (S x W)
  std::vector<uint32_t> first;  // per element and lane: the first extremal operand, or n
  int n = 0;
  int next = 0;
};
bool variadic_vjp_wanted(int code, int n);
// clock: ticked with the work done (a huge record stops at the deadline)
void variadic_vjp_prepare(int code, const Real* ans, const Operand* args, int n, uint32_t W,
                          size_t S, VariadicVjp& v, WorkClock& clock);
void variadic_vjp(int code, const Real* g, const Operand* args, int which, Real* ct,
                  uint32_t W, size_t S, VariadicVjp& v);

// Lane-vectorized forms of CUSTOM primitives: the sums of products (dot, vsum, vmean,
// outer, matvec, matmul, transpose, trace) and, over many lanes, inv/det/logdet (lane-parallel
// LU with the per-lane pivoting of the scalar form). Return false for other opcodes.
bool lanes_forward(int code, const Operand* args, Real* out, uint32_t W, LinalgScratch& s);
bool lanes_forward_products(int code, const Operand* args, Real* out, uint32_t W,
                            WorkClock& clock);
bool lanes_vjp(int code, const Real* g, const Real* ans, const Operand* args, int which,
               Real* ct, uint32_t W, LinalgScratch& s);
// lanes_vjp's cotangent added into `adj` (an adjoint of W lanes that already holds a
// cotangent), element for element as accumulate_lanes adds it after lanes_vjp (bitwise the
// same adjoint, without the buffer and its pass): the sums of products and, over W > 1
// lanes, inv/det/logdet. False (nothing written) for the others and at one lane.
bool lanes_vjp_add(int code, const Real* g, const Real* ans, const Operand* args, int which,
                   Real* adj, uint32_t W, LinalgScratch& s);
// The det (det true) / logdet VJP over W lanes of an n x n operand given its inverse (n x n,
// W lanes, as the forward `inv` kernel wrote it): ct = f * inverse^T, f = g * ans (det) or g,
// stored (add false) or added into ct; the same bits as the VJP that recomputes the inverse.
void slogdet_vjp_from_inverse(bool det, const Real* g, const Real* ans, const Real* inverse,
                              size_t n, Real* ct, uint32_t W, bool add);

// Whether PREDICATE opcode `code` has its row.
bool has_predicate_row(int code);

// Whether CUSTOM opcode `code` has its row: shape rule, forward, VJP and operand ranks.
bool has_custom_row(int code);

// Rank of operand i of CUSTOM opcode `code` (the last rank repeats), as linalg.py declares.
int custom_in_rank(int code, int i);

// Shape rule of a CUSTOM (linear-algebra) primitive. Returns "" or the ShapeError message.
std::string custom_shape(int code, const Operand* args, int n, OutShape& out);

// Forward of a CUSTOM primitive (out: W_out lanes of the shape custom_shape gave).
void custom_forward(int code, const Operand* args, int n, Real* out, uint32_t W_out,
                    LinalgScratch& scratch);

// VJP of a CUSTOM primitive w.r.t. argument `which`: ct gets the argument's size x W values.
void custom_vjp(int code, const Real* g, const Real* ans, const OutShape& out_shape,
                const Operand* args, int n, int which, Real* ct, uint32_t W,
                LinalgScratch& scratch);

}  // namespace ndvm
