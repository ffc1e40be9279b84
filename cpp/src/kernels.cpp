// Elementwise forward and VJP lane loops. Every formula mirrors the float64 reference rule
// next to the primitive's declaration in src/ndvm/prims/numeric.py (same operation order,
// same conventions at kinks, IEEE results, never a trap).
#include <cmath>
#include <limits>

#include "ndvm/kernels.hpp"
#include "ndvm/prims.hpp"

namespace ndvm {
namespace {

constexpr double kDmciEps = 1e-8;
constexpr double kTwoOverSqrtPi = 1.1283791670955126;  // 2 / sqrt(pi)

// Element e of lane l of an operand broadcast to (S, W): p[e * es + l * ls].
struct Src {
  const double* p;
  size_t es;
  size_t ls;
  double at(size_t e, size_t l) const { return p[e * es + l * ls]; }
};

Src src_of(const Operand& o) {
  return {o.p, o.size() > 1 ? static_cast<size_t>(o.width) : 0, o.width > 1 ? size_t{1} : 0};
}

Src src_out(const double* p, uint32_t W, size_t S) {
  return {p, S > 1 ? static_cast<size_t>(W) : 0, W > 1 ? size_t{1} : 0};
}

template <class F>
void map1(double* o, uint32_t W, size_t S, Src a, F f) {
  for (size_t e = 0; e < S; ++e) {
    double* oe = o + e * W;
    const double* ap = a.p + e * a.es;
    if (a.ls) {
      for (uint32_t l = 0; l < W; ++l) oe[l] = f(ap[l]);
    } else {
      const double x = ap[0];
      for (uint32_t l = 0; l < W; ++l) oe[l] = f(x);
    }
  }
}

template <class F>
void map2(double* o, uint32_t W, size_t S, Src a, Src b, F f) {
  for (size_t e = 0; e < S; ++e) {
    double* oe = o + e * W;
    const double* ap = a.p + e * a.es;
    const double* bp = b.p + e * b.es;
    if (a.ls && b.ls) {
      for (uint32_t l = 0; l < W; ++l) oe[l] = f(ap[l], bp[l]);
    } else if (a.ls) {
      const double y = bp[0];
      for (uint32_t l = 0; l < W; ++l) oe[l] = f(ap[l], y);
    } else if (b.ls) {
      const double x = ap[0];
      for (uint32_t l = 0; l < W; ++l) oe[l] = f(x, bp[l]);
    } else {
      for (uint32_t l = 0; l < W; ++l) oe[l] = f(ap[0], bp[0]);
    }
  }
}

template <class F>
void map3(double* o, uint32_t W, size_t S, Src a, Src b, Src c, F f) {
  for (size_t e = 0; e < S; ++e) {
    for (uint32_t l = 0; l < W; ++l) o[e * W + l] = f(a.at(e, l), b.at(e, l), c.at(e, l));
  }
}

// out = fold(op, init, args) left to right, as the reference's `_fold`/`_add`/`_mul`.
template <class F>
void fold(double* o, uint32_t W, size_t S, const Operand* args, int n, F f) {
  const Src first = src_of(args[0]);
  map1(o, W, S, first, [](double x) { return x; });
  for (int j = 1; j < n; ++j) map2(o, W, S, src_out(o, W, S), src_of(args[j]), f);
}

void fill_value(double* o, uint32_t W, size_t S, double v) {
  for (size_t k = 0; k < S * W; ++k) o[k] = v;
}

double np_minimum(double a, double b) { return (a < b || std::isnan(a)) ? a : b; }
double np_maximum(double a, double b) { return (a > b || std::isnan(a)) ? a : b; }
double np_sign(double x) {
  if (x > 0) return 1.0;
  if (x < 0) return -1.0;
  if (x == 0) return 0.0;
  return x;
}
double np_mod(double a, double b) {
  double mod = std::fmod(a, b);
  if (b == 0.0) return mod;
  if (mod != 0.0) {
    if ((b < 0) != (mod < 0)) mod += b;
  } else {
    mod = std::copysign(0.0, b);
  }
  return mod;
}
double sigmoid(double x) {
  const double e = std::exp(-std::fabs(x));
  return x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}
double softplus(double x) { return np_maximum(x, 0.0) + std::log1p(std::exp(-std::fabs(x))); }
double np_round(double x) { return std::nearbyint(x); }
double dmci_clamp(double x) { return np_maximum(x, kDmciEps); }

using Fn1 = double (*)(double);

Fn1 unary_fn(int code) {
  switch (static_cast<Prim>(code)) {
    case Prim::ABS: return [](double x) { return std::fabs(x); };
    case Prim::EXP: return [](double x) { return std::exp(x); };
    case Prim::LOG1P: return [](double x) { return std::log1p(x); };
    case Prim::EXPM1: return [](double x) { return std::expm1(x); };
    case Prim::SQRT: return [](double x) { return std::sqrt(x); };
    case Prim::CBRT: return [](double x) { return std::cbrt(x); };
    case Prim::SQUARE: return [](double x) { return x * x; };
    case Prim::SIN: return [](double x) { return std::sin(x); };
    case Prim::COS: return [](double x) { return std::cos(x); };
    case Prim::TAN: return [](double x) { return std::tan(x); };
    case Prim::ASIN: return [](double x) { return std::asin(x); };
    case Prim::ACOS: return [](double x) { return std::acos(x); };
    case Prim::SINH: return [](double x) { return std::sinh(x); };
    case Prim::COSH: return [](double x) { return std::cosh(x); };
    case Prim::TANH: return [](double x) { return std::tanh(x); };
    case Prim::ASINH: return [](double x) { return std::asinh(x); };
    case Prim::ACOSH: return [](double x) { return std::acosh(x); };
    case Prim::ATANH: return [](double x) { return std::atanh(x); };
    case Prim::SIGMOID: return sigmoid;
    case Prim::SOFTPLUS: return softplus;
    case Prim::ERF: return [](double x) { return std::erf(x); };
    case Prim::FLOOR: return [](double x) { return std::floor(x); };
    case Prim::CEILING: return [](double x) { return std::ceil(x); };
    case Prim::ROUND: return np_round;
    case Prim::TRUNCATE: return [](double x) { return std::trunc(x); };
    case Prim::SIGN: return np_sign;
    default: return nullptr;
  }
}

// d(ans, x) of a unary primitive: the VJP is g * d(ans, x).
using Deriv = double (*)(double, double);

Deriv unary_deriv(int code) {
  switch (static_cast<Prim>(code)) {
    case Prim::ABS: return [](double, double x) { return np_sign(x); };
    case Prim::EXP: return [](double ans, double) { return ans; };
    case Prim::LOG1P: return [](double, double x) { return 1.0 / (1.0 + x); };
    case Prim::EXPM1: return [](double ans, double) { return ans + 1.0; };
    case Prim::CBRT: return [](double ans, double) { return 1.0 / (3.0 * ans * ans); };
    case Prim::SQUARE: return [](double, double x) { return 2.0 * x; };
    case Prim::SIN: return [](double, double x) { return std::cos(x); };
    case Prim::COS: return [](double, double x) { return -std::sin(x); };
    case Prim::TAN: return [](double ans, double) { return 1.0 + ans * ans; };
    case Prim::ASIN: return [](double, double x) { return 1.0 / std::sqrt(1.0 - x * x); };
    case Prim::ACOS: return [](double, double x) { return -1.0 / std::sqrt(1.0 - x * x); };
    case Prim::SINH: return [](double, double x) { return std::cosh(x); };
    case Prim::COSH: return [](double, double x) { return std::sinh(x); };
    case Prim::TANH: return [](double ans, double) { return 1.0 - ans * ans; };
    case Prim::ASINH: return [](double, double x) { return 1.0 / std::sqrt(x * x + 1.0); };
    case Prim::ACOSH: return [](double, double x) { return 1.0 / std::sqrt(x * x - 1.0); };
    case Prim::ATANH: return [](double, double x) { return 1.0 / (1.0 - x * x); };
    case Prim::SIGMOID: return [](double ans, double) { return ans * (1.0 - ans); };
    case Prim::SOFTPLUS: return [](double, double x) { return sigmoid(x); };
    case Prim::ERF: return [](double, double x) { return kTwoOverSqrtPi * std::exp(-x * x); };
    default: return nullptr;
  }
}

void forward_binary(int code, double* o, uint32_t W, size_t S, Src a, Src b) {
  switch (static_cast<Prim>(code)) {
    case Prim::EXPT: return map2(o, W, S, a, b, [](double x, double y) { return std::pow(x, y); });
    case Prim::HYPOT:
      return map2(o, W, S, a, b, [](double x, double y) { return std::hypot(x, y); });
    case Prim::QUOTIENT:
      return map2(o, W, S, a, b, [](double x, double y) { return std::trunc(x / y); });
    case Prim::REMAINDER:
      return map2(o, W, S, a, b, [](double x, double y) { return std::fmod(x, y); });
    case Prim::MODULO: return map2(o, W, S, a, b, np_mod);
    case Prim::ATAN:
      return map2(o, W, S, a, b, [](double y, double x) { return std::atan2(y, x); });
    default: return;
  }
}

void forward_log(bool dmci, const Operand* args, int n, double* o, uint32_t W, size_t S) {
  const Src x = src_of(args[0]);
  if (n == 1) {
    if (dmci) return map1(o, W, S, x, [](double v) { return std::log(dmci_clamp(v)); });
    return map1(o, W, S, x, [](double v) { return std::log(v); });
  }
  const Src b = src_of(args[1]);
  if (dmci) {
    return map2(o, W, S, x, b,
                [](double v, double base) { return std::log(dmci_clamp(v)) / std::log(base); });
  }
  map2(o, W, S, x, b, [](double v, double base) { return std::log(v) / std::log(base); });
}

void forward_variadic(int code, const Operand* args, int n, double* o, uint32_t W, size_t S) {
  switch (static_cast<Prim>(code)) {
    case Prim::ADD:
      if (n == 0) return fill_value(o, W, S, 0.0);
      map1(o, W, S, src_of(args[0]), [](double x) { return 0.0 + x; });
      for (int j = 1; j < n; ++j) {
        map2(o, W, S, src_out(o, W, S), src_of(args[j]), [](double x, double y) { return x + y; });
      }
      return;
    case Prim::MUL:
      if (n == 0) return fill_value(o, W, S, 1.0);
      map1(o, W, S, src_of(args[0]), [](double x) { return 1.0 * x; });
      for (int j = 1; j < n; ++j) {
        map2(o, W, S, src_out(o, W, S), src_of(args[j]), [](double x, double y) { return x * y; });
      }
      return;
    case Prim::SUB:
      if (n == 1) return map1(o, W, S, src_of(args[0]), [](double x) { return -x; });
      return fold(o, W, S, args, n, [](double x, double y) { return x - y; });
    case Prim::DIV:
      if (n == 1) return map1(o, W, S, src_of(args[0]), [](double x) { return 1.0 / x; });
      return fold(o, W, S, args, n, [](double x, double y) { return x / y; });
    case Prim::MIN: return fold(o, W, S, args, n, np_minimum);
    case Prim::MAX: return fold(o, W, S, args, n, np_maximum);
    default: return;
  }
}

// One lane (W == 1) of a vector/matrix: its S elements are contiguous, so run them as S lanes
// of one element. Elementwise kernels treat every element alike, so results are identical;
// this only skips the per-element lane-loop overhead (the B=1 hot path).
constexpr int kMaxFlat = 8;

bool flatten(const Operand* args, int n, uint32_t& W, size_t& S, Operand* flat) {
  if (W != 1 || S <= 1 || n > kMaxFlat || S > 0xffffffffu) return false;
  for (int i = 0; i < n; ++i) {
    flat[i] = args[i];
    if (args[i].size() > 1) {
      flat[i].width = static_cast<uint32_t>(S);
      flat[i].rows = flat[i].cols = 1;
      flat[i].rank = 0;
    }
  }
  W = static_cast<uint32_t>(S);
  S = 1;
  return true;
}

}  // namespace

void elementwise_forward(int code, bool dmci, const Operand* args, int n, double* out,
                         uint32_t W, size_t S) {
  Operand flat[kMaxFlat];
  if (flatten(args, n, W, S, flat)) args = flat;
  const Prim p = static_cast<Prim>(code);
  if (p == Prim::LOG) return forward_log(dmci, args, n, out, W, S);
  if (p == Prim::SQRT && dmci) {
    return map1(out, W, S, src_of(args[0]), [](double x) { return std::sqrt(dmci_clamp(x)); });
  }
  if (p == Prim::ATAN && n == 1) {
    return map1(out, W, S, src_of(args[0]), [](double x) { return std::atan(x); });
  }
  if (p == Prim::CLAMP) {
    return map3(out, W, S, src_of(args[0]), src_of(args[1]), src_of(args[2]),
                [](double x, double lo, double hi) { return np_minimum(np_maximum(x, lo), hi); });
  }
  if (Fn1 f = unary_fn(code)) return map1(out, W, S, src_of(args[0]), f);
  switch (p) {
    case Prim::ADD:
    case Prim::SUB:
    case Prim::MUL:
    case Prim::DIV:
    case Prim::MIN:
    case Prim::MAX: return forward_variadic(code, args, n, out, W, S);
    default: return forward_binary(code, out, W, S, src_of(args[0]), src_of(args[1]));
  }
}

void predicate_forward(int code, const Operand* args, int n, double* out, uint32_t W) {
  const Prim p = static_cast<Prim>(code);
  auto test = [&](auto f) { map1(out, W, 1, src_of(args[0]), [f](double x) { return f(x) ? 1.0 : 0.0; }); };
  switch (p) {
    case Prim::IS_ZERO: return test([](double x) { return x == 0; });
    case Prim::IS_POSITIVE: return test([](double x) { return x > 0; });
    case Prim::IS_NEGATIVE: return test([](double x) { return x < 0; });
    case Prim::IS_FINITE: return test([](double x) { return std::isfinite(x); });
    case Prim::IS_NAN: return test([](double x) { return std::isnan(x); });
    default: break;
  }
  for (uint32_t l = 0; l < W; ++l) out[l] = 1.0;
  for (int j = 0; j + 1 < n; ++j) {
    const Src a = src_of(args[j]);
    const Src b = src_of(args[j + 1]);
    for (uint32_t l = 0; l < W; ++l) {
      const double x = a.at(0, l);
      const double y = b.at(0, l);
      bool r = false;
      switch (p) {
        case Prim::NUM_EQ: r = x == y; break;
        case Prim::LT: r = x < y; break;
        case Prim::GT: r = x > y; break;
        case Prim::LE: r = x <= y; break;
        case Prim::GE: r = x >= y; break;
        default: break;
      }
      if (!r) out[l] = 0.0;
    }
  }
}

namespace {

// g, ans: (S, W) buffers of the output; ct: (S, W).
struct VjpCtx {
  Src g;
  Src ans;
  const Operand* args;
  int n;
  double* ct;
  uint32_t W;
  size_t S;
  double x(int j, size_t e, uint32_t l) const { return src_of(args[j]).at(e, l); }
};

template <class F>
void each(const VjpCtx& c, F f) {
  for (size_t e = 0; e < c.S; ++e) {
    for (uint32_t l = 0; l < c.W; ++l) c.ct[e * c.W + l] = f(e, l, c.g.at(e, l), c.ans.at(e, l));
  }
}

bool vjp_variadic(int code, const VjpCtx& c, int which) {
  const int n = c.n;
  switch (static_cast<Prim>(code)) {
    case Prim::ADD: each(c, [](size_t, uint32_t, double g, double) { return g; }); return true;
    case Prim::SUB:
      if (n == 1 || which > 0) {
        each(c, [](size_t, uint32_t, double g, double) { return -g; });
      } else {
        each(c, [](size_t, uint32_t, double g, double) { return g; });
      }
      return true;
    case Prim::MUL:
      each(c, [&](size_t e, uint32_t l, double g, double) {
        double rest = 1.0;
        for (int j = 0; j < n; ++j) {
          if (j != which) rest = rest * c.x(j, e, l);
        }
        return g * rest;
      });
      return true;
    case Prim::DIV:
      if (n == 1) {
        each(c, [](size_t, uint32_t, double g, double ans) { return -g * ans * ans; });
      } else if (which == 0) {
        each(c, [&](size_t e, uint32_t l, double g, double) {
          double den = 1.0;
          for (int j = 1; j < n; ++j) den = den * c.x(j, e, l);
          return g / den;
        });
      } else {
        each(c, [&](size_t e, uint32_t l, double g, double ans) {
          return -g * ans / c.x(which, e, l);
        });
      }
      return true;
    case Prim::MIN:
    case Prim::MAX:
      each(c, [&](size_t e, uint32_t l, double g, double ans) {
        for (int j = 0; j < which; ++j) {
          if (c.x(j, e, l) == ans) return g * 0.0;
        }
        return g * (c.x(which, e, l) == ans ? 1.0 : 0.0);
      });
      return true;
    default: return false;
  }
}

bool vjp_binary(int code, bool dmci, const VjpCtx& c, int which) {
  switch (static_cast<Prim>(code)) {
    case Prim::EXPT:
      each(c, [&](size_t e, uint32_t l, double g, double ans) {
        const double a = c.x(0, e, l);
        const double b = c.x(1, e, l);
        if (which == 0) return g * (b == 0 ? 0.0 : b * std::pow(a, b - 1.0));
        return g * (a > 0 ? ans * std::log(a > 0 ? a : 1.0) : 0.0);
      });
      return true;
    case Prim::HYPOT:
      each(c, [&](size_t e, uint32_t l, double g, double ans) {
        const double v = c.x(which, e, l);
        return g * (ans == 0 ? 0.0 : v / ans);
      });
      return true;
    case Prim::REMAINDER:
    case Prim::MODULO: {
      const bool rem = static_cast<Prim>(code) == Prim::REMAINDER;
      each(c, [&](size_t e, uint32_t l, double g, double) {
        if (which == 0) return g;
        const double q = c.x(0, e, l) / c.x(1, e, l);
        return -g * (rem ? std::trunc(q) : std::floor(q));
      });
      return true;
    }
    case Prim::ATAN:
      each(c, [&](size_t e, uint32_t l, double g, double) {
        const double y = c.x(0, e, l);
        if (c.n == 1) return g / (1.0 + y * y);
        const double x = c.x(1, e, l);
        const double r2 = x * x + y * y;
        return which == 0 ? g * x / r2 : -g * y / r2;
      });
      return true;
    case Prim::LOG:
      each(c, [&](size_t e, uint32_t l, double g, double ans) {
        const double raw = c.x(0, e, l);
        const double x = dmci ? dmci_clamp(raw) : raw;
        double out;
        if (c.n == 1) {
          out = g / x;
        } else {
          const double b = c.x(1, e, l);
          const double lb = std::log(b);
          out = which == 0 ? g / (x * lb) : -g * ans / (b * lb);
        }
        if (dmci && which == 0 && raw < kDmciEps) return 0.0;
        return out;
      });
      return true;
    case Prim::CLAMP:
      each(c, [&](size_t e, uint32_t l, double g, double) {
        const double x = c.x(0, e, l);
        const double lo = c.x(1, e, l);
        const double hi = c.x(2, e, l);
        const bool take_x = x >= lo;
        const double inner = take_x ? x : lo;
        const bool take_inner = inner <= hi;
        bool hit = !take_inner;
        if (which == 0) hit = take_x && take_inner;
        if (which == 1) hit = !take_x && take_inner;
        return g * (hit ? 1.0 : 0.0);
      });
      return true;
    default: return false;
  }
}

}  // namespace

bool elementwise_vjp(int code, bool dmci, const double* g, const double* ans,
                     const Operand* args, int n, int which, double* ct, uint32_t W, size_t S) {
  Operand flat[kMaxFlat];
  if (flatten(args, n, W, S, flat)) args = flat;
  const VjpCtx c{src_out(g, W, S), src_out(ans, W, S), args, n, ct, W, S};
  const Prim p = static_cast<Prim>(code);
  switch (p) {
    case Prim::FLOOR:
    case Prim::CEILING:
    case Prim::ROUND:
    case Prim::TRUNCATE:
    case Prim::SIGN:
    case Prim::QUOTIENT: return false;
    case Prim::SQRT:
      each(c, [&](size_t e, uint32_t l, double gv, double a) {
        if (dmci && c.x(0, e, l) < kDmciEps) return 0.0;
        return 0.5 * gv / a;
      });
      return true;
    default: break;
  }
  if (p == Prim::ADD && n == 2) {
    const Src gs = c.g;
    map1(ct, W, S, gs, [](double v) { return v; });
    return true;
  }
  if (p == Prim::MUL && n == 2) {
    map2(ct, W, S, c.g, src_of(args[1 - which]), [](double gv, double y) { return gv * (1.0 * y); });
    return true;
  }
  if (Deriv d = unary_deriv(code)) {
    map3(ct, W, S, c.g, c.ans, src_of(args[0]),
         [d](double gv, double a, double x) { return gv * d(a, x); });
    return true;
  }
  if (vjp_variadic(code, c, which)) return true;
  return vjp_binary(code, dmci, c, which);
}

bool has_numeric_kernels(int code) {
  const PrimInfo& info = prim_info(code);
  if (info.name == nullptr || info.kind != PrimKind::NUMERIC) return false;
  if (info.shape == PrimShape::CUSTOM) {
    OutShape tmp;
    return custom_shape(code, nullptr, -1, tmp) != "unknown";
  }
  switch (static_cast<Prim>(code)) {
    case Prim::ADD: case Prim::SUB: case Prim::MUL: case Prim::DIV: case Prim::MIN:
    case Prim::MAX: case Prim::LOG: case Prim::ATAN: case Prim::CLAMP: case Prim::EXPT:
    case Prim::HYPOT: case Prim::QUOTIENT: case Prim::REMAINDER: case Prim::MODULO:
      return true;
    default: break;
  }
  const bool piecewise = static_cast<Prim>(code) >= Prim::FLOOR &&
                         static_cast<Prim>(code) <= Prim::SIGN;
  return unary_fn(code) != nullptr &&
         (unary_deriv(code) != nullptr || piecewise || static_cast<Prim>(code) == Prim::SQRT);
}

}  // namespace ndvm
