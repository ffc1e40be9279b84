// Lane-vectorized (element-outer, lane-inner) kernels for the linear-algebra primitives whose
// work is a fixed sum of products: dot, vsum, vmean, scale, outer, matvec, matmul, transpose,
// trace. Same operation order as the per-lane forms in linalg.cpp. Sums of products over full-
// width operands keep each output's running sum in a register over its K <= 4 terms (the 2x2
// to 4x4 matrices of state-space models) instead of streaming the output K times; the result
// is the same sum in the same order (0.0, then + x_k y_k for k = 0, 1, ...).
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "ndvm/kernels.hpp"
#include "ndvm/prims.hpp"

namespace ndvm {

namespace {

struct Lanes {
  const Real* p;
  size_t es;
  size_t ls;
  const Real* row(size_t e) const { return p + e * es; }
};

Lanes lanes_of(const Operand& o) {
  return {o.p, o.size() > 1 ? static_cast<size_t>(o.width) : 0, o.width > 1 ? size_t{1} : 0};
}

Lanes lanes_out(const Real* p, uint32_t W) { return {p, W, 1}; }

// o[l] = init; o[l] += a(ea, l) * b(eb, l)
inline void fill(Real* o, uint32_t W, Real v) {
  for (uint32_t l = 0; l < W; ++l) o[l] = v;
}

inline void fma_lanes(Real* o, uint32_t W, const Real* a, size_t als, const Real* b,
                      size_t bls) {
  if (als && bls) {
    for (uint32_t l = 0; l < W; ++l) o[l] += a[l] * b[l];
  } else if (als) {
    const Real y = b[0];
    for (uint32_t l = 0; l < W; ++l) o[l] += a[l] * y;
  } else if (bls) {
    const Real x = a[0];
    for (uint32_t l = 0; l < W; ++l) o[l] += x * b[l];
  } else {
    for (uint32_t l = 0; l < W; ++l) o[l] += a[0] * b[0];
  }
}

inline void mul_lanes(Real* o, uint32_t W, const Real* a, size_t als, const Real* b,
                      size_t bls) {
  if (als && bls) {
    for (uint32_t l = 0; l < W; ++l) o[l] = a[l] * b[l];
  } else {
    for (uint32_t l = 0; l < W; ++l) o[l] = a[l * als] * b[l * bls];
  }
}

// o[l] = 0.0 + x_0[l] y_0[l] + ... + x_{K-1}[l] y_{K-1}[l] with the sum in a register;
// kNeg: every term is (-x_t[l]) y_t[l]. All rows full-width.
template <int K, bool kNeg>
NDVM_INLINE void sop_k(Real* __restrict o, uint32_t W, const Real* const* x,
                       const Real* const* y) {
  const Real* xs[K];
  const Real* ys[K];
  for (int t = 0; t < K; ++t) {
    xs[t] = x[t];
    ys[t] = y[t];
  }
  for (uint32_t l = 0; l < W; ++l) {
    Real acc = 0.0;
    for (int t = 0; t < K; ++t) acc += (kNeg ? -xs[t][l] : xs[t][l]) * ys[t][l];
    o[l] = acc;
  }
}

// The sum of products of K full-width row pairs (xrow(t), yrow(t)) into o.
template <bool kNeg = false, class X, class Y>
NDVM_INLINE void sop(Real* o, uint32_t W, size_t K, X xrow, Y yrow) {
  if (K >= 1 && K <= 4) {
    const Real* x[4];
    const Real* y[4];
    for (size_t t = 0; t < K; ++t) {
      x[t] = xrow(t);
      y[t] = yrow(t);
    }
    switch (K) {
      case 1: return sop_k<1, kNeg>(o, W, x, y);
      case 2: return sop_k<2, kNeg>(o, W, x, y);
      case 3: return sop_k<3, kNeg>(o, W, x, y);
      default: return sop_k<4, kNeg>(o, W, x, y);
    }
  }
  fill(o, W, 0.0);
  for (size_t t = 0; t < K; ++t) {
    const Real* xp = xrow(t);
    const Real* yp = yrow(t);
    for (uint32_t l = 0; l < W; ++l) o[l] += (kNeg ? -xp[l] : xp[l]) * yp[l];
  }
}

// Lane-parallel LU with partial pivoting: the same operations, per lane, as linalg.cpp's lu()
// (pivot = first largest |a_ij|; a zero pivot marks the lane singular and skips its swap and
// scaling). Rows of b (n x k) are swapped along. a: n*n*W, b: n*k*W element-major.
struct SoaLU {
  std::vector<Real>& buf;
  std::vector<int>& piv;
  Real* a;
  Real* b;
  Real* sign;
  Real* best;
  Real* singular;
  size_t n;
  size_t k;
  uint32_t W;
  SoaLU(LinalgScratch& s, size_t n_, size_t k_, uint32_t W_)
      : buf(s.buf), piv(s.piv), n(n_), k(k_), W(W_) {
    buf.resize((n * n + n * k + 3) * W);
    piv.resize(W);
    a = buf.data();
    b = a + n * n * W;
    sign = b + n * k * W;
    best = sign + W;
    singular = best + W;
  }
  Real* A(size_t i, size_t j) { return a + (i * n + j) * W; }
  Real* Bm(size_t i, size_t c) { return b + (i * k + c) * W; }
  void load(const Operand& m) {
    const Lanes src = lanes_of(m);
    for (size_t e = 0; e < n * n; ++e) {
      const Real* x = src.row(e);
      for (uint32_t l = 0; l < W; ++l) a[e * W + l] = x[l * src.ls];
    }
  }
  void identity() {
    for (size_t i = 0; i < n; ++i) {
      for (size_t c = 0; c < k; ++c) fill(Bm(i, c), W, i == c ? 1.0 : 0.0);
    }
  }
  void factor(WorkClock& clock) {
    fill(sign, W, 1.0);
    fill(singular, W, 0.0);
    for (size_t j = 0; j < n; ++j) {
      clock.tick((n - j) * n * W);
      for (uint32_t l = 0; l < W; ++l) {
        piv[l] = static_cast<int>(j);
        best[l] = std::fabs(A(j, j)[l]);
      }
      for (size_t i = j + 1; i < n; ++i) {
        const Real* x = A(i, j);
        for (uint32_t l = 0; l < W; ++l) {
          const Real v = std::fabs(x[l]);
          if (v > best[l]) {
            best[l] = v;
            piv[l] = static_cast<int>(i);
          }
        }
      }
      for (uint32_t l = 0; l < W; ++l) {
        const size_t p = static_cast<size_t>(piv[l]);
        if (A(p, j)[l] == 0.0) {
          singular[l] = 1.0;
          piv[l] = -1;
          continue;
        }
        if (p == j) continue;
        sign[l] = -sign[l];
        for (size_t c = 0; c < n; ++c) std::swap(A(j, c)[l], A(p, c)[l]);
        for (size_t c = 0; c < k; ++c) std::swap(Bm(j, c)[l], Bm(p, c)[l]);
      }
      const Real* d = A(j, j);
      for (size_t i = j + 1; i < n; ++i) {
        Real* x = A(i, j);
        for (uint32_t l = 0; l < W; ++l) {
          if (piv[l] >= 0) x[l] /= d[l];
        }
      }
      for (size_t i = j + 1; i < n; ++i) {
        const Real* f = A(i, j);
        for (size_t c = j + 1; c < n; ++c) {
          Real* x = A(i, c);
          const Real* y = A(j, c);
          for (uint32_t l = 0; l < W; ++l) x[l] -= f[l] * y[l];
        }
      }
    }
  }
  // b <- U^-1 L^-1 b (rows already permuted); singular lanes become NaN.
  void solve(WorkClock& clock) {
    for (size_t i = 0; i < n; ++i) {
      clock.tick(2 * i * k * W);
      for (size_t j = 0; j < i; ++j) {
        const Real* f = A(i, j);
        for (size_t c = 0; c < k; ++c) {
          Real* x = Bm(i, c);
          const Real* y = Bm(j, c);
          for (uint32_t l = 0; l < W; ++l) x[l] -= f[l] * y[l];
        }
      }
    }
    for (size_t i = n; i-- > 0;) {
      for (size_t j = i + 1; j < n; ++j) {
        const Real* f = A(i, j);
        for (size_t c = 0; c < k; ++c) {
          Real* x = Bm(i, c);
          const Real* y = Bm(j, c);
          for (uint32_t l = 0; l < W; ++l) x[l] -= f[l] * y[l];
        }
      }
      const Real* d = A(i, i);
      for (size_t c = 0; c < k; ++c) {
        Real* x = Bm(i, c);
        for (uint32_t l = 0; l < W; ++l) x[l] /= d[l];
      }
    }
    for (uint32_t l = 0; l < W; ++l) {
      bool bad = singular[l] != 0.0;
      for (size_t e = 0; e < n * k && !bad; ++e) bad = !std::isfinite(b[e * W + l]);
      if (!bad) continue;
      for (size_t e = 0; e < n * k; ++e) b[e * W + l] = std::numeric_limits<Real>::quiet_NaN();
    }
  }
};

// 2 x 2: SoaLU's factor + solve for n = 2, operation for operation (partial pivoting with the
// first maximal row, l10 = a10 / a00, u11 = a11 - l10 a01, forward then back substitution),
// with each lane in registers and the pivoting as selects, so the lane loop vectorizes.
struct Lu2 {
  Real u00, u01, l10, u11;  // after the row swap: U = [u00 u01; 0 u11], L's multiplier l10
  bool swapped;
  bool singular;
};

NDVM_INLINE Lu2 lu2(Real a00, Real a01, Real a10, Real a11) {
  Lu2 f;
  f.swapped = std::fabs(a10) > std::fabs(a00);
  f.u00 = f.swapped ? a10 : a00;
  f.u01 = f.swapped ? a11 : a01;
  const Real r10 = f.swapped ? a00 : a10;
  const Real r11 = f.swapped ? a01 : a11;
  const bool zero = f.u00 == 0.0;  // singular column: the multiplier is not scaled
  const Real scaled = r10 / f.u00;  // computed on every lane (a select, not a branch)
  f.l10 = zero ? r10 : scaled;
  f.u11 = r11 - f.l10 * f.u01;
  f.singular = zero | (f.u11 == 0.0);
  return f;
}

// The four entries of lane l of a 2x2 operand (stride 0 or 1 over lanes).
struct Quad {
  const Real* p[4];
  size_t ls;
  Real at(int e, uint32_t l) const { return p[e][l * ls]; }
};

Quad quad_of(const Operand& m) {
  const Lanes src = lanes_of(m);
  return {{src.row(0), src.row(1), src.row(2), src.row(3)}, src.ls};
}

struct Inv2 {
  Real b00, b01, b10, b11;
};

NDVM_INLINE Inv2 inverse2(Real a00, Real a01, Real a10, Real a11) {
  const Lu2 f = lu2(a00, a01, a10, a11);
  // B = P I; forward: B1 -= l10 B0; back: B1 /= u11; B0 -= u01 B1; B0 /= u00
  Real b00 = f.swapped ? 0.0 : 1.0, b01 = f.swapped ? 1.0 : 0.0;
  Real b10 = f.swapped ? 1.0 : 0.0, b11 = f.swapped ? 0.0 : 1.0;
  b10 -= f.l10 * b00;
  b11 -= f.l10 * b01;
  b10 /= f.u11;
  b11 /= f.u11;
  b00 -= f.u01 * b10;
  b01 -= f.u01 * b11;
  b00 /= f.u00;
  b01 /= f.u00;
  // singular, a non-finite entry, or an overflowing inverse: NaN (as linalg.py's _inv)
  const Real z = (a00 * 0.0 + a01 * 0.0) + (a10 * 0.0 + a11 * 0.0) +
                   ((b00 * 0.0 + b01 * 0.0) + (b10 * 0.0 + b11 * 0.0));  // NaN iff non-finite
  const bool bad = f.singular | (z != 0.0);
  const Real nan = std::numeric_limits<Real>::quiet_NaN();
  return {bad ? nan : b00, bad ? nan : b01, bad ? nan : b10, bad ? nan : b11};
}

NDVM_SIMD void soa_inverse2(const Operand& m, Real* out, uint32_t W, bool transpose) {
  const Quad q = quad_of(m);
  Real* __restrict o00 = out;
  Real* __restrict o01 = out + (transpose ? 2 : 1) * size_t{W};
  Real* __restrict o10 = out + (transpose ? 1 : 2) * size_t{W};
  Real* __restrict o11 = out + 3 * size_t{W};
  const Real* __restrict p0 = q.p[0];
  const Real* __restrict p1 = q.p[1];
  const Real* __restrict p2 = q.p[2];
  const Real* __restrict p3 = q.p[3];
  const size_t ls = q.ls;
  if (ls) {
#pragma GCC ivdep
    for (uint32_t l = 0; l < W; ++l) {
      const Inv2 v = inverse2(p0[l], p1[l], p2[l], p3[l]);
      o00[l] = v.b00;
      o01[l] = v.b01;
      o10[l] = v.b10;
      o11[l] = v.b11;
    }
    return;
  }
  const Inv2 v = inverse2(p0[0], p1[0], p2[0], p3[0]);
  for (uint32_t l = 0; l < W; ++l) {
    o00[l] = v.b00;
    o01[l] = v.b01;
    o10[l] = v.b10;
    o11[l] = v.b11;
  }
}

// out (n x n, W lanes) = inverse of m, lane-parallel.
void soa_inverse(const Operand& m, Real* out, uint32_t W, LinalgScratch& s, bool transpose) {
  const size_t n = m.rows;
  if (n == 2) return soa_inverse2(m, out, W, transpose);
  SoaLU lu(s, n, n, W);
  lu.load(m);
  std::vector<uint8_t> nonfinite(W, 0);  // such lanes are NaN, as linalg.py's _inv
  for (size_t e = 0; e < n * n; ++e) {
    for (uint32_t l = 0; l < W; ++l) nonfinite[l] |= !std::isfinite(lu.a[e * W + l]);
  }
  lu.identity();
  lu.factor(s.clock);
  for (uint32_t l = 0; l < W; ++l) {
    if (nonfinite[l]) lu.singular[l] = 1.0;
  }
  lu.solve(s.clock);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      const Real* x = lu.Bm(i, j);
      Real* o = out + (transpose ? j * n + i : i * n + j) * W;
      for (uint32_t l = 0; l < W; ++l) o[l] = x[l];
    }
  }
}

// sign (NaN for a lane with a NaN entry, 0 if singular) and |u00|, |u11| (0 and 1 if singular,
// so that log|det| is -inf) of every lane; LS: lane stride of the operand (0 or 1).
template <size_t LS>
NDVM_INLINE void slogdet2_factor(const Real* __restrict p0, const Real* __restrict p1,
                                 const Real* __restrict p2, const Real* __restrict p3,
                                 Real* __restrict d0, Real* __restrict d1,
                                 Real* __restrict sg, uint32_t W) {
#pragma GCC ivdep
  for (uint32_t l = 0; l < W; ++l) {
    const Real a00 = p0[l * LS], a01 = p1[l * LS], a10 = p2[l * LS], a11 = p3[l * LS];
    const Lu2 f = lu2(a00, a01, a10, a11);
    // f.swapped, restated from the pivot itself (|a10| > |a00| <=> the pivot is a10 and not
    // a00): GCC 12 does not vectorize this loop when the select reads the flag
    Real sign = (f.u00 == a10 && f.u00 != a00) ? -1.0 : 1.0;
    sign = f.u00 < 0 ? -sign : sign;
    sign = f.u11 < 0 ? -sign : sign;
    const bool nan = (a00 != a00) | (a01 != a01) | (a10 != a10) | (a11 != a11);
    sg[l] = nan ? std::numeric_limits<Real>::quiet_NaN() : (f.singular ? 0.0 : sign);
    d0[l] = f.singular ? 0.0 : std::fabs(f.u00);
    d1[l] = f.singular ? 1.0 : std::fabs(f.u11);
  }
}

// 2 x 2 slogdet: the factorization, sign and |u_ii| for every lane first (vectorized), then
// log|det| = log_abs_product (libm calls, one lane at a time).
NDVM_SIMD void soa_slogdet2(const Operand& m, Real* out, uint32_t W, LinalgScratch& s,
                            bool det) {
  const Quad q = quad_of(m);
  s.buf.resize(3 * size_t{W});
  Real* __restrict d0 = s.buf.data();
  Real* __restrict d1 = d0 + W;
  Real* __restrict sg = d1 + W;
  if (q.ls) {  // constant stride: the loop vectorizes
    slogdet2_factor<1>(q.p[0], q.p[1], q.p[2], q.p[3], d0, d1, sg, W);
  } else {
    slogdet2_factor<0>(q.p[0], q.p[1], q.p[2], q.p[3], d0, d1, sg, W);
  }
  for (uint32_t l = 0; l < W; ++l) {
    const Real logdet = log_abs_product(2, [&](int i) { return i == 0 ? d0[l] : d1[l]; });
    const Real v = det ? sg[l] * std::exp(logdet) : logdet;
    out[l] = sg[l] != sg[l] ? sg[l] : v;
  }
}

void soa_slogdet(const Operand& m, Real* out, uint32_t W, LinalgScratch& s, bool det) {
  const size_t n = m.rows;
  if (n == 2) return soa_slogdet2(m, out, W, s, det);
  SoaLU lu(s, n, 0, W);
  lu.load(m);
  std::vector<uint8_t> nan_lane(W, 0);
  for (size_t e = 0; e < n * n; ++e) {
    for (uint32_t l = 0; l < W; ++l) nan_lane[l] |= std::isnan(lu.a[e * W + l]);
  }
  lu.factor(s.clock);
  for (uint32_t l = 0; l < W; ++l) {
    Real sign = lu.sign[l];
    Real logdet = 0.0;
    if (lu.singular[l] != 0.0) {
      sign = 0.0;
      logdet = -std::numeric_limits<Real>::infinity();
    } else {
      for (size_t i = 0; i < n; ++i) {
        if (lu.A(i, i)[l] < 0) sign = -sign;
      }
      logdet = log_abs_product(static_cast<int>(n), [&](int i) {
        return std::fabs(lu.A(static_cast<size_t>(i), static_cast<size_t>(i))[l]);
      });
    }
    out[l] = det ? sign * std::exp(logdet) : logdet;
    if (nan_lane[l]) out[l] = std::numeric_limits<Real>::quiet_NaN();
  }
}

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

bool lanes_forward(int code, const Operand* args, Real* out, uint32_t W, LinalgScratch& s) {
  if (W > 1) {
    switch (static_cast<Prim>(code)) {
      case Prim::INV: soa_inverse(args[0], out, W, s, false); return true;
      case Prim::DET: soa_slogdet(args[0], out, W, s, true); return true;
      case Prim::LOGDET: soa_slogdet(args[0], out, W, s, false); return true;
      default: break;
    }
  }
  const bool done = lanes_forward_products(code, args, out, W, s.clock);
  s.clock.raise_if_expired();
  return done;
}

NDVM_SIMD bool lanes_forward_products(int code, const Operand* args, Real* out, uint32_t W,
                                      WorkClock& clock) {
  if (W == 1 && products_one_lane(static_cast<Prim>(code), args, out, clock)) return true;
  const Operand& A = args[0];
  const Lanes a = lanes_of(A);
  const size_t r = A.rows;
  const size_t c = A.cols;
  switch (static_cast<Prim>(code)) {
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
    case Prim::VSUM:
    case Prim::VMEAN: {
      fill(out, W, 0.0);
      for (size_t i = 0; i < r; ++i) {
        const Real* x = a.row(i);
        for (uint32_t l = 0; l < W; ++l) out[l] += x[l * a.ls];
      }
      if (static_cast<Prim>(code) == Prim::VMEAN) {
        const Real n = static_cast<Real>(r);
        for (uint32_t l = 0; l < W; ++l) out[l] = out[l] / n;
      }
      return true;
    }
    case Prim::SCALE: {
      const Lanes sc = lanes_of(args[1]);
      for (size_t i = 0; i < r; ++i) mul_lanes(out + i * W, W, a.row(i), a.ls, sc.row(0), sc.ls);
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

namespace {

// det/logdet: ct = f * inv(A)^T with f = g * ans (det) or g (logdet)
NDVM_SIMD void vjp_slogdet(bool det, const Real* g, const Real* ans, const Operand& A, Real* ct,
                 uint32_t W, LinalgScratch& s) {
  const size_t n = A.rows;
  std::vector<Real>& inv = s.g;
  inv.resize(n * n * W);
  soa_inverse(A, inv.data(), W, s, true);
  for (size_t e = 0; e < n * n; ++e) {
    const Real* x = inv.data() + e * W;
    Real* o = ct + e * W;
    if (det) {
      for (uint32_t l = 0; l < W; ++l) o[l] = (g[l] * ans[l]) * x[l];
    } else {
      for (uint32_t l = 0; l < W; ++l) o[l] = g[l] * x[l];
    }
  }
}

// inv: -ans^T G ans^T, as t2 = (-ans^T) G, then t2 ans^T
NDVM_SIMD void vjp_inverse(const Real* g, const Real* ans, size_t n, Real* ct, uint32_t W,
                 LinalgScratch& s) {
  std::vector<Real>& t2 = s.ans;
  t2.resize(n * n * W);
  for (size_t i = 0; i < n; ++i) {
    if (s.clock.poll(n * n * W)) return;
    for (size_t j = 0; j < n; ++j) {
      sop<true>(t2.data() + (i * n + j) * W, W, n, [&](size_t k) { return ans + (k * n + i) * W; },
                [&](size_t k) { return g + (k * n + j) * W; });
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (s.clock.poll(n * n * W)) return;
    for (size_t j = 0; j < n; ++j) {
      sop(ct + (i * n + j) * W, W, n, [&](size_t k) { return t2.data() + (i * n + k) * W; },
          [&](size_t k) { return ans + (j * n + k) * W; });
    }
  }
}

}  // namespace

NDVM_SIMD bool lanes_vjp(int code, const Real* g_ptr, const Real* ans, const Operand* args,
                         int which, Real* ct, uint32_t W, LinalgScratch& s) {
  const Prim p = static_cast<Prim>(code);
  if (W > 1 && (p == Prim::DET || p == Prim::LOGDET)) {
    vjp_slogdet(p == Prim::DET, g_ptr, ans, args[0], ct, W, s);
    return true;
  }
  if (W > 1 && p == Prim::INV) {
    vjp_inverse(g_ptr, ans, args[0].rows, ct, W, s);
    return true;
  }
  if (W == 1 && products_vjp_one_lane(p, g_ptr, args, which, ct)) return true;
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
      const Real f = static_cast<Prim>(code) == Prim::VSUM ? 1.0 : 1.0 / static_cast<Real>(r);
      for (size_t i = 0; i < r; ++i) {
        for (uint32_t l = 0; l < W; ++l) ct[i * W + l] = g_ptr[l] * f;
      }
      return true;
    }
    case Prim::SCALE: {
      const Lanes sc = lanes_of(args[1]);
      if (which == 0) {
        for (size_t i = 0; i < r; ++i) mul_lanes(ct + i * W, W, g.row(i), 1, sc.row(0), sc.ls);
      } else if (a.ls) {
        sop(ct, W, r, [&](size_t i) { return g.row(i); }, [&](size_t i) { return a.row(i); });
      } else {
        fill(ct, W, 0.0);
        for (size_t i = 0; i < r; ++i) fma_lanes(ct, W, g.row(i), 1, a.row(i), a.ls);
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
        if (other.ls) {
          sop(ct + i * W, W, K, grow, [&](size_t t) { return other.row(t); });
          continue;
        }
        fill(ct + i * W, W, 0.0);
        for (size_t t = 0; t < K; ++t) fma_lanes(ct + i * W, W, grow(t), 1, other.row(t), 0);
      }
      return true;
    }
    case Prim::MATVEC: {
      const Lanes v = lanes_of(args[1]);
      if (which == 0) {
        for (size_t i = 0; i < r; ++i) {
          for (size_t j = 0; j < c; ++j) mul_lanes(ct + (i * c + j) * W, W, g.row(i), 1, v.row(j), v.ls);
        }
        return true;
      }
      for (size_t j = 0; j < c; ++j) {
        if (s.clock.poll(r * W)) return true;
        if (a.ls) {
          sop(ct + j * W, W, r, [&](size_t i) { return a.row(i * c + j); },
              [&](size_t i) { return g.row(i); });
          continue;
        }
        fill(ct + j * W, W, 0.0);
        for (size_t i = 0; i < r; ++i) fma_lanes(ct + j * W, W, a.row(i * c + j), a.ls, g.row(i), 1);
      }
      return true;
    }
    case Prim::MATMUL: {
      const Lanes b = lanes_of(args[1]);
      const size_t m = args[1].cols;
      if (which == 0) {  // G B^T
        for (size_t i = 0; i < r; ++i) {
          if (s.clock.poll(c * m * W)) return true;
          for (size_t k = 0; k < c; ++k) {
            Real* o = ct + (i * c + k) * W;
            if (b.ls) {
              sop(o, W, m, [&](size_t j) { return g.row(i * m + j); },
                  [&](size_t j) { return b.row(k * m + j); });
              continue;
            }
            fill(o, W, 0.0);
            for (size_t j = 0; j < m; ++j) fma_lanes(o, W, g.row(i * m + j), 1, b.row(k * m + j), b.ls);
          }
        }
      } else {  // A^T G
        for (size_t k = 0; k < c; ++k) {
          if (s.clock.poll(m * r * W)) return true;
          for (size_t j = 0; j < m; ++j) {
            Real* o = ct + (k * m + j) * W;
            if (a.ls) {
              sop(o, W, r, [&](size_t i) { return a.row(i * c + k); },
                  [&](size_t i) { return g.row(i * m + j); });
              continue;
            }
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

}  // namespace ndvm
