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

 private:
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
  const size_t M = last_.value.size() / B_;
  const double* val = last_.value.data();
  const double w = rq_.weight;
  if (rq_.target != nullptr) {
    if (M != rq_.target_len) {
      out_.target_mismatch = true;
      return false;
    }
    sq_.resize(M);
    if (grad) ct_.resize(last_.value.size());
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
    if (grad) ct_.assign(last_.value.size(), w);
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

OptimizeOutput AdamRun::go() {
  const size_t BP = static_cast<size_t>(B_) * P_;
  run_ = rq_.run;
  std::vector<double> theta(rq_.theta0, rq_.theta0 + BP);
  m_.assign(BP, 0.0);
  v_.assign(BP, 0.0);
  t_.assign(B_, 0.0);
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

}  // namespace ndvm
