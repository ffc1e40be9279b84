"""The ``Task`` record: data builder, calibration protocol, scoring and success for one workload.

One task model serves a single calibration (``task.calibrate()`` on its reference program) and
co-search (``task.evaluate(candidate)``: calibrate a candidate on the train split, score it on
the held-out split, never raise for a bad candidate; ``task.search`` holds the proposal grammar,
seed programs and the description an LLM proposer is given).

A 2-D train target ``[S, N]`` is S independent series (e.g. battery cells): each series is
fitted with its own parameters, ``starts`` lanes per series, and the best lane of each series
(by training loss) is what the task scores.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

import numpy as np

from ndvm.api import Program
from ndvm.calibrate import Calibration, calibrate
from ndvm.errors import NdvmError


@dataclass(frozen=True)
class TaskData:
    """Train/held-out inputs and targets (target None for likelihood tasks), plus metadata."""

    train_inputs: Mapping[str, Any]
    train_target: np.ndarray | None
    test_inputs: Mapping[str, Any] | None = None
    test_target: np.ndarray | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)


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


@dataclass(frozen=True)
class SearchSpec:
    """What co-search needs beyond the calibration protocol.

    grammar: the proposal grammar (``ndvm.search.Grammar``); seeds: programs the evolutionary
    proposer starts from; prompt: the task as an LLM proposer is told it (never the law that
    generated the data).
    """

    grammar: Any
    seeds: tuple[str, ...] = ()
    prompt: str = ""


@dataclass(frozen=True)
class TaskResult:
    """One candidate's outcome: its calibration (None if it failed before), metrics, success."""

    calibration: Calibration | None
    metrics: Mapping[str, float]
    success: bool
    error: str | None = None


def load_candidate(candidate: Any, inputs: tuple[str, ...], backend: str | None = None) -> Program:
    """A Program from source text, a Program, or a JSONL record / line (``src``, ``params``)."""
    import ndvm

    if isinstance(candidate, Program):
        return candidate if backend is None else candidate.with_options(backend=backend)
    if isinstance(candidate, str) and candidate.lstrip().startswith("{"):
        candidate = json.loads(candidate)
    if isinstance(candidate, Mapping):
        params = candidate.get("params")
        return ndvm.compile(
            candidate["src"], None if params is None else list(params), inputs, backend=backend
        )
    if isinstance(candidate, str):
        return ndvm.compile(candidate, inputs=inputs, backend=backend)
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
        """Calibrate on the train split with the task's protocol (``overrides`` win)."""
        program = self.compile(candidate, backend)
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
        if spec.init_scale is not None:
            scale = spec.init_scale
            kw["init"] = lambda rng, shape: scale * rng.standard_normal(shape)
        if spec.lr_final is not None:
            kw["lr_final"] = spec.lr_final
        kw.update(overrides)
        target = data.train_target
        if target is not None and np.ndim(target) == 2:  # K starts per series, series-major
            kw["target"] = np.repeat(np.asarray(target), int(kw["starts"]), axis=0)
            kw["starts"] = int(kw["starts"]) * int(np.shape(target)[0])
        else:
            kw["target"] = target
        return calibrate(program, data.train_inputs, **kw)

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

    def with_calib(self, **changes: Any) -> Task:
        return replace(self, calib=replace(self.calib, **changes))


@cache
def _cached(builder: Callable[[], TaskData]) -> TaskData:
    return builder()


def regression_data(target: Callable[[np.ndarray], np.ndarray]) -> TaskData:
    """The TASKS.md regression protocol: 64 points on [0.1, 6], N(0, 0.02^2) noise from a
    generator seeded 0, and a random 44/20 train/held-out split."""
    rng = np.random.default_rng(0)
    x = np.linspace(0.1, 6.0, 64)
    y = target(x) + rng.normal(0.0, 0.02, size=64)
    perm = rng.permutation(64)
    tr, te = np.sort(perm[:44]), np.sort(perm[44:])
    return TaskData({"x": x[tr]}, y[tr], {"x": x[te]}, y[te], {"x_all": x, "y_all": y})


def regression_score(cal: Any, data: TaskData) -> dict[str, float]:
    """Train MSE, held-out MSE and held-out R^2 of a calibrated regression candidate."""
    assert data.test_inputs is not None and data.test_target is not None
    pred = np.asarray(cal.predict(data.test_inputs), dtype=np.float64)
    with np.errstate(all="ignore"):
        mse = float(np.mean((pred - data.test_target) ** 2))
    return {"train_mse": cal.loss, "test_mse": mse, "test_r2": r2(data.test_target, pred)}


def series_best(cal: Calibration, series: int) -> np.ndarray:
    """The best lane of each series (lanes are series-major: ``starts`` lanes per series)."""
    losses = np.asarray(cal.all_losses, dtype=np.float64).reshape(series, -1)
    safe = np.where(np.isfinite(losses), losses, np.inf)
    return np.argmin(safe, axis=1) + np.arange(series) * losses.shape[1]


def predict_lanes(cal: Calibration, inputs: Mapping[str, Any], lanes: np.ndarray) -> np.ndarray:
    """The model's values ``[len(lanes), N]`` at the given lanes' best parameters."""
    P = len(cal.program.params)
    theta = np.asarray(cal.all_theta)[np.asarray(lanes), :P]
    out = np.asarray(cal.program.eval(theta, **dict(inputs)), dtype=np.float64)
    return out.reshape(len(lanes), -1)


def r2(y: np.ndarray, pred: np.ndarray) -> float:
    """Coefficient of determination; -inf for a non-finite prediction."""
    pred = np.asarray(pred, dtype=np.float64)
    if not np.isfinite(pred).all():
        return float("-inf")
    with np.errstate(over="ignore", invalid="ignore"):
        ss_res = float(((y - pred) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum())
    return 1.0 - ss_res / ss_tot
