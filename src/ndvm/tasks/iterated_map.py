"""Task ``iterated-map``: recurrence-heavy regression of y = sin(1.2 x) + 0.3 x + noise.

The data protocol of ``sr-damped`` (64 points on linspace(0.1, 6), N(0, 0.02^2) noise and a
44/20 split from default_rng(0)); every candidate is a bounded iterated map
``(loop ((s INIT) (k 0)) (if (= k N) s (recur NEW-S (+ k 1))))`` with N in 6..16. Adam lr
0.05, 50 steps from 0.3 N(0, 1); success: held-out R² > 0.9.
"""

from __future__ import annotations

import numpy as np

from ndvm.tasks.base import CalibSpec, SearchSpec, Task, TaskData, regression_data, regression_score
from ndvm.tasks.grammar import Grammar
from ndvm.tasks.sr_damped import r2_success

# A known-good map: s_{k+1} = s + (b sin(c x) + d x) / 8 after 8 steps is b sin(c x) + d x + a.
PROGRAM = "(loop ((s a) (k 0)) (if (= k 8) s (recur (+ s (* 0.125 (+ (* b (sin (* c x))) (* d x)))) (+ k 1))))"  # noqa: E501

SEEDS = (
    "(loop ((s a) (k 0)) (if (= k 8) s (recur (+ s (* b (sin (* c x)))) (+ k 1))))",
    "(loop ((s (* a x)) (k 0)) (if (= k 6) s (recur (+ s (* b x)) (+ k 1))))",
    "(loop ((s a) (k 0)) (if (= k 10) s (recur (* b s) (+ k 1))))",
)


def target(x: np.ndarray) -> np.ndarray:
    return np.sin(1.2 * x) + 0.3 * x


def build() -> TaskData:
    return regression_data(target)


score = regression_score


TASK = Task(
    name="iterated-map",
    description=__doc__.splitlines()[0],
    inputs=("x",),
    build_data=build,
    calib=CalibSpec(loss="mse", steps=50, lr=0.05, optimizer="adam", init_scale=0.3),
    score=score,
    success=r2_success,
    program=PROGRAM,
    search=SearchSpec(
        Grammar(loop=True, loop_depth=(6, 16), require_loop=True, max_size=48),
        SEEDS,
        "Regression: 44 noisy observations of y at x in [0.1, 6]; every model is a bounded "
        "iterated map whose state s is updated N times from an initial value.",
    ),
)
