// In-runtime Adam (see optimize.hpp): the loop of ndvm.calibrate.optim.Adam._loop and
// optim._Book with on_failure="drop", operation for operation, so that the trajectories equal
// the NumPy implementation's to the last bit wherever libm agrees with NumPy.
#include "ndvm/optimize.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

namespace ndvm {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// sq = (v - t)^2, and with ct the cotangent of the tape of (* r r) under cotangent w (w*r
// from each operand, summed).
NDVM_SIMD void residuals(const double* v, const double* t, size_t M, double w,
                         double* __restrict sq, double* __restrict ct) {
  for (size_t m = 0; m < M; ++m) {
    const double r = v[m] - t[m];
    sq[m] = r * r;
  }
  if (ct == nullptr) return;
  for (size_t m = 0; m < M; ++m) {
    const double wr = w * (v[m] - t[m]);
    ct[m] = wr + wr;
  }
}

// One objective evaluation of every lane (ProgramObjective.__call__ for a weighted sum).
struct Eval {
  std::vector<double> loss;
  std::vector<double> sse;  // the unweighted sum (of squared residuals, with a target)
  std::vector<double> grad;
  std::vector<uint8_t> failed;
  std::vector<uint8_t> bad_loss;
};

class AdamRun {
 public:
  AdamRun(Interp& interp, const OptimizeRequest& req)
      : in_(interp), rq_(req), B_(req.run.B), P_(req.run.program->n_params) {}

  OptimizeOutput go();

 protected:
  void init(const std::vector<double>& theta);
  bool evaluate(const std::vector<double>& theta, bool grad, bool final = false);
  void record(const std::vector<double>& theta);
  void stop_running(uint32_t it);
  int32_t reason_of(uint32_t b);
  void update(uint32_t b, std::vector<double>& theta);
  void finish(std::vector<double>& theta);

  Interp& in_;
  const OptimizeRequest& rq_;
  const uint32_t B_;
  const uint32_t P_;
  RunRequest run_;
  RunOutput last_;
  Eval ev_;
  std::vector<double> ct_;
  std::vector<double> sq_;
  std::vector<int64_t> flat_;
  std::vector<int32_t> err_map_;  // error index of the last run -> OptimizeOutput::errors
  std::vector<double> m_, v_, t_;  // Adam moments and per-lane step counts
  OptimizeOutput out_;
};

// With ``grad`` also the gradient, which fails a lane where it is not finite, except at the
// ``final`` iterate (no step follows it: the gradient is only reported, as best_grad).
bool AdamRun::evaluate(const std::vector<double>& theta, bool grad, bool final) {
  run_.theta = theta.data();
  run_.grad = false;
  in_.run(run_, last_);  // into last_'s capacity
  if (!last_.numeric) return false;
  const size_t n = in_.value_size();  // [B, M] values, in place or copied
  const size_t M = n / B_;
  const double* val = last_.view ? last_.view : last_.value.data();
  const double w = rq_.weight;
  if (rq_.target != nullptr) {
    if (M != rq_.target_len) {
      out_.target_mismatch = true;
      return false;
    }
    sq_.resize(M);
    if (grad) ct_.resize(n);
    for (uint32_t b = 0; b < B_; ++b) {
      const double* t = rq_.target + (rq_.target_per_lane ? b * M : 0);
      residuals(val + b * M, t, M, w, sq_.data(), grad ? ct_.data() + b * M : nullptr);
      ev_.sse[b] = pairwise_sum(sq_.data(), M);
      ev_.loss[b] = ev_.sse[b] * w;
      ev_.bad_loss[b] = !std::isfinite(ev_.loss[b]);
      ev_.failed[b] = ev_.bad_loss[b];
    }
  } else {
    for (uint32_t b = 0; b < B_; ++b) {
      ev_.sse[b] = pairwise_sum(val + b * M, M);
      ev_.loss[b] = ev_.sse[b] * w;
      ev_.bad_loss[b] = !std::isfinite(ev_.loss[b]);
      ev_.failed[b] = ev_.bad_loss[b];
    }
    if (grad) ct_.assign(n, w);
  }
  if (grad) {
    in_.gradient(ct_.data(), ev_.grad);
    for (uint32_t b = 0; b < B_ && !final; ++b) {
      bool bad = false;
      for (uint32_t i = 0; i < P_; ++i) bad = bad || !std::isfinite(ev_.grad[b * P_ + i]);
      ev_.failed[b] = ev_.failed[b] || bad;
    }
  }
  err_map_.assign(last_.errors.size(), -1);
  return true;
}

// lane_reasons (first error naming the lane), else "non-finite loss" / "non-finite gradient".
int32_t AdamRun::reason_of(uint32_t b) {
  for (size_t e = 0; e < last_.errors.size(); ++e) {
    bool hit = false;
    for (int64_t lane : last_.errors[e].lanes) hit = hit || lane == static_cast<int64_t>(b);
    if (!hit) continue;
    if (err_map_[e] < 0) {
      err_map_[e] = static_cast<int32_t>(out_.errors.size());
      out_.errors.push_back(last_.errors[e]);
    }
    return err_map_[e];
  }
  return ev_.bad_loss[b] ? kNonFiniteLoss : kNonFiniteGrad;
}

// The fit's time limit passed before step ``it``: lanes still running fail with kTimeLimit
// (their best iterate so far is kept), as optim._Book.stop_running does.
void AdamRun::stop_running(uint32_t it) {
  out_.timed_out = true;
  out_.stopped_at = it;
  for (uint32_t b = 0; b < B_; ++b) {
    if (out_.state[b] == LANE_RUNNING) {
      out_.state[b] = LANE_FAILED;
      out_.reason[b] = kTimeLimit;
    }
  }
}

// _Book.record (general path; the fast path is bitwise the same).
void AdamRun::record(const std::vector<double>& theta) {
  out_.evaluations += 1;
  const uint32_t k = out_.iterates;
  double* hist = out_.history.data() + static_cast<size_t>(k) * B_;
  for (uint32_t b = 0; b < B_; ++b) {
    const int8_t s = out_.state[b];
    const bool act = s == LANE_RUNNING;
    const bool bad = act && ev_.failed[b];
    const bool good = act && !ev_.failed[b];
    const double loss = ev_.loss[b];
    hist[b] = (act || s == LANE_CONVERGED) ? loss : kNaN;
    const bool better = good && loss < out_.best_loss[b];
    if (rq_.early_stop && k > 0) {
      const bool small = out_.best_loss[b] - loss <= rq_.rtol * std::fabs(loss) + rq_.atol;
      flat_[b] = (good && small) ? flat_[b] + 1 : 0;
      if (good && flat_[b] >= rq_.patience) out_.state[b] = LANE_CONVERGED;
    }
    if (better) {
      out_.best_loss[b] = loss;
      out_.best_sse[b] = ev_.sse[b];
      for (uint32_t i = 0; i < P_; ++i) out_.best_theta[b * P_ + i] = theta[b * P_ + i];
      for (uint32_t i = 0; i < P_; ++i) out_.best_grad[b * P_ + i] = ev_.grad[b * P_ + i];
    }
    if (bad) {
      out_.reason[b] = reason_of(b);
      out_.state[b] = LANE_FAILED;
    }
  }
  out_.iterates = k + 1;
}

// The per-lane bookkeeping of _Book.__init__ for a run from ``theta``.
void AdamRun::init(const std::vector<double>& theta) {
  const size_t BP = static_cast<size_t>(B_) * P_;
  run_ = rq_.run;
  run_.value_view = true;  // evaluate reads the values in place
  ev_.loss.assign(B_, 0.0);
  ev_.sse.assign(B_, 0.0);
  ev_.failed.assign(B_, 0);
  ev_.bad_loss.assign(B_, 0);
  flat_.assign(B_, 0);
  out_.best_theta = theta;
  out_.best_loss.assign(B_, kInf);
  out_.best_grad.assign(BP, kNaN);
  out_.best_sse.assign(B_, kNaN);
  out_.history.assign(static_cast<size_t>(rq_.steps + 1) * B_, kNaN);
  out_.state.assign(B_, LANE_RUNNING);
  out_.reason.assign(B_, kNoReason);
}

OptimizeOutput AdamRun::go() {
  const size_t BP = static_cast<size_t>(B_) * P_;
  std::vector<double> theta(rq_.theta0, rq_.theta0 + BP);
  init(theta);
  m_.assign(BP, 0.0);
  v_.assign(BP, 0.0);
  t_.assign(B_, 0.0);
  std::vector<uint8_t> act(B_);
  bool broke = false;
  const auto t0 = std::chrono::steady_clock::now();
  const double base_deadline = run_.limits.deadline;
  for (uint32_t it = 0; it < rq_.steps; ++it) {
    in_.poll_interrupt();
    if (rq_.time_limit > 0) {
      const double left = rq_.time_limit -
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (left <= 0) {
        stop_running(it);
        broke = true;
        break;
      }
      // no single walk may outlive the fit's budget
      run_.limits.deadline = base_deadline > 0 ? std::min(base_deadline, left) : left;
    }
    if (!evaluate(theta, true)) {
      out_.non_numeric = !out_.target_mismatch;
      return std::move(out_);
    }
    record(theta);
    bool any = false;
    for (uint32_t b = 0; b < B_; ++b) {
      act[b] = out_.state[b] == LANE_RUNNING;
      any = any || act[b];
    }
    if (!any) {
      broke = true;
      break;
    }
    for (uint32_t b = 0; b < B_; ++b) {
      if (act[b]) update(b, theta);
    }
  }
  if (!broke) {
    if (!evaluate(theta, true, true)) {
      out_.non_numeric = !out_.target_mismatch;
      return std::move(out_);
    }
    record(theta);
  }
  finish(theta);
  return std::move(out_);
}

// One Adam step of lane b (torch's update order), then the box projection.
void AdamRun::update(uint32_t b, std::vector<double>& theta) {
  const double b1 = rq_.adam.beta1, b2 = rq_.adam.beta2, eps = rq_.adam.eps;
  t_[b] += 1.0;
  const double bc1 = 1.0 - std::pow(b1, t_[b]);
  const double bc2s = std::sqrt(1.0 - std::pow(b2, t_[b]));
  const double lr_t =
      rq_.lr_schedule ? rq_.lr_schedule[static_cast<size_t>(t_[b]) - 1] : rq_.adam.lr;
  const double scale = lr_t / bc1;
  for (uint32_t i = 0; i < P_; ++i) {
    const size_t j = static_cast<size_t>(b) * P_ + i;
    const double g = ev_.grad[j];
    const double mn = m_[j] + (1.0 - b1) * (g - m_[j]);
    const double vn = v_[j] * b2 + (1.0 - b2) * g * g;
    m_[j] = mn;
    v_[j] = vn;
    double x = theta[j] - scale * (mn / (std::sqrt(vn) / bc2s + eps));
    // np.clip: min(max(x, lo), hi) with NaN propagated
    if (rq_.lower && x < rq_.lower[i]) x = rq_.lower[i];
    if (rq_.upper && x > rq_.upper[i]) x = rq_.upper[i];
    theta[j] = x;
  }
}

// _Book.finish
void AdamRun::finish(std::vector<double>& theta) {
  for (uint32_t b = 0; b < B_; ++b) {
    if (out_.state[b] == LANE_RUNNING) out_.state[b] = LANE_OK;
    if (out_.best_loss[b] == kInf) {
      out_.state[b] = LANE_FAILED;
      out_.best_loss[b] = kNaN;
    }
    if (out_.state[b] != LANE_FAILED) out_.reason[b] = kNoReason;
  }
  out_.history.resize(static_cast<size_t>(out_.iterates) * B_);
  out_.theta = std::move(theta);
}

// In-runtime L-BFGS: optim.LBFGS.minimize operation for operation (the strong-Wolfe line
// search of ndvm.calibrate.linesearch, each trial one walk; a bound holds the coordinates it
// blocks).
class LbfgsRun : public AdamRun {
 public:
  using AdamRun::AdamRun;
  OptimizeOutput go();

 private:
  void direction(uint32_t b, uint32_t it, double* r);
  double dot(const double* a, const double* b);
  // a lane's line-search bracket (linesearch.strong_wolfe's per-lane arrays)
  struct Bracket {
    double a_prev, f_prev, dp_prev, lo, f_lo, dp_lo, hi, f_hi;
  };
  void line_search(const std::vector<double>& theta, const std::vector<double>& f);
  void place_trial(uint32_t b, const std::vector<double>& theta);
  void judge(uint32_t b, double f0);
  void update_memory(uint32_t it, const std::vector<double>& theta, const std::vector<double>& g);
  void plan(uint32_t it, const std::vector<double>& theta, const std::vector<double>& g);

  std::vector<double> S_, Y_, rho_, gamma_, alpha_, prod_;
  std::vector<double> d_, slope_, step_, new_t_, new_f_, new_g_, trial_, sv_, yv_;
  std::vector<uint8_t> act_, pending_, stuck_, held_, flat_lanes_, search_, zoom_, found_;
  std::vector<Bracket> br_;
};

double LbfgsRun::dot(const double* a, const double* b) {  // (a * b).sum() as NumPy
  prod_.resize(P_);
  for (uint32_t i = 0; i < P_; ++i) prod_[i] = a[i] * b[i];
  return pairwise_sum(prod_.data(), P_);
}

// LBFGS._direction for lane b: the two-loop recursion over the last min(it, memory) pairs.
void LbfgsRun::direction(uint32_t b, uint32_t it, double* r) {
  const uint32_t M = rq_.lbfgs.memory;
  const uint32_t m = std::min(it, M);
  const size_t BP = static_cast<size_t>(B_) * P_;
  const double* g = ev_.grad.data() + static_cast<size_t>(b) * P_;  // gf, held zeroed
  std::vector<double>& q = alpha_;  // q, then alpha per pair behind it
  q.assign(P_ + m, 0.0);
  std::copy_n(g, P_, q.begin());
  for (uint32_t j = 0; j < m; ++j) {
    const uint32_t k = (it - 1 - j) % M;
    const double* Sk = S_.data() + k * BP + static_cast<size_t>(b) * P_;
    const double* Yk = Y_.data() + k * BP + static_cast<size_t>(b) * P_;
    const double a = rho_[k * B_ + b] * dot(Sk, q.data());
    q[P_ + j] = a;
    for (uint32_t i = 0; i < P_; ++i) q[i] -= a * Yk[i];
  }
  for (uint32_t i = 0; i < P_; ++i) r[i] = gamma_[b] * q[i];
  for (uint32_t j = m; j-- > 0;) {
    const uint32_t k = (it - 1 - j) % M;
    const double* Sk = S_.data() + k * BP + static_cast<size_t>(b) * P_;
    const double* Yk = Y_.data() + k * BP + static_cast<size_t>(b) * P_;
    const double beta = rho_[k * B_ + b] * dot(Yk, r);
    for (uint32_t i = 0; i < P_; ++i) r[i] += Sk[i] * (q[P_ + j] - beta);
  }
}

// The minimizer of the quadratic through phi(lo), phi'(lo), phi(hi) where it lies 10 %
// inside [lo, hi] (either order), else the midpoint (linesearch._interpolate).
double interpolate(double lo, double hi, double f_lo, double dp_lo, double f_hi) {
  const double delta = hi - lo;
  const double denom = 2.0 * (f_hi - f_lo - dp_lo * delta);
  const double aq = lo - dp_lo * delta * delta / denom;
  const double margin = 0.1 * std::fabs(delta);
  const bool inside = std::isfinite(aq) && aq >= std::min(lo, hi) + margin &&
                      aq <= std::max(lo, hi) - margin;
  return inside ? aq : lo + 0.5 * delta;
}

// Lane b's trial point: theta + a d on the box (a lane not searching stays at new_t_).
void LbfgsRun::place_trial(uint32_t b, const std::vector<double>& theta) {
  for (uint32_t i = 0; i < P_; ++i) {
    const size_t j = static_cast<size_t>(b) * P_ + i;
    if (!search_[b]) {
      trial_[j] = new_t_[j];
      continue;
    }
    double x = theta[j] + step_[b] * d_[j];
    if (rq_.lower && x < rq_.lower[i]) x = rq_.lower[i];
    if (rq_.upper && x > rq_.upper[i]) x = rq_.upper[i];
    trial_[j] = x;
  }
}

// One trial's verdict for lane b (linesearch.strong_wolfe's loop body): keep the point if it
// is accepted or the lowest with sufficient decrease; move the bracket or grow the step.
void LbfgsRun::judge(uint32_t b, double f0) {
  const bool bad = ev_.failed[b] || !std::isfinite(ev_.loss[b]);
  const double ft = bad ? kInf : ev_.loss[b];
  const double* gt = ev_.grad.data() + static_cast<size_t>(b) * P_;
  const double dp = bad ? kNaN : dot(gt, d_.data() + static_cast<size_t>(b) * P_);
  const double a = step_[b];
  const bool armijo = ft <= f0 + rq_.lbfgs.c1 * a * slope_[b];
  const bool wolfe = armijo && std::fabs(dp) <= -rq_.lbfgs.c2 * slope_[b];
  if (wolfe || (armijo && ft < new_f_[b])) {
    const size_t o = static_cast<size_t>(b) * P_;
    std::copy_n(trial_.data() + o, P_, new_t_.data() + o);
    for (uint32_t i = 0; i < P_; ++i) new_g_[o + i] = bad ? 0.0 : gt[i];
    new_f_[b] = ft;
    found_[b] = 1;
  }
  if (wolfe) {
    search_[b] = 0;
    return;
  }
  Bracket& k = br_[b];
  if (!zoom_[b]) {
    if (!armijo || (k.a_prev > 0 && ft >= k.f_prev)) {  // [a_prev, a]
      k.lo = k.a_prev, k.f_lo = k.f_prev, k.dp_lo = k.dp_prev, k.hi = a, k.f_hi = ft;
    } else if (dp >= 0) {  // [a, a_prev]
      k.hi = k.a_prev, k.f_hi = k.f_prev, k.lo = a, k.f_lo = ft, k.dp_lo = dp;
    } else {
      k.a_prev = a, k.f_prev = ft, k.dp_prev = dp;
      step_[b] = 2.0 * a;
      return;
    }
    zoom_[b] = 1;
  } else if (!armijo || ft >= k.f_lo) {
    k.hi = a, k.f_hi = ft;
  } else {
    if (dp * (k.hi - k.lo) >= 0) k.hi = k.lo, k.f_hi = k.f_lo;
    k.lo = a, k.f_lo = ft, k.dp_lo = dp;
  }
  step_[b] = interpolate(k.lo, k.hi, k.f_lo, k.dp_lo, k.f_hi);
}

// The strong-Wolfe line search of the pending lanes from theta along d_
// (ndvm.calibrate.linesearch, operation for operation): each trial one walk of every lane
// still searching; a lane ends with its accepted or lowest sufficient-decrease trial (found_).
void LbfgsRun::line_search(const std::vector<double>& theta, const std::vector<double>& f) {
  for (uint32_t b = 0; b < B_; ++b) {
    search_[b] = pending_[b];
    zoom_[b] = 0;
    found_[b] = 0;
    step_[b] = search_[b] ? 1.0 : 0.0;
    br_[b] = Bracket{0.0, f[b], slope_[b], 0.0, f[b], slope_[b], 0.0, kInf};
  }
  for (uint32_t ls = 0; ls < rq_.lbfgs.max_ls; ++ls) {
    bool any = false;
    for (uint32_t b = 0; b < B_; ++b) any = any || search_[b];
    if (!any) break;
    for (uint32_t b = 0; b < B_; ++b) place_trial(b, theta);
    if (!evaluate(trial_, true)) {
      out_.non_numeric = !out_.target_mismatch;
      return;
    }
    out_.evaluations += 1;
    for (uint32_t b = 0; b < B_; ++b) {
      if (search_[b]) judge(b, f[b]);
    }
  }
}

// The new (s, y) pair of each lane that moved with curvature, and gamma.
void LbfgsRun::update_memory(uint32_t it, const std::vector<double>& theta,
                             const std::vector<double>& g) {
  const size_t BP = static_cast<size_t>(B_) * P_;
  const uint32_t k = it % rq_.lbfgs.memory;
  std::vector<double>& sv = sv_;
  std::vector<double>& yv = yv_;
  sv.resize(P_);
  yv.resize(P_);
  for (uint32_t b = 0; b < B_; ++b) {
    const size_t o = static_cast<size_t>(b) * P_;
    for (uint32_t i = 0; i < P_; ++i) {
      sv[i] = new_t_[o + i] - theta[o + i];
      yv[i] = new_g_[o + i] - g[o + i];
    }
    const double sy = dot(sv.data(), yv.data());
    const bool good = act_[b] && !stuck_[b] && sy > 1e-300;
    for (uint32_t i = 0; i < P_; ++i) {
      S_[k * BP + o + i] = good ? sv[i] : 0.0;
      Y_[k * BP + o + i] = good ? yv[i] : 0.0;
    }
    rho_[k * B_ + b] = good ? 1.0 / sy : 0.0;
    const double yy = dot(yv.data(), yv.data());
    if (good) gamma_[b] = sy / yy;
  }
}

// The search direction, slope, first step and pending flag of every lane (the loop body of
// optim.LBFGS.minimize before its line search); gf, the gradient with the coordinates a
// bound holds zeroed, is left in ev_.grad.
void LbfgsRun::plan(uint32_t it, const std::vector<double>& theta, const std::vector<double>& g) {
  const size_t BP = static_cast<size_t>(B_) * P_;
  ev_.grad = g;
  std::vector<uint8_t>& held = held_;
  held.assign(BP, 0);
  for (uint32_t b = 0; b < B_; ++b) {
    for (uint32_t i = 0; i < P_; ++i) {
      const size_t j = static_cast<size_t>(b) * P_ + i;
      held[j] = (rq_.lower && theta[j] <= rq_.lower[i] && g[j] > 0) ||
                (rq_.upper && theta[j] >= rq_.upper[i] && g[j] < 0);
      if (held[j]) ev_.grad[j] = 0.0;
    }
  }
  for (uint32_t b = 0; b < B_; ++b) {
    double* d = d_.data() + static_cast<size_t>(b) * P_;
    const double* gf = ev_.grad.data() + static_cast<size_t>(b) * P_;
    direction(b, it, d);
    for (uint32_t i = 0; i < P_; ++i) d[i] = held[static_cast<size_t>(b) * P_ + i] ? 0.0 : -d[i];
    slope_[b] = dot(gf, d);
    if (slope_[b] >= 0) {
      for (uint32_t i = 0; i < P_; ++i) d[i] = -gf[i];
      slope_[b] = -dot(gf, gf);
    }
    double gmax = 0.0;
    for (uint32_t i = 0; i < P_; ++i) gmax = std::max(gmax, std::fabs(gf[i]));
    if (it == 0) {
      const double sc = std::min(1.0, 1.0 / std::max(gmax, 1e-300));
      for (uint32_t i = 0; i < P_; ++i) d[i] *= sc;
      slope_[b] *= sc;
    }
    step_[b] = act_[b] ? 1.0 : 0.0;
    pending_[b] = act_[b] && gmax > rq_.lbfgs.gtol;
    if (act_[b] && !pending_[b]) out_.state[b] = LANE_CONVERGED;
  }
}

OptimizeOutput LbfgsRun::go() {
  const size_t BP = static_cast<size_t>(B_) * P_;
  const uint32_t M = std::max<uint32_t>(rq_.lbfgs.memory, 1);
  std::vector<double> theta(rq_.theta0, rq_.theta0 + BP);
  init(theta);
  S_.assign(M * BP, 0.0);
  Y_.assign(M * BP, 0.0);
  rho_.assign(static_cast<size_t>(M) * B_, 0.0);
  gamma_.assign(B_, 1.0);
  d_.assign(BP, 0.0);
  trial_.assign(BP, 0.0);
  slope_.assign(B_, 0.0);
  step_.assign(B_, 0.0);
  act_.assign(B_, 0);
  pending_.assign(B_, 0);
  stuck_.assign(B_, 0);
  search_.assign(B_, 0);
  zoom_.assign(B_, 0);
  found_.assign(B_, 0);
  br_.assign(B_, Bracket{});
  if (!evaluate(theta, true)) {
    out_.non_numeric = !out_.target_mismatch;
    return std::move(out_);
  }
  record(theta);
  std::vector<double> f = ev_.loss, g = ev_.grad;
  for (uint32_t b = 0; b < B_; ++b) {
    if (ev_.failed[b]) std::fill_n(g.data() + static_cast<size_t>(b) * P_, P_, 0.0);
  }
  for (uint32_t it = 0; it < rq_.steps; ++it) {
    in_.poll_interrupt();
    bool any = false;
    for (uint32_t b = 0; b < B_; ++b) {
      act_[b] = out_.state[b] == LANE_RUNNING;
      any = any || act_[b];
    }
    if (!any) break;
    plan(it, theta, g);
    new_t_ = theta;
    new_f_ = f;
    new_g_ = g;
    line_search(theta, f);
    if (out_.non_numeric || out_.target_mismatch) return std::move(out_);
    for (uint32_t b = 0; b < B_; ++b) stuck_[b] = act_[b] && pending_[b] && !found_[b];
    update_memory(it, theta, g);
    std::vector<uint8_t>& flat = flat_lanes_;
    flat.assign(B_, 0);
    for (uint32_t b = 0; b < B_; ++b) {
      flat[b] = act_[b] && !stuck_[b] &&
                f[b] - new_f_[b] <= rq_.lbfgs.ftol * std::max(std::fabs(f[b]), 1.0);
    }
    theta = new_t_;
    f = new_f_;
    g = new_g_;
    ev_.loss = f;  // the iterate's record: losses and gradients of the accepted points
    ev_.grad = g;
    std::fill(ev_.failed.begin(), ev_.failed.end(), 0);
    out_.evaluations -= 1;  // (the trials were counted)
    record(theta);
    for (uint32_t b = 0; b < B_; ++b) {
      if ((stuck_[b] || flat[b]) && out_.state[b] == LANE_RUNNING) out_.state[b] = LANE_CONVERGED;
    }
  }
  finish(theta);
  return std::move(out_);
}

double pairwise_rec(const double* a, size_t n) {
  if (n < 8) {
    double res = 0.0;
    for (size_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    size_t i = 8;
    for (; i < n - (n % 8); i += 8) {
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    }
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  size_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise_rec(a, n2) + pairwise_rec(a + n2, n - n2);
}

}  // namespace

double pairwise_sum(const double* a, size_t n) { return pairwise_rec(a, n); }

OptimizeOutput optimize_adam(Interp& interp, const OptimizeRequest& req) {
  AdamRun run(interp, req);
  return run.go();
}

OptimizeOutput optimize_lbfgs(Interp& interp, const OptimizeRequest& req) {
  LbfgsRun run(interp, req);
  return run.go();
}

}  // namespace ndvm
