"""Adaptive starts: a least-squares fit's starts run in waves.

Most fits' first starts already agree, and every start costs runtime (with 1,000 rows a start
costs as much as a whole small fit; with 44 rows 16 lanes cost about three times 4). So a
Levenberg–Marquardt fit with the default starts (``starts=None``, any data size) or with
``ADAPTIVE_N`` data rows or more (any number of starts) runs its first ``WAVE`` starts (the
declared one first, as always) for at most ``WAVE_STEPS`` iterations; when the best of them
stopped on a convergence test and at least ``AGREE`` of them reached its loss (within 1e-6
relative), the remaining starts are not run; otherwise every start runs afresh, and the
result is the one the fit gives without waves (only slower by the first wave). An explicit
``starts=k`` on fewer rows runs every start. ``Calibration.status`` has one entry per start
that ran. A backend whose in-runtime LM runs the waves itself (``optimize_waves``: the native
one, ``optimize_waves.cpp``) does it all in one call, with the same rule; else the waves are
two calls from here. Not with ``diagnostics=False`` (co-search keeps its starts), per-start targets,
restarts, a progress callback or a ``time_limit``.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from ndvm.calibrate import optim
from ndvm.calibrate.lm import CONVERGED_WHY, LM

ADAPTIVE_N = 1000  # data rows from which explicit starts run in waves too
WAVE = 4  # starts in the first wave
AGREE = 2  # starts at the best loss (1e-6 relative) that make the first wave enough
WAVE_STEPS = 100  # iterations of the first wave (a fit that needs more runs every start)


def applies(
    runner: Any, prepared: Any, control: optim.Control, starts: int, default: bool = False
) -> bool:
    """Waves for a least-squares (LM) fit of one target series with the ``default`` starts or
    ``ADAPTIVE_N`` rows or more, more than ``WAVE`` starts, no restarts, no progress callback
    and no time limit (the whole fit's: one wave may not take it all)."""
    target = getattr(prepared, "target", None)
    return (
        isinstance(getattr(runner, "inner", runner), LM)
        and target is not None
        and target.ndim == 1
        and (default or target.shape[0] >= ADAPTIVE_N)
        and starts > WAVE
        and control.callback is None
        and control.time_limit is None
        and control.on_failure == "drop"
    )


def minimize(
    runner: Any, prepared: Any, objective: Any, theta0: np.ndarray, steps: int,
    control: optim.Control, adaptive: bool = True, default: bool = False,
) -> Any:  # fmt: skip
    """``runner.minimize`` of every start, or (``adaptive`` and ``applies``; ``default``: the
    starts are calibrate's default) the first wave, and unless it agrees every start afresh
    (the fit without waves, its evaluations counting the first wave's too)."""
    if not (adaptive and applies(runner, prepared, control, theta0.shape[0], default)):
        return runner.minimize(objective, theta0, steps, control)
    if getattr(getattr(runner, "backend", None), "optimize_waves", False):  # one runtime call
        return runner.minimize(objective, theta0, steps, control, (WAVE, WAVE_STEPS, AGREE))
    return in_waves(runner, objective, theta0, steps, control)


def in_waves(
    runner: Any, objective: Any, theta0: np.ndarray, steps: int, control: optim.Control
) -> Any:
    """The first wave by ``runner.minimize``, and unless it is enough every start afresh."""
    first = runner.minimize(objective, theta0[:WAVE], min(steps, WAVE_STEPS), control)
    if _enough(first):
        return first
    full = runner.minimize(objective, theta0, steps, control)
    return replace(full, evaluations=full.evaluations + first.evaluations)


def _enough(trace: Any) -> bool:
    """The first wave is enough: its best start stopped on a convergence test and at least
    ``AGREE`` starts reached its loss within 1e-6 relative (Python floats: a wave is small)."""
    if trace.why is None:
        return False
    loss = [v if v == v else math.inf for v in np.asarray(trace.best_loss).tolist()]  # NaN
    low = min(loss)
    if not math.isfinite(low) or int(trace.why[loss.index(low)]) not in CONVERGED_WHY:
        return False
    tie = low + 1e-6 * abs(low)
    return sum(v <= tie for v in loss) >= AGREE
