"""Task ``battery-knee``: recover a knee-shaped capacity fade from 12 synthetic cells.

Seeded generator (default_rng(0)): capacity Q_k = min(q0 - a sqrt(k), q0 - c k) + N(0, 2e-3²)
for cycles k = 0..120, per-cell q0 ~ 1 + N(0, 0.01²), a ~ 0.012 (1 + N(0, 0.05²)) and a knee
k* ~ 55 + N(0, 3²) (c = a / sqrt(k*)). Input ``x`` is k / 100. Train on k < 70 (``early``:
k < 45), score held-out RMSE on the rest. Each cell is one parameter lane calibrated with its
own parameters (Adam, 400 steps, lr cosine-decayed 0.1 -> 1e-3, from 0.3 N(0, 1)). The smooth
seed model q0 - a sqrt(k) is the baseline a searched knee model must beat; success: held-out
RMSE < 0.02 (the smooth seed scores about 0.035-0.05).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ndvm.tasks.base import CalibSpec, Task, TaskData

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


def build() -> TaskData:
    """The Task record's data: the cell-mean capacity curve (one series; the co-search problem
    fits every cell as its own lane)."""
    xtr, qtr, xte, qte = split()
    return TaskData({"x": xtr}, qtr.mean(0), {"x": xte}, qte.mean(0), {"cells": CELLS})


def score(cal: Any, data: TaskData) -> dict[str, float]:
    assert data.test_inputs is not None and data.test_target is not None
    pred = np.asarray(cal.predict(data.test_inputs), dtype=np.float64)
    with np.errstate(all="ignore"):
        rmse = float(np.sqrt(np.mean((pred - data.test_target) ** 2)))
    return {"train_mse": cal.loss, "test_rmse": rmse}


TASK = Task(
    name="battery-knee",
    description=__doc__.splitlines()[0],
    inputs=("x",),
    build_data=build,
    calib=CalibSpec(loss="mse", steps=400, lr=0.05, optimizer="adam", init_scale=0.3),
    score=score,
    success=lambda m: m["test_rmse"] < SUCCESS_RMSE,
    program=KNEE,
)


def problem(early: bool = False) -> Any:
    """The co-search problem: 12 cells as lanes, grammar with ``min``/``max`` and sqrt."""
    from ndvm.search.grammar import Grammar
    from ndvm.search.problems import Problem

    xtr, qtr, xte, qte = split(early)
    return Problem(
        "battery-knee-early" if early else "battery-knee",
        xtr,
        qtr,
        xte,
        qte,
        grammar=Grammar(
            binary=("+", "-", "*", "/", "min", "max"),
            unary=("sqrt", "exp", "log", "abs"),
            params=("a", "b", "c", "d"),
            loop=False,
        ),
        seeds=(SMOOTH, "(- a (* b x))"),
        steps=400,
        lr=0.1,
        lr_final=1e-3,
        success_r2=None,
        success_rmse=SUCCESS_RMSE,
        description=__doc__.splitlines()[0],
    )
