"""The strong-Wolfe line search of ``optim.LBFGS``, over lanes: every trial is one objective
call for all lanes still searching.

Per lane it is the bracketing-and-zoom search of Nocedal & Wright (Numerical Optimization,
2nd ed., algorithms 3.5 and 3.6) on ``phi(a) = f(project(theta + a d))``: the step grows
(doubles) from 1 until a trial satisfies the strong Wolfe conditions

    phi(a) <= phi(0) + c1 a phi'(0)        (sufficient decrease)
    |phi'(a)| <= c2 |phi'(0)|              (curvature)

or brackets such a step, which the zoom then narrows by quadratic interpolation (through
``phi(lo)``, ``phi'(lo)`` and ``phi(hi)``, kept 10 % inside the bracket; else bisection). A trial
that fails (a lane error, a non-finite loss) counts as too far. After ``max_ls`` trials a lane
keeps its lowest trial with sufficient decrease, if any; a lane with none is stuck.
``phi'(a)`` is ``grad(trial) . d``. The runtime's L-BFGS (``cpp/src/optimize.cpp``) is this
search operation for operation; tests hold the two equal bitwise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ndvm.calibrate.objective import Objective


@dataclass
class Search:
    """The result for every lane: the accepted (or fallback) point, its loss and gradient
    (the start's where none was found), whether one was found, and how many objective calls
    the search made."""

    theta: np.ndarray
    loss: np.ndarray
    grad: np.ndarray
    found: np.ndarray
    evaluations: int


def _interpolate(
    lo: np.ndarray, hi: np.ndarray, f_lo: np.ndarray, dp_lo: np.ndarray, f_hi: np.ndarray
) -> np.ndarray:
    """The minimizer of the quadratic through phi(lo), phi'(lo), phi(hi) where it lies 10 %
    inside [lo, hi] (either order), else the midpoint."""
    delta = hi - lo
    with np.errstate(all="ignore"):
        denom = 2.0 * (f_hi - f_lo - dp_lo * delta)
        aq = lo - dp_lo * delta * delta / denom
    margin = 0.1 * np.abs(delta)
    inside = np.isfinite(aq) & (aq >= np.minimum(lo, hi) + margin)
    inside &= aq <= np.maximum(lo, hi) - margin
    return np.where(inside, aq, lo + 0.5 * delta)


def strong_wolfe(
    objective: Objective,
    theta: np.ndarray,
    f: np.ndarray,
    g: np.ndarray,
    d: np.ndarray,
    slope: np.ndarray,
    pending: np.ndarray,
    project: Callable[[np.ndarray], np.ndarray] | None,
    c1: float,
    c2: float,
    max_ls: int,
) -> Search:
    """Search along ``d`` ([B, D]) from ``theta`` (loss ``f``, gradient ``g``, directional
    derivative ``slope`` < 0) for the ``pending`` lanes; the others stay put."""
    B = theta.shape[0]
    new_t, new_f, new_g = theta.copy(), f.copy(), g.copy()
    found = np.zeros(B, dtype=bool)
    search, zoom = pending.copy(), np.zeros(B, dtype=bool)
    a = np.where(search, 1.0, 0.0)
    a_prev, f_prev, dp_prev = np.zeros(B), f.copy(), slope.copy()
    lo, f_lo, dp_lo = np.zeros(B), f.copy(), slope.copy()
    hi, f_hi = np.zeros(B), np.full(B, np.inf)
    evaluations = 0
    for _ in range(max_ls):
        if not search.any():
            break
        trial = np.where(search[:, None], theta + a[:, None] * d, new_t)
        if project is not None:
            trial = np.where(search[:, None], project(trial), trial)
        tr = objective(trial, grad=True)
        evaluations += 1
        bad = tr.failed | ~np.isfinite(tr.loss)
        ft = np.where(bad, np.inf, tr.loss)
        gt = np.where(bad[:, None], 0.0, tr.grad)
        dp = np.where(bad, np.nan, (gt * d).sum(axis=1))
        armijo = search & (ft <= f + c1 * a * slope)
        wolfe = armijo & (np.abs(dp) <= -c2 * slope)
        keep = wolfe | (armijo & (ft < new_f))  # accepted, or the lowest fallback so far
        new_t[keep], new_f[keep], new_g[keep] = trial[keep], ft[keep], gt[keep]
        found |= keep
        # bracketing lanes: a bracket [a_prev, a] or [a, a_prev] starts the zoom, else a doubles
        br = search & ~zoom & ~wolfe
        up = br & (~armijo | ((a_prev > 0) & (ft >= f_prev)))
        down = br & ~up & (dp >= 0)
        grow = br & ~up & ~down
        # zooming lanes: a replaces hi (too high) or lo (then hi moves to lo if it must)
        zm = search & zoom & ~wolfe
        to_hi = zm & (~armijo | (ft >= f_lo))
        to_lo = zm & ~to_hi
        flip = to_lo & (dp * (hi - lo) >= 0)
        hi, f_hi = np.where(flip, lo, hi), np.where(flip, f_lo, f_hi)
        hi = np.where(to_hi | down, np.where(down, a_prev, a), np.where(up, a, hi))
        f_hi = np.where(to_hi | up, ft, np.where(down, f_prev, f_hi))
        lo = np.where(up, a_prev, np.where(to_lo | down, a, lo))
        f_lo = np.where(up, f_prev, np.where(to_lo | down, ft, f_lo))
        dp_lo = np.where(up, dp_prev, np.where(to_lo | down, dp, dp_lo))
        a_prev = np.where(grow, a, a_prev)
        f_prev = np.where(grow, ft, f_prev)
        dp_prev = np.where(grow, dp, dp_prev)
        search &= ~wolfe
        zoom |= up | down
        nxt = _interpolate(lo, hi, f_lo, dp_lo, f_hi)
        a = np.where(grow, 2.0 * a, np.where(search & zoom, nxt, a))
    return Search(new_t, new_f, new_g, found, evaluations)
