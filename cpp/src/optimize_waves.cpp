// Adaptive starts in the runtime (ndvm.calibrate.waves, in one call): Levenberg–Marquardt on
// the first ``wave`` starts for at most ``wave_steps`` iterations; when the best of them
// stopped on a convergence test and at least ``agree`` of them reached its loss within 1e-6
// relative, that is the fit (``wave`` lanes); otherwise every start runs afresh — the fit
// without waves, its evaluations counting the first wave's too. The same rule, operation for
// operation, as waves._enough (which the NumPy engine uses).
#include <algorithm>
#include <cmath>
#include <limits>

#include "ndvm/optimize.hpp"

namespace ndvm {

namespace {

bool converged_why(int8_t why) {
  return why == kWhyFtol || why == kWhyXtol || why == kWhyGtol || why == kWhyZero;
}

// The first wave is enough: its best lane (the first of the lowest loss; NaN counts as inf)
// stopped on a convergence test and at least ``agree`` lanes are within 1e-6 relative of it.
bool enough(const OptimizeOutput& first, uint32_t agree) {
  const double inf = std::numeric_limits<double>::infinity();
  const size_t B = first.best_loss.size();
  if (B == 0 || first.why.size() != B) return false;
  double low = inf;
  size_t at = 0;
  for (size_t b = 0; b < B; ++b) {
    const double v = std::isnan(first.best_loss[b]) ? inf : first.best_loss[b];
    if (v < low) {
      low = v;
      at = b;
    }
  }
  if (!std::isfinite(low) || !converged_why(first.why[at])) return false;
  const double tie = low + 1e-6 * std::fabs(low);
  uint32_t n = 0;
  for (size_t b = 0; b < B; ++b) n += first.best_loss[b] <= tie;  // NaN compares false
  return n >= agree;
}

}  // namespace

OptimizeOutput optimize_lm_waves(Interp& interp, const OptimizeRequest& req, uint32_t wave,
                                 uint32_t wave_steps, uint32_t agree) {
  if (wave == 0 || wave >= req.run.B || req.target_per_lane) return optimize_lm(interp, req);
  OptimizeRequest first_req = req;  // the first ``wave`` rows of theta0, fewer iterations
  first_req.run.B = wave;
  first_req.steps = std::min(req.steps, wave_steps);
  OptimizeOutput first = optimize_lm(interp, first_req);
  if (first.non_numeric || first.target_mismatch || enough(first, agree)) return first;
  OptimizeOutput full = optimize_lm(interp, req);
  full.evaluations += first.evaluations;
  return full;
}

}  // namespace ndvm
