"""Task ``sr-damped``: symbolic regression of y = exp(-0.3 x) cos(2 x) + N(0, 0.02^2).

64 points on linspace(0.1, 6.0), noise and a 70/30 (44/20) split from default_rng(0);
candidates start at 0.3 N(0, 1), Adam lr 0.05, 50 steps of train MSE; success: held-out R² > 0.9.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ndvm.tasks.base import (
    CalibSpec,
    SearchSpec,
    Task,
    TaskData,
    regression_data,
    regression_score,
)
from ndvm.tasks.grammar import Grammar

# The generating structure with its parameters free (the known-good candidate).
PROGRAM = "(* a (exp (* b x)) (cos (+ (* c x) d)))"


def target(x: np.ndarray) -> np.ndarray:
    return np.exp(-0.3 * x) * np.cos(2.0 * x)


def build() -> TaskData:
    return regression_data(target)


score = regression_score


def r2_success(metrics: Any) -> bool:
    """docs/tasks.md: held-out R² > 0.9."""
    return bool(metrics["test_r2"] > 0.9)


def plot(cal: Any, data: TaskData, path: str | None = None) -> Any:
    assert data.test_inputs is not None
    extra = {"x": data.test_inputs["x"], "y": data.test_target}
    return cal.plot(path, extra=extra)


TASK = Task(
    name="sr-damped",
    description=__doc__.splitlines()[0],
    inputs=("x",),
    build_data=build,
    calib=CalibSpec(loss="mse", steps=50, lr=0.05, optimizer="adam", init_scale=0.3),
    score=score,
    success=r2_success,
    program=PROGRAM,
    plot_fn=plot,
    search=SearchSpec(
        Grammar(loop=False),
        ("(* a x)", "(* a (cos (* b x)))", "(* a (exp (* b x)))", "(+ a (* b x))"),
        "Symbolic regression: 44 noisy observations of y at x in [0.1, 6]; find a closed-form "
        "model y = f(x).",
    ),
)
