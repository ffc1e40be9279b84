"""``Calibration``: ``ndvm.calibrate``'s result, reported like ``scipy.optimize.OptimizeResult``.

Besides the best start and every start's trajectory it says whether the fit converged
(``success``, ``message``: the largest gradient entry at the best start against ``gtol``),
how much it cost (``nit``, ``nfev``), how well it fits (``r2``), and, on demand, the
uncertainty of the fitted values (``cov``, ``stderr``; see ``ndvm.calibrate.uncertainty``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import field, replace
from functools import cached_property
from itertools import repeat
from typing import Any

import numpy as np

from ndvm.api import Program
from ndvm.calibrate import optim, uncertainty, verdicts
from ndvm.calibrate.objective import ProgramObjective
from ndvm.calibrate.verdicts import verdict as lm_verdict
from ndvm.frozen import frozen

STATUS_NAMES = {optim.OK: "ok", optim.CONVERGED: "ok", optim.FAILED: "failed"}
GTOL = 1e-5  # converged when max |d loss / d theta| <= GTOL * max(1, |loss|) at the best start


class ConvergenceWarning(UserWarning):
    """A calibration ended without meeting its convergence test (``Calibration.message``)."""


@frozen(repr=False)
class Calibration:
    """The result of ``calibrate``: the best start, every start's trajectory, diagnostics.

    params: best lane's parameter values by name (constrained space, plus loss-owned extras such
    as ``sigma``); loss: its loss; theta: its unconstrained vector. history [k+1, starts]: loss
    of every lane at every iterate of the main optimizer (NaN after a lane failed; a polish is
    not in it). all_params [starts, P'] / all_losses [starts]: each lane's best iterate.
    status: per start "ok" or "failed: <reason>". success/message: the convergence test;
    nit: optimizer iterations (main stage plus polish); nfev: evaluations of all lanes;
    grad_norm: max |d loss / d theta| at the best start (projected on box bounds); r2:
    1 - SSE/SST of the best start (residual losses on one target series; None otherwise).
    """

    program: Program
    names: tuple[str, ...]
    theta: np.ndarray
    loss: float
    params: dict[str, float]
    history: np.ndarray
    all_theta: np.ndarray
    all_params: np.ndarray
    all_losses: np.ndarray
    status: tuple[str, ...]
    best: int
    restarts: np.ndarray
    evaluations: int
    optimizer: str
    loss_name: str
    inputs: Mapping[str, Any]
    target: Any = None
    success: bool = False
    message: str = ""
    nit: int = 0
    grad_norm: float = float("nan")
    r2: float | None = None
    objective: Any = field(default=None, compare=False)
    prepared: Any = field(default=None, compare=False)
    jtj: np.ndarray | None = field(default=None, compare=False)  # least squares: J'J at theta
    absolute_sigma: bool = False
    n_best: int = 0  # starts whose loss is within 1e-6 (relative) of the best
    fixed: dict[str, float] = field(default_factory=dict)  # pinned parameters (fixed=)

    @property
    def free(self) -> np.ndarray:
        """Indices (``names`` order) of the parameters that were fitted (not ``fixed``)."""
        return np.array([i for i, n in enumerate(self.names) if n not in self.fixed], np.intp)

    @property
    def ok(self) -> bool:
        return bool(np.isfinite(self.loss))

    @property
    def nfev(self) -> int:
        return self.evaluations

    @property
    def n_failed(self) -> int:
        return sum(s != "ok" for s in self.status)

    @cached_property
    def cov(self) -> np.ndarray | None:
        """Covariance [P', P'] of the fitted values (``names`` order), as curve_fit's ``pcov``.

        A least-squares fit (Levenberg–Marquardt) gives the Gauss–Newton ``(JᵀJ)⁻¹`` scaled
        as ``curve_fit`` does (``uncertainty.gauss_newton``); other fits the inverse Hessian of
        the loss (``uncertainty.covariance``). None for a callable loss or a failed fit; NaN
        where the matrix is singular (not a minimum, or a flat direction)."""
        prep = self.prepared
        free = self.free
        D = self.theta.shape[0]
        if not self.ok or prep is None:
            return None
        if self.jtj is not None:
            sse = self.loss / prep.weight
            jac = uncertainty.value_jacobian(self.program, prep, self.theta)
            sub = uncertainty.gauss_newton(
                self.jtj[np.ix_(free, free)], sse, _n_obs(prep), self.absolute_sigma, jac[free]
            )
            return _embed(sub, free, D)
        factor = uncertainty.scale(prep.kind, self.loss, _n_obs(prep), free.size)
        if factor is None:
            return None
        obj = lane_objective(self.objective, prep, np.full(2 * D, self.best))
        H = uncertainty.hessian(obj, self.theta)
        if H is None:
            return np.full((D, D), np.nan)
        jac = uncertainty.value_jacobian(self.program, prep, self.theta)
        return _embed(uncertainty.covariance(H[np.ix_(free, free)], factor, jac[free]), free, D)

    @property
    def stderr(self) -> dict[str, float] | None:
        """Standard error of each fitted value by name (sqrt of ``cov``'s diagonal)."""
        cov = self.cov
        if cov is None:
            return None
        return {
            n: float(np.sqrt(v))
            for n, v in zip(self.names, np.diag(cov))
            if n not in self.fixed
        }

    def predict(
        self, inputs: Mapping[str, Any] | None = None, lane: int | None = None, **named: Any
    ) -> Any:
        """The program's value at the best (or given lane's) parameters on ``inputs`` (a
        mapping, a DataFrame, or keywords: ``cal.predict(conc=xs)``; None: the fit's data)."""
        from ndvm.calibrate.data import frame_inputs

        P = len(self.program.params)
        th = self.theta if lane is None else self.all_theta[lane]
        given = frame_inputs(self.program, inputs) if inputs is not None else {}
        given.update(named)
        return self.program.eval(th[:P], given if inputs is not None or named else dict(
            self.inputs))

    def plot(self, path: str | None = None, **kwargs: Any) -> Any:
        """Loss history of every start and (for 1-D data) the fit; needs matplotlib."""
        from ndvm.calibrate.plot import plot_calibration

        return plot_calibration(self, path, **kwargs)

    def __repr__(self) -> str:
        vals = ", ".join(f"{k}={v:.6g}" for k, v in self.params.items())
        return (
            f"Calibration(success={self.success}, loss={self.loss:.6g}, {vals}; "
            f"starts={len(self.status)}, failed={self.n_failed}, nit={self.nit}, "
            f"nfev={self.nfev})"
        )

    def summary(self) -> str:
        """A table: the convergence message, fit statistics, and each value with its error."""
        se = self.stderr or {}
        lines = [
            f"{self.message}",
            f"loss ({self.loss_name}) {self.loss:.6g}   R² "
            + ("-" if self.r2 is None else f"{self.r2:.6g}")
            + f"   starts {len(self.status)} ({self.n_failed} failed)"
            + f"   iterations {self.nit}   evaluations {self.nfev}",
            f"{'parameter':<16}{'value':>16}{'std err':>14}",
        ]
        for n, v in self.params.items():
            e = se.get(n)
            err = "fixed" if n in self.fixed else "-" if e is None else f"{e:.4g}"
            lines.append(f"{n:<16}{v:>16.8g}{err:>14}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the result's numbers (NaN stays float; ``json_safe`` turns it to None)."""
        se = self.stderr
        return {
            "success": bool(self.success),
            "message": self.message,
            "loss": float(self.loss),
            "params": {k: float(v) for k, v in self.params.items()},
            "stderr": se,
            "cov": None if self.cov is None else self.cov.tolist(),
            "r2": self.r2,
            "grad_norm": float(self.grad_norm),
            "nit": int(self.nit),
            "nfev": int(self.nfev),
            "best_start": int(self.best),
            "starts": len(self.status),
            "failed": self.n_failed,
            "steps": int(self.history.shape[0] - 1),
            "optimizer": self.optimizer,
            "loss_name": self.loss_name,
            "failures": {i: s for i, s in enumerate(self.status) if s != "ok"},
            "fixed": dict(self.fixed),
        }


def _embed(sub: np.ndarray, free: np.ndarray, D: int) -> np.ndarray:
    """The free parameters' covariance ``sub`` in a ``[D, D]`` matrix whose fixed rows and
    columns are 0 (a pinned value does not vary)."""
    if free.size == D:
        return sub
    out = np.zeros((D, D))
    out[np.ix_(free, free)] = sub
    return out


def _n_obs(prep: Any) -> int:
    t = getattr(prep, "target", None)
    return 1 if t is None else int(np.shape(t)[-1]) if np.ndim(t) else 1


def lane_objective(objective: Any, prepared: Any, rows: np.ndarray) -> Any:
    """``objective`` for lanes that are the starts ``rows`` (per-start targets follow them)."""
    if prepared is None or not prepared.per_lane:
        return objective
    return ProgramObjective(replace(prepared, target=prepared.target[rows]))


def _best(losses: np.ndarray) -> int:
    """The lowest loss's lane (NaN ignored; lane 0 when no loss is finite); of starts that
    reached it within 1e-9 relative, the first. (Python floats: a fit has few starts.)"""
    if losses.shape[0] == 1:
        return 0
    vals = losses.tolist()
    total = sum(vals)
    if total != total:  # a NaN (or inf - inf): NaN counts as inf
        vals = [math.inf if v != v else v for v in vals]
    low = min(vals)
    if not math.isfinite(low):
        return 0
    # ties within 1e-9 (relative) go to the first start: the declared init's, if it got there
    tie = low + 1e-9 * abs(low)
    return next(i for i, v in enumerate(vals) if v <= tie)


def _n_best(losses: np.ndarray, loss: float, target_scale: float) -> int:
    """How many starts reached ``loss`` within 1e-6 relative; for a least-squares fit the
    scale is at least 1e-12 of the target's mean square (an exact fit's starts end at round-off
    losses like 1e-24, not all at 0); ``target_scale``: ``target_scale`` of the fit."""
    if not math.isfinite(loss):
        return 0
    if losses.shape[0] == 1:
        return 1
    scale = max(abs(loss), 1e-12 * target_scale)  # the mse's scale
    tie = loss + 1e-6 * scale
    return sum(1 for v in losses.tolist() if v <= tie)  # NaN compares False


def _diagnose(
    program: Program, objective: Any, prep: Any, trace: optim.Trace, theta: np.ndarray, best: int
) -> tuple[np.ndarray | None, float | None]:
    """The exact gradient and R² at the best start's ``theta [D]``: as an in-runtime optimizer
    reported them for that iterate (``best_grad``, ``best_sse``), else from one objective
    evaluation, whose squared residuals give R² where it formed them (else a model walk)."""
    y = None
    if prep is not None and prep.target is not None and prep.kind != "value":
        if np.ndim(prep.target) > 0:
            y = prep.target[best] if prep.per_lane else prep.target
    if trace.best_grad is not None:
        g = trace.best_grad[best]
        grad = g if optim.all_finite(g) else None
        assert trace.best_sse is not None
        sse = float(trace.best_sse[best])
    else:
        if prep is not None and prep.per_lane:
            objective = lane_objective(objective, prep, np.array([best]))
        ev = objective(theta[None, :], grad=True)
        failed = bool(ev.failed[0])
        grad = None if ev.grad is None or failed else np.asarray(ev.grad[0], dtype=np.float64)
        sse = None if y is None else _sse(program, prep, theta, y, None if failed else ev.sq)
    if y is None or sse is None:
        return grad, None
    d = y - y.sum() / y.shape[0]  # y.mean(), bitwise
    sst = float((d * d).sum())
    return grad, 1.0 - sse / sst if sst > 0 else None


def _sse(
    program: Program, prep: Any, theta: np.ndarray, y: np.ndarray, sq: np.ndarray | None
) -> float | None:
    """The sum of squared residuals against ``y``: of the objective's ``sq`` when given, else
    of a model walk (None when the model's value is not one number per target entry)."""
    if sq is not None:
        sq = sq[0]
    else:
        res = prep.model.evaluate(theta[None, : len(program.param_specs)], prep.model_inputs)
        if not res.numeric:
            return None
        f = np.asarray(res.value, dtype=np.float64).reshape(-1)
        sq = (f - y) ** 2 if f.shape == y.shape else None
    return None if sq is None or sq.shape != y.shape else float(sq.sum())


def _cosine(grad: np.ndarray | None, jtj: np.ndarray, loss: float, prep: Any) -> float:
    """The largest cosine of a Jacobian column with the residual, from the (projected) loss
    gradient ``2 w Jᵀr``: ``|g_i| / (2 w ‖J_i‖ ‖r‖)`` over the columns with a norm (NaN if
    one of those is NaN)."""
    if grad is None:
        return math.inf
    rn = math.sqrt(max(loss / prep.weight, 0.0))
    two_w = 2.0 * prep.weight
    worst = 0.0
    for g, d in zip(grad.tolist(), np.diagonal(jtj).tolist()):
        norm = math.sqrt(max(d, 0.0)) * rn
        if norm > 0:
            c = abs(g) / (two_w * norm)
            if c != c:
                return math.nan
            worst = max(worst, c)
    return worst


def target_scale(prep: Any) -> float:
    """The mean square of a least-squares fit's target, weighted as its residuals (``sigma``);
    0 for other losses."""
    target = getattr(prep, "target", None)
    if target is None or getattr(prep, "kind", None) != "mse" or not target.size:
        return 0.0
    flat = target.reshape(-1)
    w = getattr(prep, "residual_weight", None)
    if w is not None and flat.size == np.size(w):
        flat = flat * w
    return float(flat @ flat) / flat.size


def _round_off(loss: float, scale: float) -> bool:
    """A least-squares loss at round-off of the target's mean square (relative RMS residual at
    most 1e-10): an exact fit, where the residual's direction, and so its cosine with J, is
    noise. (A model of large intermediates, e.g. ``a exp(b (w - c)²)`` with w near 500, fits
    exact data only to a relative RMS of about 1e-12.)"""
    return scale > 0.0 and loss <= ROUND_OFF * scale


ROUND_OFF = 1e-20  # an exact fit: loss <= this times the target's mean square


AUTO_NAME = "adam+lbfgs-polish"  # what optimizer="auto" reports (calibrate.api)


def _verdict(cal: dict[str, Any], steps: int, starts: int, optimizer: str = "") -> tuple[bool, str]:
    loss, g = cal["loss"], cal["grad_norm"]
    if not math.isfinite(loss):
        why = next((s for s in cal["status"] if s != "ok"), "no finite loss")
        why = why.removeprefix("failed: ")
        return False, f"failed: every start failed ({why})"
    tol = GTOL * max(1.0, abs(loss))
    if math.isfinite(g) and g <= tol:
        return True, f"converged: max |gradient| {g:.3g} <= {tol:.3g} (best of {starts} starts)"
    advice = (
        "raise steps, starts or polish (optimizer='auto' was in use: Adam, then an L-BFGS "
        "polish of the best starts)"
        if optimizer == AUTO_NAME
        else "raise steps or starts, or use optimizer='auto' (Adam, then an L-BFGS polish of "
        "the best starts)"
    )
    return False, (
        f"not converged: max |gradient| {g:.3g} > {tol:.3g} after {steps} steps at the best of "
        f"{starts} starts; {advice}"
    )


def _unbounded_verdict(
    objective: Any, theta: np.ndarray, grad: Any, loss: float, project: Any, message: str
) -> tuple[bool, str]:
    """A gradient-converged fit is not a success where the loss keeps falling along its
    descent direction (``verdicts.unbounded``), nor where it reached -inf."""
    low = -math.inf if loss == -math.inf else verdicts.unbounded(
        objective, theta, grad, loss, project
    )
    if low is None:
        return True, message
    return False, (
        f"not converged: the loss kept falling (from {loss:.6g} to {low:.6g} along the "
        f"descent direction, up to {verdicts.RAY[-1]:g} times farther out): the objective "
        "looks unbounded below; bound the parameters (constraints=) or check the model"
    )


def _ls_verdict(
    why: int, jtj: np.ndarray, names: tuple[str, ...], theta: np.ndarray, cos: float,
    n_best: int, starts: int, prepared: Any, fixed: Mapping[str, float], scale: float,
) -> tuple[bool, str]:  # fmt: skip
    """``verdicts.verdict`` of a least-squares fit on its free parameters' columns."""
    sub, free_names, th = jtj, names, theta
    if fixed:
        free = [i for i, n in enumerate(names) if n not in fixed]
        sub, free_names, th = jtj[np.ix_(free, free)], tuple(names[i] for i in free), theta[free]
    n = _n_obs(prepared)
    y_norm = math.sqrt(scale * n)
    return lm_verdict(why, sub, free_names, cos, n_best, starts, n, (th, y_norm))


def build(
    program: Program,
    trace: optim.Trace,
    extra_names: tuple[str, ...],
    prepared: Any,
    objective: Any,
    meta: dict[str, Any],
    project: optim.Project | None = None,
    diagnostics: bool = True,
    warn: bool = True,
    stacklevel: int = 3,
    scale: float | None = None,
) -> Calibration:
    """The Calibration of a finished trace; warns (``ConvergenceWarning``, at ``stacklevel``)
    if not converged (and ``warn``); ``scale``: ``target_scale(prepared)`` when the caller
    has it (a plan's, made once).
    Without ``diagnostics`` no further evaluation is made (no gradient norm, no R², no
    warning) and ``success`` means only that the best start did not fail."""
    P = len(program.param_specs)
    losses = trace.best_loss
    best = _best(losses)
    values = program.constrain(trace.best_theta[:, :P])
    if extra_names and prepared is not None:
        values = np.concatenate([values, prepared.constrain_extra(trace.best_theta[:, P:])], 1)
    names = program.params + extra_names
    codes = np.asarray(trace.state).tolist()
    status = tuple(
        STATUS_NAMES.get(s, "failed") if s != optim.FAILED else f"failed: {r or 'unknown'}"
        for s, r in zip(codes, trace.reasons)
    ) if optim.FAILED in codes else tuple(map(STATUS_NAMES.get, codes, repeat("failed")))
    theta = trace.best_theta[best].copy()
    loss = float(losses[best])
    grad = r2 = None
    if math.isfinite(loss) and diagnostics:
        grad, r2 = _diagnose(program, objective, prepared, trace, theta, best)
    if grad is not None and project is not None:  # at a box bound only the inward part counts
        grad = theta - project((theta - grad)[None, :])[0]
    fields: dict[str, Any] = dict(
        loss=loss,
        grad_norm=float("nan") if grad is None else max(map(abs, grad.tolist()), default=0.0),
        status=status,
    )
    if scale is None:  # once: n_best, the round-off test and the verdict
        scale = target_scale(prepared)
    n_best = _n_best(losses, loss, scale)
    jtj = None if trace.jtj is None or not math.isfinite(loss) else trace.jtj[best]
    if diagnostics and trace.why is not None and jtj is not None:
        cos = 0.0 if _round_off(loss, scale) else _cosine(grad, jtj, loss, prepared)
        success, message = _ls_verdict(
            int(trace.why[best]), jtj, names, theta, cos, n_best, len(status), prepared,
            meta.get("fixed") or {}, scale,
        )
    elif diagnostics:
        success, message = _verdict(fields, meta["nit"], len(status), meta.get("optimizer", ""))
        if success or loss == -math.inf:
            obj = lane_objective(objective, prepared, np.full(len(verdicts.RAY), best))
            success, message = _unbounded_verdict(obj, theta, grad, loss, project, message)
    else:
        success = math.isfinite(loss)
        message = "finished (diagnostics off)" if success else "every start failed"
    cal = Calibration(
        program=program,
        names=names,
        theta=theta,
        params=dict(zip(names, values[best].tolist())),
        history=trace.history,
        all_theta=trace.best_theta,
        all_params=values,
        all_losses=losses,
        best=best,
        restarts=trace.restarts,
        evaluations=trace.evaluations,
        success=success,
        message=message,
        r2=r2,
        objective=objective,
        prepared=prepared,
        jtj=jtj,
        n_best=n_best,
        **fields,
        **meta,
    )
    if not success and diagnostics and warn:
        warnings.warn(message, ConvergenceWarning, stacklevel=stacklevel)
    return cal
