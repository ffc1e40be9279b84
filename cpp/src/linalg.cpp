// Vector and matrix primitives (Shape CUSTOM), one row per primitive: shape rule, forward and
// VJP of one lane next to each other, collected into a table indexed by opcode from the
// generated primitive list (a CUSTOM primitive without its three functions does not compile).
// The lane-parallel forms of linalg_lanes.cpp run first where they exist.
// Mirrors src/ndvm/prims/linalg.py: singular or non-positive-definite lanes become NaN, never
// an error; det is sign * exp(log|det|) as NumPy computes it.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>

#include "ndvm/kernels.hpp"
#include "ndvm/prims.hpp"

namespace ndvm {
namespace {

constexpr Real kNaN = std::numeric_limits<Real>::quiet_NaN();

std::string tuple_str(const Operand& o) {
  char buf[64];
  if (o.rank == 1) {
    std::snprintf(buf, sizeof buf, "(%u,)", o.rows);
  } else if (o.rank == 2) {
    std::snprintf(buf, sizeof buf, "(%u, %u)", o.rows, o.cols);
  } else {
    std::snprintf(buf, sizeof buf, "()");
  }
  return buf;
}

std::string misfit(const char* name, const Operand& a, const Operand& b,
                   const char* why = "do not align") {
  return std::string(name) + ": shapes " + tuple_str(a) + " and " + tuple_str(b) + " " + why;
}

std::string square(const char* name, const Operand& a) {
  if (a.rows != a.cols) {
    return std::string(name) + ": expected a square matrix, got shape " + tuple_str(a);
  }
  return "";
}

// Element e of lane l.
inline Real at(const Operand& o, size_t e, uint32_t l) {
  const size_t es = o.size() > 1 ? o.width : 0;
  return o.p[e * es + (o.width > 1 ? l : 0)];
}

void gather(const Operand& o, uint32_t l, Real* buf) {
  const size_t n = o.size();
  for (size_t e = 0; e < n; ++e) buf[e] = at(o, e, l);
}

void scatter(Real* out, uint32_t W, uint32_t l, const Real* buf, size_t n) {
  for (size_t e = 0; e < n; ++e) out[e * W + l] = buf[e];
}

// In-place LU with partial pivoting (row-major n x n). Returns 0, or k > 0 when U[k-1][k-1]
// is exactly zero (singular), like LAPACK getrf.
int lu(Real* a, int n, int* piv, WorkClock& clock) {
  int info = 0;
  for (int j = 0; j < n; ++j) {
    clock.tick(static_cast<uint64_t>(n - j) * static_cast<uint64_t>(n));
    int p = j;
    Real best = std::fabs(a[j * n + j]);
    for (int i = j + 1; i < n; ++i) {
      const Real v = std::fabs(a[i * n + j]);
      if (v > best) {
        best = v;
        p = i;
      }
    }
    piv[j] = p;
    if (a[p * n + j] != 0.0) {
      if (p != j) {
        for (int k = 0; k < n; ++k) std::swap(a[j * n + k], a[p * n + k]);
      }
      for (int i = j + 1; i < n; ++i) a[i * n + j] /= a[j * n + j];
    } else if (info == 0) {
      info = j + 1;
    }
    for (int i = j + 1; i < n; ++i) {
      const Real f = a[i * n + j];
      for (int k = j + 1; k < n; ++k) a[i * n + k] -= f * a[j * n + k];
    }
  }
  return info;
}

// Solves LU x = b in place (b has n rows, k columns, row-major).
void lu_solve(const Real* a, int n, const int* piv, Real* b, int k, WorkClock& clock) {
  for (int j = 0; j < n; ++j) {
    if (piv[j] != j) {
      for (int c = 0; c < k; ++c) std::swap(b[j * k + c], b[piv[j] * k + c]);
    }
  }
  for (int i = 0; i < n; ++i) {
    clock.tick(static_cast<uint64_t>(2 * n) * static_cast<uint64_t>(k));
    for (int j = 0; j < i; ++j) {
      for (int c = 0; c < k; ++c) b[i * k + c] -= a[i * n + j] * b[j * k + c];
    }
  }
  for (int i = n - 1; i >= 0; --i) {
    for (int j = i + 1; j < n; ++j) {
      for (int c = 0; c < k; ++c) b[i * k + c] -= a[i * n + j] * b[j * k + c];
    }
    for (int c = 0; c < k; ++c) b[i * k + c] /= a[i * n + i];
  }
}

bool any_nan(const Real* a, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(a[i])) return true;
  }
  return false;
}

// x = A^-1 B for one lane (A n x n, B n x k); x NaN when A is singular. work: n*n + n ints.
void solve_lane(const Real* A, const Real* B, int n, int k, Real* x, Real* work,
                int* piv, WorkClock& clock) {
  for (int i = 0; i < n * n; ++i) work[i] = A[i];
  for (int i = 0; i < n * k; ++i) x[i] = B[i];
  if (lu(work, n, piv, clock) != 0) {
    for (int i = 0; i < n * k; ++i) x[i] = kNaN;
    return;
  }
  lu_solve(work, n, piv, x, k, clock);
}

bool all_finite(const Real* a, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i])) return false;
  }
  return true;
}

// The inverse; NaN everywhere when A is singular, has a non-finite entry, or its inverse
// overflows (a non-finite entry), as linalg.py's _inv.
void inv_lane(const Real* A, int n, Real* out, Real* work, int* piv, WorkClock& clock) {
  const size_t nn = static_cast<size_t>(n) * static_cast<size_t>(n);
  for (size_t i = 0; i < nn; ++i) out[i] = 0.0;
  for (int i = 0; i < n; ++i) out[i * n + i] = 1.0;
  for (size_t i = 0; i < nn; ++i) work[i] = A[i];
  const bool singular = lu(work, n, piv, clock) != 0;
  if (!singular) lu_solve(work, n, piv, out, n, clock);
  if (singular || !all_finite(A, nn) || !all_finite(out, nn)) {
    for (size_t i = 0; i < nn; ++i) out[i] = kNaN;
  }
}

// NumPy slogdet: (sign, log|det|); singular gives (0, -inf).
void slogdet_lane(const Real* A, int n, Real* work, int* piv, Real& sign, Real& logdet,
                  WorkClock& clock) {
  for (int i = 0; i < n * n; ++i) work[i] = A[i];
  if (lu(work, n, piv, clock) != 0) {
    sign = 0.0;
    logdet = -std::numeric_limits<Real>::infinity();
    return;
  }
  sign = 1.0;
  for (int i = 0; i < n; ++i) {
    if (piv[i] != i) sign = -sign;
    if (work[i * n + i] < 0) sign = -sign;
  }
  logdet = log_abs_product(n, [&](int i) { return std::fabs(work[i * n + i]); });
}

bool cholesky_lane(const Real* A, int n, Real* L, WorkClock& clock) {
  for (int i = 0; i < n * n; ++i) L[i] = 0.0;
  for (int j = 0; j < n; ++j) {
    clock.tick(static_cast<uint64_t>(n) * static_cast<uint64_t>(j + 1));
    Real d = A[j * n + j];
    for (int k = 0; k < j; ++k) d -= L[j * n + k] * L[j * n + k];
    if (!(d > 0.0)) return false;
    const Real ljj = std::sqrt(d);
    L[j * n + j] = ljj;
    for (int i = j + 1; i < n; ++i) {
      Real s = A[i * n + j];
      for (int k = 0; k < j; ++k) s -= L[i * n + k] * L[j * n + k];
      L[i * n + j] = s / ljj;
    }
  }
  return true;
}

struct Lane {
  std::vector<Real>& buf;
  std::vector<int>& piv;
  WorkClock& clock;
  Real* a;
  Real* b;
  Real* c;
  Real* d;
  Real* w;
  Lane(LinalgScratch& scratch, size_t m) : buf(scratch.buf), piv(scratch.piv), clock(scratch.clock) {
    buf.resize(5 * (m + 1));
    piv.resize(m + 1);
    a = buf.data();
    b = a + m + 1;
    c = b + m + 1;
    d = c + m + 1;
    w = d + m + 1;
  }
};

size_t max_size(const Operand* args, int n) {
  size_t m = 1;
  for (int i = 0; i < n; ++i) m = std::max(m, args[i].size());
  return m;
}

// ---- one row per CUSTOM primitive: shape rule, per-lane forward, per-lane VJP -------------
// Lane operands are gathered into L.a / L.b; g, ans hold the lane's output cotangent and value.

struct Ctx {
  const Operand* args;
  Lane& L;
  int r;  // rows of argument 0
  int c;  // columns of argument 0
};

using ShapeFn = std::string (*)(const Operand* args, OutShape& out);
using FwdFn = void (*)(const Ctx& k, Real* o);
using VjpFn = void (*)(const Ctx& k, int which, const Real* g, const Real* ans, Real* ct);

constexpr OutShape kScalar{0, 1, 1};

std::string shape_DOT(const Operand* a, OutShape& out) {
  out = kScalar;
  return a[0].rows != a[1].rows ? misfit("dot", a[0], a[1]) : "";
}
void fwd_DOT(const Ctx& k, Real* o) {
  Real s = 0.0;
  for (int i = 0; i < k.r; ++i) s += k.L.a[i] * k.L.b[i];
  o[0] = s;
}
void vjp_DOT(const Ctx& k, int which, const Real* g, const Real*, Real* ct) {
  for (int i = 0; i < k.r; ++i) ct[i] = g[0] * (which == 0 ? k.L.b[i] : k.L.a[i]);
}

std::string shape_VSUM(const Operand*, OutShape& out) {
  out = kScalar;
  return "";
}
void fwd_VSUM(const Ctx& k, Real* o) {
  Real s = 0.0;
  for (int i = 0; i < k.r; ++i) s += k.L.a[i];
  o[0] = s;
}
void vjp_VSUM(const Ctx& k, int, const Real* g, const Real*, Real* ct) {
  for (int i = 0; i < k.r; ++i) ct[i] = g[0] * 1.0;
}

std::string shape_VMEAN(const Operand* a, OutShape& out) { return shape_VSUM(a, out); }
void fwd_VMEAN(const Ctx& k, Real* o) {
  fwd_VSUM(k, o);
  o[0] = o[0] / k.r;
}
void vjp_VMEAN(const Ctx& k, int, const Real* g, const Real*, Real* ct) {
  for (int i = 0; i < k.r; ++i) ct[i] = g[0] * (1.0 / k.r);
}

Real sum_squares(const Ctx& k) {
  Real s = 0.0;
  for (int i = 0; i < k.r; ++i) s += k.L.a[i] * k.L.a[i];
  return s;
}

std::string shape_NORM(const Operand* a, OutShape& out) { return shape_VSUM(a, out); }
void fwd_NORM(const Ctx& k, Real* o) { o[0] = std::sqrt(sum_squares(k)); }
void vjp_NORM(const Ctx& k, int, const Real* g, const Real* ans, Real* ct) {
  for (int i = 0; i < k.r; ++i) ct[i] = ans[0] == 0 ? 0.0 : g[0] * k.L.a[i] / ans[0];
}

std::string shape_NORMALIZE(const Operand* a, OutShape& out) {
  out = {1, a[0].rows, 1};
  return "";
}
void fwd_NORMALIZE(const Ctx& k, Real* o) {
  const Real nv = std::sqrt(sum_squares(k));
  for (int i = 0; i < k.r; ++i) o[i] = k.L.a[i] / nv;
}
void vjp_NORMALIZE(const Ctx& k, int, const Real* g, const Real* ans, Real* ct) {
  Real dg = 0.0;
  const Real nv = std::sqrt(sum_squares(k));
  for (int i = 0; i < k.r; ++i) dg += ans[i] * g[i];
  for (int i = 0; i < k.r; ++i) ct[i] = (g[i] - ans[i] * dg) / nv;
}

// normalize under the dmci dialect: v / max(|v|, 1e-8) (a NaN norm stays NaN)
constexpr Real kDmciNormEps = static_cast<Real>(1e-8);
std::string shape_INTERNAL_DMCI_NORMALIZE(const Operand* a, OutShape& out) {
  return shape_NORMALIZE(a, out);
}
void fwd_INTERNAL_DMCI_NORMALIZE(const Ctx& k, Real* o) {
  const Real nv = std::sqrt(sum_squares(k));
  const Real d = nv < kDmciNormEps ? kDmciNormEps : nv;
  for (int i = 0; i < k.r; ++i) o[i] = k.L.a[i] / d;
}
void vjp_INTERNAL_DMCI_NORMALIZE(const Ctx& k, int which, const Real* g, const Real* ans,
                                 Real* ct) {
  if (std::sqrt(sum_squares(k)) < kDmciNormEps) {
    for (int i = 0; i < k.r; ++i) ct[i] = g[i] / kDmciNormEps;
    return;
  }
  vjp_NORMALIZE(k, which, g, ans, ct);
}

void cross3(const Real* u, const Real* v, Real* o) {
  o[0] = u[1] * v[2] - u[2] * v[1];
  o[1] = u[2] * v[0] - u[0] * v[2];
  o[2] = u[0] * v[1] - u[1] * v[0];
}
std::string shape_CROSS(const Operand* a, OutShape& out) {
  out = {1, 3, 1};
  return a[0].rows != 3 || a[1].rows != 3 ? misfit("cross", a[0], a[1], "must both be (3,)") : "";
}
void fwd_CROSS(const Ctx& k, Real* o) { cross3(k.L.a, k.L.b, o); }
void vjp_CROSS(const Ctx& k, int which, const Real* g, const Real*, Real* ct) {
  if (which == 0) return cross3(k.L.b, g, ct);  // cross(w, g)
  cross3(g, k.L.a, ct);                          // cross(g, v)
}

std::string shape_OUTER(const Operand* a, OutShape& out) {
  out = {2, a[0].rows, a[1].rows};
  return "";
}
void fwd_OUTER(const Ctx& k, Real* o) {
  const int m = static_cast<int>(k.args[1].rows);
  for (int i = 0; i < k.r; ++i) {
    for (int j = 0; j < m; ++j) o[i * m + j] = k.L.a[i] * k.L.b[j];
  }
}
void vjp_OUTER(const Ctx& k, int which, const Real* g, const Real*, Real* ct) {
  const int m = static_cast<int>(k.args[1].rows);
  const int n_out = which == 0 ? k.r : m;
  for (int u = 0; u < n_out; ++u) {
    Real s = 0.0;
    if (which == 0) {
      for (int j = 0; j < m; ++j) s += g[u * m + j] * k.L.b[j];
    } else {
      for (int i = 0; i < k.r; ++i) s += g[i * m + u] * k.L.a[i];
    }
    ct[u] = s;
  }
}

std::string shape_MATVEC(const Operand* a, OutShape& out) {
  out = {1, a[0].rows, 1};
  return a[0].cols != a[1].rows ? misfit("matvec", a[0], a[1]) : "";
}
void fwd_MATVEC(const Ctx& k, Real* o) {
  for (int i = 0; i < k.r; ++i) {
    Real s = 0.0;
    for (int j = 0; j < k.c; ++j) s += k.L.a[i * k.c + j] * k.L.b[j];
    o[i] = s;
  }
}
void vjp_MATVEC(const Ctx& k, int which, const Real* g, const Real*, Real* ct) {
  if (which == 0) {
    for (int i = 0; i < k.r; ++i) {
      for (int j = 0; j < k.c; ++j) ct[i * k.c + j] = g[i] * k.L.b[j];
    }
    return;
  }
  for (int j = 0; j < k.c; ++j) {
    Real s = 0.0;
    for (int i = 0; i < k.r; ++i) s += k.L.a[i * k.c + j] * g[i];
    ct[j] = s;
  }
}

// o (r x m) = x (r x n) y (n x m); x and y read through strides (transposes without copies)
void matmul_lane(const Real* x, int xs_i, int xs_k, const Real* y, int ys_k, int ys_j, int r,
                 int n, int m, Real* o, WorkClock& clock) {
  for (int i = 0; i < r; ++i) {
    clock.tick(static_cast<uint64_t>(n) * static_cast<uint64_t>(m));
    for (int j = 0; j < m; ++j) {
      Real s = 0.0;
      for (int t = 0; t < n; ++t) s += x[i * xs_i + t * xs_k] * y[t * ys_k + j * ys_j];
      o[i * m + j] = s;
    }
  }
}

std::string shape_MATMUL(const Operand* a, OutShape& out) {
  out = {2, a[0].rows, a[1].cols};
  return a[0].cols != a[1].rows ? misfit("matmul", a[0], a[1]) : "";
}
void fwd_MATMUL(const Ctx& k, Real* o) {
  const int m = static_cast<int>(k.args[1].cols);
  matmul_lane(k.L.a, k.c, 1, k.L.b, m, 1, k.r, k.c, m, o, k.L.clock);
}
void vjp_MATMUL(const Ctx& k, int which, const Real* g, const Real*, Real* ct) {
  const int m = static_cast<int>(k.args[1].cols);
  if (which == 0) return matmul_lane(g, m, 1, k.L.b, 1, m, k.r, m, k.c, ct, k.L.clock);  // G B^T
  matmul_lane(k.L.a, 1, k.c, g, m, 1, k.c, k.r, m, ct, k.L.clock);                        // A^T G
}

std::string shape_TRANSPOSE(const Operand* a, OutShape& out) {
  out = {2, a[0].cols, a[0].rows};
  return "";
}
void fwd_TRANSPOSE(const Ctx& k, Real* o) {
  for (int i = 0; i < k.r; ++i) {
    for (int j = 0; j < k.c; ++j) o[j * k.r + i] = k.L.a[i * k.c + j];
  }
}
void vjp_TRANSPOSE(const Ctx& k, int, const Real* g, const Real*, Real* ct) {
  for (int i = 0; i < k.r; ++i) {
    for (int j = 0; j < k.c; ++j) ct[i * k.c + j] = g[j * k.r + i];
  }
}

std::string shape_TRACE(const Operand* a, OutShape& out) {
  out = kScalar;
  return square("trace", a[0]);
}
void fwd_TRACE(const Ctx& k, Real* o) {
  Real s = 0.0;
  for (int i = 0; i < k.r; ++i) s += k.L.a[i * k.r + i];
  o[0] = s;
}
void vjp_TRACE(const Ctx& k, int, const Real* g, const Real*, Real* ct) {
  for (int i = 0; i < k.r; ++i) {
    for (int j = 0; j < k.r; ++j) ct[i * k.r + j] = g[0] * (i == j ? 1.0 : 0.0);
  }
}

// det/logdet: NumPy's slogdet; a lane with a NaN entry is NaN; d/dA = f A^-T
void slogdet_fwd(const Ctx& k, Real* o, bool det) {
  Real sign = 0.0;
  Real ld = 0.0;
  slogdet_lane(k.L.a, k.r, k.L.w, k.L.piv.data(), sign, ld, k.L.clock);
  o[0] = det ? sign * std::exp(ld) : ld;
  if (any_nan(k.L.a, k.args[0].size())) o[0] = kNaN;
}
void slogdet_vjp(const Ctx& k, Real f, Real* ct) {
  Real* inv = k.L.d;
  inv_lane(k.L.a, k.r, inv, k.L.w, k.L.piv.data(), k.L.clock);
  for (int i = 0; i < k.r; ++i) {
    for (int j = 0; j < k.r; ++j) ct[i * k.r + j] = f * inv[j * k.r + i];
  }
}

std::string shape_DET(const Operand* a, OutShape& out) {
  out = kScalar;
  return square("det", a[0]);
}
void fwd_DET(const Ctx& k, Real* o) { slogdet_fwd(k, o, true); }
void vjp_DET(const Ctx& k, int, const Real* g, const Real* ans, Real* ct) {
  slogdet_vjp(k, g[0] * ans[0], ct);
}

std::string shape_LOGDET(const Operand* a, OutShape& out) {
  out = kScalar;
  return square("logdet", a[0]);
}
void fwd_LOGDET(const Ctx& k, Real* o) { slogdet_fwd(k, o, false); }
void vjp_LOGDET(const Ctx& k, int, const Real* g, const Real*, Real* ct) {
  slogdet_vjp(k, g[0], ct);
}

std::string shape_INV(const Operand* a, OutShape& out) {
  out = {2, a[0].rows, a[0].rows};
  return square("inv", a[0]);
}
void fwd_INV(const Ctx& k, Real* o) { inv_lane(k.L.a, k.r, o, k.L.w, k.L.piv.data(), k.L.clock); }
void vjp_INV(const Ctx& k, int, const Real* g, const Real* ans, Real* ct) {
  Real* t2 = k.L.d;  // -ans^T G, then (-ans^T G) ans^T
  const int r = k.r;
  for (int i = 0; i < r; ++i) {
    for (int j = 0; j < r; ++j) {
      Real s = 0.0;
      for (int t = 0; t < r; ++t) s += -ans[t * r + i] * g[t * r + j];
      t2[i * r + j] = s;
    }
  }
  matmul_lane(t2, r, 1, ans, 1, r, r, r, r, ct, k.L.clock);
}

std::string shape_SOLVE(const Operand* a, OutShape& out) {
  out = {1, a[0].rows, 1};
  std::string sq = square("solve", a[0]);
  if (!sq.empty()) return sq;
  return a[1].rows != a[0].rows ? misfit("solve", a[0], a[1]) : "";
}
void fwd_SOLVE(const Ctx& k, Real* o) {
  solve_lane(k.L.a, k.L.b, k.r, 1, o, k.L.w, k.L.piv.data(), k.L.clock);
}
void vjp_SOLVE(const Ctx& k, int which, const Real* g, const Real* ans, Real* ct) {
  const int r = k.r;
  for (int i = 0; i < r; ++i) {
    for (int j = 0; j < r; ++j) k.L.c[i * r + j] = k.L.a[j * r + i];
  }
  Real* lam = k.L.d;  // A^-T g
  solve_lane(k.L.c, g, r, 1, lam, k.L.w, k.L.piv.data(), k.L.clock);
  if (which == 1) {
    for (int i = 0; i < r; ++i) ct[i] = lam[i];
    return;
  }
  for (int i = 0; i < r; ++i) {
    for (int j = 0; j < r; ++j) ct[i * r + j] = -lam[i] * ans[j];
  }
}

std::string shape_CHOLESKY(const Operand* a, OutShape& out) {
  out = {2, a[0].rows, a[0].rows};
  return square("cholesky", a[0]);
}
void fwd_CHOLESKY(const Ctx& k, Real* o) {
  if (!cholesky_lane(k.L.a, k.r, o, k.L.clock) || any_nan(k.L.a, k.args[0].size())) {
    for (size_t i = 0; i < k.args[0].size(); ++i) o[i] = kNaN;
  }
}
// Murray (2016), symmetrized, as linalg.py's _cholesky_vjp. ans: L, g: Lbar.
void vjp_CHOLESKY(const Ctx& k, int, const Real* g, const Real* Lm, Real* ct) {
  const int n = k.r;
  Lane& L = k.L;
  Real* phi = L.a;
  Real* lt = L.b;
  Real* left = L.c;
  Real* tmp = L.d;
  int* piv = L.piv.data();
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      Real s = 0.0;
      for (int t = 0; t < n; ++t) s += Lm[t * n + i] * g[t * n + j];
      phi[i * n + j] = j <= i ? s / (1.0 + (i == j ? 1.0 : 0.0)) : 0.0;
      lt[i * n + j] = Lm[j * n + i];
    }
  }
  solve_lane(lt, phi, n, n, left, L.w, piv, L.clock);  // L^-T phi
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) phi[i * n + j] = left[j * n + i];
  }
  solve_lane(lt, phi, n, n, tmp, L.w, piv, L.clock);  // s^T
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) ct[i * n + j] = 0.5 * (tmp[j * n + i] + tmp[i * n + j]);
  }
}

// ---- the table, indexed by opcode, from the generated primitive list ----------------------

struct CustomRow {
  ShapeFn shape = nullptr;
  FwdFn fwd = nullptr;
  VjpFn vjp = nullptr;
  int ranks[2] = {-1, -1};  // operand ranks, from the Python table's in_ranks
};

using CustomRows = std::array<CustomRow, kPrimCodeLimit>;

#define NDVM_ROW_NUMERIC_CUSTOM(upper, code) \
  t[code] = CustomRow{&shape_##upper, &fwd_##upper, &vjp_##upper};
#define NDVM_PRIM_RANKS(upper, code, rank0, rank1) t[code].ranks[0] = rank0, t[code].ranks[1] = rank1;
#include "ndvm/prim_rows.hpp"

const CustomRows& custom_rows() {
  static const CustomRows table = [] {
    CustomRows t{};
#include "ndvm/prims.inc"
    return t;
  }();
  return table;
}
#undef NDVM_PRIM_RANKS
#undef NDVM_PRIM

const CustomRow& row(int code) { return custom_rows()[static_cast<size_t>(code)]; }

}  // namespace

bool has_custom_row(int code) {
  if (code < 0 || code >= kPrimCodeLimit) return false;
  const CustomRow& r = row(code);
  return r.shape != nullptr && r.fwd != nullptr && r.vjp != nullptr && r.ranks[0] >= 0;
}

int custom_in_rank(int code, int i) {
  const CustomRow& r = row(code);
  return i > 0 && r.ranks[1] >= 0 ? r.ranks[1] : r.ranks[0];
}

std::string custom_shape(int code, const Operand* args, int, OutShape& out) {
  return row(code).shape(args, out);
}

void custom_forward(int code, const Operand* args, int n, Real* out, uint32_t W_out,
                    LinalgScratch& scratch) {
  if (lanes_forward(code, args, out, W_out, scratch)) return;
  OutShape shape;
  custom_shape(code, args, n, shape);
  const size_t S = static_cast<size_t>(shape.rows) * shape.cols;
  const size_t m = std::max(max_size(args, n), S);
  Lane L(scratch, m);
  const Ctx k{args, L, static_cast<int>(args[0].rows), static_cast<int>(args[0].cols)};
  const FwdFn fwd = row(code).fwd;
  for (uint32_t l = 0; l < W_out; ++l) {
    gather(args[0], l, L.a);
    if (n > 1) gather(args[1], l, L.b);
    fwd(k, L.c);
    scatter(out, W_out, l, L.c, S);
  }
}

void custom_vjp(int code, const Real* g, const Real* ans, const OutShape& out_shape,
                const Operand* args, int n, int which, Real* ct, uint32_t W,
                LinalgScratch& scratch) {
  if (lanes_vjp(code, g, ans, args, which, ct, W, scratch)) return;
  const size_t S = static_cast<size_t>(out_shape.rows) * out_shape.cols;
  const size_t m = std::max(max_size(args, n), S);
  Lane L(scratch, m);
  std::vector<Real>& lane_g = scratch.g;
  std::vector<Real>& lane_ans = scratch.ans;
  std::vector<Real>& lane_ct = scratch.ct;
  lane_g.resize(S);
  lane_ans.resize(S);
  lane_ct.resize(args[which].size());
  const Ctx k{args, L, static_cast<int>(args[0].rows), static_cast<int>(args[0].cols)};
  const VjpFn vjp = row(code).vjp;
  for (uint32_t l = 0; l < W; ++l) {
    for (size_t e = 0; e < S; ++e) {
      lane_g[e] = g[e * W + l];
      lane_ans[e] = ans[e * W + l];
    }
    gather(args[0], l, L.a);
    if (n > 1) gather(args[1], l, L.b);
    vjp(k, which, lane_g.data(), lane_ans.data(), lane_ct.data());
    scatter(ct, W, l, lane_ct.data(), lane_ct.size());
  }
}

}  // namespace ndvm
