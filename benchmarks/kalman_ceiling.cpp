// Hand-written ceiling: forward + gradient of the 80-step 2-D local-level Kalman NLL of
// examples/kalman80.scm, per parameter lane, with forward-mode duals over the two parameters
// (the cheapest exact gradient for P = 2). Reads T, then T rows of 2 observations, then B and
// B rows of theta (q, r unconstrained; softplus applied) from stdin; prints the NLL and
// gradient of lane 0 and the best time per lane in microseconds.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

namespace {

struct Dual {
  double v, dq, dr;
};

inline Dual operator+(Dual a, Dual b) { return {a.v + b.v, a.dq + b.dq, a.dr + b.dr}; }
inline Dual operator-(Dual a, Dual b) { return {a.v - b.v, a.dq - b.dq, a.dr - b.dr}; }
inline Dual operator*(Dual a, Dual b) {
  return {a.v * b.v, a.dq * b.v + a.v * b.dq, a.dr * b.v + a.v * b.dr};
}
inline Dual operator/(Dual a, Dual b) {
  const double inv = 1.0 / b.v;
  const double q = a.v * inv;
  return {q, (a.dq - q * b.dq) * inv, (a.dr - q * b.dr) * inv};
}
inline Dual dlog(Dual a) { return {std::log(a.v), a.dq / a.v, a.dr / a.v}; }
inline Dual cst(double x) { return {x, 0.0, 0.0}; }

struct M2 {
  Dual a, b, c, d;  // [[a b] [c d]]
};

inline M2 mmul(const M2& x, const M2& y) {
  return {x.a * y.a + x.b * y.c, x.a * y.b + x.b * y.d, x.c * y.a + x.d * y.c,
          x.c * y.b + x.d * y.d};
}

double softplus(double x) { return std::fmax(x, 0.0) + std::log1p(std::exp(-std::fabs(x))); }
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

Dual nll(const std::vector<double>& Y, int T, double tq, double tr) {
  const Dual q = {softplus(tq), sigmoid(tq), 0.0};
  const Dual r = {softplus(tr), 0.0, sigmoid(tr)};
  const Dual q2 = q * q;
  const Dual r2 = r * r;
  Dual m0 = cst(0), m1 = cst(0), out = cst(0);
  M2 P = {cst(1), cst(0), cst(0), cst(1)};
  for (int t = 0; t < T; ++t) {
    const M2 Pp = {P.a + q2, P.b, P.c, P.d + q2};
    const Dual v0 = cst(Y[2 * t]) - m0;
    const Dual v1 = cst(Y[2 * t + 1]) - m1;
    const M2 S = {Pp.a + r2, Pp.b, Pp.c, Pp.d + r2};
    const Dual det = S.a * S.d - S.b * S.c;
    const M2 Si = {S.d / det, cst(0) - S.b / det, cst(0) - S.c / det, S.a / det};
    const M2 K = mmul(Pp, Si);
    m0 = m0 + (K.a * v0 + K.b * v1);
    m1 = m1 + (K.c * v0 + K.d * v1);
    const M2 KP = mmul(K, Pp);
    P = {Pp.a - KP.a, Pp.b - KP.b, Pp.c - KP.c, Pp.d - KP.d};
    const Dual siv0 = Si.a * v0 + Si.b * v1;
    const Dual siv1 = Si.c * v0 + Si.d * v1;
    const Dual quad = v0 * siv0 + v1 * siv1;
    out = out + cst(0.5) * (dlog(det) + quad + cst(2 * 1.8378770664093453));
  }
  return out;
}

}  // namespace

int main() {
  int T = 0;
  if (std::scanf("%d", &T) != 1 || T <= 0) return 1;
  std::vector<double> Y(2 * static_cast<size_t>(T));
  for (double& y : Y) {
    if (std::scanf("%lf", &y) != 1) return 1;
  }
  int B = 0;
  if (std::scanf("%d", &B) != 1 || B <= 0) return 1;
  std::vector<double> theta(2 * static_cast<size_t>(B));
  for (double& x : theta) {
    if (std::scanf("%lf", &x) != 1) return 1;
  }
  std::vector<Dual> res(static_cast<size_t>(B));
  double best = 1e30;
  for (int rep = 0; rep < 20; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int b = 0; b < B; ++b) res[b] = nll(Y, T, theta[2 * b], theta[2 * b + 1]);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = dt < best ? dt : best;
  }
  std::printf("%.17g %.17g %.17g\n%.6f\n", res[0].v, res[0].dq, res[0].dr, best * 1e6 / B);
  return 0;
}
