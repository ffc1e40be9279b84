// Lane-parallel LU kernels: inv, det and logdet over W lanes (per-lane partial pivoting, as
// linalg.cpp's lu()), with a register-resident branch-free form for 2 x 2, and the VJPs of
// inv, det and logdet. Same operations per lane as the scalar forms in linalg.cpp.
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "lanes.hpp"

namespace ndvm {
namespace lanes {

namespace {

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

}  // namespace

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

namespace {

// sign (NaN for a lane with a NaN entry, 0 if singular), |u00|, |u11| (0 and 1 if singular,
// so that log|det| is -inf) and their product (log_abs_product's, 1 * |u00| * |u11|) of every
// lane; LS: lane stride of the operand (0 or 1).
template <size_t LS>
NDVM_INLINE void slogdet2_factor(const Real* __restrict p0, const Real* __restrict p1,
                                 const Real* __restrict p2, const Real* __restrict p3,
                                 Real* __restrict d0, Real* __restrict d1,
                                 Real* __restrict sg, Real* __restrict pr, uint32_t W) {
#pragma GCC ivdep
  for (uint32_t l = 0; l < W; ++l) {
    const Slogdet2 s = slogdet2_parts(p0[l * LS], p1[l * LS], p2[l * LS], p3[l * LS]);
    sg[l] = s.sign;
    d0[l] = s.d0;
    d1[l] = s.d1;
    pr[l] = Real(1.0) * s.d0 * s.d1;
  }
}

// 2 x 2 slogdet: the factorization, sign, |u_ii| and their product for every lane first
// (vectorized), then the logs of all products in one vector call (vmath), then per lane
// log_abs_product's choice (its sum of logs where the product is not a normal number) and
// slogdet2_value's result: the bits of slogdet2_value on each lane alone.
NDVM_SIMD void soa_slogdet2(const Operand& m, Real* out, uint32_t W, LinalgScratch& s,
                            bool det) {
  const Quad q = quad_of(m);
  s.buf.resize(5 * size_t{W});
  Real* __restrict d0 = s.buf.data();
  Real* __restrict d1 = d0 + W;
  Real* __restrict sg = d1 + W;
  Real* __restrict pr = sg + W;
  Real* __restrict lg = pr + W;
  if (q.ls) {  // constant stride: the loop vectorizes
    slogdet2_factor<1>(q.p[0], q.p[1], q.p[2], q.p[3], d0, d1, sg, pr, W);
  } else {
    slogdet2_factor<0>(q.p[0], q.p[1], q.p[2], q.p[3], d0, d1, sg, pr, W);
  }
  vmath::log(pr, lg, W);
  int normal = 1;  // & of the lanes' flags (no branch: the loop vectorizes)
  constexpr Real lo = std::numeric_limits<Real>::min(), hi = std::numeric_limits<Real>::max();
  for (uint32_t l = 0; l < W; ++l) normal &= static_cast<int>(pr[l] >= lo) & (pr[l] <= hi);
  if (!normal) {
    for (uint32_t l = 0; l < W; ++l) {
      if (log_product_normal(pr[l])) continue;
      lg[l] = log_abs_sum(2, [&](int i) { return i == 0 ? d0[l] : d1[l]; });
    }
  }
  if (det) {
    for (uint32_t l = 0; l < W; ++l) out[l] = slogdet2_finish(lg[l], sg[l], true);
    return;
  }
#pragma GCC ivdep
  for (uint32_t l = 0; l < W; ++l) out[l] = slogdet2_finish(lg[l], sg[l], false);
}

}  // namespace

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

namespace {

// ct(i, j) = f * x(i, j), f = g * ans (det) or g; x(i, j) at x + (i * xi + j * xj) * W; add:
// ct(i, j) += that
template <bool kDet, bool kAdd>
NDVM_INLINE void scaled_by_cotangent(const Real* g, const Real* ans, const Real* x, size_t xi,
                                     size_t xj, size_t n, Real* ct, uint32_t W) {
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      const Real* xe = x + (i * xi + j * xj) * W;
      Real* o = ct + (i * n + j) * W;
      for (uint32_t l = 0; l < W; ++l) {
        const Real v = (kDet ? g[l] * ans[l] : g[l]) * xe[l];
        o[l] = kAdd ? o[l] + v : v;
      }
    }
  }
}

NDVM_SIMD void scaled_inverse_t(bool det, bool add, const Real* g, const Real* ans,
                                const Real* x, size_t xi, size_t xj, size_t n, Real* ct,
                                uint32_t W) {
  if (det && add) return scaled_by_cotangent<true, true>(g, ans, x, xi, xj, n, ct, W);
  if (det) return scaled_by_cotangent<true, false>(g, ans, x, xi, xj, n, ct, W);
  if (add) return scaled_by_cotangent<false, true>(g, ans, x, xi, xj, n, ct, W);
  scaled_by_cotangent<false, false>(g, ans, x, xi, xj, n, ct, W);
}

}  // namespace

// det/logdet: ct = f * inv(A)^T with f = g * ans (det) or g (logdet); add: ct += that
void vjp_slogdet(bool det, const Real* g, const Real* ans, const Operand& A, Real* ct,
                 uint32_t W, LinalgScratch& s, bool add) {
  const size_t n = A.rows;
  std::vector<Real>& inv = s.g;
  inv.resize(n * n * W);
  soa_inverse(A, inv.data(), W, s, true);
  scaled_inverse_t(det, add, g, ans, inv.data(), n, 1, n, ct, W);
}

// inv: -ans^T G ans^T, as t2 = (-ans^T) G, then t2 ans^T (add: added into ct)
NDVM_SIMD void vjp_inverse(const Real* g, const Real* ans, size_t n, Real* ct, uint32_t W,
                 LinalgScratch& s, bool add) {
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
      auto trow = [&](size_t k) { return t2.data() + (i * n + k) * W; };
      auto arow = [&](size_t k) { return ans + (j * n + k) * W; };
      if (add) {
        sop<false, true>(ct + (i * n + j) * W, W, n, trow, arow);
      } else {
        sop(ct + (i * n + j) * W, W, n, trow, arow);
      }
    }
  }
}


}  // namespace lanes

void slogdet_vjp_from_inverse(bool det, const Real* g, const Real* ans, const Real* inverse,
                              size_t n, Real* ct, uint32_t W, bool add) {
  lanes::scaled_inverse_t(det, add, g, ans, inverse, 1, n, n, ct, W);  // its transpose
}

}  // namespace ndvm
