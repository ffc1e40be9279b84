"""Lane-vectorized optimizers (NumPy): Adam (torch.optim.Adam's exact update) and L-BFGS.

Every start is one row of ``theta [B, D]``; each step is one objective call for all rows, and
the loop body is whole-array NumPy with no per-lane Python. A lane whose loss or gradient is
non-finite is frozen (``on_failure="drop"``) or re-drawn (``"restart"``); frozen lanes keep
being evaluated at their last theta so the batch never changes and no other lane is perturbed.
``Optimizer`` is the protocol a native in-runtime implementation replaces.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ndvm.calibrate.linesearch import strong_wolfe
from ndvm.calibrate.objective import Eval, Objective
from ndvm.frozen import frozen

RUNNING, OK, FAILED, CONVERGED = 0, 1, 2, 3


def all_finite(a: np.ndarray) -> bool:
    """``np.isfinite(a).all()``; a small 1-D array (a fit's per-start bookkeeping) is checked
    without NumPy's reduction machinery, which costs more than the check."""
    if a.ndim == 1 and a.shape[0] <= 64:
        return all(map(math.isfinite, a.tolist()))
    return bool(np.isfinite(a).all())


# (rng, n) -> theta rows [n, D] for restarted lanes
Sampler = Callable[[np.random.Generator, int], np.ndarray]
Project = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Box:
    """Box bounds on the first ``len(lo)`` columns of theta: a ``Project`` (clip) that also
    tells which coordinates a bound blocks (at the bound, the descent direction leaving it)."""

    lo: np.ndarray
    hi: np.ndarray

    def __call__(self, theta: np.ndarray) -> np.ndarray:
        out = np.array(theta, dtype=np.float64)
        P = len(self.lo)
        out[:, :P] = np.clip(out[:, :P], self.lo, self.hi)
        return out

    def blocked(self, theta: np.ndarray, g: np.ndarray) -> np.ndarray:
        """[B, D] mask: at a lower bound with g > 0 or at an upper bound with g < 0."""
        out = np.zeros(theta.shape, dtype=bool)
        P = len(self.lo)
        t, gp = theta[:, :P], g[:, :P]
        out[:, :P] = ((t <= self.lo) & (gp > 0)) | ((t >= self.hi) & (gp < 0))
        return out


def blocked_by_bounds(control: Control, theta: np.ndarray, g: np.ndarray) -> np.ndarray | None:
    """The coordinates a box bound holds (the active set), or None without bounds."""
    blocked = getattr(control.project, "blocked", None)
    return None if blocked is None else blocked(theta, g)


@dataclass(frozen=True)
class EarlyStop:
    """Freeze a lane once its loss improved by < rtol·|loss| + atol for ``patience`` steps."""

    rtol: float = 1e-10
    atol: float = 0.0
    patience: int = 10


@dataclass
class Trace:
    """What a run produced, per lane: last and best theta/loss, history, status and reasons.

    history [k+1, B]: the loss at every evaluated iterate (NaN once a lane failed).
    state: RUNNING/OK at the end -> OK; FAILED; CONVERGED (stopped early, ok).
    best_grad [B, D] / best_sse [B]: the objective's gradient and sum of squared residuals at
    best_theta, where the optimizer has them (an in-runtime one); None: evaluate them.
    jtj / why: Levenberg–Marquardt's J'J at best_theta and stopping reasons (``lm``).
    """

    theta: np.ndarray
    best_theta: np.ndarray
    best_loss: np.ndarray
    history: np.ndarray
    state: np.ndarray
    reasons: list[str | None]
    restarts: np.ndarray
    evaluations: int = 0
    best_grad: np.ndarray | None = None
    best_sse: np.ndarray | None = None
    jtj: np.ndarray | None = None  # [B, D, D] Gauss-Newton J'J at best_theta (least squares)
    why: np.ndarray | None = None  # [B] why each least-squares lane stopped (lm.WHY_*)


@dataclass
class Control:
    """Run-wide options shared by every optimizer."""

    on_failure: str = "drop"  # drop | restart
    max_restarts: int = 3
    sampler: Sampler | None = None
    project: Project | None = None
    early_stop: EarlyStop | None = None
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    callback: Callable[[int, int], None] | None = None  # (step, total)
    time_limit: float | None = None  # seconds for the whole fit: running lanes then fail


class Optimizer(Protocol):
    """Minimize ``objective`` from ``theta0 [B, D]`` for ``steps`` steps."""

    name: str

    def minimize(
        self, objective: Objective, theta0: np.ndarray, steps: int, control: Control
    ) -> Trace: ...


class _Book:
    """Shared bookkeeping: best-so-far, history, failure/restart and early-stop per lane."""

    def __init__(self, theta0: np.ndarray, steps: int, control: Control) -> None:
        B = theta0.shape[0]
        self.c = control
        self.best_theta = theta0.copy()
        self.best_loss = np.full(B, np.inf)
        self.history = np.full((steps + 1, B), np.nan)
        self.state = np.full(B, RUNNING, dtype=np.int8)
        self.reasons: list[str | None] = [None] * B
        self.restarts = np.zeros(B, dtype=np.int64)
        self.flat = np.zeros(B, dtype=np.int64)
        self.k = 0
        self.evaluations = 0
        self._no_restart = np.zeros(B, dtype=bool)

    @property
    def active(self) -> np.ndarray:
        return self.state == RUNNING

    def out_of_time(self, t0: float, steps_done: int) -> bool:
        """True (and the running lanes failed) once ``control.time_limit`` has passed."""
        limit = self.c.time_limit
        if limit is None or limit <= 0 or time.perf_counter() - t0 < limit:
            return False
        why = f"time limit of {limit:g} s reached after {steps_done} steps"
        for b in np.flatnonzero(self.active):
            self.reasons[b] = why
        self.state[self.active] = FAILED
        return True

    def record(self, theta: np.ndarray, ev: Eval) -> np.ndarray:
        """Log iterate k; returns the lanes that must be restarted (already re-drawn)."""
        self.evaluations += 1
        act = self.active
        if not ev.failed.any() and act.all() and self.c.early_stop is None:
            # fast path: every lane running and finite (bitwise the same as the general path)
            self.history[self.k] = ev.loss
            better = ev.loss < self.best_loss
            np.copyto(self.best_loss, ev.loss, where=better)
            np.copyto(self.best_theta, theta, where=better[:, None])
            self.k += 1
            if self.c.callback is not None:
                self.c.callback(self.k, len(self.history))
            return self._no_restart
        bad = act & ev.failed
        good = act & ~ev.failed
        self.history[self.k] = np.where(act | (self.state == CONVERGED), ev.loss, np.nan)
        self.history[self.k][self.state == FAILED] = np.nan
        better = good & (ev.loss < self.best_loss)
        if self.c.early_stop is not None and self.k > 0:
            es = self.c.early_stop
            small = self.best_loss - ev.loss <= es.rtol * np.abs(ev.loss) + es.atol
            self.flat = np.where(good & small, self.flat + 1, 0)
            self.state[good & (self.flat >= es.patience)] = CONVERGED
        self.best_loss = np.where(better, ev.loss, self.best_loss)
        self.best_theta = np.where(better[:, None], theta, self.best_theta)
        restart = np.zeros_like(bad)
        if bad.any():
            can = (
                (self.restarts < self.c.max_restarts)
                if self.c.on_failure == "restart" and self.c.sampler is not None
                else np.zeros_like(bad)
            )
            restart = bad & can
            for b in np.flatnonzero(bad):
                self.reasons[b] = ev.reasons[b]
            self.state[bad & ~restart] = FAILED
            self.restarts += restart
        self.k += 1
        if self.c.callback is not None:
            self.c.callback(self.k, len(self.history))
        return restart

    def redraw(self, theta: np.ndarray, restart: np.ndarray) -> np.ndarray:
        assert self.c.sampler is not None
        fresh = np.asarray(self.c.sampler(self.c.rng, int(restart.sum())), dtype=np.float64)
        theta = theta.copy()
        theta[restart] = fresh
        self.best_loss[restart] = np.inf
        self.best_theta[restart] = fresh
        return theta

    def finish(self, theta: np.ndarray) -> Trace:
        state = self.state.copy()
        state[state == RUNNING] = OK
        failed = self.best_loss == np.inf
        state[failed] = FAILED
        reasons = [r if s == FAILED else None for r, s in zip(self.reasons, state)]
        best_loss = np.where(failed, np.nan, self.best_loss)
        return Trace(
            theta,
            self.best_theta,
            best_loss,
            self.history[: self.k],
            state,
            reasons,
            self.restarts,
            self.evaluations,
        )


@frozen
class Adam:
    """Adam with torch.optim.Adam's update order and rounding (no weight decay, no amsgrad)."""

    lr: float = 0.05
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    lr_final: float | None = None  # cosine decay of a lane's lr from lr to lr_final
    name: str = "adam"

    def schedule(self, steps: int) -> np.ndarray | None:
        """lr of a lane's t-th step at index t - 1 (None: constant ``lr``)."""
        if self.lr_final is None:
            return None
        frac = np.arange(steps, dtype=np.float64) / max(steps - 1, 1)
        return self.lr_final + (self.lr - self.lr_final) * 0.5 * (1.0 + np.cos(np.pi * frac))

    def minimize(
        self, objective: Objective, theta0: np.ndarray, steps: int, control: Control
    ) -> Trace:
        b1, b2 = self.betas
        theta = np.array(theta0, dtype=np.float64)
        m = np.zeros_like(theta)
        v = np.zeros_like(theta)
        t = np.zeros(theta.shape[0])  # per-lane step count (restarts reset it)
        book = _Book(theta, steps, control)
        with np.errstate(all="ignore"):
            return self._loop(objective, theta, m, v, t, book, steps, control)

    def _loop(self, objective, theta, m, v, t, book, steps, control):  # type: ignore[no-untyped-def]
        b1, b2 = self.betas
        sched = self.schedule(steps)
        t0 = time.perf_counter()
        for k in range(steps):
            if book.out_of_time(t0, k):
                break
            ev = objective(theta, grad=True)
            restart = book.record(theta, ev)
            act = book.active & ~restart
            everyone = bool(act.all())
            if not everyone and not act.any() and not restart.any():
                break
            g = ev.grad if everyone else np.where(act[:, None], ev.grad, 0.0)
            t = t + act
            m_new = m + (1.0 - b1) * (g - m)  # torch: exp_avg.lerp_(grad, 1 - beta1)
            v_new = v * b2 + (1.0 - b2) * g * g
            bc1 = 1.0 - b1**t
            bc2s = np.sqrt(1.0 - b2**t)
            lr = self.lr if sched is None else sched[np.maximum(t, 1).astype(np.int64) - 1]
            step = (lr / bc1)[:, None] * (m_new / (np.sqrt(v_new) / bc2s[:, None] + self.eps))
            if everyone:
                m, v, theta = m_new, v_new, theta - step
                if control.project is not None:
                    theta = control.project(theta)
            else:
                m = np.where(act[:, None], m_new, m)
                v = np.where(act[:, None], v_new, v)
                theta = np.where(act[:, None], theta - step, theta)
                if control.project is not None:
                    theta = np.where(act[:, None], control.project(theta), theta)
            if restart.any():
                theta = book.redraw(theta, restart)
                m[restart] = 0.0
                v[restart] = 0.0
                t[restart] = 0.0
        else:
            book.record(theta, objective(theta, grad=False))
        return book.finish(theta)


@dataclass(frozen=True)
class LBFGS:
    """Lane-vectorized L-BFGS with a strong-Wolfe line search (``linesearch``); each trial is
    one objective call for every lane still searching."""

    memory: int = 10
    c1: float = 1e-4
    c2: float = 0.9
    max_ls: int = 15
    gtol: float = 1e-10
    ftol: float = 1e-13  # stop a lane once (f_k - f_k+1) <= ftol * max(|f_k|, 1)
    name: str = "lbfgs"

    def minimize(
        self, objective: Objective, theta0: np.ndarray, steps: int, control: Control
    ) -> Trace:
        theta = np.array(theta0, dtype=np.float64)
        B, D = theta.shape
        S = np.zeros((self.memory, B, D))
        Y = np.zeros((self.memory, B, D))
        rho = np.zeros((self.memory, B))
        gamma = np.ones(B)
        book = _Book(theta, steps, control)
        ev = objective(theta, grad=True)
        book.record(theta, ev)
        book.state[(book.state == RUNNING) & ev.failed] = FAILED  # L-BFGS drops, never restarts
        f, g = ev.loss, np.where(ev.failed[:, None], 0.0, ev.grad)
        for it in range(steps):
            act = book.active
            if not act.any():
                break
            held = blocked_by_bounds(control, theta, g)  # coordinates a bound holds stay put
            gf = g if held is None else np.where(held, 0.0, g)
            d = -self._direction(gf, S, Y, rho, gamma, it)
            if held is not None:
                d[held] = 0.0
            slope = (gf * d).sum(axis=1)
            steep = slope >= 0
            d[steep] = -gf[steep]
            slope = np.where(steep, -(gf * gf).sum(axis=1), slope)
            if it == 0:
                scale = np.minimum(1.0, 1.0 / np.maximum(np.abs(gf).max(axis=1), 1e-300))
                d, slope = d * scale[:, None], slope * scale
            pending = act & (np.abs(gf).max(axis=1) > self.gtol)
            book.state[act & ~pending] = CONVERGED
            ls = strong_wolfe(objective, theta, f, g, d, slope, pending, control.project,
                              self.c1, self.c2, self.max_ls)  # fmt: skip
            book.evaluations += ls.evaluations
            new_t, new_f, new_g = ls.theta, ls.loss, ls.grad
            stuck = act & pending & ~ls.found  # no sufficient decrease: round-off (or failed)
            s, y = new_t - theta, new_g - g
            sy = (s * y).sum(axis=1)
            good = act & ~stuck & (sy > 1e-300)
            k = it % self.memory
            S[k] = np.where(good[:, None], s, 0.0)
            Y[k] = np.where(good[:, None], y, 0.0)
            rho[k] = np.where(good, 1.0 / np.where(good, sy, 1.0), 0.0)
            yy = (y * y).sum(axis=1)
            gamma = np.where(good, sy / np.where(good, yy, 1.0), gamma)
            flat = act & ~stuck & (f - new_f <= self.ftol * np.maximum(np.abs(f), 1.0))
            theta, f, g = new_t, new_f, new_g
            fake = Eval(f, g, np.zeros(B, dtype=bool), [None] * B)
            book.evaluations -= 1
            book.record(theta, fake)
            book.state[(stuck | flat) & (book.state == RUNNING)] = CONVERGED
        return book.finish(theta)

    def _direction(self, g, S, Y, rho, gamma, it) -> np.ndarray:  # type: ignore[no-untyped-def]
        q = g.copy()
        m = min(it, self.memory)
        order = [(it - 1 - j) % self.memory for j in range(m)]
        alpha = {}
        for k in order:
            alpha[k] = rho[k] * (S[k] * q).sum(axis=1)
            q -= alpha[k][:, None] * Y[k]
        r = gamma[:, None] * q
        for k in reversed(order):
            beta = rho[k] * (Y[k] * r).sum(axis=1)
            r += S[k] * (alpha[k] - beta)[:, None]
        return r


@dataclass(frozen=True)
class Chain:
    """Run optimizers one after another (e.g. Adam then an L-BFGS polish); histories concat."""

    stages: tuple[tuple[Optimizer, int | None], ...]
    name: str = "chain"

    def minimize(
        self, objective: Objective, theta0: np.ndarray, steps: int, control: Control
    ) -> Trace:
        trace: Trace | None = None
        theta = theta0
        for opt, n in self.stages:
            nxt = opt.minimize(objective, theta, steps if n is None else n, control)
            if trace is not None:
                nxt = _join(trace, nxt)
            trace = nxt
            theta = np.where((trace.state == FAILED)[:, None], trace.theta, trace.best_theta)
        assert trace is not None
        return trace


def _join(a: Trace, b: Trace) -> Trace:
    better = b.best_loss < a.best_loss
    failed = (a.state == FAILED) | (b.state == FAILED)
    reasons = [ra or rb for ra, rb in zip(a.reasons, b.reasons)]
    state = np.where(failed, FAILED, b.state).astype(np.int8)
    return Trace(
        b.theta,
        np.where(better[:, None], b.best_theta, a.best_theta),
        np.where(better | np.isnan(a.best_loss), b.best_loss, a.best_loss),
        np.concatenate([a.history, b.history[1:]], axis=0),
        state,
        reasons,
        a.restarts + b.restarts,
        a.evaluations + b.evaluations,
    )


def make_optimizer(name: str | Optimizer, lr: float, lr_final: float | None = None) -> Optimizer:
    """``"adam"``, ``"lbfgs"``, ``"adam+lbfgs"`` (Adam for ``steps``, then 50 L-BFGS), or an
    Optimizer (``calibrate`` makes ``"lm"``: ``ndvm.calibrate.lm.LM``).

    ``lr_final``: Adam's learning rate decays from ``lr`` to it on a cosine over the steps."""
    if not isinstance(name, str):
        return name
    if name == "adam":
        return Adam(lr=lr, lr_final=lr_final)
    if name == "lbfgs":
        return LBFGS()
    if name == "adam+lbfgs":
        return Chain(((Adam(lr=lr, lr_final=lr_final), None), (LBFGS(), 50)))
    from ndvm.errors import NdvmError

    raise NdvmError(
        f"unknown optimizer {name!r} (auto, lm, adam, lbfgs, adam+lbfgs, or an Optimizer)"
    )
