"""One candidate, end to end, in the process that runs it: funnel, calibration, scores.

The candidate is read, resolved and lowered once (``ndvm.compile``); the funnel's checks, the
calibration (``Task.fit`` of the task's calibration plan, ``ndvm.calibrate.plan``, and the
runtime's in-runtime optimizer, no Python per step: what ``Task.calibrate`` gives) and the
held-out scores all use that one compiled program. K starts are K parameter lanes of one walk;
the candidate's result is its best lane by training loss (never by held-out data), and the
record keeps every lane's final training loss. What every job of a task shares (grammar,
limits, start scale, data shape, the calibration plan: the data checked and laid out, the
loss's target, the optimizer; what placing start roles reads of the training data: each
input's range and periodogram peaks, ``starts.RoleData``) is set up once per worker process.

Nothing here raises for a bad candidate: a funnel stop is a ``rejected`` evaluation with its
stage, an error or a non-finite loss a ``failed`` one, a limit a ``timeout``, each with its
reason.
"""

from __future__ import annotations

import math
import time
from collections.abc import MutableSet
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ndvm.api import compile as compile_program
from ndvm.calibrate.starts import RoleData, place_roles, program_roles
from ndvm.errors import LimitExceeded, NdvmError, ReadError
from ndvm.eval.limits import Limits
from ndvm.identity import MISSING, ByIdentity
from ndvm.lang.front import skeleton_of
from ndvm.lang.reader import read_with_symbols
from ndvm.search.candidate import Candidate, Evaluation, skeleton_hash
from ndvm.search.facts import Facts, read_facts
from ndvm.search.funnel import Verdict, check_finite, check_params, check_source, scalar_valued
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


DEFAULT_STARTS = 16  # regression tasks; a task with several series: its protocol's starts


def starts_for(task: Task, limits: CalibLimits) -> int:
    if limits.starts is not None:
        return max(1, int(limits.starts))
    return DEFAULT_STARTS if task.series == 1 else max(1, int(task.calib.starts))


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
    earlier jobs this process calibrated (a hit is a duplicate; the driver decides the rest).

    For a program that provably gives one number per point (``funnel.scalar_valued``) on a
    least-squares task, the ``finite`` stage is read from the fit (one walk fewer): its first
    losses are the mean squared residuals of the starts at their initial parameters, each
    finite only when the program's value there is finite at every point; one finite passes
    the stage. When none is, the stage is evaluated on its own (its verdict and reason) and
    the fit is kept if the stage passes, so the result is the one the stages in order give."""
    t0 = time.perf_counter()
    cand = job.candidate
    setup = _setup(task, limits)
    try:
        facts = read_facts(cand.src)  # the reader's facts of the source (None: its data)
        data: Any = facts
        if facts is None:
            data, symbols = read_with_symbols(cand.src)
        else:
            symbols = facts.symbols
    except ReadError as exc:
        return _rejected(job, Verdict(False, "parse", str(exc)), t0)
    v = check_source(data if facts is None else facts.complexity, setup.grammar)
    if not v.ok:
        return _rejected(job, v, t0)
    try:
        prog = compile_program(
            cand.src, cand.params, task.inputs, backend=limits.backend,
            dialect=limits.dialect, strict=False, limits=setup.limits, free_params=True,
        )  # fmt: skip
    except NdvmError as exc:
        return _rejected(job, Verdict(False, "resolve", f"{type(exc).__name__}: {exc}"), t0)
    P = len(prog.param_specs)
    K = setup.starts if P else 1  # nothing to start from: one walk
    rng = np.random.default_rng(job.seed)
    init = spread_starts(setup.scale * rng.standard_normal((K * setup.series, P)), K,
                         setup.decades)  # fmt: skip
    if K > 1:  # (one start: no roles to place)
        place_roles(init, K, program_roles(prog), setup.roles, rng)
    skel = None if facts is None else skeleton_of(prog.compiled, plain=facts.skeleton)
    v = check_params(prog, data, task, v.complexity, symbols, skel)
    if not v.ok:
        return _rejected(job, v, t0)
    trusted = cand.key and cand.skeleton == v.skeleton
    h = cand.key if trusted else skeleton_hash(v.skeleton, cand.src)
    key = (job.scope, h)
    fit: _Fit | None = None
    if key not in seen and _folds(task, prog, data, setup):
        fit = _fit(task, prog, K, init, rng, limits, t0, setup)
        if fit.start_finite:  # the finite stage passed (see above)
            seen.add(key)
            return _result(job, task, v, fit, t0, h, setup)
    v = check_finite(prog, task, init, v)
    if v.stage == "limit":  # a step limit or the deadline at the starts: too slow
        return _fail(job, v, "timeout", v.reason, t0)
    if not v.ok:
        return _rejected(job, v, t0)
    if key in seen:
        why = Verdict(False, "duplicate", f"skeleton already evaluated: {v.skeleton}", **v.info)
        return _rejected(job, why, t0)
    seen.add(key)
    if fit is None:
        fit = _fit(task, prog, K, init, rng, limits, t0, setup)
    return _result(job, task, v, fit, t0, h, setup)


@dataclass(frozen=True)
class _Setup:
    """What every job of one task and one set of limits shares (built once per worker)."""

    grammar: Any
    limits: Limits  # one object: the runtime's options are cached per limits
    starts: int
    series: int
    scale: float
    decades: int
    data: Any
    n_valid: int | None  # rows behind validation_mse, for a 1-D validation target
    point_inputs: list[str] | None = None  # what ``_folds`` needs of the task (``_fold_inputs``)
    plans: dict[int, Any] = field(default_factory=dict)  # starts -> the task's fit plan
    roles: RoleData | None = None  # what placing start roles reads of the training data

    def plan(self, task: Task, K: int) -> Any:
        """``task.plan`` of a candidate's fit with ``K`` starts, made once (co-search's
        protocol: no diagnostics)."""
        fitplan = self.plans.get(K)
        if fitplan is None:
            fitplan = self.plans[K] = task.plan(starts=K, diagnostics=False)
        return fitplan


_SETUPS = ByIdentity(8)  # task -> (limits, its setup)


def _setup(task: Task, limits: CalibLimits) -> _Setup:
    hit = _SETUPS.get(task)
    if hit is not None and (hit[0] is limits or hit[0] == limits) and hit[1].data is task.data():
        return hit[1]  # type: ignore[no-any-return]
    data = task.data()
    calib = task.calib
    setup = _Setup(
        grammar=task.search.grammar if task.search is not None else None,
        limits=Limits(max_steps=limits.max_steps, deadline=limits.seconds),
        starts=starts_for(task, limits), series=task.series,
        scale=calib.init_scale if calib.init_scale is not None else 1.0,
        decades=calib.start_decades, data=data,
        n_valid=_valid_rows(data), point_inputs=_fold_inputs(task),
        roles=RoleData(data.train_inputs, data.train_target),
    )  # fmt: skip
    _SETUPS.put(task, (limits, setup))
    return setup


def spread_starts(init: np.ndarray, K: int, decades: int) -> np.ndarray:
    """``init [series * K, P]`` (series-major) with start k >= K // 2 of every series scaled
    by ``10 ** -(1 + (k - K // 2) % decades)`` (in place; unchanged for ``decades`` 0): the
    first half of the starts keeps the task's scale, the others reach constants 10 to
    10^decades times smaller."""
    if decades > 0 and K > 1:
        for k in range(K // 2, K):
            init[k::K] *= 10.0 ** -(1 + (k - K // 2) % decades)
    return init


@dataclass(frozen=True)
class _Fit:
    """A calibration and its scores, or what it raised."""

    cal: Any = None
    metrics: dict[str, float] | None = None
    error: BaseException | None = None

    @property
    def start_finite(self) -> bool:
        """A lane's loss at its initial parameters is finite (a fit stopped by its time limit
        before the first evaluation has none)."""
        hist = None if self.error is not None else self.cal.history
        return hist is not None and len(hist) > 0 and any(map(math.isfinite, hist[0].tolist()))


def _fit(
    task: Task, prog: Any, K: int, init: np.ndarray, rng: np.random.Generator,
    limits: CalibLimits, t0: float, setup: _Setup,
) -> _Fit:  # fmt: skip
    """Calibrate (``task.fit`` of the setup's plan: what ``task.calibrate`` gives; restarts
    would draw from ``rng``, the task's protocol has none) and score; an exception is kept,
    not raised (the funnel's verdict comes first). The fit gets what is left of the
    candidate's seconds, at least a nanosecond (a ``time_limit`` of 0 or less is none: a
    candidate whose setup spent its time would fit unlimited)."""
    left = max(limits.seconds - (time.perf_counter() - t0), 1e-9)
    try:
        cal = task.fit(setup.plan(task, K), prog, init=init, seed=rng, time_limit=left)
        return _Fit(cal, task.score(cal, setup.data))
    except Exception as exc:  # noqa: BLE001 - raised by _result, after the funnel's verdict
        return _Fit(error=exc)


def _result(
    job: Job, task: Task, v: Verdict, fit: _Fit, t0: float, h: str, shape: Any = None
) -> Result:
    exc = fit.error
    if isinstance(exc, LimitExceeded):
        return _fail(job, v, "timeout", f"{type(exc).__name__}: {exc}", t0, h)
    if isinstance(exc, NdvmError):
        return _fail(job, v, "failed", f"{type(exc).__name__}: {exc}", t0, h)
    if exc is not None:
        raise exc
    assert fit.metrics is not None
    ev = evaluation(task, fit.cal, fit.metrics, t0, shape)
    return Result(job.idx, v.skeleton, v.n_params, v.complexity, ev, h)


def _folds(task: Task, prog: Any, data: tuple[Any, ...] | Facts, setup: Any = None) -> bool:
    """Whether the ``finite`` stage can be read from the fit: a least-squares task whose
    inputs are one number per point, float64, unconstrained parameters, a program that gives
    one number per point (``scalar_valued`` of its data, or its ``Facts``). ``setup``: the
    task's (its ``point_inputs``), when the caller has it."""
    inputs = setup.point_inputs if setup is not None else _fold_inputs(task)
    if inputs is None or prog.dtype != "float64":
        return False
    if any(s.constraint != "free" for s in prog.param_specs):
        return False
    names = {*prog.params, *inputs}
    return data.scalar(names) if type(data) is Facts else scalar_valued(data, names)


def _fold_inputs(task: Task) -> list[str] | None:
    """The task's inputs when a fit can stand in for the ``finite`` stage: a least-squares
    task's one-number-per-point inputs (``_point_inputs``), else None."""
    return _point_inputs(task) if task.calib.loss == "mse" else None


_POINT_INPUTS = ByIdentity(64)  # task data -> _point_inputs


def _point_inputs(task: Task) -> list[str] | None:
    """The task's inputs when each is a plain 1-D array of one number per training point (the
    target's last axis), else None (once per data object)."""
    data = task.data()
    hit = _POINT_INPUTS.get(data, MISSING)
    if hit is not MISSING:
        return hit  # type: ignore[no-any-return]
    t, cols = data.train_target, dict(data.train_inputs)
    names = None
    if cols and t is not None and np.ndim(t) in (1, 2):
        n = np.shape(t)[-1]
        ok = all(type(v) is np.ndarray and v.ndim == 1 and len(v) == n for v in cols.values())
        names = list(cols) if ok else None
    return _POINT_INPUTS.put(data, names)  # type: ignore[no-any-return]


_LIMIT_WORDS = ("time limit", "StepLimitExceeded", "DeadlineExceeded", "DepthLimitExceeded")


def evaluation(
    task: Task, cal: Any, metrics: dict[str, float], t0: float, shape: Any = None
) -> Evaluation:
    """The record of a calibration and its scores; ``shape``: the task's setup when the caller
    has it (``run_job``), else looked up."""
    steps = max(int(cal.history.shape[0] - 1), 0)  # 0: stopped before its first evaluation
    losses = np.asarray(cal.all_losses, dtype=np.float64).tolist()
    shape = shape or _setup_of(task)
    series = shape.series
    best = [cal.best] if series == 1 else series_best(cal, series).tolist()
    wall = time.perf_counter() - t0
    status = cal.status
    for b in best:
        st = status[b]
        if st != "ok" and any(w in st for w in _LIMIT_WORDS):
            return Evaluation("timeout", reason=st[:500], wall=wall, steps=steps)
    get = metrics.get
    train = float(get("train_mse", cal.loss))
    mse = float(get("test_mse", math.nan))
    # the status depends on what calibration and selection see, never on the test split
    valid = float(get("validation_mse", train))
    if not (math.isfinite(train) and math.isfinite(valid)):
        reason = next((s for s in status if s != "ok"), "non-finite loss or prediction")
        return Evaluation("failed", reason=reason[:500], wall=wall, steps=steps)
    if series == 1:  # the calibration's own best: its params
        params = dict(cal.params)
    else:
        values = np.asarray(cal.all_params, dtype=np.float64)[best[0]].tolist()
        params = dict(zip(cal.names, values))
    extra: dict[str, Any] = {"lane_losses": losses}
    n_valid = shape.n_valid
    if n_valid is not None:  # rows behind validation_mse (selection)
        extra["n_valid"] = n_valid
    if series > 1:
        P = len(cal.program.params)
        extra["theta"] = np.asarray(cal.all_theta)[best, :P].tolist()
    return Evaluation.scored(
        train, mse, float(get("test_r2", math.nan)), bool(task.success(metrics)), params, wall,
        steps, extra, float(get("validation_mse", math.nan)), float(get("validation_r2", math.nan)),
    )  # fmt: skip


def _setup_of(task: Task) -> Any:
    """The task's series and validation rows: from its setup when ``run_job`` made one for
    its data, else computed (``evaluation`` called on its own)."""
    hit = _SETUPS.get(task)
    data = task.data()
    if hit is not None and hit[1].data is data:
        return hit[1]
    return _Shape(task.series, _valid_rows(data))


@dataclass(frozen=True)
class _Shape:
    series: int
    n_valid: int | None


def _valid_rows(data: Any) -> int | None:
    valid = data.valid_target
    return int(np.shape(valid)[0]) if valid is not None and np.ndim(valid) == 1 else None
