"""Search problems: a task's data, calibration protocol and success criterion for co-search.

A problem fixes train/held-out inputs and targets, the Adam protocol (steps, lr, initial
scale), the proposal grammar and seed programs. Regression targets are 1-D ``[N]`` (one
series) or 2-D ``[L, N]`` (one series per lane, as in ``battery-knee``: each lane is one cell
calibrated with its own parameters).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

import numpy as np

from ndvm.search.grammar import Grammar


@dataclass(frozen=True, eq=False)
class Problem:
    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    grammar: Grammar = Grammar()
    seeds: tuple[str, ...] = ()
    steps: int = 50
    lr: float = 0.05
    lr_final: float | None = None  # cosine decay from lr to lr_final over the steps
    init_scale: float = 0.3
    success_r2: float | None = 0.9
    success_rmse: float | None = None
    description: str = ""
    input_name: str = "x"
    meta: dict[str, object] = field(default_factory=dict)

    @property
    def lanes(self) -> int:
        """Parameter lanes per calibration: 1, or one per target series."""
        return 1 if self.y_train.ndim == 1 else int(self.y_train.shape[0])

    def is_success(self, r2: float, rmse: float) -> bool:
        ok = True
        if self.success_r2 is not None:
            ok = ok and bool(np.isfinite(r2) and r2 > self.success_r2)
        if self.success_rmse is not None:
            ok = ok and bool(np.isfinite(rmse) and rmse < self.success_rmse)
        return ok


def regression_data(
    fn: Callable[[np.ndarray], np.ndarray], n: int = 64, n_train: int = 44, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """TASKS.md data protocol: x = linspace(0.1, 6, 64), y = fn(x) + N(0, 0.02^2) noise from a
    generator seeded ``seed``, then a random 70/30 split (44 train / 20 held-out, sorted)."""
    rng = np.random.default_rng(seed)
    x = np.linspace(0.1, 6.0, n)
    y = fn(x) + rng.normal(0.0, 0.02, n)
    perm = rng.permutation(n)
    tr, te = np.sort(perm[:n_train]), np.sort(perm[n_train:])
    return x[tr], y[tr], x[te], y[te]


def _sr_damped() -> Problem:
    from ndvm import tasks

    d = tasks.get("sr-damped").data()
    assert d.test_inputs is not None and d.test_target is not None
    return Problem(
        "sr-damped",
        np.asarray(d.train_inputs["x"]),
        np.asarray(d.train_target),
        np.asarray(d.test_inputs["x"]),
        np.asarray(d.test_target),
        grammar=Grammar(loop=False),
        seeds=("(* a x)", "(* a (cos (* b x)))", "(* a (exp (* b x)))", "(+ a (* b x))"),
        description="symbolic regression of y = exp(-0.3 x) cos(2 x) + noise",
    )


def _iterated_map() -> Problem:
    from ndvm.tasks import iterated_map

    return iterated_map.problem()


def _battery_knee() -> Problem:
    from ndvm.tasks import battery_knee

    return battery_knee.problem()


_FACTORIES: dict[str, Callable[[], Problem]] = {
    "sr-damped": _sr_damped,
    "iterated-map": _iterated_map,
    "battery-knee": _battery_knee,
    "battery-knee-early": lambda: __import__(
        "ndvm.tasks.battery_knee", fromlist=["problem"]
    ).problem(early=True),
}


def names() -> tuple[str, ...]:
    return tuple(_FACTORIES)


@cache
def get(name: str) -> Problem:
    """The search problem for task ``name`` (cached per process; data is deterministic)."""
    if name not in _FACTORIES:
        raise KeyError(f"unknown search task {name!r} (known: {', '.join(_FACTORIES)})")
    return _FACTORIES[name]()
