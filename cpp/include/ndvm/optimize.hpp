// In-runtime multi-step optimizer: Adam over the B parameter lanes of one program, looping
// run + reverse mode on one reused Interp with no host round trip per step. The semantics are
// those of ndvm.calibrate.optim.Adam with on_failure="drop" (torch.optim.Adam's update order,
// per-lane best iterate, failed lanes frozen but still evaluated, optional early stop and box
// projection); the loss of lane b is weight * sum(value[b, ...]) (NumPy's pairwise sum), or,
// with a target, weight * sum((value[b, m] - target[b or shared, m])^2): the residual is formed
// here, with the same operations (and bits) as the loss-augmented program
// (let ((r (- E target))) (* r r)) would tape, so no augmented copy has to be compiled.
#pragma once

#include <cstdint>
#include <vector>

#include "ndvm/interp.hpp"

namespace ndvm {

enum LaneState : int8_t { LANE_RUNNING = 0, LANE_OK = 1, LANE_FAILED = 2, LANE_CONVERGED = 3 };

// Why a lane failed: an index into OptimizeOutput::errors, or one of these.
constexpr int32_t kNoReason = -1;
constexpr int32_t kNonFiniteLoss = -2;
constexpr int32_t kNonFiniteGrad = -3;
constexpr int32_t kTimeLimit = -4;

struct AdamOptions {
  double lr = 0.05;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};

// Levenberg–Marquardt's tolerances (optimize_lm), as scipy.optimize.least_squares names them.
struct LMOptions {
  double ftol = 1.49012e-8;  // relative reduction of the sum of squares, actual and predicted
  double xtol = 1.49012e-8;  // scaled step relative to the scaled point (|D delta| / |D theta|)
  double gtol = 1e-8;        // cosine of every Jacobian column with the residual
  double lambda0 = 1e-3; // initial damping (relative to diag(J'J))
  bool project_linear = true;  // first trial: the exact solve of the linear parameters
};

// Why an LM lane stopped (OptimizeOutput::why).
enum LMWhy : int8_t {
  kWhyNone = 0, kWhyFtol = 1, kWhyXtol = 2, kWhyGtol = 3, kWhyZero = 4, kWhyNoProgress = 5,
  kWhyTimeLimit = 6, kWhyDominated = 7,
  kWhyUnderflow = 8,  // the sum of squares underflowed (residuals nonzero, squares below DBL_MIN)
};

// L-BFGS's options (optimize_lbfgs): ndvm.calibrate.optim.LBFGS's fields.
struct LBFGSOptions {
  uint32_t memory = 10;
  double c1 = 1e-4;
  uint32_t max_ls = 15;
  double gtol = 1e-10;
  double ftol = 1e-13;
  double c2 = 0.9;  // the strong Wolfe curvature condition's constant
};

struct OptimizeRequest {
  RunRequest run;                 // program, B, Ng, constraints, inputs, limits, dialect
  const double* theta0 = nullptr;  // [B, P]
  double weight = 1.0;            // loss_b = weight * sum(value[b, ...]); cotangent = weight
  uint32_t steps = 0;
  AdamOptions adam;
  const double* lr_schedule = nullptr;  // [steps] or nullptr: lr of a lane's t-th step
  const double* target = nullptr;       // [N] shared or [B, N] per lane; nullptr: no residual
  size_t target_len = 0;                // N
  bool target_per_lane = false;
  double time_limit = 0.0;  // seconds for the whole fit; <= 0: none. Running lanes then fail
  const double* lower = nullptr;  // [P] or nullptr: theta box, projected after each step
  const double* upper = nullptr;
  bool early_stop = false;
  double rtol = 0.0;
  double atol = 0.0;
  int64_t patience = 0;
  LMOptions lm;                           // optimize_lm only
  LBFGSOptions lbfgs;                     // optimize_lbfgs only
  const double* residual_weight = nullptr;  // [N] or nullptr: r = (value - target) * w
};

struct OptimizeOutput {
  std::vector<double> theta;       // [B, P]
  std::vector<double> best_theta;  // [B, P]
  std::vector<double> best_loss;   // [B] (NaN for failed lanes)
  std::vector<double> best_grad;   // [B, P]: the loss gradient at best_theta (NaN: none)
  std::vector<double> best_sse;    // [B]: sum of squared residuals there (with a target)
  std::vector<double> history;     // [k, B]
  uint32_t iterates = 0;           // k
  std::vector<int8_t> state;       // [B]
  std::vector<int32_t> reason;     // [B]: >= 0 index into errors, else kNo/kNonFinite*
  std::vector<ErrorOut> errors;    // the lane errors reasons refer to
  uint64_t evaluations = 0;
  bool non_numeric = false;  // the program's result was not numeric: nothing to optimize
  bool target_mismatch = false;  // the value grid has not target_len numbers per lane
  bool timed_out = false;        // time_limit stopped the fit ...
  uint32_t stopped_at = 0;       // ... after this many steps
  std::vector<int8_t> why;       // [B] optimize_lm: LMWhy of each lane
  std::vector<double> jtj;       // [B, P, P] optimize_lm: J'J of the weighted residuals there
};

// Pairwise summation exactly as NumPy's float64 add.reduce over a contiguous row.
double pairwise_sum(const double* a, size_t n);

OptimizeOutput optimize_adam(Interp& interp, const OptimizeRequest& req);

// L-BFGS with a strong-Wolfe line search (ndvm.calibrate.optim.LBFGS, operation for operation) on
// the same losses as optimize_adam; req.steps bounds the iterations.
OptimizeOutput optimize_lbfgs(Interp& interp, const OptimizeRequest& req);

// Levenberg–Marquardt on the sum of squared (weighted) residuals against req.target, all
// lanes in one walk per iteration; req.steps bounds the iterations. Needs a target.
OptimizeOutput optimize_lm(Interp& interp, const OptimizeRequest& req);

// optimize_lm with adaptive starts (optimize_waves.cpp): the first ``wave`` lanes for at most
// ``wave_steps`` iterations, and every lane afresh only when fewer than ``agree`` of them
// reached the best loss or the best did not converge; the output has ``wave`` lanes when the
// first wave was enough (``wave`` 0: optimize_lm).
OptimizeOutput optimize_lm_waves(Interp& interp, const OptimizeRequest& req, uint32_t wave,
                                 uint32_t wave_steps, uint32_t agree);

}  // namespace ndvm
