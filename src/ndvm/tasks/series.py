"""Tasks with several series (a 2-D training target ``[S, N]``, e.g. battery cells).

Each series is fitted with its own parameters, ``starts`` lanes per series (series-major), and
each series keeps its best lane by *training* loss: that is calibration. Choosing between
candidate programs is selection, and it reads a validation split the fit never saw: a
trailing block of every series' points (``trailing_block``; a task may declare its own
block), scored by ``series_score`` with each series at its chosen lane. A task whose series
share one structure may refit every series from all series' bests (``pooled_refit``,
``CalibSpec.pooled``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np


def series_best(cal: Any, series: int) -> np.ndarray:
    """The best lane of each series (lanes are series-major: ``starts`` lanes per series)."""
    losses = np.asarray(cal.all_losses, dtype=np.float64).reshape(series, -1)
    if series == 1:  # the calibration's own best (its rule for ties)
        return np.array([cal.best])
    safe = np.where(np.isfinite(losses), losses, np.inf)
    return np.argmin(safe, axis=1) + np.arange(series) * losses.shape[1]


def predict_lanes(cal: Any, inputs: Mapping[str, Any], lanes: np.ndarray) -> np.ndarray:
    """The model's values ``[len(lanes), N]`` at the given lanes' best parameters."""
    P = len(cal.program.params)
    theta = np.asarray(cal.all_theta)[np.asarray(lanes), :P]
    out = np.asarray(cal.program.eval(theta, dict(inputs)), dtype=np.float64)
    return out.reshape(len(lanes), -1)


def r2_of(ss_res: float, ss_tot: float, finite: bool) -> float:
    """1 - ss_res / ss_tot; -inf for a non-finite prediction, NaN for a constant target."""
    if not finite:
        return float("-inf")
    if not ss_tot > 0:
        return float("nan")  # a constant target: R² is undefined
    return 1.0 - ss_res / ss_tot


def series_score(cal: Any, data: Any) -> dict[str, float]:
    """Scores of a multi-series fit, every series at its best lane by training loss:
    ``train_mse`` (mean over series), and for the test and (when present) validation splits
    ``*_mse``, ``*_rmse`` and ``*_r2`` (pooled: residual over total sum of squares, each
    series about its own mean on that split)."""
    target = np.asarray(data.train_target)
    lanes = series_best(cal, int(target.shape[0]))
    out = {"train_mse": float(np.mean(np.asarray(cal.all_losses, dtype=np.float64)[lanes]))}
    splits = (("test", data.test_inputs, data.test_target),
              ("validation", data.valid_inputs, data.valid_target))  # fmt: skip
    for name, inputs, y in splits:
        if inputs is None or y is None:
            continue
        y = np.asarray(y, dtype=np.float64)
        pred = predict_lanes(cal, inputs, lanes)
        finite = bool(np.isfinite(pred).all()) and pred.shape == y.shape
        with np.errstate(all="ignore"):
            ss_res = float(((pred - y) ** 2).sum()) if finite else math.inf
        ss_tot = float(((y - y.mean(axis=1, keepdims=True)) ** 2).sum())
        mse = ss_res / max(y.size, 1)
        out[f"{name}_mse"] = mse
        out[f"{name}_rmse"] = math.sqrt(mse)
        out[f"{name}_r2"] = r2_of(ss_res, ss_tot, finite)
    return out


def trailing_block(
    inputs: Mapping[str, Any], target: np.ndarray, points: int
) -> tuple[dict[str, np.ndarray], np.ndarray, dict[str, np.ndarray], np.ndarray] | None:
    """``(train inputs, train target, validation inputs, validation target)``: the last
    ``points`` points of every series (``target [S, N]``, inputs 1-D over the N points, in
    order) as the validation block, the rest for training; None when the data is not of that
    shape or fewer than 2 training points would remain."""
    t = np.asarray(target)
    if t.ndim != 2 or not 1 <= points <= t.shape[1] - 2:
        return None
    n = t.shape[1]
    cols = {k: np.asarray(v) for k, v in inputs.items()}
    if any(v.ndim != 1 or len(v) != n for v in cols.values()):
        return None
    cut = n - points
    return ({k: v[:cut] for k, v in cols.items()}, t[:, :cut],
            {k: v[cut:] for k, v in cols.items()}, t[:, cut:])  # fmt: skip


def pooled_refit(
    cal: Any, program: Any, fitplan: Any, run: dict[str, Any], S: int, spent: float = 0.0
) -> Any:
    """A second fit of every series from the best parameters the first fit found anywhere.

    ``cal`` is a fit of ``S`` series with ``K`` lanes each by ``fitplan`` (a
    ``calibrate.Plan``: ``starts`` S*K and ``target [S*K, N]``, series-major; ``run``: its
    ``Plan.run`` keywords). Series that share one
    structure have similar parameters, so a start that reached the right basin for one series
    is a good start for all: start k of series s restarts from series s's own best (k = 0),
    then from the best of the other series in order of their training loss (cycling when
    K > S). The refit keeps K lanes per series; a series that does better from another's
    parameters takes them; its own best is a start, so with a descent method (LM, L-BFGS)
    none ends worse. Returns ``cal`` unchanged when it has one series, no parameter or no
    finite best, or when ``run``'s ``time_limit`` is spent (``spent``: seconds used so far)."""
    losses = np.asarray(cal.all_losses, dtype=np.float64)
    K = losses.size // max(S, 1)
    P = len(program.params)
    if S < 2 or K * S != losses.size or P == 0:
        return cal
    best = series_best(cal, S)
    values = np.asarray(cal.all_params, dtype=np.float64)[best, :P]
    order = [int(i) for i in np.argsort(np.where(np.isfinite(losses[best]), losses[best], np.inf))
             if np.isfinite(losses[best][i]) and np.isfinite(values[i]).all()]  # fmt: skip
    if not order:
        return cal
    init = np.empty((S * K, P))
    for s in range(S):
        donors = [s] if s in order else []
        donors += [i for i in order if i != s]
        for k in range(K):
            init[s * K + k] = values[donors[k % len(donors)]]
    again = dict(run, init=init)
    if again.get("time_limit") is not None:
        again["time_limit"] = float(again["time_limit"]) - spent
        if again["time_limit"] <= 0:
            return cal
    return fitplan.run(program, **again)
