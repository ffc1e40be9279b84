"""``ndvm.calibrate``: fit a program's parameters to data from many starts in one lane batch.

Starts are parameter lanes; each optimizer step is one evaluation of all of them. Built-in losses
run as one-walk objectives (``losses``); a callable loss runs through the torch boundary. When a
backend offers an in-runtime optimizer (``backend.optimize``), built-in losses dispatch to it.
``calibrate`` is ``plan`` (what the data and settings fix, ``ndvm.calibrate.fitplan``) run once
on the program; ``plan`` alone prepares a fit for many programs.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ndvm.api import Program
from ndvm.calibrate import optim
from ndvm.calibrate.data import user_data
from ndvm.calibrate.fitplan import POLISH_ITERATIONS as POLISH_ITERATIONS
from ndvm.calibrate.fitplan import POLISH_STARTS as POLISH_STARTS
from ndvm.calibrate.fitplan import Plan, loss_settings
from ndvm.calibrate.losses import get_loss
from ndvm.calibrate.result import Calibration
from ndvm.calibrate.theta import init_theta
from ndvm.errors import NdvmError

__all__ = ["Calibration", "Plan", "calibrate", "plan"]

DEFAULT_STARTS = 16  # starts=None: the declared inits and 15 jittered starts (as search)
_init_theta = init_theta  # (its name here before ``theta`` held it)


def calibrate(
    program: Program | str,
    inputs: Mapping[str, Any] | Any = None,
    target: Any = None,
    *,
    init: Any = None,
    seed: int | np.random.Generator = 0,
    time_limit: float | None = None,
    **settings: Any,
) -> Calibration:
    """Fit ``program``'s parameters to ``target`` (or minimize its value) from ``starts`` starts.

    Args:
        program: a compiled Program or source text (inputs are then the keys of ``inputs``).
        inputs: data inputs by name (1-D arrays are data lanes; ``ndvm.const`` for matrices),
            or a pandas DataFrame (the program's inputs by column name; for source text the
            columns it names; other columns are ignored, whatever their dtype).
        target: observed values (mse / gaussian_nll; a pandas Series is an array): ``[N]`` per
            data lane, or ``[starts, N]``
            one series per start (each start fits its own series, e.g. one cell per lane);
            None for ``loss="value"``.
        loss: "mse", "gaussian_nll" (learned noise; ``GaussianNLL(sigma=..)`` fixes it),
            "value" (the program's output is the loss), or a callable
            ``fn(value: torch.Tensor [B, ...], target: torch.Tensor) -> [B]`` (torch path).
        starts: independent starts, run as parameter lanes of one evaluation per step (None:
            ``DEFAULT_STARTS``; the first at ``init``, the others jittered around it; a
            least-squares fit runs the first 4 and stops there when they agree,
            ``ndvm.calibrate.waves``).
        steps: optimizer steps (L-BFGS and LM: iterations). history has steps + 1 rows.
        optimizer: "auto" (Levenberg–Marquardt for a sum of squares against a target — mse —
            else Adam for ``steps``, then an L-BFGS polish of the best starts), "lm",
            "adam", "lbfgs", "adam+lbfgs" (every start polished), or an ``optim.Optimizer``.
        lr: Adam learning rate.
        lr_final: if given, Adam's learning rate decays from ``lr`` to ``lr_final`` on a
            cosine over each start's steps.
        init: None (declared inits; further starts jittered by N(0, max(1, |init|)²) in theta
            space), values
            [P] / [starts, P] / {name: value} in the constrained space, or a callable
            ``(rng, shape) -> values``, which also draws restarts.
        seed: seeds the start jitter and restarts (a ``np.random.Generator`` is drawn from as
            it is).
        constraints: {name: (lo, hi)} box bounds (constrained space), kept by projection;
            they combine with a parameter's own constraint (``positive``, ...).
        early_stop: rtol or ``optim.EarlyStop``: freeze lanes whose loss stopped improving.
        backend: override the program's backend.
        on_failure: "drop" (freeze failed lanes) or "restart" (re-draw them, at most 3 times).
        callback: called as ``callback(iterate, total)`` after every iterate (progress bars).
            An in-runtime optimizer then runs in chunks of ``native.CHUNK`` steps and calls it
            after each; Adam's moments restart at each chunk (see docs/calibration.md).
        engine: "auto" (the backend's in-runtime optimizer when it has one for this loss,
            optimizer and on_failure="drop"; else NumPy), "numpy", or "native" (required).
        time_limit: seconds for the whole fit (Adam): when it passes, the starts still running
            fail with reason "time limit ..." and keep their best iterate so far; no single
            evaluation outlives it.
        polish: how many of the best starts L-BFGS polishes after the main optimizer (None:
            ``POLISH_STARTS`` for optimizer="auto", else 0; a per-start target polishes all).
        diagnostics: False skips what a fit loop does not need — the gradient norm and R² at
            the optimum and the convergence verdict and warning (``success`` then only says no
            start failed) — e.g. co-search's thousands of candidate fits.
        warn: False does not warn ``ConvergenceWarning`` (``success`` and ``message`` still
            give the verdict), e.g. for a protocol whose step count is fixed.
        sigma: per-entry uncertainties of ``target`` (``[N]``, or one number), as
            ``curve_fit``'s: the loss is then ``mean(((f - y) / sigma)**2)`` (mse only).
        absolute_sigma: as ``curve_fit``'s: ``cov`` is ``(JᵀJ)⁻¹`` of the sigma-weighted
            residuals, not scaled by their reduced chi-square.
        fixed: {name: value} parameters pinned at a value (constrained space), as lmfit's
            ``vary=False``: every start holds them there, the result reports them in
            ``params`` and ``fixed`` with no standard error, and ``cov`` and the degrees of
            freedom are those of the free parameters alone.
        nan_policy: "raise" (an error naming the column and row of the first NaN) or "omit"
            (those rows are dropped), as scipy's.

    Returns a ``Calibration``; warns ``ConvergenceWarning`` when ``success`` is False.
    """
    fit = plan(program, inputs, target, **settings)  # the settings: plan's keywords
    return fit.run(program, init, seed, time_limit, stacklevel=3)


def plan(
    program: Program | str | None,
    inputs: Mapping[str, Any] | Any = None,
    target: Any = None,
    *,
    loss: str | Any | Callable[..., Any] = "mse",
    starts: int | None = None,
    steps: int = 200,
    optimizer: str | optim.Optimizer = "auto",
    lr: float = 0.05,
    lr_final: float | None = None,
    constraints: Mapping[str, tuple[float | None, float | None]] | None = None,
    early_stop: float | optim.EarlyStop | None = None,
    backend: str | None = None,
    on_failure: str = "drop",
    callback: Callable[[int, int], None] | None = None,
    engine: str = "auto",
    polish: int | None = None,
    diagnostics: bool = True,
    warn: bool = True,
    sigma: Any = None,
    absolute_sigma: bool = False,
    fixed: Mapping[str, float] | None = None,
    nan_policy: str = "raise",
) -> Plan:
    """``calibrate``'s fit of any program to ``inputs`` and ``target`` with these settings
    (``calibrate``'s arguments but ``init``, ``seed`` and ``time_limit``), checked and
    prepared once: ``plan(...).run(program, init, seed, time_limit)`` is ``calibrate(program,
    ...)``. ``program`` picks a DataFrame's columns (None: every column); what a plan
    prepares is in ``ndvm.calibrate.fitplan``."""
    if engine not in ("auto", "numpy", "native"):
        raise NdvmError(f"engine must be 'auto', 'numpy' or 'native', got {engine!r}")
    if on_failure not in ("drop", "restart"):
        raise NdvmError(f"on_failure must be 'drop' or 'restart', got {on_failure!r}")
    default_starts = starts is None  # adaptive starts (waves) at any data size
    starts = DEFAULT_STARTS if starts is None else starts
    if starts < 1 or steps < 0:
        raise NdvmError("calibrate needs starts >= 1 and steps >= 0")
    inputs, target, sigma = user_data(program, inputs, target, sigma, nan_policy)
    if isinstance(early_stop, (int, float)):
        early_stop = optim.EarlyStop(rtol=float(early_stop))
    settings = dict(optimizer=optimizer, lr=lr, lr_final=lr_final, on_failure=on_failure,
                    constraints=constraints, early_stop=early_stop, backend=backend,
                    callback=callback, engine=engine, polish=polish, diagnostics=diagnostics,
                    warn=warn, absolute_sigma=bool(absolute_sigma), fixed=fixed)  # fmt: skip
    lossobj = get_loss(loss)
    name = lossobj.name if hasattr(lossobj, "prepare") else getattr(lossobj, "__name__", "callable")
    data, _, _, opt, auto = loss_settings(None, lossobj, inputs, target, sigma, starts, settings)
    return Plan(inputs, target, sigma, lossobj, name, data, opt, auto, starts, default_starts,
                steps, settings, {})  # fmt: skip


def _signature() -> inspect.Signature:
    """``calibrate``'s signature: ``plan``'s, with ``init``, ``seed`` and ``time_limit``."""
    own = inspect.signature(calibrate)
    settings = list(inspect.signature(plan).parameters.values())[1:]
    run = [own.parameters[k] for k in RUN_ARGS]
    return own.replace(parameters=[own.parameters["program"], *settings, *run])


RUN_ARGS = ("init", "seed", "time_limit")  # calibrate's per-program arguments (``Plan.run``)
calibrate.__signature__ = _signature()  # type: ignore[attr-defined]
