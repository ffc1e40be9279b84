// In-runtime Levenberg–Marquardt (see optimize.hpp): nonlinear least squares over the B
// parameter lanes of one program, every start a lane of the same walk.
//
// Each iteration evaluates all lanes at their trial points in one taped walk. A lane whose
// trial lowered its sum of squares accepts it; the exact Jacobian of the residuals at the
// accepted points comes from the same tape — one reverse sweep per element of the value (one
// in all for a scalar model over data lanes), the per-lane adjoints of the parameter leaves
// being the rows d r[b, n] / d theta[b] (data lanes are independent evaluations). Then every
// running lane solves its damped normal equations (J'J + lambda D) delta = -J'r by Cholesky,
// D = diag(J'J) floored (Marquardt's scaling: the step does not depend on the parameters'
// units), with Nielsen's damping update. Steps are projected on the theta box. A lane whose
// trial fails (a lane error, a non-finite residual) rejects it and damps harder: LM backs
// out of a domain error instead of failing the lane; only a lane whose start fails fails.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <type_traits>

#include "lm_rows.hpp"
#include "ndvm/optimize.hpp"

namespace ndvm {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kMaxLambda = 1e16;  // damping past this: no step lowers the loss
constexpr uint32_t kDominatedWindow = 10;
constexpr uint32_t kLinearProbes = 8;  // starts tried for a finite linearity probe
constexpr double kDominatedDrop = 0.01;
constexpr double kRadiusFactor = 100.0;

class LMRun {
 public:
  LMRun(Interp& interp, const OptimizeRequest& req)
      : in_(interp), rq_(req), B_(req.run.B), P_(req.run.program->n_params) {}

  OptimizeOutput go();

 private:
  void start();
  bool out_of_time(uint32_t it, std::chrono::steady_clock::time_point t0, double base);
  bool evaluate(const std::vector<double>& theta);
  void sweep(const double* cotangent, size_t W);
  void normal_equations();
  void accumulate(uint32_t b, uint32_t c, uint32_t s, uint32_t S);
  void compact();
  void decide(uint32_t it);
  template <class Np>
  void decide_p(uint32_t it, Np np);
  bool step(uint32_t b);
  template <class Np>
  bool step_p(uint32_t b, Np np);
  template <class Np>
  bool converged_gradient(uint32_t b, Np np) const;
  void converge(uint32_t b, int8_t why);
  int32_t reason_of(uint32_t b);
  void finish();
  void copy_first();
  void drop_dominated();
  void detect_linear();
  bool detect_linear_at(const double* th0, bool strict);  // false: not an informative point
  void follow_first();
  bool probe_columns(const std::vector<double>& rows, uint32_t n, std::vector<double>& jac);
  bool project_linear(uint32_t b);
  bool damped_solve(uint32_t b, const std::vector<uint8_t>& free, const double* dfloor, double lam) {
    return damped_solve_p(b, free, dfloor, lam, P_);
  }
  template <class Np>
  bool damped_solve_p(uint32_t b, const std::vector<uint8_t>& free, const double* dfloor,
                      double lam, Np np);

  Interp& in_;
  const OptimizeRequest& rq_;
  const uint32_t B_;
  const uint32_t P_;
  size_t M_ = 0;  // residuals per lane
  RunRequest run_;
  RunOutput last_;
  std::vector<double> trial_;    // [B, P] the points of the last walk
  std::vector<double> r_;        // [B, M] weighted residuals there
  std::vector<double> f_;        // [B] their sums of squares (inf: the lane failed)
  std::vector<double> jtj_t_;    // [B, P, P] J'J at the trial points (accepting lanes)
  std::vector<double> jtr_t_;    // [B, P] J'r there
  std::vector<double> theta_;    // [B, P] accepted points
  std::vector<double> fc_;       // [B] their sums of squares
  std::vector<double> jtj_;      // [B, P, P] J'J at the accepted points
  std::vector<double> jtr_;      // [B, P]
  std::vector<double> lambda_, nu_, pred_;  // damping, its growth, predicted reduction
  std::vector<double> scale_;    // [B, P] D: running max of J's column norms (MINPACK's diag)
  std::vector<double> radius_;   // [B] trust radius on |D delta|
  std::vector<double> sn_;       // [B] |D delta| of the last trial step
  std::vector<uint8_t> linear_;  // [P] parameters the model is jointly affine in
  bool any_linear_ = false;
  std::vector<uint8_t> projected_;  // [B] the last trial was the linear parameters' solve
  RunOutput probe_;
  std::vector<uint8_t> accept_;
  std::vector<uint8_t> under_;  // [B] the last walk's sum of squares underflowed
  std::vector<double> ct_, jac_, a_, x_, y_, w_, rows_scratch_;
  std::vector<const Real*> adj_;     // [P] the last sweep's adjoint columns (nullptr: unused)
  std::vector<const double*> cols_;  // [P] the same as doubles over the walk's lanes
  std::vector<const double*> lane_cols_;  // [P] one lane's rows of cols_
  std::vector<double> zeros_;        // the column of a parameter the value does not use
  std::vector<uint32_t> idx_;
  std::vector<uint8_t> free_;
  std::vector<double> floor_, zeros_p_;  // [P] step's damping floors; zeros (no damping)
  std::vector<int32_t> err_map_;
  bool follow_ = false;          // the other lanes copy lane 0 (follow_first)
  std::vector<uint32_t> act_;    // the lanes a walk evaluates (walk row c is lane act_[c])
  std::vector<double> ctheta_;   // [act_.size(), P] their points when fewer than B
  OptimizeOutput out_;
};

// The walk narrows to the running lanes once at most half of the lanes it evaluates still
// run (so the replayed trace, keyed by the lane count, changes at most log2(B) times): the
// lanes that stopped cost nothing more. Lanes are independent, so a lane's values do not
// depend on which others share its walk.
void LMRun::compact() {
  uint32_t running = 0;
  for (uint32_t b = 0; b < B_; ++b) running += out_.state[b] == LANE_RUNNING;
  if (running == 0 || 2 * static_cast<size_t>(running) > act_.size()) return;
  act_.clear();
  for (uint32_t b = 0; b < B_; ++b) {
    if (out_.state[b] == LANE_RUNNING) act_.push_back(b);
  }
}

// One taped walk at ``theta`` over the lanes in act_: residuals and sums of squares per lane
// (infinite for the lanes left out); false when the result is not numeric or does not match
// the target.
bool LMRun::evaluate(const std::vector<double>& theta) {
  compact();
  const uint32_t Bc = static_cast<uint32_t>(act_.size());
  run_.B = Bc;
  run_.theta = theta.data();
  if (Bc < B_) {
    ctheta_.resize(static_cast<size_t>(Bc) * P_);
    for (uint32_t c = 0; c < Bc; ++c) {
      std::copy_n(theta.data() + static_cast<size_t>(act_[c]) * P_, P_, ctheta_.data() + static_cast<size_t>(c) * P_);
    }
    run_.theta = ctheta_.data();
  }
  run_.grad = false;
  in_.run(run_, last_);
  out_.evaluations += 1;
  if (!last_.numeric) return false;
  const size_t M = in_.value_size() / Bc;  // values per lane, in place or copied
  if (M != rq_.target_len) {
    out_.target_mismatch = true;
    return false;
  }
  M_ = M;
  r_.resize(static_cast<size_t>(B_) * M);
  f_.assign(B_, kInf);
  if (w_.size() != M) {  // the residual weights (1 without sigma), once per fit
    w_.assign(M, 1.0);
    if (rq_.residual_weight) std::copy_n(rq_.residual_weight, M, w_.data());
  }
  const double* __restrict val = last_.view ? last_.view : last_.value.data();
  const double* __restrict w = w_.data();
  for (uint32_t c = 0; c < Bc; ++c) {
    const uint32_t b = act_[c];
    const double* __restrict t = rq_.target + (rq_.target_per_lane ? b * M : 0);
    double* __restrict r = r_.data() + static_cast<size_t>(b) * M;
    const double* __restrict v = val + static_cast<size_t>(c) * M;
    const double sum = lm_residuals(v, t, rq_.residual_weight ? w : nullptr, M, r);
    bool lane_failed = false;
    if (!last_.errors.empty() && !last_.status.empty()) {  // status 2 only where an error is
      const int8_t* st = last_.status.data() + static_cast<size_t>(c) * run_.Ng;
      for (uint32_t n = 0; n < run_.Ng; ++n) lane_failed = lane_failed || st[n] == 2;
    }
    f_[b] = (lane_failed || !std::isfinite(sum)) ? kInf : sum;
    under_[b] = 0;
    if (sum < std::numeric_limits<double>::min()) {  // 0 or subnormal: an exact fit, or underflow
      for (size_t m = 0; m < M && !under_[b]; ++m) under_[b] = r[m] != 0.0;
    }
  }
  err_map_.assign(last_.errors.size(), -1);
  return true;
}


// A sweep's adjoint columns as doubles: in place in the float64 core; in the float32 core
// converted into buf [P, W]. Unused parameters read the zero column.
[[maybe_unused]] void as_columns(const std::vector<const double*>& adj, size_t, const double* zeros,
                std::vector<double>&, std::vector<const double*>& cols) {
  cols.resize(adj.size());
  for (size_t i = 0; i < adj.size(); ++i) cols[i] = adj[i] ? adj[i] : zeros;
}

[[maybe_unused]] void as_columns(const std::vector<const float*>& adj, size_t W,
                                 const double* zeros, std::vector<double>& buf,
                                 std::vector<const double*>& cols) {
  cols.resize(adj.size());
  buf.resize(adj.size() * W);
  for (size_t i = 0; i < adj.size(); ++i) {
    if (!adj[i]) {
      cols[i] = zeros;
      continue;
    }
    std::copy_n(adj[i], W, buf.data() + i * W);
    cols[i] = buf.data() + i * W;
  }
}

// One reverse sweep of the last walk (W lanes): cols_[i] is parameter i's column of
// d sum(cotangent * value) / d theta over the lanes, read where the sweep left it.
void LMRun::sweep(const double* cotangent, size_t W) {
  if (zeros_.size() < W) zeros_.assign(W, 0.0);
  in_.lane_adjoints(cotangent, adj_);
  as_columns(adj_, W, zeros_.data(), jac_, cols_);
}

// Adds lane b's rows of the last sweep (walk row c, value element s of S) to its J'J and J'r
// (element 0's to zeros).
void LMRun::accumulate(uint32_t b, uint32_t c, uint32_t s, uint32_t S) {
  const uint32_t Ng = run_.Ng;
  const size_t PP = static_cast<size_t>(P_) * P_;
  lane_cols_.resize(P_);
  for (uint32_t i = 0; i < P_; ++i) lane_cols_[i] = cols_[i] + static_cast<size_t>(c) * Ng;
  lm_add_rows(lane_cols_.data(), P_, w_.data() + s, r_.data() + static_cast<size_t>(b) * M_ + s,
              Ng, S, jtj_t_.data() + b * PP, jtr_t_.data() + static_cast<size_t>(b) * P_, s == 0,
              rows_scratch_);
}

// J'J and J'r at the trial points of the accepting lanes: one reverse sweep per element of
// the value, each giving every lane's row d value[b, n, s] / d theta[b] (with one element,
// the seed 1 on every lane is the sweep's own: no cotangent).
void LMRun::normal_equations() {
  const uint32_t S = in_.value_elements();
  const uint32_t Ng = run_.Ng;
  const size_t W = act_.size() * Ng;
  const size_t PP = static_cast<size_t>(P_) * P_;
  if (S > 1) ct_.assign(W * S, 0.0);
  for (uint32_t s = 0; s < S; ++s) {
    if (S > 1) {
      for (size_t l = 0; l < W; ++l) ct_[l * S + s] = 1.0;
    }
    sweep(S > 1 ? ct_.data() : nullptr, W);
    if (S > 1) {
      for (size_t l = 0; l < W; ++l) ct_[l * S + s] = 0.0;
    }
    for (uint32_t c = 0; c < act_.size(); ++c) {
      if (accept_[act_[c]]) accumulate(act_[c], c, s, S);
    }
  }
  for (uint32_t b = 0; b < B_; ++b) {
    if (!accept_[b]) continue;
    double* jtj = jtj_t_.data() + b * PP;
    bool finite = true;
    for (uint32_t i = 0; i < P_; ++i) {
      for (uint32_t k = 0; k < i; ++k) jtj[k * P_ + i] = jtj[i * P_ + k];
      finite = finite && std::isfinite(jtr_t_[static_cast<size_t>(b) * P_ + i]);
    }
    if (!finite) {  // a non-finite derivative: the point cannot be stepped from
      accept_[b] = 0;
      f_[b] = kInf;
    }
  }
}

// lane_reasons (the first error naming the lane), else a non-finite loss.
int32_t LMRun::reason_of(uint32_t b) {
  for (size_t e = 0; e < last_.errors.size(); ++e) {
    bool hit = false;
    for (int64_t lane : last_.errors[e].lanes) {
      hit = hit || (lane >= 0 && static_cast<size_t>(lane) < act_.size() && act_[lane] == b);
    }
    if (!hit) continue;
    if (err_map_[e] < 0) {
      err_map_[e] = static_cast<int32_t>(out_.errors.size());
      out_.errors.push_back(last_.errors[e]);
    }
    return err_map_[e];
  }
  return kNonFiniteLoss;
}

void LMRun::converge(uint32_t b, int8_t why) {
  out_.state[b] = LANE_CONVERGED;
  out_.why[b] = why;
}

// The cosine test (MINPACK's gtol): every column of J is orthogonal to r within gtol.
template <class Np>
bool LMRun::converged_gradient(uint32_t b, Np np) const {
  const uint32_t P = np;
  const size_t PP = static_cast<size_t>(P) * P;
  const double rn = std::sqrt(fc_[b]);
  if (rn == 0.0) return true;
  double worst = 0.0;
  for (uint32_t i = 0; i < P; ++i) {
    const double cn = std::sqrt(jtj_[b * PP + i * P + i]);
    if (cn > 0.0) worst = std::max(worst, std::fabs(jtr_[static_cast<size_t>(b) * P + i]) / (cn * rn));
  }
  return worst <= rq_.lm.gtol;
}

// Accept or reject each running lane's trial; update damping; test convergence.
template <class Np>
void LMRun::decide_p(uint32_t it, Np np) {
  const uint32_t P = np;  // P_, or the same as a constant: the loops unroll
  const size_t PP = static_cast<size_t>(P) * P;
  for (uint32_t b = 0; b < B_; ++b) {
    if (out_.state[b] != LANE_RUNNING) continue;
    const double ft = f_[b];
    if (it == 0) {
      if (!accept_[b]) {
        out_.state[b] = LANE_FAILED;
        out_.reason[b] = reason_of(b);
        continue;
      }
    } else if (accept_[b]) {
      const double actual = fc_[b] - ft;
      const double rho = pred_[b] > 0.0 ? actual / pred_[b] : 0.0;
      const double c = 2.0 * rho - 1.0;
      lambda_[b] *= std::max(1.0 / 3.0, 1.0 - c * c * c);
      nu_[b] = 2.0;
      if (rho < 0.25) {
        radius_[b] *= 0.5;
      } else if (rho > 0.75) {
        radius_[b] = std::max(radius_[b], 2.0 * sn_[b]);
      }
      const bool small_f = actual <= rq_.lm.ftol * fc_[b] && pred_[b] <= rq_.lm.ftol * fc_[b];
      if (small_f) out_.why[b] = kWhyFtol;
      if (lm_small_step(scale_.data() + static_cast<size_t>(b) * P, trial_.data() + static_cast<size_t>(b) * P,
                     theta_.data() + static_cast<size_t>(b) * P, P, rq_.lm.xtol)) {
        out_.why[b] = kWhyXtol;
      }
    } else {
      lambda_[b] *= nu_[b];
      nu_[b] *= 2.0;
      if (!projected_[b]) radius_[b] = 0.5 * sn_[b];
      if (lambda_[b] > kMaxLambda) converge(b, kWhyNoProgress);
      continue;
    }
    // accepted: the trial is the lane's point
    fc_[b] = ft;
    std::copy_n(trial_.data() + static_cast<size_t>(b) * P, P, theta_.data() + static_cast<size_t>(b) * P);
    std::copy_n(jtj_t_.data() + b * PP, PP, jtj_.data() + b * PP);
    std::copy_n(jtr_t_.data() + static_cast<size_t>(b) * P, P, jtr_.data() + static_cast<size_t>(b) * P);
    double xn = 0.0;
    for (uint32_t i = 0; i < P; ++i) {
      double& d = scale_[static_cast<size_t>(b) * P + i];
      const double norm = std::sqrt(std::max(jtj_[b * PP + i * P + i], 0.0));
      d = projected_[b] ? norm : std::max(d, norm);  // the linear solve restarts the norms
      const double v = d * theta_[static_cast<size_t>(b) * P + i];
      xn += v * v;
    }
    if (it == 0 || projected_[b]) {  // MINPACK's initial radius: 100 |D theta| (100 at 0)
      radius_[b] = xn > 0.0 ? kRadiusFactor * std::sqrt(xn) : kRadiusFactor;
    }
    out_.best_loss[b] = ft * rq_.weight;
    out_.best_sse[b] = ft;
    if (under_[b]) {  // the loss can no longer be compared: never an "exact fit"
      converge(b, kWhyUnderflow);
    } else if (ft == 0.0) {
      converge(b, kWhyZero);
    } else if (converged_gradient(b, np)) {
      converge(b, kWhyGtol);
    } else if (out_.why[b] != kWhyNone) {
      converge(b, out_.why[b]);
    }
  }
}

// decide_p with the parameter count a constant for P <= 6 (as step).
void LMRun::decide(uint32_t it) {
  with_small_p(P_, [&](auto np) { decide_p(it, np); });
}

// The damped system of lane b over the parameters in ``free`` (the others' step 0) into x_;
// false if it is not positive definite.
template <class Np>
bool LMRun::damped_solve_p(uint32_t b, const std::vector<uint8_t>& free, const double* dfloor,
                           double lam, Np np) {
  const uint32_t P = np;  // P_, or the same as a constant (step's dispatch)
  const size_t PP = static_cast<size_t>(P) * P;
  const double* __restrict jtj = jtj_.data() + b * PP;
  const double* __restrict g = jtr_.data() + static_cast<size_t>(b) * P;
  uint32_t* __restrict idx = idx_.data();  // a_, y_, x_, idx_: sized in start()
  uint32_t F = 0;
  for (uint32_t i = 0; i < P; ++i) {
    if (free[i]) idx[F++] = i;
  }
  if (F == P) return lm_damped_solve(jtj, g, P, lam, dfloor, x_.data(), a_.data());
  double* __restrict a = a_.data();
  double* __restrict y = y_.data();
  for (uint32_t i = 0; i < F; ++i) {
    const uint32_t r = idx[i];
    for (uint32_t k = 0; k < F; ++k) a[i * F + k] = jtj[r * P + idx[k]];
    a[i * F + i] += lam * std::max(jtj[r * P + r], dfloor[r]);
    y[i] = -g[r];
  }
  if (F > 0 && !lm_cholesky_solve(a, y, F)) return false;
  double* __restrict x = x_.data();
  if (F < P) std::fill_n(x, P, 0.0);
  for (uint32_t i = 0; i < F; ++i) x[idx[i]] = y[i];
  return true;
}

// The damped Gauss–Newton step of lane b from its accepted point into trial_, inside the
// trust radius and the box: a parameter on a bound that the step pushes outward is held
// there and the step solved again for the others (so a bound-active optimum converges);
// false when no damping gives a solvable system.
template <class Np>
bool LMRun::step_p(uint32_t b, Np np) {
  const uint32_t P = np;  // P_, or the same as a constant: the loops unroll
  const size_t PP = static_cast<size_t>(P) * P;
  const double* jtj = jtj_.data() + b * PP;
  const double* g = jtr_.data() + static_cast<size_t>(b) * P;
  double* t = trial_.data() + static_cast<size_t>(b) * P;
  const double* th = theta_.data() + static_cast<size_t>(b) * P;
  double* dfloor = floor_.data();
  lm_floors(scale_.data() + static_cast<size_t>(b) * P, jtj, P, dfloor);
  std::vector<uint8_t>& free = free_;
  for (int attempt = 0; attempt < 200; ++attempt) {
    for (uint32_t i = 0; i < P; ++i) free[i] = 1;
    bool solved = true;
    for (uint32_t pass = 0; pass <= P; ++pass) {
      if (!damped_solve_p(b, free, dfloor, lambda_[b], np)) {
        solved = false;
        break;
      }
      bool blocked = false;
      for (uint32_t i = 0; i < P; ++i) {
        double v = th[i] + x_[i];
        if (rq_.lower && v < rq_.lower[i]) v = rq_.lower[i];
        if (rq_.upper && v > rq_.upper[i]) v = rq_.upper[i];
        t[i] = v;
        if (free[i] && x_[i] != 0.0 && v == th[i]) {  // on its bound, pushed outward
          free[i] = 0;
          blocked = true;
        }
      }
      if (!blocked) break;
    }
    if (!solved) {
      lambda_[b] = std::max(lambda_[b] * 10.0, 1e-12);
      if (lambda_[b] > kMaxLambda) break;
      continue;
    }
    double sn = 0.0;
    for (uint32_t i = 0; i < P; ++i) {
      const double v = scale_[static_cast<size_t>(b) * P + i] * (t[i] - th[i]);
      sn += v * v;
    }
    sn = std::sqrt(sn);
    if (sn > radius_[b] && lambda_[b] < kMaxLambda) {  // outside the trust region
      lambda_[b] = std::max(lambda_[b] * 4.0, 1e-12);
      continue;
    }
    sn_[b] = sn;
    // predicted reduction of the linear model: -2 d'g - d'J'J d, d the projected step
    double pr = 0.0;
    for (uint32_t i = 0; i < P; ++i) {
      const double di = t[i] - th[i];
      double jd = 0.0;
      for (uint32_t k = 0; k < P; ++k) jd += jtj[i * P + k] * (t[k] - th[k]);
      pr -= di * (2.0 * g[i] + jd);
    }
    pred_[b] = pr;
    return true;
  }
  return false;
}

// step_p with the parameter count a constant for P <= 6 (the same operations in the same
// order: only the loop bounds are known).
bool LMRun::step(uint32_t b) {
  return with_small_p(P_, [&](auto np) { return step_p(b, np); });
}

// The Gauss–Newton step on the linear parameters alone from lane b's point: exact (the
// model is affine in them), so the first trial puts every amplitude and offset at its
// least-squares value for the start's other parameters, whatever their scale.
bool LMRun::project_linear(uint32_t b) {
  if (!damped_solve(b, linear_, zeros_p_.data(), 0.0)) return false;
  const size_t PP = static_cast<size_t>(P_) * P_;
  const double* jtj = jtj_.data() + b * PP;
  const double* g = jtr_.data() + static_cast<size_t>(b) * P_;
  double* t = trial_.data() + static_cast<size_t>(b) * P_;
  const double* th = theta_.data() + static_cast<size_t>(b) * P_;
  for (uint32_t i = 0; i < P_; ++i) {
    double v = th[i] + x_[i];
    if (rq_.lower && v < rq_.lower[i]) v = rq_.lower[i];
    if (rq_.upper && v > rq_.upper[i]) v = rq_.upper[i];
    t[i] = v;
  }
  double pr = 0.0;
  for (uint32_t i = 0; i < P_; ++i) {
    double jd = 0.0;
    for (uint32_t k = 0; k < P_; ++k) jd += jtj[i * P_ + k] * (t[k] - th[k]);
    pr -= (t[i] - th[i]) * (2.0 * g[i] + jd);
  }
  pred_[b] = pr;
  sn_[b] = 0.0;
  projected_[b] = 1;
  return true;
}

// d value / d theta at ``n`` parameter rows (one small walk, the model's own data lanes):
// jac [n * Ng * S, P], element-major within a lane as the value. False if the walk fails.
bool LMRun::probe_columns(const std::vector<double>& rows, uint32_t n, std::vector<double>& jac) {
  RunRequest rq = run_;
  rq.B = n;
  rq.theta = rows.data();
  rq.grad = false;
  in_.run(rq, probe_);
  out_.evaluations += 1;
  if (!probe_.numeric) return false;
  const uint32_t S = in_.value_elements();
  const size_t W = static_cast<size_t>(n) * rq.Ng;
  jac.assign(W * S * P_, kNaN);
  ct_.assign(W * S, 0.0);
  for (uint32_t s = 0; s < S; ++s) {
    for (size_t l = 0; l < W; ++l) ct_[l * S + s] = 1.0;
    in_.lane_jacobian(ct_.data(), jac_);
    for (size_t l = 0; l < W; ++l) ct_[l * S + s] = 0.0;
    for (size_t l = 0; l < W; ++l) {
      for (uint32_t i = 0; i < P_; ++i) jac[(l * S + s) * P_ + i] = jac_[i * W + l];
    }
  }
  return true;
}

// Which parameters the model is jointly affine in, at the first of the first kLinearProbes
// starts where the probes' Jacobian is finite and no column is zero (a declared start of
// zeros may divide by zero, or zero an amplitude: A sin(w x + p) says nothing of A at w = p
// = 0); if there is none, at the first start, where a non-finite column is not affine:
// parameter i is a candidate when its Jacobian column does not move as it shifts alone; the
// candidates are kept when their columns do not move as they all shift together (no products).
void LMRun::detect_linear() {
  linear_.assign(P_, 0);
  if (P_ == 0) return;
  for (uint32_t b = 0; b < std::min(B_, kLinearProbes); ++b) {
    if (detect_linear_at(rq_.theta0 + static_cast<size_t>(b) * P_, true)) return;
  }
  detect_linear_at(rq_.theta0, false);  // none finite: the first start's finite columns
}

bool LMRun::detect_linear_at(const double* th0, bool strict) {
  std::vector<double> rows(static_cast<size_t>(P_ + 1) * P_);
  for (uint32_t r = 0; r <= P_; ++r) {
    std::copy_n(th0, P_, rows.data() + static_cast<size_t>(r) * P_);
    if (r > 0) rows[static_cast<size_t>(r) * P_ + r - 1] += 1.0 + std::fabs(th0[r - 1]);
  }
  std::vector<double> jac;
  if (!probe_columns(rows, P_ + 1, jac)) return true;  // not numeric at any start
  if (strict && !all_finite(jac.data(), jac.size())) return false;
  const size_t per = jac.size() / (P_ + 1) / P_;  // Jacobian rows per parameter row
  for (uint32_t i = 0; strict && i < P_; ++i) {  // a zero column: the point says nothing of i
    double top = 0.0;
    for (size_t m = 0; m < per; ++m) top = std::max(top, std::fabs(jac[m * P_ + i]));
    if (top == 0.0) return false;
  }
  auto same = [&](const double* a, const double* b, uint32_t i) {
    double top = 0.0;
    for (size_t m = 0; m < per; ++m) top = std::max(top, std::fabs(a[m * P_ + i]));
    for (size_t m = 0; m < per; ++m) {
      const double x = a[m * P_ + i], y = b[m * P_ + i];
      if (!std::isfinite(x) || !std::isfinite(y) || std::fabs(x - y) > 1e-9 * top) return false;
    }
    return top > 0.0;
  };
  uint32_t n = 0;
  for (uint32_t i = 0; i < P_; ++i) {
    linear_[i] = same(jac.data(), jac.data() + (i + 1) * per * P_, i);
    n += linear_[i];
  }
  any_linear_ = n > 0;
  if (n < 2) return true;
  std::vector<double> both(2 * static_cast<size_t>(P_));
  std::copy_n(th0, P_, both.data());
  std::copy_n(th0, P_, both.data() + P_);
  for (uint32_t i = 0; i < P_; ++i) {
    if (linear_[i]) both[P_ + i] += 1.0 + std::fabs(th0[i]);
  }
  if (!probe_columns(both, 2, jac)) {
    linear_.assign(P_, 0);
    any_linear_ = false;
    return true;
  }
  for (uint32_t i = 0; i < P_; ++i) {
    if (linear_[i] && !same(jac.data(), jac.data() + per * P_, i)) {
      linear_.assign(P_, 0);  // a product of candidates: no exact linear solve
      any_linear_ = false;
      return true;
    }
  }
  return true;
}

// Once a lane has converged, a running lane whose loss is above it and fell by less than
// kDominatedDrop over the last kDominatedWindow iterations stops (it creeps along a valley of
// a worse optimum); the fit's verdict rests on the best lane.
void LMRun::drop_dominated() {
  const uint32_t k = out_.iterates;
  if (k <= kDominatedWindow) return;
  double best = kInf;
  for (uint32_t b = 0; b < B_; ++b) {
    if (out_.state[b] == LANE_CONVERGED && out_.why[b] != kWhyNoProgress) {
      best = std::min(best, fc_[b]);
    }
  }
  if (best == kInf) return;
  const double* then = out_.history.data() + static_cast<size_t>(k - 1 - kDominatedWindow) * B_;
  for (uint32_t b = 0; b < B_; ++b) {
    if (out_.state[b] != LANE_RUNNING || !(fc_[b] > best * (1.0 + 1e-6))) continue;
    if (fc_[b] * rq_.weight > then[b] * (1.0 - kDominatedDrop)) {
      out_.state[b] = LANE_OK;
      out_.why[b] = kWhyDominated;
    }
  }
}

// After the first walk: a model affine in every parameter — at the probes, and with the same
// J'J at every start, none failing — is linear least squares, whose solution does not depend
// on the start: only lane 0 runs on, and the others end as its copies (copy_first). Not with
// per-lane targets or bounds (ndvm.calibrate.lm._Lanes._follow_first).
void LMRun::follow_first() {
  bool all = P_ > 0 && B_ > 1 && !rq_.target_per_lane && !rq_.lower && !rq_.upper;
  for (uint32_t i = 0; i < P_ && all; ++i) all = linear_[i];
  const size_t PP = static_cast<size_t>(P_) * P_;
  double top = 0.0;
  for (size_t k = 0; k < PP && all; ++k) top = std::max(top, std::fabs(jtj_[k]));
  for (uint32_t b = 0; b < B_ && all; ++b) {
    all = out_.state[b] != LANE_FAILED;
    for (size_t k = 0; k < PP && all; ++k) all = std::fabs(jtj_[b * PP + k] - jtj_[k]) <= 1e-9 * top;
  }
  follow_ = all;
  if (!follow_) return;
  act_.assign(1, 0);
  for (uint32_t b = 1; b < B_; ++b) out_.state[b] = LANE_OK;
}

// The lanes that followed lane 0 take its end.
void LMRun::copy_first() {
  const size_t PP = static_cast<size_t>(P_) * P_;
  for (uint32_t b = 1; b < B_; ++b) {
    out_.state[b] = out_.state[0];
    out_.why[b] = out_.why[0];
    out_.reason[b] = out_.reason[0];
    fc_[b] = fc_[0];
    out_.best_loss[b] = out_.best_loss[0];
    out_.best_sse[b] = out_.best_sse[0];
    std::copy_n(theta_.data(), P_, theta_.data() + static_cast<size_t>(b) * P_);
    std::copy_n(jtr_.data(), P_, jtr_.data() + static_cast<size_t>(b) * P_);
    std::copy_n(jtj_.data(), PP, jtj_.data() + b * PP);
    for (uint32_t k = 1; k < out_.iterates; ++k) {  // row 0: the start's own loss
      out_.history[static_cast<size_t>(k) * B_ + b] = out_.history[static_cast<size_t>(k) * B_];
    }
  }
}

void LMRun::finish() {
  if (follow_) copy_first();
  const size_t PP = static_cast<size_t>(P_) * P_;
  for (uint32_t b = 0; b < B_; ++b) {
    if (out_.state[b] == LANE_RUNNING) out_.state[b] = LANE_OK;
    if (out_.state[b] == LANE_FAILED) {
      out_.best_loss[b] = kNaN;
      continue;
    }
    out_.reason[b] = kNoReason;
    for (uint32_t i = 0; i < P_; ++i) {
      out_.best_grad[static_cast<size_t>(b) * P_ + i] = 2.0 * rq_.weight * jtr_[static_cast<size_t>(b) * P_ + i];
    }
  }
  out_.best_theta = theta_;
  out_.theta = theta_;
  out_.jtj = jtj_;
  (void)PP;
  out_.history.resize(static_cast<size_t>(out_.iterates) * B_);
}

void LMRun::start() {
  const size_t BP = static_cast<size_t>(B_) * P_;
  const size_t PP = static_cast<size_t>(P_) * P_;
  run_ = rq_.run;
  run_.value_view = true;  // evaluate reads the residuals' values in place
  trial_.assign(rq_.theta0, rq_.theta0 + BP);
  theta_ = trial_;
  fc_.assign(B_, kInf);
  jtj_.assign(B_ * PP, kNaN);
  jtr_.assign(BP, kNaN);
  jtj_t_.assign(B_ * PP, 0.0);
  jtr_t_.assign(BP, 0.0);
  lambda_.assign(B_, rq_.lm.lambda0);
  nu_.assign(B_, 2.0);
  pred_.assign(B_, 0.0);
  accept_.assign(B_, 0);
  under_.assign(B_, 0);
  scale_.assign(BP, 0.0);
  radius_.assign(B_, kInf);
  sn_.assign(B_, 0.0);
  projected_.assign(B_, 0);
  a_.resize(PP);  // damped_solve's system, right-hand side, step and free parameters
  y_.resize(P_);
  x_.resize(P_);
  idx_.resize(P_);
  free_.resize(P_);
  floor_.resize(P_);
  zeros_p_.assign(P_, 0.0);
  out_.best_theta = theta_;
  out_.best_loss.assign(B_, kNaN);
  out_.best_grad.assign(BP, kNaN);
  out_.best_sse.assign(B_, kNaN);
  out_.history.assign(static_cast<size_t>(rq_.steps + 1) * B_, kNaN);
  out_.state.assign(B_, LANE_RUNNING);
  out_.reason.assign(B_, kNoReason);
  out_.why.assign(B_, kWhyNone);
  act_.resize(B_);
  for (uint32_t b = 0; b < B_; ++b) act_[b] = b;
}

// The fit's time limit passed before iteration ``it``: running lanes keep their point (not
// converged); before the first evaluation they fail. True when it passed.
bool LMRun::out_of_time(uint32_t it, std::chrono::steady_clock::time_point t0, double base) {
  if (rq_.time_limit <= 0) return false;
  const double left = rq_.time_limit -
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (left > 0) {  // no single walk may outlive the fit's budget
    run_.limits.deadline = base > 0 ? std::min(base, left) : left;
    return false;
  }
  out_.timed_out = true;
  out_.stopped_at = it;
  for (uint32_t b = 0; b < B_; ++b) {
    if (out_.state[b] == LANE_RUNNING && it == 0) {
      out_.state[b] = LANE_FAILED;
      out_.reason[b] = kTimeLimit;
    } else if (out_.state[b] == LANE_RUNNING) {
      out_.why[b] = kWhyTimeLimit;
    }
  }
  return true;
}

OptimizeOutput LMRun::go() {
  start();
  const auto t0 = std::chrono::steady_clock::now();
  const double base_deadline = run_.limits.deadline;
  for (uint32_t it = 0; it <= rq_.steps; ++it) {
    in_.poll_interrupt();
    if (out_of_time(it, t0, base_deadline)) break;
    if (it == 0 && rq_.lm.project_linear) detect_linear();
    if (!evaluate(trial_)) {
      out_.non_numeric = !out_.target_mismatch;
      return std::move(out_);
    }
    bool any = false;
    for (uint32_t b = 0; b < B_; ++b) {
      accept_[b] = out_.state[b] == LANE_RUNNING && f_[b] < fc_[b];
      any = any || accept_[b];
    }
    if (any) normal_equations();
    decide(it);
    if (it == 0) follow_first();
    std::fill(projected_.begin(), projected_.end(), 0);
    double* hist = out_.history.data() + static_cast<size_t>(out_.iterates) * B_;
    for (uint32_t b = 0; b < B_; ++b) {
      hist[b] = out_.state[b] == LANE_FAILED ? kNaN : fc_[b] * rq_.weight;
    }
    out_.iterates += 1;
    drop_dominated();
    if (it == rq_.steps) break;
    bool running = false;
    for (uint32_t b = 0; b < B_; ++b) {
      if (out_.state[b] != LANE_RUNNING) {
        std::copy_n(theta_.data() + static_cast<size_t>(b) * P_, P_, trial_.data() + static_cast<size_t>(b) * P_);
        continue;
      }
      if (it == 0 && any_linear_ && project_linear(b)) {
        running = true;
        continue;
      }
      if (!step(b)) {
        converge(b, kWhyNoProgress);
        std::copy_n(theta_.data() + static_cast<size_t>(b) * P_, P_, trial_.data() + static_cast<size_t>(b) * P_);
        continue;
      }
      running = true;
    }
    if (!running) break;
  }
  finish();
  return std::move(out_);
}

}  // namespace

OptimizeOutput optimize_lm(Interp& interp, const OptimizeRequest& req) {
  LMRun run(interp, req);
  return run.go();
}

}  // namespace ndvm
