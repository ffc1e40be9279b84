"""Task ``battery-knee``: recover a knee-shaped capacity fade from 12 synthetic cells.

Seeded generator (default_rng(0)): capacity Q_k = min(q0 - a sqrt(k), q0 - c k) + N(0, 2e-3²)
for cycles k = 0..120, per-cell q0 ~ 1 + N(0, 0.01²), a ~ 0.012 (1 + N(0, 0.05²)) and a knee
k* ~ 55 + N(0, 3²) (c = a / sqrt(k*)). Input ``x`` is k / 100. Train on k < 70 (``early``:
k < 45), score held-out RMSE on the rest. Each cell is one parameter lane calibrated with its
own parameters (Adam, 400 steps, lr cosine-decayed 0.1 -> 1e-3, from 0.3 N(0, 1)); with K
starts each cell gets K lanes and keeps its best by training loss. The smooth
seed model q0 - a sqrt(k) is the baseline a searched knee model must beat; success: held-out
RMSE < 0.02 (the smooth seed scores about 0.035-0.05).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ndvm.tasks.base import CalibSpec, SearchSpec, Task, TaskData, predict_lanes, series_best
from ndvm.tasks.grammar import Grammar

CELLS = 12
CYCLES = np.arange(121, dtype=np.float64)
SMOOTH = "(- a (* b (sqrt x)))"
KNEE = "(min (- a (* b (sqrt x))) (- a (* c x)))"
SUCCESS_RMSE = 0.02


def generate(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(x, Q [cells, 121], knees)``: inputs k/100, capacities, and each cell's knee cycle."""
    rng = np.random.default_rng(seed)
    q0 = 1.0 + rng.normal(0.0, 0.01, CELLS)
    a = 0.012 * (1.0 + rng.normal(0.0, 0.05, CELLS))
    knee = 55.0 + rng.normal(0.0, 3.0, CELLS)
    c = a / np.sqrt(knee)
    k = CYCLES[None, :]
    Q = np.minimum(q0[:, None] - a[:, None] * np.sqrt(k), q0[:, None] - c[:, None] * k)
    Q = Q + rng.normal(0.0, 2e-3, Q.shape)
    return CYCLES / 100.0, Q, knee


def split(early: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    x, Q, _ = generate()
    cut = 45 if early else 70
    tr = CYCLES < cut
    return x[tr], Q[:, tr], x[~tr], Q[:, ~tr]


def build(early: bool = False) -> TaskData:
    """Every cell's capacity curve as its own series: train ``[12, N]``, held-out ``[12, M]``."""
    xtr, qtr, xte, qte = split(early)
    return TaskData({"x": xtr}, qtr, {"x": xte}, qte, {"cells": CELLS, "early": early})


def build_early() -> TaskData:
    return build(early=True)


def score(cal: Any, data: TaskData) -> dict[str, float]:
    """Held-out RMSE over every cell, each at its own best lane (by training loss)."""
    assert data.test_inputs is not None and data.test_target is not None
    lanes = series_best(cal, CELLS)
    pred = predict_lanes(cal, data.test_inputs, lanes)
    with np.errstate(all="ignore"):
        rmse = float(np.sqrt(np.mean((pred - data.test_target) ** 2)))
    train = float(np.mean(np.asarray(cal.all_losses)[lanes]))
    return {"train_mse": train, "test_mse": rmse**2, "test_rmse": rmse}


def success(metrics: Any) -> bool:
    return bool(metrics["test_rmse"] < SUCCESS_RMSE)


def _search() -> SearchSpec:
    grammar = Grammar(
        binary=("+", "-", "*", "/", "min", "max"),
        unary=("sqrt", "exp", "log", "abs"),
        params=("a", "b", "c", "d"),
        loop=False,
    )
    prompt = (
        "Capacity fade of 12 battery cells: x is the cycle count / 100, y the capacity; "
        "every cell is fitted with its own parameters. Find one model for all cells."
    )
    return SearchSpec(grammar, (SMOOTH, "(- a (* b x))"), prompt)


_CALIB = CalibSpec(loss="mse", steps=400, lr=0.1, lr_final=1e-3, optimizer="adam", init_scale=0.3)

TASK = Task(
    name="battery-knee",
    description=__doc__.splitlines()[0],
    inputs=("x",),
    build_data=build,
    calib=_CALIB,
    score=score,
    success=success,
    program=KNEE,
    search=_search(),
)

TASK_EARLY = replace(
    TASK,
    name="battery-knee-early",
    description="battery-knee trained on cycles < 45 only",
    build_data=build_early,
)
