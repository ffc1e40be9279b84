"""Task ``nile``: univariate local-level model on statsmodels' Nile flow data (external oracle).

The ndvm program reproduces statsmodels' ``UnobservedComponents(level="local level")``
log-likelihood exactly (approximate diffuse start, variance 1e6, first observation burned);
fitted by L-BFGS on log-variances it must reach statsmodels' MLE (variances 1e-4 relative,
log-likelihood 1e-6 relative). Needs the optional extra ``data`` (statsmodels).
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from ndvm.backends.inputs import const
from ndvm.tasks.base import CalibSpec, Task, TaskData

PROGRAM = """\
; Negative log-likelihood of a univariate local-level model (statsmodels conventions):
; y_t = mu_t + eps_t, eps ~ N(0, exp(le)); mu_{t+1} = mu_t + eta_t, eta ~ N(0, exp(ll)).
; Approximate diffuse start (mean 0, variance 1e6), the first observation burned.
(params (le 7.0) (ll 7.0))
(define s2e (exp le))
(define s2l (exp ll))
(define T (vlen Y))
(let loop ((t 0) (a 0) (P 1e6) (nll 0))
  (if (= t T)
      nll
      (let* ((F (+ P s2e))
             (v (- (ref Y t) a))
             (K (/ P F))
             (step (if (< t 1) 0 (* 0.5 (+ 1.8378770664093453 (log F) (/ (* v v) F))))))
        (loop (+ t 1) (+ a (* K v)) (+ (* P (- 1 K)) s2l) (+ nll step)))))
"""


def load_nile() -> np.ndarray:
    """The 100 annual Nile flow volumes (statsmodels.datasets.nile)."""
    from statsmodels.datasets import nile

    return np.asarray(nile.load_pandas().data["volume"].values, dtype=np.float64)


def build() -> TaskData:
    y = load_nile()
    return TaskData({"Y": const(y)}, None, meta={"y": y})


@cache
def statsmodels_mle() -> dict[str, float]:
    """statsmodels' MLE, converged tightly (Nelder-Mead, then BFGS to gtol 1e-10)."""
    import warnings

    import statsmodels.api as sm

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sm.tsa.UnobservedComponents(load_nile(), level="local level")
        rough = model.fit(disp=False, method="nm", maxiter=5000)
        res = model.fit(rough.params, disp=False, method="bfgs", gtol=1e-10, maxiter=2000)
    return {
        "sigma2_irregular": float(res.params[0]),
        "sigma2_level": float(res.params[1]),
        "llf": float(res.llf),
    }


def score(cal: Any, data: TaskData) -> dict[str, float]:
    ref = statsmodels_mle()
    s2e, s2l = float(np.exp(cal.params["le"])), float(np.exp(cal.params["ll"]))
    llf = -cal.loss
    return {
        "sigma2_irregular": s2e,
        "sigma2_level": s2l,
        "llf": llf,
        "rel_irregular": abs(s2e - ref["sigma2_irregular"]) / ref["sigma2_irregular"],
        "rel_level": abs(s2l - ref["sigma2_level"]) / ref["sigma2_level"],
        "rel_llf": abs(llf - ref["llf"]) / abs(ref["llf"]),
    }


TASK = Task(
    name="nile",
    description=__doc__.splitlines()[0],
    inputs=("Y",),
    build_data=build,
    calib=CalibSpec(loss="value", steps=100, optimizer="lbfgs", init_scale=None),
    score=score,
    success=lambda m: max(m["rel_irregular"], m["rel_level"]) <= 1e-4 and m["rel_llf"] <= 1e-6,
    program=PROGRAM,
)
