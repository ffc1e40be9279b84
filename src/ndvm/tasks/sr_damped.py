"""Task ``sr-damped``: symbolic regression of y = exp(-0.3 x) cos(2 x) + N(0, 0.02^2).

64 points on linspace(0.1, 6.0), noise and a 70/30 (44/20) split from default_rng(0);
candidates start at 0.3 N(0, 1), Adam lr 0.05, 50 steps of train MSE; success: held-out R² > 0.9.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ndvm.tasks.base import CalibSpec, Task, TaskData, r2

# The generating structure with its parameters free (the known-good candidate).
PROGRAM = "(* a (exp (* b x)) (cos (+ (* c x) d)))"


def build() -> TaskData:
    rng = np.random.default_rng(0)
    x = np.linspace(0.1, 6.0, 64)
    y = np.exp(-0.3 * x) * np.cos(2.0 * x) + rng.normal(0.0, 0.02, size=64)
    perm = rng.permutation(64)
    tr, te = np.sort(perm[:44]), np.sort(perm[44:])
    return TaskData({"x": x[tr]}, y[tr], {"x": x[te]}, y[te], {"x_all": x, "y_all": y})


def score(cal: Any, data: TaskData) -> dict[str, float]:
    assert data.test_inputs is not None and data.test_target is not None
    pred = np.asarray(cal.predict(data.test_inputs), dtype=np.float64)
    with np.errstate(all="ignore"):
        mse = float(np.mean((pred - data.test_target) ** 2))
    return {"train_mse": cal.loss, "test_mse": mse, "test_r2": r2(data.test_target, pred)}


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
    success=lambda m: m["test_r2"] > 0.9,
    program=PROGRAM,
    plot_fn=plot,
)
