"""Adaptive starts for large data: a least-squares fit's starts run in waves.

With at least ``ADAPTIVE_N`` data rows each start costs as much as a whole small fit, and most
fits' first starts already agree. So the default Levenberg–Marquardt fit runs its first
``WAVE`` starts (the declared one first, as always); when the best of them stopped on a
convergence test and at least ``AGREE`` of them reached its loss (within 1e-6 relative), the
remaining starts are not run; otherwise they run as a second wave and the result is that of
all of them. ``Calibration.status`` has one entry per start that ran. Not with
``diagnostics=False`` (co-search keeps its starts), per-start targets, restarts or a
progress callback.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ndvm.calibrate import optim
from ndvm.calibrate.lm import CONVERGED_WHY, LM

ADAPTIVE_N = 1000  # data rows from which the starts run in waves
WAVE = 4  # starts in the first wave
AGREE = 2  # starts at the best loss (1e-6 relative) that make the first wave enough


def applies(runner: Any, prepared: Any, control: optim.Control, starts: int) -> bool:
    """Waves for a least-squares (LM) fit of one target series with ``ADAPTIVE_N`` rows or
    more, more than ``WAVE`` starts, no restarts and no progress callback."""
    target = getattr(prepared, "target", None)
    return (
        isinstance(getattr(runner, "inner", runner), LM)
        and target is not None
        and target.ndim == 1
        and target.shape[0] >= ADAPTIVE_N
        and starts > WAVE
        and control.callback is None
        and control.on_failure == "drop"
    )


def minimize(
    runner: Any, prepared: Any, objective: Any, theta0: np.ndarray, steps: int,
    control: optim.Control, adaptive: bool = True,
) -> Any:  # fmt: skip
    """``runner.minimize`` of every start, or (``adaptive`` and ``applies``) the first wave,
    and the rest of the starts unless the first wave agrees."""
    if not (adaptive and applies(runner, prepared, control, theta0.shape[0])):
        return runner.minimize(objective, theta0, steps, control)
    first = runner.minimize(objective, theta0[:WAVE], steps, control)
    if _enough(first):
        return first
    rest = runner.minimize(objective, theta0[WAVE:], steps, control)
    return _merge(first, rest)


def _enough(trace: Any) -> bool:
    loss = np.asarray(trace.best_loss, dtype=np.float64)
    finite = np.isfinite(loss)
    if not finite.any() or trace.why is None:
        return False
    best = int(np.flatnonzero(finite)[np.argmin(loss[finite])])
    if int(trace.why[best]) not in CONVERGED_WHY:
        return False
    tie = loss[best] + 1e-6 * abs(loss[best])
    return int((loss[finite] <= tie).sum()) >= AGREE


def _merge(a: Any, b: Any) -> Any:
    """One trace of the lanes of ``a`` then ``b`` (histories padded with their last row)."""
    rows = max(a.history.shape[0], b.history.shape[0])

    def pad(h: np.ndarray) -> np.ndarray:
        if h.shape[0] == rows:
            return h
        return np.concatenate([h, np.repeat(h[-1:], rows - h.shape[0], axis=0)])

    def cat(x: Any, y: Any) -> Any:
        return None if x is None or y is None else np.concatenate([x, y])

    return optim.Trace(
        np.concatenate([a.theta, b.theta]), np.concatenate([a.best_theta, b.best_theta]),
        np.concatenate([a.best_loss, b.best_loss]),
        np.concatenate([pad(a.history), pad(b.history)], axis=1),
        np.concatenate([a.state, b.state]), list(a.reasons) + list(b.reasons),
        np.concatenate([a.restarts, b.restarts]), a.evaluations + b.evaluations,
        cat(a.best_grad, b.best_grad), cat(a.best_sse, b.best_sse), jtj=cat(a.jtj, b.jtj),
        why=cat(a.why, b.why),
    )  # fmt: skip
