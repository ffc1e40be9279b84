// Numeric kernels: forward lane loops and VJP lane loops for every NUMERIC primitive, plus
// the predicates. Payloads are element-major: element e of lane l sits at p[e * width + l];
// width is 1 (the same on every lane) or W (one value per lane).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ndvm {

struct Operand {
  const double* p = nullptr;
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
void elementwise_forward(int code, bool dmci, const Operand* args, int n, double* out,
                         uint32_t W_out, size_t S);

// Predicate (= < > <= >= zero? ...) on rank-0 operands: out[l] = 0.0 or 1.0.
void predicate_forward(int code, const Operand* args, int n, double* out, uint32_t W_out);

// VJP of an elementwise primitive w.r.t. argument `which`: ct gets S x W values (the
// output's shape). Returns false when no gradient flows to that argument (piecewise-constant).
bool elementwise_vjp(int code, bool dmci, const double* g, const double* ans,
                     const Operand* args, int n, int which, double* ct, uint32_t W, size_t S);

// Reusable buffers of the per-lane linear-algebra kernels (one per evaluator: no
// allocation per operation once warm, no thread-local state).
struct LinalgScratch {
  std::vector<double> buf;
  std::vector<double> g;
  std::vector<double> ans;
  std::vector<double> ct;
  std::vector<int> piv;
};

// Lane-vectorized forms of CUSTOM primitives: the sums of products (dot, vsum, vmean, scale,
// outer, matvec, matmul, transpose, trace) and, over many lanes, inv/det/logdet (lane-parallel
// LU with the per-lane pivoting of the scalar form). Return false for other opcodes.
bool lanes_forward(int code, const Operand* args, double* out, uint32_t W, LinalgScratch& s);
bool lanes_forward_products(int code, const Operand* args, double* out, uint32_t W);
bool lanes_vjp(int code, const double* g, const double* ans, const Operand* args, int which,
               double* ct, uint32_t W, LinalgScratch& s);

// Shape rule of a CUSTOM (linear-algebra) primitive. Returns "" or the ShapeError message.
std::string custom_shape(int code, const Operand* args, int n, OutShape& out);

// Forward of a CUSTOM primitive (out: W_out lanes of the shape custom_shape gave).
void custom_forward(int code, const Operand* args, int n, double* out, uint32_t W_out,
                    LinalgScratch& scratch);

// VJP of a CUSTOM primitive w.r.t. argument `which`: ct gets the argument's size x W values.
void custom_vjp(int code, const double* g, const double* ans, const OutShape& out_shape,
                const Operand* args, int n, int which, double* ct, uint32_t W,
                LinalgScratch& scratch);

}  // namespace ndvm
