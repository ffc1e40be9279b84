"""The ``Task`` record: data builder, calibration protocol, scoring and success for one workload.

One task model serves a single calibration (``task.calibrate()`` on its reference program) and
co-search (``task.evaluate(candidate)``: calibrate a candidate on the train split, score it on
the held-out split, never raise for a bad candidate; ``task.search`` holds the proposal grammar,
seed programs and the description an LLM proposer is given).

A 2-D train target ``[S, N]`` is S independent series (e.g. battery cells): each series is
fitted with its own parameters, ``starts`` lanes per series, and the best lane of each series
(by training loss) is what the task scores; choosing between candidates reads a validation
block of every series the fits never saw (``ndvm.tasks.series``).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache, partial
from pathlib import Path
from typing import Any

import numpy as np

from ndvm.api import Program
from ndvm.api import compile as compile_program
from ndvm.backends.inputs import as_array, as_table
from ndvm.calibrate import Calibration, Plan, plan
from ndvm.calibrate.api import RUN_ARGS
from ndvm.errors import NdvmError
from ndvm.lang.front import check_name
from ndvm.tasks.columns import (
    DEFAULT_BINARY,
    DEFAULT_UNARY,
    check_operators,
    holdout_rows,
    read_csv,
    split_rows,
    success_rule,
)
from ndvm.tasks.grammar import Grammar, param_names
from ndvm.tasks.scoring import regression_score as regression_score
from ndvm.tasks.series import pooled_refit, r2_of, trailing_block
from ndvm.tasks.series import predict_lanes as predict_lanes
from ndvm.tasks.series import series_best as series_best


@dataclass(frozen=True)
class TaskData:
    """Train / held-out (test) / validation inputs and targets, plus metadata.

    Calibration sees only the train split; every selection between candidates (co-search's
    tournament, Pareto front, hall of fame, "best") uses the validation split; the test split
    is scored once per reported program and never used to choose anything. The target is None
    for likelihood tasks; the validation split is optional (``with_validation`` carves one);
    the selection split (``from_arrays(holdout=...)``) only chooses the reported model."""

    train_inputs: Mapping[str, Any]
    train_target: np.ndarray | None
    test_inputs: Mapping[str, Any] | None = None
    test_target: np.ndarray | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    valid_inputs: Mapping[str, Any] | None = None
    valid_target: np.ndarray | None = None
    select_inputs: Mapping[str, Any] | None = None
    select_target: np.ndarray | None = None


@dataclass(frozen=True)
class CalibSpec:
    """How the task calibrates a candidate (the protocol's fixed settings)."""

    loss: str = "mse"
    steps: int = 50
    lr: float = 0.05
    optimizer: str = "adam"
    starts: int = 1
    init_scale: float | None = 0.3  # values ~ init_scale * N(0, 1); None: declared inits
    constraints: Mapping[str, tuple[float | None, float | None]] | None = None
    lr_final: float | None = None  # cosine decay of Adam's lr from lr to lr_final
    start_decades: int = 0  # search: starts K/2.. drawn 10^-1 .. 10^-k smaller (spread_starts)
    pooled: bool = False  # several series: refit every series from all series' bests (series.py)


@dataclass(frozen=True)
class SearchSpec:
    """What co-search needs beyond the calibration protocol.

    grammar: the proposal grammar (``ndvm.search.Grammar``); seeds: programs the evolutionary
    proposer starts from; prompt: the task as an LLM proposer is told it (never the law that
    generated the data); fixed: whether a candidate without parameters is scored as it is
    (a law with no free constant, such as ``(/ omega c)``, on a data task) instead of rejected.
    """

    grammar: Any
    seeds: tuple[str, ...] = ()
    prompt: str = ""
    fixed: bool = False


@dataclass(frozen=True)
class TaskResult:
    """One candidate's outcome: its calibration (None if it failed before), metrics, success."""

    calibration: Calibration | None
    metrics: Mapping[str, float]
    success: bool
    error: str | None = None


def load_candidate(candidate: Any, inputs: tuple[str, ...], backend: str | None = None) -> Program:
    """A Program from source text, a Program, or a JSONL record / line (``src``, ``params``)."""

    if isinstance(candidate, Program):
        return candidate if backend is None else candidate.with_options(backend=backend)
    if isinstance(candidate, str) and candidate.lstrip().startswith("{"):
        candidate = json.loads(candidate)
    if isinstance(candidate, Mapping):
        params = candidate.get("params")
        return compile_program(
            candidate["src"],
            None if params is None else list(params),
            inputs,
            backend=backend,
            free_params=True,  # a candidate's free names are its parameters (docs/tasks.md)
        )
    if isinstance(candidate, str):
        return compile_program(candidate, inputs=inputs, backend=backend, free_params=True)
    raise NdvmError(f"a candidate is source text, a Program or a JSON record, not {candidate!r}")


@dataclass(frozen=True)
class Task:
    """A named workload: ``data()`` (seeded, cached), ``calibrate``, ``score``, ``success``."""

    name: str
    description: str
    inputs: tuple[str, ...]
    build_data: Callable[[], TaskData]
    calib: CalibSpec
    score: Callable[[Calibration, TaskData], dict[str, float]]
    success: Callable[[Mapping[str, float]], bool]
    program: str | None = None  # reference program (the known-good model), if any
    plot_fn: Callable[..., Any] | None = None
    search: SearchSpec | None = None

    @property
    def series(self) -> int:
        """Independent target series (rows of a 2-D train target; 1 for a 1-D target)."""
        t = self.data().train_target
        return 1 if t is None or np.ndim(t) < 2 else int(np.shape(t)[0])

    def data(self) -> TaskData:
        return _cached(self.build_data)

    def compile(self, candidate: Any = None, backend: str | None = None) -> Program:
        """The candidate (default: the reference program) compiled for this task's inputs."""
        if candidate is None:
            if self.program is None:
                raise NdvmError(f"task {self.name!r} has no reference program; pass a candidate")
            candidate = self.program
        return load_candidate(candidate, self.inputs, backend)

    def calibrate(
        self, candidate: Any = None, *, backend: str | None = None, **overrides: Any
    ) -> Calibration:
        """Calibrate on the train split with the task's protocol (``overrides`` win):
        ``fit`` of ``plan``."""
        program = self.compile(candidate, backend)
        run = {k: overrides.pop(k) for k in RUN_ARGS if k in overrides}
        return self.fit(self.plan(**overrides), program, **run)

    def plan(self, **overrides: Any) -> Plan:
        """The protocol's calibration of any program on the train split, prepared
        (``ndvm.calibrate.plan``; ``overrides`` win, but ``RUN_ARGS``, which ``fit`` takes):
        a caller fitting many candidates (co-search's worker) makes it once."""
        data = self.data()
        spec = self.calib
        kw: dict[str, Any] = dict(
            loss=spec.loss,
            steps=spec.steps,
            lr=spec.lr,
            optimizer=spec.optimizer,
            starts=spec.starts,
            constraints=spec.constraints,
        )
        if spec.lr_final is not None:
            kw["lr_final"] = spec.lr_final
        kw.update(overrides)
        for k in RUN_ARGS:
            kw.pop(k, None)
        target = data.train_target
        if target is not None and np.ndim(target) == 2:  # K starts per series, series-major
            kw["target"] = np.repeat(np.asarray(target), int(kw["starts"]), axis=0)
            kw["starts"] = int(kw["starts"]) * int(np.shape(target)[0])
        else:
            kw["target"] = target
        # a task's protocol fixes its steps: the verdict is on the result, not a warning
        kw.setdefault("warn", False)
        return plan(None, data.train_inputs, **kw)

    def fit(self, fitplan: Plan, program: Program, **run: Any) -> Calibration:
        """``program`` calibrated by ``fitplan`` (this task's ``plan``) with ``run``'s
        ``init``, ``seed`` and ``time_limit`` (the protocol's start draw unless given); a
        pooled protocol on several series then refits from every series' best."""
        spec = self.calib
        if spec.init_scale is not None and "init" not in run:
            scale = spec.init_scale
            run["init"] = lambda rng, shape: scale * rng.standard_normal(shape)
        t0 = time.perf_counter()
        cal = fitplan.run(program, **run)
        if spec.pooled and np.ndim(target := self.data().train_target) == 2:
            S, spent = int(np.shape(target)[0]), time.perf_counter() - t0
            cal = pooled_refit(cal, program, fitplan, run, S, spent)
        return cal

    def evaluate(self, candidate: Any, *, backend: str | None = None, **overrides: Any) -> Any:
        """Calibrate and score one candidate; errors become a failed ``TaskResult``."""
        try:
            cal = self.calibrate(candidate, backend=backend, **overrides)
        except NdvmError as exc:
            return TaskResult(None, {}, False, f"{type(exc).__name__}: {exc}")
        if not cal.ok:
            return TaskResult(cal, {}, False, cal.status[cal.best])
        try:
            metrics = self.score(cal, self.data())
        except NdvmError as exc:
            return TaskResult(cal, {}, False, f"{type(exc).__name__}: {exc}")
        return TaskResult(cal, metrics, bool(self.success(metrics)))

    def plot(self, cal: Calibration, path: str | None = None) -> Any:
        if self.plot_fn is not None:
            return self.plot_fn(cal, self.data(), path)
        return cal.plot(path)

    @staticmethod
    def from_arrays(X: Any, y: Any, **kw: Any) -> Task:
        """A regression task on your own data (``ndvm.tasks.base.from_arrays``)."""
        return from_arrays(X, y, **kw)

    @staticmethod
    def from_csv(path: Any, x: Any, y: str, **kw: Any) -> Task:
        """A regression task on columns of a CSV file (``ndvm.tasks.base.from_csv``)."""
        return from_csv(path, x, y, **kw)

    def with_calib(self, **changes: Any) -> Task:
        return replace(self, calib=replace(self.calib, **changes))

    def for_search(self, fraction: float = 0.25, seed: int = 0) -> Task:
        """This task as co-search runs it: with a validation split carved from the training
        data when it has none (calibration on the rest; the test split and the success
        criterion unchanged). The same object for the same task and arguments."""
        key = (id(self), fraction, seed)
        held = _VIEWS.get(key)  # (task, view): the entry holds its task, so its id stays its own
        view = held[1] if held is not None and held[0] is self else None
        if view is None:
            data = self.data()
            if data.valid_inputs is not None or with_validation(data) is data:
                view = self
            else:
                build = partial(_validated, self.build_data, fraction, seed)
                view = replace(self, build_data=build)
            _VIEWS[key] = (self, view)
        return view


_VIEWS: dict[tuple[int, float, int], tuple[Task, Task]] = {}


def _validated(build: Callable[[], TaskData], fraction: float, seed: int) -> TaskData:
    return with_validation(build(), fraction, seed)


@cache
def _cached(builder: Callable[[], TaskData]) -> TaskData:
    return builder()


def regression_data(target: Callable[[np.ndarray], np.ndarray]) -> TaskData:
    """The regression protocol of docs/tasks.md: 64 points on [0.1, 6], N(0, 0.02^2) noise from a
    generator seeded 0, and a random 44/20 train/held-out split."""
    rng = np.random.default_rng(0)
    x = np.linspace(0.1, 6.0, 64)
    y = target(x) + rng.normal(0.0, 0.02, size=64)
    perm = rng.permutation(64)
    tr, te = np.sort(perm[:44]), np.sort(perm[44:])
    return TaskData({"x": x[tr]}, y[tr], {"x": x[te]}, y[te], {"x_all": x, "y_all": y})


def with_validation(data: TaskData, fraction: float = 0.25, seed: int = 0) -> TaskData:
    """``data`` with a seeded ``fraction`` of its training points moved to a validation split
    (1-D targets over data lanes); for several series (``[S, N]``) the trailing ``fraction``
    of every series' points, a block (``series.trailing_block``); other data is returned
    unchanged."""
    t = data.train_target
    if data.valid_inputs is None and t is not None and np.ndim(t) == 2:
        block = trailing_block(data.train_inputs, t, int(round(fraction * np.shape(t)[1])))
        if block is None:
            return data
        xs, ys, xv, yv = block
        return replace(data, train_inputs=xs, train_target=ys, valid_inputs=xv, valid_target=yv)
    if data.valid_inputs is not None or t is None or np.ndim(t) != 1 or len(t) < 8:
        return data
    n = len(t)
    cols = {k: np.asarray(v) for k, v in data.train_inputs.items()}
    if any(np.ndim(v) != 1 or len(v) != n for v in cols.values()):
        return data
    perm = np.random.default_rng(seed).permutation(n)
    k = max(1, int(round(fraction * n)))
    va, tr = np.sort(perm[:k]), np.sort(perm[k:])
    return replace(
        data,
        train_inputs={k_: v[tr] for k_, v in cols.items()},
        train_target=np.asarray(t)[tr],
        valid_inputs={k_: v[va] for k_, v in cols.items()},
        valid_target=np.asarray(t)[va],
    )


def r2(y: np.ndarray, pred: np.ndarray) -> float:
    """Coefficient of determination; -inf for a non-finite prediction."""
    pred = np.asarray(pred, dtype=np.float64)
    finite = bool(np.isfinite(pred).all())
    with np.errstate(over="ignore", invalid="ignore"):
        ss_res = float(((y - pred) ** 2).sum()) if finite else math.inf
        ss_tot = float(((y - y.mean()) ** 2).sum())
    return r2_of(ss_res, ss_tot, finite)


# -- a task from the user's own data ----------------------------------------------------------
def constant_data(data: TaskData) -> TaskData:
    """``build_data`` of a task whose data are given (picklable as a ``partial``)."""
    return data


START_DECADES = 3  # a data task's starts: half at 1, the others at 0.1, 0.01, 0.001 (cycling)


def from_arrays(
    X: Any,
    y: Any,
    *,
    names: Sequence[str] | None = None,
    binary_operators: Sequence[str] = DEFAULT_BINARY,
    unary_operators: Sequence[str] = DEFAULT_UNARY,
    split: Sequence[float] = (0.6, 0.2, 0.2),
    seed: int = 0,
    name: str = "data",
    description: str = "",
    steps: int = 100,
    lr: float = 0.05,
    max_size: int = 30,
    loops: bool = False,
    optimizer: str = "auto",
    success_r2: float | None = None,
    success_rmse: float | None = None,
    holdout: float = 0.0,
) -> Task:
    """A regression task on ``y ~ f(X)``: X ``[N]`` or ``[N, d]``, y ``[N]``. A pandas
    DataFrame X gives the input names (its columns) unless ``names`` is given; a pandas Series
    X its name; y may be a Series. Candidates are calibrated by ``optimizer`` ("auto":
    Levenberg–Marquardt on the mse, at most ``steps`` iterations; "adam": ``steps`` Adam steps
    at ``lr``), every start a lane. A success is a validation R² of at least ``success_r2``
    and/or a validation RMSE of at most ``success_rmse`` (neither given: R² >= 0.99);
    ``holdout``: the fraction of all rows moved from train to the selection split."""
    X, columns = as_table(X, "X")
    if names is None:
        names = columns
    Xa = np.asarray(X, dtype=np.float64)
    ya = np.asarray(as_array(y, "y"), dtype=np.float64).reshape(-1)
    if Xa.ndim == 1:
        Xa = Xa[:, None]
    if Xa.ndim != 2 or Xa.shape[0] != ya.shape[0]:
        raise NdvmError(f"X must be [N] or [N, d] with N = len(y) = {ya.shape[0]}, got {Xa.shape}")
    d = Xa.shape[1]
    cols = list(names) if names is not None else (["x"] if d == 1 else [f"x{i}" for i in range(d)])
    if len(cols) != d or len(set(cols)) != d:
        raise NdvmError(f"names must be {d} distinct input names, got {cols}")
    check_input_names(cols)
    for i, col in enumerate(cols):
        bad = np.flatnonzero(~np.isfinite(Xa[:, i]))
        if bad.size:
            raise NdvmError(f"input {col!r}: non-finite value in row {int(bad[0])}")
    bad = np.flatnonzero(~np.isfinite(ya))
    if bad.size:
        raise NdvmError(f"target: non-finite value in row {int(bad[0])}")
    binary_operators, unary_operators = check_operators(binary_operators, unary_operators)
    tr, va, te = split_rows(len(ya), split, seed)
    tr, sel = holdout_rows(tr, holdout, len(ya), seed)

    def part(rows: np.ndarray) -> dict[str, np.ndarray]:
        return {c: Xa[rows, i].copy() for i, c in enumerate(cols)}

    data = TaskData(
        part(tr), ya[tr], part(te), ya[te],
        {"n": int(len(ya)), "split": tuple(float(f) for f in split), "seed": seed,
         "holdout": int(sel.size)},
        part(va), ya[va], part(sel) if sel.size else None, ya[sel] if sel.size else None,
    )  # fmt: skip
    params = param_names(tuple(cols))
    grammar = Grammar(
        inputs=tuple(cols), params=params, binary=tuple(binary_operators),
        unary=tuple(unary_operators), loop=loops, allow_let=False, max_size=max_size,
    )  # fmt: skip
    prompt = description or (
        f"Regression of a target on {', '.join(cols)} ({len(tr)} training rows); find a "
        "closed-form model."
    )
    return Task(
        name=name,
        description=prompt,
        inputs=tuple(cols),
        build_data=partial(constant_data, data),
        calib=CalibSpec("mse", steps, lr, optimizer, init_scale=1.0, start_decades=START_DECADES),
        score=regression_score,
        success=success_rule(success_r2, success_rmse),
        search=SearchSpec(grammar, tuple(f"(* {params[0]} {c})" for c in cols), prompt, fixed=True),
    )


def check_input_names(names: Sequence[str]) -> None:
    """Every name can be an input of a searched program: distinct and one symbol of the
    language that is no special form (``check_name``; skeletons write a name spelled like
    their markers ``P`` and ``C`` apart, ``lang.front.skeleton``). Raises ``NdvmError`` saying
    which and why."""
    if len(set(names)) != len(names):
        raise NdvmError(f"input names must be distinct, got {list(names)}")
    for name in names:
        check_name(name)


def from_csv(
    path: str | Path,
    x: Sequence[str],
    y: str,
    **kw: Any,
) -> Task:
    """``from_arrays`` on columns ``x`` (inputs, named as the columns) and ``y`` of a CSV
    file; the task remembers how it was built (``data().meta["origin"]``) so that a search
    database can rebuild it for ``--resume`` and ``ndvm report``."""
    xs = [c.strip() for c in x if c.strip()]
    if not xs:
        raise NdvmError("--x needs at least one column")
    if y in xs:
        raise NdvmError(f"column {y!r} is both an input (--x) and the target (--y)")
    cols = read_csv(path, [*xs, y])
    X = np.stack([cols[c] for c in xs], axis=1)
    kw.setdefault("name", f"data:{Path(path).name}")
    task = from_arrays(X, cols[y], names=xs, **kw)
    origin = {"csv": str(Path(path).resolve()), "x": xs, "y": y}
    origin.update({k: (list(v) if isinstance(v, tuple) else v) for k, v in kw.items()})
    data = task.data()
    meta = {**dict(data.meta), "origin": origin}
    return replace(task, build_data=partial(constant_data, replace(data, meta=meta)))


def rebuild(origin: dict[str, Any]) -> Task:
    """The task ``from_csv`` built, from its recorded origin."""
    kw = dict(origin)
    return from_csv(kw.pop("csv"), kw.pop("x"), kw.pop("y"), **kw)
