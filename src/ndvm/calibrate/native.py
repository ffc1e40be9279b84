"""Drop-in dispatch to a backend's in-runtime optimizer (many steps per call, no Python per step).

A backend that defines ``optimize`` (signature below) runs the whole Adam / L-BFGS loop for a
built-in loss in which the loss is a weighted sum of the model's value grid, or of its squared
residual against a target (formed in the runtime: no loss-augmented copy is compiled); this
adapter turns its result into the same ``Trace`` the NumPy optimizers produce. When the runtime
cannot form the residual (the value grid does not have one number per target entry) it falls
back to the NumPy optimizer on the loss-augmented program.

    backend.optimize(program: CompiledProgram, theta0: f64[B, P], inputs: Mapping, *,
                     weight: float, method: "adam" | "lbfgs", steps: int, options: dict,
                     lower: f64[P] | None, upper: f64[P] | None,
                     early_stop: (rtol, atol, patience) | None,
                     limits: Limits, dialect: str | None,
                     lr_schedule: f64[steps] | None, target: f64[N] | f64[B, N] | None,
                     time_limit: float | None) -> dict with
        theta f64[B, P], best_theta f64[B, P], best_loss f64[B], history f64[k+1, B],
        state int8[B] (1 ok, 2 failed, 3 converged), reasons list[str | None], evaluations int
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ndvm.calibrate import optim
from ndvm.calibrate.losses import Prepared
from ndvm.calibrate.objective import Objective
from ndvm.errors import BackendUnsupported


def supports(backend: Any, prepared: Prepared | None, opt: Any) -> bool:
    """True when ``backend`` can run ``opt`` on ``prepared`` in-runtime."""
    if prepared is None or not hasattr(backend, "optimize"):
        return False
    # a learned noise scale (gaussian_nll) needs loss-owned parameters: NumPy path
    if prepared.extra0 or (prepared.kind == "gaussian_nll" and prepared.sigma is None):
        return False
    if not isinstance(opt, (optim.Adam, optim.LBFGS)):
        return False
    # a backend may run only some methods in-runtime (e.g. Adam); the rest stay in NumPy
    return opt.name in getattr(backend, "optimize_methods", ("adam", "lbfgs"))


@dataclass(frozen=True)
class NativeOptimizer:
    """Runs ``inner``'s algorithm inside the backend runtime; same ``Optimizer`` protocol."""

    backend: Any
    inner: optim.Adam | optim.LBFGS
    prepared: Prepared
    name: str = "native"

    def minimize(
        self, objective: Objective, theta0: np.ndarray, steps: int, control: optim.Control
    ) -> optim.Trace:
        prep = self.prepared
        program = prep.model
        P = len(program.params)
        lower = upper = None
        if control.project is not None:
            lower = control.project(np.full((1, P), -np.inf))[0]
            upper = control.project(np.full((1, P), np.inf))[0]
        es = control.early_stop
        weight = prep.weight
        if prep.kind == "gaussian_nll":
            assert prep.sigma is not None
            weight = 0.5 * prep.weight / prep.sigma**2
        options = {k: v for k, v in asdict(self.inner).items() if k != "name"}
        schedule = self.inner.schedule(steps) if isinstance(self.inner, optim.Adam) else None
        try:
            out = self.backend.optimize(
                program.compiled,
                np.ascontiguousarray(theta0, dtype=np.float64),
                prep.model_inputs,
                weight=weight,
                method=self.inner.name,
                steps=steps,
                options=options,
                lower=lower,
                upper=upper,
                early_stop=None if es is None else (es.rtol, es.atol, es.patience),
                limits=program.limits,
                dialect=program.dialect,
                lr_schedule=schedule,
                target=prep.target,
                time_limit=control.time_limit,
            )
        except BackendUnsupported:
            return self.inner.minimize(objective, theta0, steps, control)
        if control.callback is not None:
            control.callback(steps + 1, steps + 1)
        best_loss = np.asarray(out["best_loss"], dtype=np.float64)
        history = np.asarray(out["history"], dtype=np.float64)
        if prep.kind == "gaussian_nll":  # the runtime minimizes the weighted sum of squares
            shift = np.log(prep.sigma) + 0.5 * np.log(2 * np.pi)
            best_loss, history = best_loss + shift, history + shift
        return optim.Trace(
            theta=np.asarray(out["theta"]),
            best_theta=np.asarray(out["best_theta"]),
            best_loss=best_loss,
            history=history,
            state=np.asarray(out["state"], dtype=np.int8),
            reasons=list(out["reasons"]),
            restarts=np.zeros(theta0.shape[0], dtype=np.int64),
            evaluations=int(out["evaluations"]),
        )
