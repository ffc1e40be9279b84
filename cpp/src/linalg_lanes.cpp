// Lane-vectorized (element-outer, lane-inner) kernels for the linear-algebra primitives whose
// work is a fixed sum of products: dot, vsum, vmean, scale, outer, matvec, matmul, transpose,
// trace. Same operation order as the per-lane forms in linalg.cpp.
#include "ndvm/kernels.hpp"
#include "ndvm/prims.hpp"

namespace ndvm {

namespace {

struct Lanes {
  const double* p;
  size_t es;
  size_t ls;
  const double* row(size_t e) const { return p + e * es; }
};

Lanes lanes_of(const Operand& o) {
  return {o.p, o.size() > 1 ? static_cast<size_t>(o.width) : 0, o.width > 1 ? size_t{1} : 0};
}

Lanes lanes_out(const double* p, uint32_t W) { return {p, W, 1}; }

// o[l] = init; o[l] += a(ea, l) * b(eb, l)
inline void fill(double* o, uint32_t W, double v) {
  for (uint32_t l = 0; l < W; ++l) o[l] = v;
}

inline void fma_lanes(double* o, uint32_t W, const double* a, size_t als, const double* b,
                      size_t bls) {
  if (als && bls) {
    for (uint32_t l = 0; l < W; ++l) o[l] += a[l] * b[l];
  } else if (als) {
    const double y = b[0];
    for (uint32_t l = 0; l < W; ++l) o[l] += a[l] * y;
  } else if (bls) {
    const double x = a[0];
    for (uint32_t l = 0; l < W; ++l) o[l] += x * b[l];
  } else {
    for (uint32_t l = 0; l < W; ++l) o[l] += a[0] * b[0];
  }
}

inline void mul_lanes(double* o, uint32_t W, const double* a, size_t als, const double* b,
                      size_t bls) {
  for (uint32_t l = 0; l < W; ++l) o[l] = a[l * als] * b[l * bls];
}

}  // namespace

bool lanes_forward(int code, const Operand* args, double* out, uint32_t W) {
  const Operand& A = args[0];
  const Lanes a = lanes_of(A);
  const size_t r = A.rows;
  const size_t c = A.cols;
  switch (static_cast<Prim>(code)) {
    case Prim::DOT: {
      const Lanes b = lanes_of(args[1]);
      fill(out, W, 0.0);
      for (size_t i = 0; i < r; ++i) fma_lanes(out, W, a.row(i), a.ls, b.row(i), b.ls);
      return true;
    }
    case Prim::VSUM:
    case Prim::VMEAN: {
      fill(out, W, 0.0);
      for (size_t i = 0; i < r; ++i) {
        const double* x = a.row(i);
        for (uint32_t l = 0; l < W; ++l) out[l] += x[l * a.ls];
      }
      if (static_cast<Prim>(code) == Prim::VMEAN) {
        const double n = static_cast<double>(r);
        for (uint32_t l = 0; l < W; ++l) out[l] = out[l] / n;
      }
      return true;
    }
    case Prim::SCALE: {
      const Lanes s = lanes_of(args[1]);
      for (size_t i = 0; i < r; ++i) mul_lanes(out + i * W, W, a.row(i), a.ls, s.row(0), s.ls);
      return true;
    }
    case Prim::OUTER: {
      const Lanes b = lanes_of(args[1]);
      const size_t m = args[1].rows;
      for (size_t i = 0; i < r; ++i) {
        for (size_t j = 0; j < m; ++j) {
          mul_lanes(out + (i * m + j) * W, W, a.row(i), a.ls, b.row(j), b.ls);
        }
      }
      return true;
    }
    case Prim::MATVEC: {
      const Lanes v = lanes_of(args[1]);
      for (size_t i = 0; i < r; ++i) {
        double* o = out + i * W;
        fill(o, W, 0.0);
        for (size_t j = 0; j < c; ++j) fma_lanes(o, W, a.row(i * c + j), a.ls, v.row(j), v.ls);
      }
      return true;
    }
    case Prim::MATMUL: {
      const Lanes b = lanes_of(args[1]);
      const size_t m = args[1].cols;
      for (size_t i = 0; i < r; ++i) {
        for (size_t j = 0; j < m; ++j) {
          double* o = out + (i * m + j) * W;
          fill(o, W, 0.0);
          for (size_t k = 0; k < c; ++k) {
            fma_lanes(o, W, a.row(i * c + k), a.ls, b.row(k * m + j), b.ls);
          }
        }
      }
      return true;
    }
    case Prim::TRANSPOSE:
      for (size_t i = 0; i < r; ++i) {
        for (size_t j = 0; j < c; ++j) {
          const double* x = a.row(i * c + j);
          double* o = out + (j * r + i) * W;
          for (uint32_t l = 0; l < W; ++l) o[l] = x[l * a.ls];
        }
      }
      return true;
    case Prim::TRACE:
      fill(out, W, 0.0);
      for (size_t i = 0; i < r; ++i) {
        const double* x = a.row(i * r + i);
        for (uint32_t l = 0; l < W; ++l) out[l] += x[l * a.ls];
      }
      return true;
    default: return false;
  }
}

bool lanes_vjp(int code, const double* g_ptr, const Operand* args, int which, double* ct,
               uint32_t W) {
  const Operand& A = args[0];
  const Lanes a = lanes_of(A);
  const Lanes g = lanes_out(g_ptr, W);
  const size_t r = A.rows;
  const size_t c = A.cols;
  switch (static_cast<Prim>(code)) {
    case Prim::DOT: {
      const Lanes other = lanes_of(args[1 - which]);
      for (size_t i = 0; i < r; ++i) mul_lanes(ct + i * W, W, g.row(0), 1, other.row(i), other.ls);
      return true;
    }
    case Prim::VSUM:
    case Prim::VMEAN: {
      const double f = static_cast<Prim>(code) == Prim::VSUM ? 1.0 : 1.0 / static_cast<double>(r);
      for (size_t i = 0; i < r; ++i) {
        for (uint32_t l = 0; l < W; ++l) ct[i * W + l] = g_ptr[l] * f;
      }
      return true;
    }
    case Prim::SCALE: {
      const Lanes s = lanes_of(args[1]);
      if (which == 0) {
        for (size_t i = 0; i < r; ++i) mul_lanes(ct + i * W, W, g.row(i), 1, s.row(0), s.ls);
      } else {
        fill(ct, W, 0.0);
        for (size_t i = 0; i < r; ++i) fma_lanes(ct, W, g.row(i), 1, a.row(i), a.ls);
      }
      return true;
    }
    case Prim::OUTER: {
      const Lanes b = lanes_of(args[1]);
      const size_t m = args[1].rows;
      if (which == 0) {
        for (size_t i = 0; i < r; ++i) {
          fill(ct + i * W, W, 0.0);
          for (size_t j = 0; j < m; ++j) fma_lanes(ct + i * W, W, g.row(i * m + j), 1, b.row(j), b.ls);
        }
      } else {
        for (size_t j = 0; j < m; ++j) {
          fill(ct + j * W, W, 0.0);
          for (size_t i = 0; i < r; ++i) fma_lanes(ct + j * W, W, g.row(i * m + j), 1, a.row(i), a.ls);
        }
      }
      return true;
    }
    case Prim::MATVEC: {
      const Lanes v = lanes_of(args[1]);
      if (which == 0) {
        for (size_t i = 0; i < r; ++i) {
          for (size_t j = 0; j < c; ++j) mul_lanes(ct + (i * c + j) * W, W, g.row(i), 1, v.row(j), v.ls);
        }
      } else {
        for (size_t j = 0; j < c; ++j) {
          fill(ct + j * W, W, 0.0);
          for (size_t i = 0; i < r; ++i) fma_lanes(ct + j * W, W, a.row(i * c + j), a.ls, g.row(i), 1);
        }
      }
      return true;
    }
    case Prim::MATMUL: {
      const Lanes b = lanes_of(args[1]);
      const size_t m = args[1].cols;
      if (which == 0) {
        for (size_t i = 0; i < r; ++i) {
          for (size_t k = 0; k < c; ++k) {
            double* o = ct + (i * c + k) * W;
            fill(o, W, 0.0);
            for (size_t j = 0; j < m; ++j) fma_lanes(o, W, g.row(i * m + j), 1, b.row(k * m + j), b.ls);
          }
        }
      } else {
        for (size_t k = 0; k < c; ++k) {
          for (size_t j = 0; j < m; ++j) {
            double* o = ct + (k * m + j) * W;
            fill(o, W, 0.0);
            for (size_t i = 0; i < r; ++i) fma_lanes(o, W, a.row(i * c + k), a.ls, g.row(i * m + j), 1);
          }
        }
      }
      return true;
    }
    case Prim::TRANSPOSE:
      for (size_t i = 0; i < r; ++i) {
        for (size_t j = 0; j < c; ++j) {
          const double* x = g.row(j * r + i);
          double* o = ct + (i * c + j) * W;
          for (uint32_t l = 0; l < W; ++l) o[l] = x[l];
        }
      }
      return true;
    case Prim::TRACE:
      for (size_t i = 0; i < r; ++i) {
        for (size_t j = 0; j < r; ++j) {
          const double f = i == j ? 1.0 : 0.0;
          for (uint32_t l = 0; l < W; ++l) ct[(i * r + j) * W + l] = g_ptr[l] * f;
        }
      }
      return true;
    default: return false;
  }
}

}  // namespace ndvm
