// Lane-vectorized (element-outer, lane-inner) kernels for the linear-algebra primitives whose
// work is a fixed sum of products: dot, vsum, vmean, outer, matvec, matmul, transpose,
// trace. Same operation order as the per-lane forms in linalg.cpp. Sums of products over full-
// width operands keep each output's running sum in a register over its K <= 4 terms (the 2x2
// to 4x4 matrices of state-space models) instead of streaming the output K times; the result
// is the same sum in the same order (0.0, then + x_k y_k for k = 0, 1, ...).
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "ndvm/prims.hpp"

#include "lanes.hpp"

namespace ndvm {

using namespace lanes;  // NOLINT: the lane helpers of lanes.hpp

namespace {

// One lane (W == 1): the sums of products of DOT / MATVEC / MATMUL as plain scalar loops, with
// the same accumulation order as the lane loops below (0.0, then += x * y in index order).
inline Real el(const Lanes& x, size_t e) { return x.row(e)[0]; }

bool products_one_lane(Prim p, const Operand* args, Real* out, WorkClock& clock) {
  const Lanes a = lanes_of(args[0]);
  const size_t r = args[0].rows;
  const size_t c = args[0].cols;
  switch (p) {
    case Prim::DOT: {
      const Lanes b = lanes_of(args[1]);
      Real acc = 0.0;
      for (size_t i = 0; i < r; ++i) acc += el(a, i) * el(b, i);
      out[0] = acc;
      return true;
    }
    case Prim::MATVEC: {
      const Lanes v = lanes_of(args[1]);
      for (size_t i = 0; i < r; ++i) {
        if (clock.poll(c)) return true;
        Real acc = 0.0;
        for (size_t j = 0; j < c; ++j) acc += el(a, i * c + j) * el(v, j);
        out[i] = acc;
      }
      return true;
    }
    case Prim::MATMUL: {
      const Lanes b = lanes_of(args[1]);
      const size_t m = args[1].cols;
      for (size_t i = 0; i < r; ++i) {
        if (clock.poll(m * c)) return true;
        for (size_t j = 0; j < m; ++j) {
          Real acc = 0.0;
          for (size_t k = 0; k < c; ++k) acc += el(a, i * c + k) * el(b, k * m + j);
          out[i * m + j] = acc;
        }
      }
      return true;
    }
    default: return false;
  }
}

bool products_vjp_one_lane(Prim p, const Real* g, const Operand* args, int which, Real* ct) {
  const Lanes a = lanes_of(args[0]);
  const size_t r = args[0].rows;
  const size_t c = args[0].cols;
  switch (p) {
    case Prim::DOT: {
      const Lanes other = lanes_of(args[1 - which]);
      for (size_t i = 0; i < r; ++i) ct[i] = g[0] * el(other, i);
      return true;
    }
    case Prim::MATVEC: {
      const Lanes v = lanes_of(args[1]);
      if (which == 0) {
        for (size_t i = 0; i < r; ++i) {
          for (size_t j = 0; j < c; ++j) ct[i * c + j] = g[i] * el(v, j);
        }
      } else {
        for (size_t j = 0; j < c; ++j) {
          Real acc = 0.0;
          for (size_t i = 0; i < r; ++i) acc += el(a, i * c + j) * g[i];
          ct[j] = acc;
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
            Real acc = 0.0;
            for (size_t j = 0; j < m; ++j) acc += g[i * m + j] * el(b, k * m + j);
            ct[i * c + k] = acc;
          }
        }
      } else {
        for (size_t k = 0; k < c; ++k) {
          for (size_t j = 0; j < m; ++j) {
            Real acc = 0.0;
            for (size_t i = 0; i < r; ++i) acc += el(a, i * c + k) * g[i * m + j];
            ct[k * m + j] = acc;
          }
        }
      }
      return true;
    }
    default: return false;
  }
}

}  // namespace

// The lane-parallel inverse and slogdet serve every W > 1, and one lane of a 2x2 (their 2x2
// closed form is the LU of the one-lane kernels, operation for operation).
bool lanes_forward(int code, const Operand* args, Real* out, uint32_t W, LinalgScratch& s) {
  const Prim p = static_cast<Prim>(code);
  const bool square = p == Prim::INV || p == Prim::DET || p == Prim::LOGDET;
  if (square && (W > 1 || args[0].rows == 2)) {
    if (p == Prim::INV) {
      soa_inverse(args[0], out, W, s, false);
    } else {
      soa_slogdet(args[0], out, W, s, p == Prim::DET);
    }
    return true;
  }
  const bool done = lanes_forward_products(code, args, out, W, s.clock);
  s.clock.raise_if_expired();
  return done;
}

namespace {

// Sums of products (dot, matvec, matmul) over W lanes; false for other opcodes.
NDVM_SIMD bool forward_sums(Prim p, const Operand* args, Real* out, uint32_t W,
                            WorkClock& clock) {
  const Operand& A = args[0];
  const Lanes a = lanes_of(A);
  const size_t r = A.rows;
  const size_t c = A.cols;
  switch (p) {
    case Prim::DOT: {
      const Lanes b = lanes_of(args[1]);
      if (a.ls && b.ls) {
        sop(out, W, r, [&](size_t i) { return a.row(i); }, [&](size_t i) { return b.row(i); });
        return true;
      }
      fill(out, W, 0.0);
      for (size_t i = 0; i < r; ++i) fma_lanes(out, W, a.row(i), a.ls, b.row(i), b.ls);
      return true;
    }
    case Prim::MATVEC: {
      const Lanes v = lanes_of(args[1]);
      for (size_t i = 0; i < r; ++i) {
        Real* o = out + i * W;
        if (clock.poll(c * W)) return true;
        if (a.ls && v.ls) {
          sop(o, W, c, [&](size_t j) { return a.row(i * c + j); }, [&](size_t j) { return v.row(j); });
          continue;
        }
        fill(o, W, 0.0);
        for (size_t j = 0; j < c; ++j) fma_lanes(o, W, a.row(i * c + j), a.ls, v.row(j), v.ls);
      }
      return true;
    }
    case Prim::MATMUL: {
      const Lanes b = lanes_of(args[1]);
      const size_t m = args[1].cols;
      for (size_t i = 0; i < r; ++i) {
        if (clock.poll(m * c * W)) return true;
        for (size_t j = 0; j < m; ++j) {
          Real* o = out + (i * m + j) * W;
          if (a.ls && b.ls) {
            sop(o, W, c, [&](size_t k) { return a.row(i * c + k); },
                [&](size_t k) { return b.row(k * m + j); });
            continue;
          }
          fill(o, W, 0.0);
          for (size_t k = 0; k < c; ++k) {
            fma_lanes(o, W, a.row(i * c + k), a.ls, b.row(k * m + j), b.ls);
          }
        }
      }
      return true;
    }
    default: return false;
  }
}

// Sums, scalings, outer products and rearrangements over W lanes; false for other opcodes.
NDVM_SIMD bool forward_maps(Prim p, const Operand* args, Real* out, uint32_t W) {
  const Operand& A = args[0];
  const Lanes a = lanes_of(A);
  const size_t r = A.rows;
  const size_t c = A.cols;
  switch (p) {
    case Prim::VSUM:
    case Prim::VMEAN: {
      fill(out, W, 0.0);
      for (size_t i = 0; i < r; ++i) {
        const Real* x = a.row(i);
        for (uint32_t l = 0; l < W; ++l) out[l] += x[l * a.ls];
      }
      if (p == Prim::VMEAN) {
        const Real n = static_cast<Real>(r);
        for (uint32_t l = 0; l < W; ++l) out[l] = out[l] / n;
      }
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
    case Prim::TRANSPOSE:
      for (size_t i = 0; i < r; ++i) {
        for (size_t j = 0; j < c; ++j) {
          const Real* x = a.row(i * c + j);
          Real* o = out + (j * r + i) * W;
          for (uint32_t l = 0; l < W; ++l) o[l] = x[l * a.ls];
        }
      }
      return true;
    case Prim::TRACE:
      fill(out, W, 0.0);
      for (size_t i = 0; i < r; ++i) {
        const Real* x = a.row(i * r + i);
        for (uint32_t l = 0; l < W; ++l) out[l] += x[l * a.ls];
      }
      return true;
    default: return false;
  }
}

// MATMUL VJP: G B^T (which 0) or A^T G (which 1); kAdd: added into ct.
template <bool kAdd>
NDVM_INLINE void vjp_matmul(const Lanes& a, const Lanes& g, const Operand* args, int which,
                            Real* ct, uint32_t W, WorkClock& clock) {
  const size_t r = args[0].rows;
  const size_t c = args[0].cols;
  const Lanes b = lanes_of(args[1]);
  const size_t m = args[1].cols;
  if (which == 0) {  // G B^T
    for (size_t i = 0; i < r; ++i) {
      if (clock.poll(c * m * W)) return;
      for (size_t k = 0; k < c; ++k) {
        sums_into<kAdd>(ct + (i * c + k) * W, W, m, [&](size_t j) { return g.row(i * m + j); }, 1,
                        [&](size_t j) { return b.row(k * m + j); }, b.ls);
      }
    }
  } else {  // A^T G
    for (size_t k = 0; k < c; ++k) {
      if (clock.poll(m * r * W)) return;
      for (size_t j = 0; j < m; ++j) {
        sums_into<kAdd>(ct + (k * m + j) * W, W, r, [&](size_t i) { return a.row(i * c + k); },
                        a.ls, [&](size_t i) { return g.row(i * m + j); }, 1);
      }
    }
  }
}

// VJPs of the sums of products (dot, outer, matvec, matmul); false for other opcodes. kAdd:
// the cotangent is added into ct (an adjoint holding earlier ones) as accumulate_lanes adds
// it, each element's cotangent computed as without kAdd.
template <bool kAdd>
NDVM_SIMD bool vjp_sums(Prim p, const Real* g_ptr, const Operand* args, int which, Real* ct,
                        uint32_t W, WorkClock& clock) {
  const Operand& A = args[0];
  const Lanes a = lanes_of(A);
  const Lanes g = lanes_out(g_ptr, W);
  const size_t r = A.rows;
  const size_t c = A.cols;
  switch (p) {
    case Prim::DOT: {
      const Lanes other = lanes_of(args[1 - which]);
      for (size_t i = 0; i < r; ++i) {
        mul_lanes<kAdd>(ct + i * W, W, g.row(0), 1, other.row(i), other.ls);
      }
      return true;
    }
    case Prim::OUTER: {
      const Lanes b = lanes_of(args[1]);
      const size_t m = args[1].rows;
      const Lanes other = which == 0 ? b : a;
      const size_t rows = which == 0 ? r : m;
      const size_t K = which == 0 ? m : r;
      for (size_t i = 0; i < rows; ++i) {
        // which 0: ct_i = sum_j g_ij b_j; which 1: ct_j = sum_i g_ij a_i
        auto grow = [&](size_t t) { return which == 0 ? g.row(i * m + t) : g.row(t * m + i); };
        sums_into<kAdd>(ct + i * W, W, K, grow, 1, [&](size_t t) { return other.row(t); },
                        other.ls);
      }
      return true;
    }
    case Prim::MATVEC: {
      const Lanes v = lanes_of(args[1]);
      if (which == 0) {
        for (size_t i = 0; i < r; ++i) {
          for (size_t j = 0; j < c; ++j) {
            mul_lanes<kAdd>(ct + (i * c + j) * W, W, g.row(i), 1, v.row(j), v.ls);
          }
        }
        return true;
      }
      for (size_t j = 0; j < c; ++j) {
        if (clock.poll(r * W)) return true;
        sums_into<kAdd>(ct + j * W, W, r, [&](size_t i) { return a.row(i * c + j); }, a.ls,
                        [&](size_t i) { return g.row(i); }, 1);
      }
      return true;
    }
    case Prim::MATMUL: vjp_matmul<kAdd>(a, g, args, which, ct, W, clock); return true;
    default: return false;
  }
}

// VJPs of vsum, vmean, transpose and trace; false for other opcodes.
NDVM_SIMD bool vjp_maps(Prim p, const Real* g_ptr, const Operand* args, Real* ct, uint32_t W) {
  const Operand& A = args[0];
  const Lanes g = lanes_out(g_ptr, W);
  const size_t r = A.rows;
  const size_t c = A.cols;
  switch (p) {
    case Prim::VSUM:
    case Prim::VMEAN: {
      const Real f = p == Prim::VSUM ? 1.0 : 1.0 / static_cast<Real>(r);
      for (size_t i = 0; i < r; ++i) {
        for (uint32_t l = 0; l < W; ++l) ct[i * W + l] = g_ptr[l] * f;
      }
      return true;
    }
    case Prim::TRANSPOSE:
      for (size_t i = 0; i < r; ++i) {
        for (size_t j = 0; j < c; ++j) {
          const Real* x = g.row(j * r + i);
          Real* o = ct + (i * c + j) * W;
          for (uint32_t l = 0; l < W; ++l) o[l] = x[l];
        }
      }
      return true;
    case Prim::TRACE:
      for (size_t i = 0; i < r; ++i) {
        for (size_t j = 0; j < r; ++j) {
          const Real f = i == j ? 1.0 : 0.0;
          for (uint32_t l = 0; l < W; ++l) ct[(i * r + j) * W + l] = g_ptr[l] * f;
        }
      }
      return true;
    default: return false;
  }
}

}  // namespace

bool lanes_forward_products(int code, const Operand* args, Real* out, uint32_t W,
                            WorkClock& clock) {
  const Prim p = static_cast<Prim>(code);
  if (W == 1 && products_one_lane(p, args, out, clock)) return true;
  return forward_sums(p, args, out, W, clock) || forward_maps(p, args, out, W);
}

bool lanes_vjp(int code, const Real* g, const Real* ans, const Operand* args, int which,
               Real* ct, uint32_t W, LinalgScratch& s) {
  const Prim p = static_cast<Prim>(code);
  const bool square = p == Prim::INV || p == Prim::DET || p == Prim::LOGDET;
  const bool soa = square && (W > 1 || args[0].rows == 2);
  if (soa && (p == Prim::DET || p == Prim::LOGDET)) {
    vjp_slogdet(p == Prim::DET, g, ans, args[0], ct, W, s);
    return true;
  }
  if (soa && p == Prim::INV) {
    vjp_inverse(g, ans, args[0].rows, ct, W, s);
    return true;
  }
  if (W == 1 && products_vjp_one_lane(p, g, args, which, ct)) return true;
  return vjp_sums<false>(p, g, args, which, ct, W, s.clock) || vjp_maps(p, g, args, ct, W);
}

bool lanes_vjp_add(int code, const Real* g, const Real* ans, const Operand* args, int which,
                   Real* adj, uint32_t W, LinalgScratch& s) {
  if (W == 1) return false;
  const Prim p = static_cast<Prim>(code);
  if (p == Prim::DET || p == Prim::LOGDET) {
    vjp_slogdet(p == Prim::DET, g, ans, args[0], adj, W, s, true);
    return true;
  }
  if (p == Prim::INV) {
    vjp_inverse(g, ans, args[0].rows, adj, W, s, true);
    return true;
  }
  return vjp_sums<true>(p, g, args, which, adj, W, s.clock);
}

}  // namespace ndvm
