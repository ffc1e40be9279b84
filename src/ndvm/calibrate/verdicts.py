"""Verdicts: a fit never calls itself a success when it is not one.

- ``verdict``: a least-squares fit's ``(success, message)`` from its best start's stopping
  reason (``lm.WHY_*``), ``JᵀJ`` and the gradient cosine there.

- ``unbounded``: a fit whose loss keeps falling along its own descent direction, ever
  farther out, has found no minimum (``(- 0 a)`` with ``loss="value"``, L-BFGS on
  ``(* a a -1)``), however small its gradient is relative to the loss.
- ``undetermined``: the parameters the data cannot determine at a least-squares optimum —
  fewer data rows than parameters, or a rank-deficient Jacobian (a null direction of the
  column-scaled ``JᵀJ``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ndvm.calibrate.lm import (
    CONVERGED_WHY,
    STATIONARY_COSINE,
    WHY_FTOL,
    WHY_STUCK,
    WHY_TEXT,
    WHY_UNDERFLOW,
    WHY_XTOL,
    WHY_ZERO,
)

# the descent ray's probes, in units of max(1, |theta|): four decades out
RAY = (1.0, 10.0, 100.0, 1000.0)
FALL = 1e-6  # the farthest probe is at least this times max(1, |loss|) lower
# a column-scaled JᵀJ eigenvalue at most this times the largest is a null direction (J's
# singular values 1e-7 apart: beyond what float64 normal equations resolve)
RANK_RTOL = 1e-14
NULL_SHARE = 0.1  # a parameter whose share of a null direction is above this is undetermined


def unbounded(
    objective: Any, theta: np.ndarray, grad: np.ndarray | None, loss: float, project: Any
) -> float | None:
    """The loss at the farthest probe when the loss falls monotonically along ``-grad``
    (theta space, projected on the box) at the distances ``RAY`` times ``max(1, |theta|)``,
    the farthest at least ``FALL · max(1, |loss|)`` below ``loss`` (``-inf`` counts as
    falling; a failed probe stops the ray); else None."""
    if grad is None or not math.isfinite(loss):
        return None
    gn = math.hypot(*grad.tolist())  # no overflow in the squares
    if not (gn > 0 and math.isfinite(gn)):
        return None
    base = max(1.0, math.hypot(*theta.tolist()))
    rows = theta[None, :] - np.outer(np.array(RAY) * base, grad / gn)
    if project is not None:
        rows = project(rows)
    with np.errstate(all="ignore"):
        ev = objective(rows, grad=False)
    vals = np.asarray(ev.loss, dtype=np.float64)
    prev = loss
    for v in vals.tolist():
        if v == -math.inf:  # overflowed below: unbounded
            return v
        if not v < prev:  # NaN, +inf or a rise: a minimum on the ray, or a domain edge
            return None
        prev = v
    return prev if prev < loss - FALL * max(1.0, abs(loss)) else None


def undetermined(jtj: np.ndarray, names: tuple[str, ...], n_rows: int) -> list[str]:
    """The parameters in a null direction of the column-scaled ``JᵀJ`` (``D^-½ JᵀJ D^-½``,
    ``D`` its diagonal; columns of zero are the caller's), all of them when there are fewer
    data rows than parameters; [] when ``JᵀJ`` is of full rank or not finite."""
    P = jtj.shape[0]
    if n_rows < P:
        return list(names[:P])
    rows = jtj.tolist()
    if P < 2 or not min(r[i] for i, r in enumerate(rows)) > 0:
        return []  # one column, or a dead column (lm.verdict names it)
    if not math.isfinite(sum(map(sum, rows))):
        return []
    d = [math.sqrt(r[i]) for i, r in enumerate(rows)]
    c = [[v / (d[i] * d[j]) for j, v in enumerate(r)] for i, r in enumerate(rows)]
    if _surely_full_rank(c):
        return []
    w, v = np.linalg.eigh(np.array(c))
    if not w[0] <= RANK_RTOL * w[-1]:
        return []
    null = w <= RANK_RTOL * w[-1]
    share = (v[:, null] ** 2).sum(axis=1)
    return [n for n, s in zip(names, share.tolist()) if s > NULL_SHARE]


def _surely_full_rank(c: list[list[float]]) -> bool:
    """A cheap sufficient test (plain Python, no LAPACK call) that the unit-diagonal ``c``
    has no null direction: its determinant is the product of the eigenvalues, so
    ``λ_min >= det / λ_max^(P-1) >= det / P^(P-1)`` (``λ_max <= trace = P``); a determinant
    above ``RANK_RTOL · P^P`` gives ``λ_min > RANK_RTOL · λ_max``. The determinant is the
    product of the elimination pivots (no pivoting: ``c`` is symmetric, and a pivot at or
    below 0 ends the test)."""
    P = len(c)
    a = [row[:] for row in c]  # (a copy: eliminated in place)
    det = 1.0
    for k in range(P):
        piv = a[k][k]
        if not piv > 0:
            return False
        det *= piv
        for i in range(k + 1, P):
            f = a[i][k] / piv
            if f:
                row_i, row_k = a[i], a[k]
                for j in range(k + 1, P):
                    row_i[j] -= f * row_k[j]
    return det > RANK_RTOL * float(P) ** P


def verdict(
    why: int, jtj: np.ndarray, names: tuple[str, ...], cosine: float, n_best: int, starts: int,
    n_rows: int | None = None, effect: tuple[np.ndarray, float] | None = None,
) -> tuple[bool, str]:
    """``(success, message)`` of a least-squares fit from its best start's stopping reason,
    ``JᵀJ`` there and the largest cosine of a Jacobian column with the residual (of the
    gradient projected on the box). A stationary point where the model depends on no
    parameter (all of J zero: a symmetric start such as all zeros for ``A sin(w t + phi)``)
    is not a success; neither is an iteration or time limit, nor an ftol or xtol stop where a
    column of J still makes a cosine above ``STATIONARY_COSINE`` with the residual (a stop in
    an ill-conditioned valley, short of the minimum), nor a sum of squares that underflowed,
    nor (given ``n_rows``, the data rows) an optimum where the data cannot determine some
    parameters (fewer rows than parameters, or a rank-deficient ``JᵀJ``: ``verdicts``).
    A column below 1e-30 of the largest squared norm is one the model does not depend on;
    given ``effect`` (theta and the target's norm), only where also ``‖J_i‖ (|θ_i| + 1)`` is
    at most 1e-15 of the target's norm (data ×1e100 make a column 1e-100 of another's)."""
    tail = f"({n_best} of {starts} starts reached this loss)"
    if why == WHY_UNDERFLOW:
        return False, f"not converged: {WHY_TEXT[why]} {tail}"
    lost = [] if n_rows is None else undetermined(jtj, names, n_rows)
    if lost:
        few = f"{n_rows} data row(s) for {jtj.shape[0]} parameters" if n_rows is not None and (
            n_rows < jtj.shape[0]) else "the Jacobian is rank-deficient at the optimum"
        return False, (
            f"not identifiable: the data cannot determine {', '.join(lost)} ({few}); fix some "
            f"of them (fixed=), add data, or simplify the model {tail}"
        )
    diag = jtj.diagonal().tolist() if jtj.size else []
    top = math.nan if any(d != d for d in diag) else max([0.0, *diag])  # ndarray.max's
    dead = [n for n, d in zip(names, diag) if not d > 1e-30 * top]
    if dead and effect is not None:  # keep those whose effect is small against the data too
        theta, y_norm = effect
        small = {n for n, d, t in zip(names, diag, theta.tolist())
                 if not math.sqrt(max(d, 0.0)) * (abs(t) + 1.0) > 1e-15 * y_norm}  # fmt: skip
        dead = [n for n in dead if n in small]
    if dead and why == WHY_ZERO and len(dead) < len(diag):  # an exact fit that some ignore
        return False, (
            f"not identifiable: the data cannot determine {', '.join(dead)} (an exact fit "
            f"where the model does not depend on {'it' if len(dead) == 1 else 'them'}); fix "
            f"{'it' if len(dead) == 1 else 'them'} (fixed=) or simplify the model {tail}"
        )
    if dead and why != WHY_ZERO:
        what = ("a stationary point where the model does not depend on any parameter (a "
                "symmetric start?)" if len(dead) == len(diag) else
                f"a point where the model does not depend on {', '.join(dead)} (not "
                "identifiable there)")  # fmt: skip
        return False, f"not converged: {what}; use more starts or another init {tail}"
    if why in (WHY_FTOL, WHY_XTOL) and cosine > STATIONARY_COSINE:
        return False, (
            f"not converged: {WHY_TEXT[why]}, but the gradient is not small (largest gradient "
            f"cosine {cosine:.2g} > {STATIONARY_COSINE:g}): an ill-conditioned or slowly "
            f"converging fit; raise steps or starts, or start nearer {tail}"
        )
    if why in CONVERGED_WHY:
        return True, f"converged: {WHY_TEXT[why]} {tail}"
    if why == WHY_STUCK and cosine <= 1e-6:
        return True, f"converged: stationary within the bounds (cosine {cosine:.2g}) {tail}"
    return False, (
        f"not converged: {WHY_TEXT[why]} (largest gradient cosine {cosine:.2g}); raise steps "
        f"or starts {tail}"
    )
