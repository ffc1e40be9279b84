"""One candidate, end to end, in the process that runs it: funnel, calibration, scores.

The candidate is read, resolved and lowered once (``ndvm.compile``); the funnel's checks, the
calibration (``Task.calibrate`` -> ``ndvm.calibrate`` and the runtime's in-runtime optimizer,
no Python per step) and the held-out scores all use that one compiled program. K starts are K
parameter lanes of one walk; the candidate's result is its best lane by training loss (never by
held-out data), and the record keeps every lane's final training loss.

Nothing here raises for a bad candidate: a funnel stop is a ``rejected`` evaluation with its
stage, an error or a non-finite loss a ``failed`` one, a limit a ``timeout``, each with its
reason.
"""

from __future__ import annotations

import math
import time
from collections.abc import MutableSet
from dataclasses import dataclass
from typing import Any

import numpy as np

import ndvm
from ndvm.errors import LimitExceeded, NdvmError, ReadError
from ndvm.lang.reader import read
from ndvm.search.candidate import Candidate, Evaluation, skeleton_hash
from ndvm.search.funnel import Verdict, check_compiled, check_source
from ndvm.tasks.base import Task, series_best


@dataclass(frozen=True)
class CalibLimits:
    """Per-candidate settings and limits.

    max_steps: evaluation steps per walk; seconds: wall time for the whole candidate (funnel,
    calibration and scoring); starts: parameter lanes per series (None: ``DEFAULT_STARTS``);
    backend / dialect: how candidates are compiled.
    """

    max_steps: int = 2_000_000
    seconds: float = 10.0
    backend: str | None = None
    dialect: str | None = None
    starts: int | None = None


DEFAULT_STARTS = 16  # regression tasks; a task with several series keeps one start per series


def starts_for(task: Task, limits: CalibLimits) -> int:
    if limits.starts is not None:
        return max(1, int(limits.starts))
    return DEFAULT_STARTS if task.series == 1 else 1


@dataclass(frozen=True)
class Job:
    """One candidate to run: its index, calibration seed and dedupe scope (replay cycle)."""

    idx: int
    candidate: Candidate
    seed: int
    scope: int = 0


@dataclass(frozen=True)
class Result:
    """What a worker sends back for one job."""

    idx: int
    skeleton: str
    n_params: int
    complexity: int
    evaluation: Evaluation
    key: str = ""  # the skeleton's hash (``skeleton_hash``), computed once, by the worker


def _rejected(job: Job, v: Verdict, t0: float) -> Result:
    ev = Evaluation("rejected", reason=v.message[:500], wall=time.perf_counter() - t0)
    return Result(job.idx, v.skeleton, v.n_params, v.complexity, ev)


def _fail(job: Job, v: Verdict, status: str, reason: str, t0: float, key: str = "") -> Result:
    ev = Evaluation(status, reason=reason[:500], wall=time.perf_counter() - t0)
    return Result(job.idx, v.skeleton, v.n_params, v.complexity, ev, key)


def run_job(task: Task, job: Job, limits: CalibLimits, seen: MutableSet[Any]) -> Result:
    """Funnel, calibrate and score ``job``; ``seen`` holds (scope, skeleton hash) pairs of
    earlier jobs this process calibrated (a hit is a duplicate; the driver decides the rest)."""
    t0 = time.perf_counter()
    cand = job.candidate
    grammar = task.search.grammar if task.search is not None else None
    try:
        data = read(cand.src)
    except ReadError as exc:
        return _rejected(job, Verdict(False, "parse", str(exc)), t0)
    v = check_source(data, grammar)
    if not v.ok:
        return _rejected(job, v, t0)
    lim = ndvm.Limits(max_steps=limits.max_steps, deadline=limits.seconds)
    try:
        prog = ndvm.compile(
            cand.src, cand.params, task.inputs, backend=limits.backend,
            dialect=limits.dialect, strict=False, limits=lim, free_params=True,
        )  # fmt: skip
    except NdvmError as exc:
        return _rejected(job, Verdict(False, "resolve", f"{type(exc).__name__}: {exc}"), t0)
    K = starts_for(task, limits) if prog.params else 1  # nothing to start from: one walk
    lanes = K * task.series
    rng = np.random.default_rng(job.seed)
    scale = task.calib.init_scale if task.calib.init_scale is not None else 1.0
    init = scale * rng.standard_normal((lanes, len(prog.params)))
    v = check_compiled(prog, data, task, init[:1], v.complexity)
    if v.stage == "limit":  # a step limit or the deadline at the first start: too slow
        return _fail(job, v, "timeout", v.reason, t0)
    if not v.ok:
        return _rejected(job, v, t0)
    h = skeleton_hash(v.skeleton)
    key = (job.scope, h)
    if key in seen:
        why = Verdict(False, "duplicate", f"skeleton already evaluated: {v.skeleton}", **v.info)
        return _rejected(job, why, t0)
    seen.add(key)
    left = limits.seconds - (time.perf_counter() - t0)
    try:
        cal = task.calibrate(prog, starts=K, init=init, seed=job.seed, time_limit=left,
                             diagnostics=False)  # fmt: skip
        metrics = task.score(cal, task.data())
    except LimitExceeded as exc:
        return _fail(job, v, "timeout", f"{type(exc).__name__}: {exc}", t0, h)
    except NdvmError as exc:
        return _fail(job, v, "failed", f"{type(exc).__name__}: {exc}", t0, h)
    ev = _evaluation(task, cal, metrics, t0)
    return Result(job.idx, v.skeleton, v.n_params, v.complexity, ev, h)


_LIMIT_WORDS = ("time limit", "StepLimitExceeded", "DeadlineExceeded", "DepthLimitExceeded")


def _evaluation(task: Task, cal: Any, metrics: dict[str, float], t0: float) -> Evaluation:
    steps = int(cal.history.shape[0] - 1)
    losses = [float(x) for x in np.asarray(cal.all_losses)]
    best = series_best(cal, task.series)
    wall = time.perf_counter() - t0
    for b in best:
        if any(w in cal.status[int(b)] for w in _LIMIT_WORDS):
            return Evaluation("timeout", reason=cal.status[int(b)][:500], wall=wall, steps=steps)
    train = float(metrics.get("train_mse", cal.loss))
    mse = float(metrics.get("test_mse", math.nan))
    # the status depends on what calibration and selection see, never on the test split
    valid = float(metrics.get("validation_mse", train))
    if not (math.isfinite(train) and math.isfinite(valid)):
        reason = next((s for s in cal.status if s != "ok"), "non-finite loss or prediction")
        return Evaluation("failed", reason=reason[:500], wall=wall, steps=steps)
    values = np.asarray(cal.all_params)
    names = cal.names
    extra: dict[str, Any] = {"lane_losses": losses}
    if task.series > 1:
        P = len(cal.program.params)
        extra["theta"] = np.asarray(cal.all_theta)[best, :P].tolist()
    return Evaluation(
        "ok",
        train_loss=train,
        heldout_mse=mse,
        heldout_r2=float(metrics.get("test_r2", math.nan)),
        success=bool(task.success(metrics)),
        validation_mse=float(metrics.get("validation_mse", math.nan)),
        validation_r2=float(metrics.get("validation_r2", math.nan)),
        params={n: float(x) for n, x in zip(names, values[int(best[0])])},
        wall=wall,
        steps=steps,
        extra=extra,
    )
