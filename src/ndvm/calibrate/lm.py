"""Levenberg–Marquardt for sum-of-squares losses, every start a lane.

The runtime's ``optimize_lm`` (``cpp/src/optimize_lm.cpp``) is the engine ``calibrate`` uses;
``LM.minimize`` here is the same algorithm in NumPy over ``Program.evaluate`` and
``Program.jacobian`` — the reference the runtime is tested against, and the engine of a backend
without it. Per iteration: one evaluation of every lane at its trial point; a lane whose sum
of squares fell accepts it and takes the exact Jacobian there; every running lane then solves
``(JᵀJ + λ D) δ = -Jᵀr`` with ``D = diag(JᵀJ)``, each entry floored at 1e-12 of its
column's running squared norm (Marquardt's
scaling: steps do not depend on the parameters' units), projected on the box; Nielsen's rule
updates λ (``λ·max(1/3, 1-(2ρ-1)³)`` on success, ``λ·ν, ν·2`` on failure). A trial that fails
(a lane error, a non-finite residual or derivative) is rejected, not fatal: only a lane whose
start fails fails.

A lane stops (``CONVERGED``) on the first of, like ``scipy.optimize.least_squares``:

- ``ftol``: the actual and the predicted reduction of the sum of squares are both at most
  ``ftol`` times it;
- ``xtol``: the scaled step is at most ``xtol ‖D θ‖`` (MINPACK: ``‖D δ‖ <= xtol ‖D θ‖``, D the
  running maximum of J's column norms, so the test does not depend on the data's units);
- ``gtol``: every column of J makes a cosine of at most ``gtol`` with the residual (MINPACK's
  test: scale-free, zero at a stationary point);
- an exact fit (sum of squares 0, every residual 0);
- underflow (a sum of squares below the smallest normal double from nonzero residuals: the
  losses can no longer be compared; never a success);
- no progress: λ above 1e16, no damped step lowers the loss (a stationary point or a bound).

The verdict (``success``) is stricter than the stop: an ``ftol`` or ``xtol`` stop where a column
of J still makes a cosine above ``STATIONARY_COSINE`` (1e-3) with the residual is reported as
not converged (a stop in an ill-conditioned valley, e.g. NIST's MGH10 from its first start).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ndvm.calibrate import optim
from ndvm.calibrate.objective import Objective
from ndvm.errors import NdvmError

(WHY_NONE, WHY_FTOL, WHY_XTOL, WHY_GTOL, WHY_ZERO, WHY_STUCK, WHY_TIME, WHY_DOMINATED,
 WHY_UNDERFLOW) = range(9)
WHY_TEXT = {
    WHY_NONE: "iteration limit reached",
    WHY_FTOL: "relative reduction of the sum of squares below ftol",
    WHY_XTOL: "step below xtol",
    WHY_GTOL: "gradient orthogonal to the residual within gtol",
    WHY_ZERO: "exact fit (zero residual)",
    WHY_STUCK: "no damped step lowers the loss",
    WHY_TIME: "time limit reached",
    WHY_DOMINATED: "stopped above a converged start's loss, improving by < 1 % in 10 iterations",
    WHY_UNDERFLOW: "the sum of squares underflows (nonzero residuals whose squares are below "
    "the smallest normal double): divide the target (and the model's scale) by its magnitude",
}
CONVERGED_WHY = (WHY_FTOL, WHY_XTOL, WHY_GTOL, WHY_ZERO)
MAX_LAMBDA = 1e16
DOMINATED_WINDOW, DOMINATED_DROP = 10, 0.01
RADIUS_FACTOR = 100.0
# an ftol or xtol stop is a success only where no Jacobian column makes a cosine above this
# with the residual (a stationary point has none; a stop in an ill-conditioned valley may)
STATIONARY_COSINE = 1e-3


@dataclass(frozen=True)
class LM:
    """Levenberg–Marquardt options (``optimizer="lm"``); ``steps`` bounds the iterations."""

    ftol: float = 1.49012e-8
    xtol: float = 1.49012e-8
    gtol: float = 1e-8
    lambda0: float = 1e-3
    project_linear: bool = True
    name: str = "lm"

    def minimize(
        self, objective: Objective, theta0: np.ndarray, steps: int, control: optim.Control
    ) -> optim.Trace:
        prep = getattr(objective, "prepared", None)
        if prep is None or prep.kind != "mse" or prep.target is None:
            raise NdvmError("optimizer='lm' needs a sum-of-squares loss with a target (mse)")
        return _Lanes(self, prep, np.array(theta0, dtype=np.float64), control).run(steps)


def residuals(prep: object, theta: np.ndarray, jac: bool) -> tuple:
    """(r [B, M], sum of squares [B] (inf where a lane failed), J [B, M, P] or None, reasons)
    of the weighted residuals ``(f - y) w`` of ``prep.model`` at ``theta``."""
    from ndvm.calibrate.losses import lane_reasons

    model, inputs = prep.model, prep.model_inputs  # type: ignore[attr-defined]
    B, P = theta.shape
    res = model.evaluate(theta, inputs)
    status = np.asarray(res.status).reshape(B, -1)
    failed = (status == 2).any(axis=1) if res.numeric else np.ones(B, bool)
    value = np.asarray(res.value, dtype=np.float64).reshape(B, -1) if res.numeric else None
    target = prep.target  # type: ignore[attr-defined]
    y = target if target.ndim == 2 else np.broadcast_to(target.reshape(-1), (B, target.size))
    if value is None or (value.shape != y.shape and value.shape[1] != 1):
        raise NdvmError(
            f"optimizer='lm': the model gives {None if value is None else value.shape[1]} "
            f"number(s) per start, the target has {y.shape[1]}"
        )
    w = prep.residual_weight  # type: ignore[attr-defined]
    r = (value - y) * (1.0 if w is None else w)  # one number per start: against every entry
    with np.errstate(invalid="ignore", over="ignore"):
        f = np.where(failed, np.inf, (r * r).sum(axis=1))
    f[~np.isfinite(f)] = np.inf
    J = None
    if jac:
        J = np.asarray(model.jacobian(theta, inputs), dtype=np.float64).reshape(B, -1, P)
        J = np.broadcast_to(J, (B, r.shape[1], P))
        if w is not None:
            J = J * w[None, :, None]
    return r, f, J, lane_reasons(res)


LINEAR_PROBES = 8  # starts tried for a finite linearity probe (the runtime's kLinearProbes)


def linear_parameters(prep: object, starts: np.ndarray) -> np.ndarray:
    """Which parameters the model is jointly affine in, at the first of the first
    ``LINEAR_PROBES`` rows of ``starts [B, P]`` where the probes' Jacobian is finite and no
    column is zero (a declared start of zeros may divide by zero, or zero an amplitude:
    ``A sin(w x + p)`` says nothing of A at w = p = 0); if there is none, at the first row."""
    for row in starts[:LINEAR_PROBES]:
        linear = _linear_at(prep, row, strict=True)
        if linear is not None:
            return linear
    out = _linear_at(prep, starts[0], strict=False)  # where a non-finite column is not affine
    assert out is not None
    return out


def _linear_at(prep: object, row: np.ndarray, strict: bool) -> np.ndarray | None:
    """At the point ``row``: parameter i is a candidate when its Jacobian column does not move
    as it shifts alone; the candidates are kept when their columns do not move as they all
    shift together (no products). None when ``strict`` and a probe's Jacobian is not finite
    or the point's has a column of zeros."""
    model, inputs = prep.model, prep.model_inputs  # type: ignore[attr-defined]
    P = row.shape[0]
    shift = 1.0 + np.abs(row)
    rows = np.tile(row, (P + 1, 1))
    rows[np.arange(1, P + 1), np.arange(P)] += shift
    J = np.asarray(model.jacobian(rows, inputs), dtype=np.float64).reshape(P + 1, -1, P)
    if strict and not (np.isfinite(J).all() and (np.abs(J[0]).max(axis=0) > 0).all()):
        return None  # not finite, or a zero column: the point says nothing of that parameter

    def same(a: np.ndarray, b: np.ndarray) -> bool:
        top = np.abs(a).max(initial=0.0)
        ok = np.isfinite(a).all() and np.isfinite(b).all()
        return bool(ok and top > 0 and (np.abs(a - b) <= 1e-9 * top).all())

    linear = np.array([same(J[0, :, i], J[i + 1, :, i]) for i in range(P)], bool)
    if linear.sum() < 2:
        return linear
    both = np.stack([row, row + np.where(linear, shift, 0.0)])
    J2 = np.asarray(model.jacobian(both, inputs), dtype=np.float64).reshape(2, -1, P)
    if all(same(J2[0, :, i], J2[1, :, i]) for i in np.flatnonzero(linear)):
        return linear
    return np.zeros(P, bool)


class _Lanes:
    """The per-lane state of one LM run (see the module docstring)."""

    def __init__(self, opts: LM, prep: object, theta0: np.ndarray, control: optim.Control):
        B, P = theta0.shape
        self.o, self.prep, self.control = opts, prep, control
        self.trial, self.theta = theta0.copy(), theta0.copy()
        self.fc = np.full(B, np.inf)
        self.jtj = np.full((B, P, P), np.nan)
        self.jtr = np.full((B, P), np.nan)
        self.lam = np.full(B, opts.lambda0)
        self.nu = np.full(B, 2.0)
        self.pred = np.zeros(B)
        self.scale = np.zeros((B, P))  # D: running max of J's column norms (MINPACK's diag)
        self.radius = np.full(B, np.inf)  # trust radius on ‖D δ‖
        self.sn = np.zeros(B)  # ‖D δ‖ of the last trial step
        self.linear = np.zeros(P, bool)  # parameters the model is jointly affine in
        self.projected = np.zeros(B, bool)  # the last trial solved the linear parameters
        self.follow = False  # the other starts copy the first (_follow_first)
        self.state = np.full(B, optim.RUNNING, np.int8)
        self.why = np.zeros(B, np.int8)
        self.reasons: list[str | None] = [None] * B
        self.evaluations = 0
        self.under = np.zeros(B, bool)  # the last evaluation's sum of squares underflowed

    def run(self, steps: int) -> optim.Trace:
        hist = []
        t0 = time.perf_counter()
        limit = self.control.time_limit
        for it in range(steps + 1):
            if limit is not None and time.perf_counter() - t0 >= limit:
                self._time_out(it)
                break
            if it == 0 and self.o.project_linear:
                self.linear = linear_parameters(self.prep, self.trial)
            r, f, J, reasons = residuals(self.prep, self.trial, jac=True)
            self.evaluations += 1
            tiny = f < np.finfo(float).tiny  # 0 or subnormal: an exact fit, or underflow
            self.under = tiny & (np.abs(r) > 0).any(axis=1) if tiny.any() else tiny
            accept = (self.state == optim.RUNNING) & (f < self.fc)
            jtj = np.einsum("bmi,bmk->bik", J, J)
            jtr = np.einsum("bmi,bm->bi", J, r)
            bad = ~np.isfinite(jtr).all(axis=1) | ~np.isfinite(jtj).all(axis=(1, 2))
            f = np.where(accept & bad, np.inf, f)
            accept &= ~bad
            self._decide(it, accept, f, jtj, jtr, reasons)
            if it == 0:
                self._follow_first()
            self.projected[:] = False
            hist.append(np.where(self.state == optim.FAILED, np.nan, self.fc * self.prep.weight))
            self._drop_dominated(hist)
            if it == steps or not self._steps(first=it == 0):
                break
        return self._trace(np.array(hist))

    def _decide(self, it, accept, f, jtj, jtr, reasons) -> None:  # type: ignore[no-untyped-def]
        o = self.o
        for b in np.flatnonzero(self.state == optim.RUNNING):
            if it == 0 and not accept[b]:
                self.state[b] = optim.FAILED
                self.reasons[b] = reasons[b] or "non-finite loss"
                continue
            if it > 0 and not accept[b]:
                self.lam[b] *= self.nu[b]
                self.nu[b] *= 2.0
                if not self.projected[b]:
                    self.radius[b] = 0.5 * self.sn[b]
                if self.lam[b] > MAX_LAMBDA:
                    self._converge(b, WHY_STUCK)
                continue
            if it > 0:
                actual = self.fc[b] - f[b]
                rho = actual / self.pred[b] if self.pred[b] > 0 else 0.0
                self.lam[b] *= max(1.0 / 3.0, 1.0 - (2.0 * rho - 1.0) ** 3)
                self.nu[b] = 2.0
                if rho < 0.25:
                    self.radius[b] *= 0.5
                elif rho > 0.75:
                    self.radius[b] = max(self.radius[b], 2.0 * self.sn[b])
                d = self.trial[b] - self.theta[b]
                if actual <= o.ftol * self.fc[b] and self.pred[b] <= o.ftol * self.fc[b]:
                    self.why[b] = WHY_FTOL
                if _small_step(self.scale[b], d, self.trial[b], o.xtol):
                    self.why[b] = WHY_XTOL
            self.fc[b], self.theta[b] = f[b], self.trial[b]
            self.jtj[b], self.jtr[b] = jtj[b], jtr[b]
            norms = np.sqrt(np.maximum(np.diag(jtj[b]), 0.0))
            # the linear solve may move amplitudes by any factor (data times 1e-12): the
            # running norms restart from the solved point's
            self.scale[b] = norms if self.projected[b] else np.maximum(self.scale[b], norms)
            if it == 0 or self.projected[b]:  # MINPACK's initial radius: 100 ‖D θ‖ (100 at 0)
                xn = float(np.sqrt(((self.scale[b] * self.theta[b]) ** 2).sum()))
                self.radius[b] = RADIUS_FACTOR * xn if xn > 0 else RADIUS_FACTOR
            if self.under[b]:  # the loss can no longer be compared: never an "exact fit"
                self._converge(b, WHY_UNDERFLOW)
            elif f[b] == 0.0:
                self._converge(b, WHY_ZERO)
            elif _cosine(self.jtj[b], self.jtr[b], f[b]) <= o.gtol:
                self._converge(b, WHY_GTOL)
            elif self.why[b] != WHY_NONE:
                self._converge(b, int(self.why[b]))

    def _drop_dominated(self, hist: list[np.ndarray]) -> None:
        """Once a lane converged, stop running lanes above its loss that fell by less than
        1 % over the last 10 iterations (they creep along the valley of a worse optimum)."""
        if len(hist) <= DOMINATED_WINDOW:
            return
        done = (self.state == optim.CONVERGED) & (self.why != WHY_STUCK)
        if not done.any():
            return
        best = self.fc[done].min()
        then = hist[-1 - DOMINATED_WINDOW]
        stop = (self.state == optim.RUNNING) & (self.fc > best * (1.0 + 1e-6))
        stop &= self.fc * self.prep.weight > then * (1.0 - DOMINATED_DROP)
        self.state[stop] = optim.OK
        self.why[stop] = WHY_DOMINATED

    def _follow_first(self) -> None:
        """After the first evaluation: a model affine in every parameter — at the probes, and
        with the same JᵀJ at every start, none failing — is linear least squares, whose
        solution does not depend on the start: only the first start runs on and the others end
        as its copies (``_trace``; their first history row stays their own). Not with per-start
        targets or bounds."""
        per_lane = getattr(self.prep, "per_lane", False)
        B = self.theta.shape[0]
        follow = bool(self.linear.size and self.linear.all()) and B > 1 and not per_lane
        follow = follow and self.control.project is None
        follow = follow and not (self.state == optim.FAILED).any()
        if follow:
            top = np.abs(self.jtj[0]).max()
            follow = bool((np.abs(self.jtj - self.jtj[0]) <= 1e-9 * top).all())
        self.follow = follow
        if follow:
            self.state[1:] = optim.OK

    def _converge(self, b: int, why: int) -> None:
        self.state[b] = optim.CONVERGED
        self.why[b] = why

    def _steps(self, first: bool) -> bool:
        """The next trial point of every running lane; False when none runs. After the first
        evaluation a lane's trial is the exact solve of the linear parameters, if any."""
        running = False
        for b in range(self.theta.shape[0]):
            if self.state[b] != optim.RUNNING:
                self.trial[b] = self.theta[b]
            elif first and self.linear.any() and self._project(b):
                running = True
            elif self._step(b):
                running = True
            else:
                self._converge(b, WHY_STUCK)
                self.trial[b] = self.theta[b]
        return running

    def _step(self, b: int) -> bool:
        """The damped step inside the trust radius and the box: a parameter on a bound that
        the step pushes outward is held there and the step solved again for the others."""
        jtj, g, th = self.jtj[b], self.jtr[b], self.theta[b]
        diag = np.diag(jtj)
        floor = _floors(self.scale[b], diag)
        for _ in range(200):
            free = np.ones(th.shape[0], bool)
            for _pass in range(th.shape[0] + 1):
                d = _solve(jtj, g, free, self.lam[b] * np.maximum(diag, floor))
                if d is None:
                    break
                t = th + d
                if self.control.project is not None:
                    t = self.control.project(t[None, :])[0]
                blocked = free & (d != 0) & (t == th)
                if not blocked.any():
                    break
                free &= ~blocked
            if d is None:
                self.lam[b] = max(self.lam[b] * 10.0, 1e-12)
                if self.lam[b] > MAX_LAMBDA:
                    return False
                continue
            d = t - th
            sn = float(np.sqrt(((self.scale[b] * d) ** 2).sum()))
            if sn > self.radius[b] and self.lam[b] < MAX_LAMBDA:  # outside the trust region
                self.lam[b] = max(self.lam[b] * 4.0, 1e-12)
                continue
            self.sn[b] = sn
            self.trial[b] = t
            self.pred[b] = -(d @ (2.0 * g + jtj @ d))
            return True
        return False

    def _project(self, b: int) -> bool:
        """The Gauss–Newton step on the linear parameters alone (exact: the model is affine
        in them), so amplitudes and offsets start at their least-squares values."""
        jtj, g = self.jtj[b], self.jtr[b]
        step = _solve(jtj, g, self.linear, np.zeros(g.shape[0]))
        if step is None:
            return False
        t = self.theta[b] + step
        if self.control.project is not None:
            t = self.control.project(t[None, :])[0]
        d = t - self.theta[b]
        self.trial[b] = t
        self.pred[b] = -(d @ (2.0 * g + jtj @ d))
        self.sn[b] = 0.0
        self.projected[b] = True
        return True

    def _time_out(self, it: int) -> None:
        for b in np.flatnonzero(self.state == optim.RUNNING):
            if it == 0:
                self.state[b] = optim.FAILED
                self.reasons[b] = f"time limit of {self.control.time_limit:g} s reached"
            else:
                self.why[b] = WHY_TIME

    def _trace(self, hist: np.ndarray) -> optim.Trace:
        if self.follow:  # the starts that followed the first: its copies
            for a in (self.theta, self.fc, self.jtj, self.jtr, self.state, self.why, hist[1:].T):
                a[1:] = a[0]
            self.reasons[1:] = [self.reasons[0]] * (len(self.reasons) - 1)
        failed = self.state == optim.FAILED
        state = np.where(self.state == optim.RUNNING, optim.OK, self.state).astype(np.int8)
        loss = np.where(failed, np.nan, self.fc * self.prep.weight)
        grad = 2.0 * self.prep.weight * self.jtr
        return optim.Trace(
            self.theta.copy(), self.theta.copy(), loss, hist, state, self.reasons,
            np.zeros(len(loss), np.int64), self.evaluations, grad,
            np.where(failed, np.nan, self.fc), jtj=self.jtj, why=self.why,
        )  # fmt: skip


def _solve(jtj: np.ndarray, g: np.ndarray, free: np.ndarray, damp: np.ndarray) -> Any:
    """The step solving ``(JᵀJ + diag(damp)) δ = -g`` over the ``free`` parameters (the
    others 0), by Cholesky; None if the system is not positive definite."""
    idx = np.flatnonzero(free)
    out = np.zeros(g.shape[0])
    if idx.size == 0:
        return out
    a = jtj[np.ix_(idx, idx)] + np.diag(damp[idx])
    try:
        c = np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        return None
    out[idx] = np.linalg.solve(c.T, np.linalg.solve(c, -g[idx]))
    return out


def _small_step(scale: np.ndarray, d: np.ndarray, theta: np.ndarray, xtol: float) -> bool:
    """MINPACK's step test in the scaled norm: ``‖D δ‖ <= xtol ‖D θ‖``, D the running column
    norms of J (the same whether a constant is 0.3 or 8e4, or the data are times 1e12). Each
    product is divided by the largest before squaring, so neither side under- or overflows
    (the runtime's ``small_step``, in the same order)."""
    sd = [abs(a * b) for a, b in zip(scale.tolist(), d.tolist())]
    st = [abs(a * b) for a, b in zip(scale.tolist(), theta.tolist())]
    top = max(sd + st, default=0.0)
    if not (top > 0.0 and math.isfinite(top)):
        return top == 0.0
    dn = tn = 0.0
    for a, b in zip(sd, st):
        dn += (a / top) * (a / top)
        tn += (b / top) * (b / top)
    return math.sqrt(dn) <= xtol * math.sqrt(tn)


def _floors(scale: np.ndarray, diag: np.ndarray) -> np.ndarray:
    """Each column's damping floor, against its own running norm (scale-free: a column 1e12
    times another's does not set the other's damping); a column never seen nonzero against
    the largest ``JᵀJ`` diagonal."""
    tiny = np.finfo(float).tiny
    other = 1e-12 * float(diag.max(initial=0.0))
    return np.maximum(np.where(scale > 0, 1e-12 * scale * scale, other), tiny)


def _cosine(jtj: np.ndarray, jtr: np.ndarray, f: float) -> float:
    """The largest cosine between a column of J and the residual (0 where a column is 0)."""
    cn = np.sqrt(np.diag(jtj))
    denom = cn * np.sqrt(f)
    with np.errstate(invalid="ignore", divide="ignore"):
        c = np.where(denom > 0, np.abs(jtr) / denom, 0.0)
    return float(c.max(initial=0.0))
