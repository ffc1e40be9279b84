"""Calibrate one candidate on a problem: Adam on training MSE, then held-out scores.

This is what a scheduler worker runs. It never raises for a bad candidate: every failure
(compile error, runtime error, non-finite loss, a step or time limit) becomes an
``Evaluation`` with status ``failed``/``timeout`` and a reason.

A 1-D target is fitted in one pass per step: the candidate's last form is wrapped as
``(square (- EXPR target))`` with the target as a data input, so ``value_and_grad`` with
cotangent ``1/N`` is the MSE gradient. Per-lane targets ``[L, N]`` use two passes (value, then
the gradient with cotangent ``2 (value - target) / N``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

import ndvm
from ndvm.errors import NdvmError
from ndvm.lang.datum import SList, Sym, to_source
from ndvm.lang.reader import read
from ndvm.search.candidate import Candidate, Evaluation
from ndvm.search.problems import Problem

TARGET = "ndvm-target"


@dataclass(frozen=True)
class CalibLimits:
    """Per-candidate limits: evaluation steps per walk, wall seconds for the whole calibration."""

    max_steps: int = 2_000_000
    seconds: float = 10.0
    backend: str | None = None


def wrap_loss(src: str) -> str:
    """Rewrite ``src`` so its value is the squared residual against the ``ndvm-target`` input."""
    forms = list(read(src))
    last = forms[-1]
    forms[-1] = SList((Sym("square"), SList((Sym("-"), last, Sym(TARGET)))))
    return "\n".join(to_source(f) for f in forms)


def initial_theta(n_params: int, lanes: int, seed: int, scale: float) -> np.ndarray:
    """Initial parameters ``scale * N(0, 1)`` from a generator seeded by the candidate seed."""
    rng = np.random.default_rng(seed)
    return scale * rng.standard_normal((lanes, n_params))


def _limits(lim: CalibLimits, t0: float) -> ndvm.Limits:
    left = max(lim.seconds - (time.perf_counter() - t0), 1e-3)
    return ndvm.Limits(max_steps=lim.max_steps, deadline=left)


def _lr(problem: Problem, step: int) -> float:
    if problem.lr_final is None:
        return problem.lr
    frac = (step - 1) / max(problem.steps - 1, 1)
    return problem.lr_final + (problem.lr - problem.lr_final) * 0.5 * (1 + np.cos(np.pi * frac))


def _fail(status: str, reason: str, t0: float, steps: int = 0) -> Evaluation:
    return Evaluation(status, reason=reason[:500], wall=time.perf_counter() - t0, steps=steps)


def _first_error(value: ndvm.LaneArray) -> str:
    if value.errors:
        err = value.errors[0][1]
        return f"{type(err).__name__}: {err}"
    return "non-finite loss"


def calibrate_candidate(
    cand: Candidate, problem: Problem, seed: int, lim: CalibLimits = CalibLimits()
) -> Evaluation:
    """Adam (``problem.steps`` steps, ``problem.lr``) from ``init_scale * N(0,1)``; score."""
    t0 = time.perf_counter()
    x = problem.input_name
    per_lane = problem.y_train.ndim == 2
    try:
        model = ndvm.compile(cand.src, cand.params, (x,), backend=lim.backend, strict=False)
        loss_src = model.source if per_lane else wrap_loss(cand.src)
        inputs = (x,) if per_lane else (x, TARGET)
        lossp = ndvm.compile(loss_src, model.params, inputs, backend=lim.backend, strict=False)
    except NdvmError as exc:
        return _fail("failed", f"{type(exc).__name__}: {exc}", t0)
    P = len(model.params)
    if P == 0:
        return _fail("failed", "no parameters", t0)
    theta = initial_theta(P, problem.lanes, seed, problem.init_scale)
    m = np.zeros_like(theta)
    v = np.zeros_like(theta)
    b1, b2, eps = 0.9, 0.999, 1e-8
    n = problem.y_train.shape[-1]
    feed = {x: problem.x_train} if per_lane else {x: problem.x_train, TARGET: problem.y_train}
    step = 0
    try:
        for step in range(1, problem.steps + 1):
            if time.perf_counter() - t0 > lim.seconds:
                return _fail("timeout", f"time limit {lim.seconds}s at step {step}", t0, step)
            p = lossp.with_options(limits=_limits(lim, t0))
            if per_lane:
                val = p.eval(theta, **feed)
                if not val.ok:
                    return _fail("failed", _first_error(val), t0, step)
                ct = 2.0 * (np.asarray(val) - problem.y_train) / n
                val, g = p.value_and_grad(theta, cotangent=ct, **feed)
            else:
                val, g = p.value_and_grad(
                    theta, cotangent=np.full((problem.lanes, n), 1.0 / n), **feed
                )
            if not val.ok or not np.all(np.isfinite(g)):
                return _fail("failed", _first_error(val), t0, step)
            with np.errstate(all="ignore"):
                m = b1 * m + (1 - b1) * g
                v = b2 * v + (1 - b2) * g * g
                mh = m / (1 - b1**step)
                vh = v / (1 - b2**step)
                theta = theta - _lr(problem, step) * mh / (np.sqrt(vh) + eps)
            if not np.all(np.isfinite(theta)):
                return _fail("failed", "non-finite parameters (gradient overflow)", t0, step)
        xs = np.concatenate([problem.x_train, problem.x_test])
        pred = model.with_options(limits=_limits(lim, t0)).eval(theta, **{x: xs})
    except ndvm.LimitExceeded as exc:
        return _fail("timeout", f"LimitExceeded: {exc}", t0, step)
    except NdvmError as exc:
        return _fail("failed", f"{type(exc).__name__}: {exc}", t0, step)
    pred = np.asarray(pred, dtype=np.float64).reshape(problem.lanes, -1)
    if pred.shape[-1] != xs.shape[0]:
        return _fail("failed", f"output has shape {pred.shape}, not one value per point", t0)
    ntr = problem.x_train.shape[0]
    ytr = problem.y_train.reshape(problem.lanes, -1)
    yte = problem.y_test.reshape(problem.lanes, -1)
    train = float(np.mean((pred[:, :ntr] - ytr) ** 2))
    mse = float(np.mean((pred[:, ntr:] - yte) ** 2))
    sst = float(np.mean((yte - yte.mean(axis=-1, keepdims=True)) ** 2))
    if not (np.isfinite(train) and np.isfinite(mse)):
        return _fail("failed", "non-finite prediction after calibration", t0, step)
    r2 = 1.0 - mse / sst if sst > 0 else float("nan")
    rmse = float(np.sqrt(mse))
    values = model.constrain(theta)
    params = {name: float(values[0, i]) for i, name in enumerate(model.params)}
    extra = {"theta": theta.tolist()} if problem.lanes > 1 else {}
    return Evaluation(
        "ok",
        train_loss=train,
        heldout_mse=mse,
        heldout_r2=r2,
        success=problem.is_success(r2, rmse),
        params=params,
        wall=time.perf_counter() - t0,
        steps=step,
        extra=extra,
    )
