"""A fitting engine for NumPy equation skeletons: what LLM-SR's ``evaluate`` computes.

LLM-SR (and LLM-SRBench's searchers) fit each skeleton ``equation(*X.T, params)`` with
``scipy.optimize.minimize(mse, ones(10), method="BFGS")`` and keep ``result.x`` and
``result.fun``. ``fit_skeleton(source, X, y)`` returns the same two things — the parameter
vector in the skeleton's own layout (``params[i]``) and the MSE — by reading the skeleton with
``ndvm.from_numpy`` (never executing it) and fitting it with ``ndvm.calibrate`` (the one
calibration path, with its defaults unless options are given). docs/search.md has the swap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ndvm.errors import NdvmError, ShapeError

LLMSR_MAX_NPARAMS = 10  # LLM-SR's MAX_NPARAMS: the length of its params vector
LANES_PER_FIT = 32768  # default starts x data points of one evaluation (see default_starts)


@dataclass(frozen=True)
class SkeletonFit:
    """params: the fitted vector, ``params[i]`` as the skeleton indexes it (entries the skeleton
    does not use keep their initial value); loss: the MSE of the skeleton at ``params`` on the
    data (NaN/inf when no start produced a finite fit); success: the loss is finite (LLM-SR
    discards a skeleton whose loss is not); converged: calibrate's convergence verdict;
    program: the compiled skeleton (parameters ``p0..``); calibration: the full result."""

    params: np.ndarray
    loss: float
    success: bool
    converged: bool
    message: str
    program: Any
    calibration: Any

    @property
    def score(self) -> float:
        """LLM-SR's score: ``-loss`` (None there for a non-finite loss; NaN here)."""
        return -self.loss if self.success else float("nan")


def fit_skeleton(
    source: str,
    X: Any,
    y: Any,
    *,
    inputs: Sequence[str] | None = None,
    params: str = "params",
    n_params: int = LLMSR_MAX_NPARAMS,
    init: Any = None,
    **calibrate_options: Any,
) -> SkeletonFit:
    """Fit one NumPy skeleton's parameters to data by least squares (MSE), as LLM-SR's BFGS.

    Args:
        source: the skeleton (``def equation(x, v, params): ...``; docs/search.md).
        X: the data: an array ``[N, d]`` whose columns are the skeleton's data arguments in
            signature order (or in ``inputs`` order), a 1-D array for one argument, or a
            mapping / pandas DataFrame by argument name.
        y: the target, ``[N]``.
        inputs: the data arguments' order in an array ``X`` (default: the signature's), or
            one column name per argument (signature order) of a mapping / DataFrame ``X``
            whose columns are named otherwise (``ndvm.from_numpy``'s ``inputs``).
        params: the name of the parameter vector argument.
        n_params: the length of the returned vector (LLM-SR's ``MAX_NPARAMS``, 10); longer
            when the skeleton indexes further.
        init: initial parameter values in the skeleton's layout (default ones, as LLM-SR).
        calibrate_options: passed to ``ndvm.calibrate`` (starts, steps, optimizer, seed,
            time_limit, ...); ``loss`` is always ``"mse"``. Defaults differ from
            calibrate's in two: ``starts=default_starts(N)`` and ``polish=1`` (an L-BFGS
            polish of the best start: a parameter entering as ``params[0] ** 2`` near 0
            leaves Levenberg–Marquardt short of BFGS's loss).

    Returns a ``SkeletonFit`` (params, loss, success, ...). Raises ``CompileError`` for a
    skeleton outside the subset, ``ShapeError`` for data that does not fit it.
    """
    from ndvm.calibrate.api import calibrate
    from ndvm.lang.numpy_reader import as_vector, from_numpy, translate

    skel = translate(source, inputs, params)
    if not isinstance(n_params, (int, np.integer)) or n_params < 0:
        raise NdvmError(f"n_params must be a non-negative integer, not {n_params!r}")
    length = max(int(n_params), skel.n_params)
    start = np.ones(length)
    if init is not None:  # a shorter init is padded with ones (LLM-SR's initial value)
        given = as_vector(init, "init")
        if given.shape[0] < skel.n_params:
            raise ShapeError(f"init has {given.shape[0]} values, the skeleton reads "
                             f"params[{skel.n_params - 1}]")
        start = np.concatenate([given, np.ones(max(0, length - given.shape[0]))])
        length = start.shape[0]
    program = from_numpy(source, inputs, params, init=start)
    data = _columns(X, skel.inputs)
    target = _floats(y, "y")
    calibrate_options.pop("loss", None)
    calibrate_options.setdefault("warn", False)
    calibrate_options.setdefault("starts", default_starts(target.shape[0]))
    calibrate_options.setdefault("polish", 1)
    if not skel.used:  # nothing to fit: the skeleton's MSE as it stands
        value = _mse(program, np.zeros(0), data, target)
        return SkeletonFit(start[:length].copy(), value, bool(np.isfinite(value)), True,
                           "no parameters", program, None)
    cal = calibrate(program, data, target, loss="mse", **calibrate_options)
    fitted = start[:length].copy()
    fitted[list(skel.used)] = [cal.params[name] for name in program.params]
    value = _mse(program, cal.theta, data, target)
    ok = bool(np.isfinite(value))
    return SkeletonFit(fitted, value, ok, bool(cal.success and ok), cal.message, program, cal)


def default_starts(n_points: int) -> int:
    """Starts (parameter lanes) of a fit over ``n_points`` data points: calibrate's 16 up to
    2048 points, then fewer so one evaluation stays near 32768 lanes (at least 4)."""
    return int(min(16, max(4, LANES_PER_FIT // max(1, n_points))))


def _columns(X: Any, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The data inputs by name from an array [N, d] (columns in ``names`` order), a 1-D
    array (one input), a mapping or a pandas DataFrame."""
    if isinstance(X, Mapping) or hasattr(X, "columns"):
        missing = [n for n in names if n not in X]
        if missing:
            raise ShapeError(f"the data has no column {missing[0]!r} (skeleton inputs {names})")
        return {n: _floats(X[n], f"column {n!r}") for n in names}
    try:
        arr = np.asarray(X, dtype=float)
    except (TypeError, ValueError):
        raise ShapeError(f"X must be numbers, not {type(X).__name__}") from None
    if arr.ndim == 1 and len(names) == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[1] != len(names):
        raise ShapeError(
            f"X has shape {arr.shape}, the skeleton takes {len(names)} input(s) {names}: "
            "expected [N, d] with one column per input"
        )
    return {n: arr[:, i] for i, n in enumerate(names)}


def _floats(values: Any, what: str) -> np.ndarray:
    try:
        return np.asarray(values, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise ShapeError(f"{what} must be numbers, not {type(values).__name__}") from None


def _mse(program: Any, theta: np.ndarray, data: Mapping[str, Any], target: np.ndarray) -> float:
    """mean((f - y)^2) of ``program`` at ``theta``: NaN when it cannot be evaluated."""
    try:
        pred = np.asarray(program.with_options(strict=False).eval(theta, data), dtype=float)
    except NdvmError:
        return float("nan")
    pred = np.broadcast_to(pred, target.shape) if pred.ndim == 0 else pred.reshape(-1)
    if pred.shape != target.shape:
        raise ShapeError(f"the skeleton gives {pred.shape[0]} values for {target.shape[0]} targets")
    with np.errstate(all="ignore"):
        return float(np.mean((pred - target) ** 2))
