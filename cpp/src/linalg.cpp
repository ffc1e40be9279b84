// Vector and matrix primitives (Shape CUSTOM): shape rules, forward and VJP lane loops.
// Mirrors src/ndvm/prims/linalg.py: singular or non-positive-definite lanes become NaN, never
// an error; det is sign * exp(log|det|) as NumPy computes it.
#include <cmath>
#include <cstdio>
#include <limits>

#include "ndvm/kernels.hpp"
#include "ndvm/prims.hpp"

namespace ndvm {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

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
inline double at(const Operand& o, size_t e, uint32_t l) {
  const size_t es = o.size() > 1 ? o.width : 0;
  return o.p[e * es + (o.width > 1 ? l : 0)];
}

void gather(const Operand& o, uint32_t l, double* buf) {
  const size_t n = o.size();
  for (size_t e = 0; e < n; ++e) buf[e] = at(o, e, l);
}

void scatter(double* out, uint32_t W, uint32_t l, const double* buf, size_t n) {
  for (size_t e = 0; e < n; ++e) out[e * W + l] = buf[e];
}

// In-place LU with partial pivoting (row-major n x n). Returns 0, or k > 0 when U[k-1][k-1]
// is exactly zero (singular), like LAPACK getrf.
int lu(double* a, int n, int* piv, WorkClock& clock) {
  int info = 0;
  for (int j = 0; j < n; ++j) {
    clock.tick(static_cast<uint64_t>(n - j) * static_cast<uint64_t>(n));
    int p = j;
    double best = std::fabs(a[j * n + j]);
    for (int i = j + 1; i < n; ++i) {
      const double v = std::fabs(a[i * n + j]);
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
      const double f = a[i * n + j];
      for (int k = j + 1; k < n; ++k) a[i * n + k] -= f * a[j * n + k];
    }
  }
  return info;
}

// Solves LU x = b in place (b has n rows, k columns, row-major).
void lu_solve(const double* a, int n, const int* piv, double* b, int k, WorkClock& clock) {
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

bool any_nan(const double* a, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(a[i])) return true;
  }
  return false;
}

// x = A^-1 B for one lane (A n x n, B n x k); x NaN when A is singular. work: n*n + n ints.
void solve_lane(const double* A, const double* B, int n, int k, double* x, double* work,
                int* piv, WorkClock& clock) {
  for (int i = 0; i < n * n; ++i) work[i] = A[i];
  for (int i = 0; i < n * k; ++i) x[i] = B[i];
  if (lu(work, n, piv, clock) != 0) {
    for (int i = 0; i < n * k; ++i) x[i] = kNaN;
    return;
  }
  lu_solve(work, n, piv, x, k, clock);
}

bool all_finite(const double* a, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i])) return false;
  }
  return true;
}

// The inverse; NaN everywhere when A is singular, has a non-finite entry, or its inverse
// overflows (a non-finite entry), as linalg.py's _inv.
void inv_lane(const double* A, int n, double* out, double* work, int* piv, WorkClock& clock) {
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
void slogdet_lane(const double* A, int n, double* work, int* piv, double& sign, double& logdet,
                  WorkClock& clock) {
  for (int i = 0; i < n * n; ++i) work[i] = A[i];
  if (lu(work, n, piv, clock) != 0) {
    sign = 0.0;
    logdet = -std::numeric_limits<double>::infinity();
    return;
  }
  sign = 1.0;
  logdet = 0.0;
  for (int i = 0; i < n; ++i) {
    if (piv[i] != i) sign = -sign;
    const double d = work[i * n + i];
    if (d < 0) sign = -sign;
    logdet += std::log(std::fabs(d));
  }
}

bool cholesky_lane(const double* A, int n, double* L, WorkClock& clock) {
  for (int i = 0; i < n * n; ++i) L[i] = 0.0;
  for (int j = 0; j < n; ++j) {
    clock.tick(static_cast<uint64_t>(n) * static_cast<uint64_t>(j + 1));
    double d = A[j * n + j];
    for (int k = 0; k < j; ++k) d -= L[j * n + k] * L[j * n + k];
    if (!(d > 0.0)) return false;
    const double ljj = std::sqrt(d);
    L[j * n + j] = ljj;
    for (int i = j + 1; i < n; ++i) {
      double s = A[i * n + j];
      for (int k = 0; k < j; ++k) s -= L[i * n + k] * L[j * n + k];
      L[i * n + j] = s / ljj;
    }
  }
  return true;
}

struct Lane {
  std::vector<double>& buf;
  std::vector<int>& piv;
  WorkClock& clock;
  double* a;
  double* b;
  double* c;
  double* d;
  double* w;
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

void forward_lane(int code, const Operand* args, Lane& L, double* o) {
  const Operand& A = args[0];
  const int r = static_cast<int>(A.rows);
  const int cc = static_cast<int>(A.cols);
  switch (static_cast<Prim>(code)) {
    case Prim::DOT: {
      double s = 0.0;
      for (int i = 0; i < r; ++i) s += L.a[i] * L.b[i];
      o[0] = s;
      return;
    }
    case Prim::VSUM:
    case Prim::VMEAN: {
      double s = 0.0;
      for (int i = 0; i < r; ++i) s += L.a[i];
      o[0] = static_cast<Prim>(code) == Prim::VSUM ? s : s / r;
      return;
    }
    case Prim::NORM:
    case Prim::NORMALIZE: {
      double s = 0.0;
      for (int i = 0; i < r; ++i) s += L.a[i] * L.a[i];
      const double nv = std::sqrt(s);
      if (static_cast<Prim>(code) == Prim::NORM) {
        o[0] = nv;
      } else {
        for (int i = 0; i < r; ++i) o[i] = L.a[i] / nv;
      }
      return;
    }
    case Prim::CROSS:
      o[0] = L.a[1] * L.b[2] - L.a[2] * L.b[1];
      o[1] = L.a[2] * L.b[0] - L.a[0] * L.b[2];
      o[2] = L.a[0] * L.b[1] - L.a[1] * L.b[0];
      return;
    case Prim::SCALE:
      for (int i = 0; i < r; ++i) o[i] = L.a[i] * L.b[0];
      return;
    case Prim::OUTER: {
      const int m = static_cast<int>(args[1].rows);
      for (int i = 0; i < r; ++i) {
        for (int j = 0; j < m; ++j) o[i * m + j] = L.a[i] * L.b[j];
      }
      return;
    }
    case Prim::MATVEC:
      for (int i = 0; i < r; ++i) {
        double s = 0.0;
        for (int j = 0; j < cc; ++j) s += L.a[i * cc + j] * L.b[j];
        o[i] = s;
      }
      return;
    case Prim::MATMUL: {
      const int m = static_cast<int>(args[1].cols);
      for (int i = 0; i < r; ++i) {
        for (int j = 0; j < m; ++j) {
          double s = 0.0;
          for (int k = 0; k < cc; ++k) s += L.a[i * cc + k] * L.b[k * m + j];
          o[i * m + j] = s;
        }
      }
      return;
    }
    case Prim::TRANSPOSE:
      for (int i = 0; i < r; ++i) {
        for (int j = 0; j < cc; ++j) o[j * r + i] = L.a[i * cc + j];
      }
      return;
    case Prim::TRACE: {
      double s = 0.0;
      for (int i = 0; i < r; ++i) s += L.a[i * r + i];
      o[0] = s;
      return;
    }
    case Prim::DET:
    case Prim::LOGDET: {
      double sign = 0.0;
      double ld = 0.0;
      slogdet_lane(L.a, r, L.w, L.piv.data(), sign, ld, L.clock);
      o[0] = static_cast<Prim>(code) == Prim::DET ? sign * std::exp(ld) : ld;
      if (any_nan(L.a, A.size())) o[0] = kNaN;
      return;
    }
    case Prim::INV: inv_lane(L.a, r, o, L.w, L.piv.data(), L.clock); return;
    case Prim::SOLVE: solve_lane(L.a, L.b, r, 1, o, L.w, L.piv.data(), L.clock); return;
    case Prim::CHOLESKY:
      if (!cholesky_lane(L.a, r, o, L.clock) || any_nan(L.a, A.size())) {
        for (size_t i = 0; i < A.size(); ++i) o[i] = kNaN;
      }
      return;
    default: return;
  }
}

}  // namespace

bool has_custom_row(int code) {
  OutShape tmp;
  return custom_shape(code, nullptr, -1, tmp) != "unknown";
}

std::string custom_shape(int code, const Operand* args, int n, OutShape& out) {
  const Prim p = static_cast<Prim>(code);
  if (n < 0) return (code >= 150 && code <= 166) ? "" : "unknown";
  const Operand& a = args[0];
  switch (p) {
    case Prim::DOT:
      if (a.rows != args[1].rows) return misfit("dot", a, args[1]);
      out = {0, 1, 1};
      return "";
    case Prim::VSUM:
    case Prim::VMEAN:
    case Prim::NORM: out = {0, 1, 1}; return "";
    case Prim::NORMALIZE: out = {1, a.rows, 1}; return "";
    case Prim::CROSS:
      if (a.rows != 3 || args[1].rows != 3) return misfit("cross", a, args[1], "must both be (3,)");
      out = {1, 3, 1};
      return "";
    case Prim::SCALE: out = {1, a.rows, 1}; return "";
    case Prim::OUTER: out = {2, a.rows, args[1].rows}; return "";
    case Prim::MATVEC:
      if (a.cols != args[1].rows) return misfit("matvec", a, args[1]);
      out = {1, a.rows, 1};
      return "";
    case Prim::MATMUL:
      if (a.cols != args[1].rows) return misfit("matmul", a, args[1]);
      out = {2, a.rows, args[1].cols};
      return "";
    case Prim::TRANSPOSE: out = {2, a.cols, a.rows}; return "";
    case Prim::TRACE: out = {0, 1, 1}; return square("trace", a);
    case Prim::DET: out = {0, 1, 1}; return square("det", a);
    case Prim::LOGDET: out = {0, 1, 1}; return square("logdet", a);
    case Prim::INV: out = {2, a.rows, a.rows}; return square("inv", a);
    case Prim::CHOLESKY: out = {2, a.rows, a.rows}; return square("cholesky", a);
    case Prim::SOLVE: {
      std::string s = square("solve", a);
      if (!s.empty()) return s;
      if (args[1].rows != a.rows) return misfit("solve", a, args[1]);
      out = {1, a.rows, 1};
      return "";
    }
    default: return "unknown";
  }
}

void custom_forward(int code, const Operand* args, int n, double* out, uint32_t W_out,
                    LinalgScratch& scratch) {
  if (lanes_forward(code, args, out, W_out, scratch)) return;
  OutShape shape;
  custom_shape(code, args, n, shape);
  const size_t S = static_cast<size_t>(shape.rows) * shape.cols;
  const size_t m = std::max(max_size(args, n), S);
  Lane L(scratch, m);
  for (uint32_t l = 0; l < W_out; ++l) {
    gather(args[0], l, L.a);
    if (n > 1) gather(args[1], l, L.b);
    forward_lane(code, args, L, L.c);
    scatter(out, W_out, l, L.c, S);
  }
}

namespace {

// Cotangent of argument `which` for one lane: g (output shape), ans, inputs in L.a / L.b.
void vjp_lane(int code, const Operand* args, int which, const double* g, const double* ans,
              Lane& L, double* ct) {
  const Operand& A = args[0];
  const int r = static_cast<int>(A.rows);
  const int cc = static_cast<int>(A.cols);
  double* t = L.w;  // n*n work (inverse, solve)
  double* t2 = L.d;
  int* piv = L.piv.data();
  switch (static_cast<Prim>(code)) {
    case Prim::DOT:
      for (int i = 0; i < r; ++i) ct[i] = g[0] * (which == 0 ? L.b[i] : L.a[i]);
      return;
    case Prim::VSUM:
      for (int i = 0; i < r; ++i) ct[i] = g[0] * 1.0;
      return;
    case Prim::VMEAN:
      for (int i = 0; i < r; ++i) ct[i] = g[0] * (1.0 / r);
      return;
    case Prim::NORM:
      for (int i = 0; i < r; ++i) ct[i] = ans[0] == 0 ? 0.0 : g[0] * L.a[i] / ans[0];
      return;
    case Prim::NORMALIZE: {
      double s = 0.0;
      double dg = 0.0;
      for (int i = 0; i < r; ++i) s += L.a[i] * L.a[i];
      for (int i = 0; i < r; ++i) dg += ans[i] * g[i];
      const double nv = std::sqrt(s);
      for (int i = 0; i < r; ++i) ct[i] = (g[i] - ans[i] * dg) / nv;
      return;
    }
    case Prim::CROSS: {
      const double* u = which == 0 ? L.b : g;  // cross(w, g) or cross(g, v)
      const double* v = which == 0 ? g : L.a;
      ct[0] = u[1] * v[2] - u[2] * v[1];
      ct[1] = u[2] * v[0] - u[0] * v[2];
      ct[2] = u[0] * v[1] - u[1] * v[0];
      return;
    }
    case Prim::SCALE:
      if (which == 0) {
        for (int i = 0; i < r; ++i) ct[i] = g[i] * L.b[0];
      } else {
        double s = 0.0;
        for (int i = 0; i < r; ++i) s += g[i] * L.a[i];
        ct[0] = s;
      }
      return;
    case Prim::OUTER: {
      const int m = static_cast<int>(args[1].rows);
      if (which == 0) {
        for (int i = 0; i < r; ++i) {
          double s = 0.0;
          for (int j = 0; j < m; ++j) s += g[i * m + j] * L.b[j];
          ct[i] = s;
        }
      } else {
        for (int j = 0; j < m; ++j) {
          double s = 0.0;
          for (int i = 0; i < r; ++i) s += g[i * m + j] * L.a[i];
          ct[j] = s;
        }
      }
      return;
    }
    case Prim::MATVEC:
      if (which == 0) {
        for (int i = 0; i < r; ++i) {
          for (int j = 0; j < cc; ++j) ct[i * cc + j] = g[i] * L.b[j];
        }
      } else {
        for (int j = 0; j < cc; ++j) {
          double s = 0.0;
          for (int i = 0; i < r; ++i) s += L.a[i * cc + j] * g[i];
          ct[j] = s;
        }
      }
      return;
    case Prim::MATMUL: {
      const int m = static_cast<int>(args[1].cols);
      if (which == 0) {  // G B^T: (r x m)(m x cc)
        for (int i = 0; i < r; ++i) {
          for (int k = 0; k < cc; ++k) {
            double s = 0.0;
            for (int j = 0; j < m; ++j) s += g[i * m + j] * L.b[k * m + j];
            ct[i * cc + k] = s;
          }
        }
      } else {  // A^T G: (cc x r)(r x m)
        for (int k = 0; k < cc; ++k) {
          for (int j = 0; j < m; ++j) {
            double s = 0.0;
            for (int i = 0; i < r; ++i) s += L.a[i * cc + k] * g[i * m + j];
            ct[k * m + j] = s;
          }
        }
      }
      return;
    }
    case Prim::TRANSPOSE:
      for (int i = 0; i < r; ++i) {
        for (int j = 0; j < cc; ++j) ct[i * cc + j] = g[j * r + i];
      }
      return;
    case Prim::TRACE:
      for (int i = 0; i < r; ++i) {
        for (int j = 0; j < r; ++j) ct[i * r + j] = g[0] * (i == j ? 1.0 : 0.0);
      }
      return;
    case Prim::DET:
    case Prim::LOGDET: {
      inv_lane(L.a, r, t2, t, piv, L.clock);
      const double f = static_cast<Prim>(code) == Prim::DET ? g[0] * ans[0] : g[0];
      for (int i = 0; i < r; ++i) {
        for (int j = 0; j < r; ++j) ct[i * r + j] = f * t2[j * r + i];
      }
      return;
    }
    case Prim::INV:  // -ans^T G ans^T
      for (int i = 0; i < r; ++i) {
        for (int j = 0; j < r; ++j) {
          double s = 0.0;
          for (int k = 0; k < r; ++k) s += -ans[k * r + i] * g[k * r + j];
          t2[i * r + j] = s;
        }
      }
      for (int i = 0; i < r; ++i) {
        for (int j = 0; j < r; ++j) {
          double s = 0.0;
          for (int k = 0; k < r; ++k) s += t2[i * r + k] * ans[j * r + k];
          ct[i * r + j] = s;
        }
      }
      return;
    case Prim::SOLVE: {
      for (int i = 0; i < r; ++i) {
        for (int j = 0; j < r; ++j) L.c[i * r + j] = L.a[j * r + i];
      }
      double* lam = t2;
      solve_lane(L.c, g, r, 1, lam, t, piv, L.clock);
      if (which == 1) {
        for (int i = 0; i < r; ++i) ct[i] = lam[i];
      } else {
        for (int i = 0; i < r; ++i) {
          for (int j = 0; j < r; ++j) ct[i * r + j] = -lam[i] * ans[j];
        }
      }
      return;
    }
    default: return;
  }
}

// Murray (2016), symmetrized, as linalg.py's _cholesky_vjp. ans: L, g: Lbar.
void cholesky_vjp_lane(int n, const double* g, const double* Lm, Lane& L, double* ct) {
  double* phi = L.a;
  double* lt = L.b;
  double* left = L.c;
  double* tmp = L.d;
  int* piv = L.piv.data();
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      double s = 0.0;
      for (int k = 0; k < n; ++k) s += Lm[k * n + i] * g[k * n + j];
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

}  // namespace

void custom_vjp(int code, const double* g, const double* ans, const OutShape& out_shape,
                const Operand* args, int n, int which, double* ct, uint32_t W,
                LinalgScratch& scratch) {
  if (lanes_vjp(code, g, ans, args, which, ct, W, scratch)) return;
  const size_t S = static_cast<size_t>(out_shape.rows) * out_shape.cols;
  const size_t m = std::max(max_size(args, n), S);
  Lane L(scratch, m);
  std::vector<double>& lane_g = scratch.g;
  std::vector<double>& lane_ans = scratch.ans;
  std::vector<double>& lane_ct = scratch.ct;
  lane_g.resize(S);
  lane_ans.resize(S);
  lane_ct.resize(args[which].size());
  for (uint32_t l = 0; l < W; ++l) {
    for (size_t e = 0; e < S; ++e) {
      lane_g[e] = g[e * W + l];
      lane_ans[e] = ans[e * W + l];
    }
    gather(args[0], l, L.a);
    if (n > 1) gather(args[1], l, L.b);
    if (static_cast<Prim>(code) == Prim::CHOLESKY) {
      cholesky_vjp_lane(static_cast<int>(args[0].rows), lane_g.data(), lane_ans.data(), L,
                        lane_ct.data());
    } else {
      vjp_lane(code, args, which, lane_g.data(), lane_ans.data(), L, lane_ct.data());
    }
    scatter(ct, W, l, lane_ct.data(), lane_ct.size());
  }
}

}  // namespace ndvm
