"""``ndvm.calibrate``: fit a program's parameters to data from many starts in one lane batch.

Starts are parameter lanes; each optimizer step is one evaluation of all of them. Built-in losses
run as one-walk objectives (``losses``); a callable loss runs through the torch boundary. When a
backend offers an in-runtime optimizer (``backend.optimize``), built-in losses dispatch to it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from ndvm.api import Program
from ndvm.api import compile as compile_program
from ndvm.backends import registry
from ndvm.calibrate import native, optim, waves
from ndvm.calibrate.data import user_data
from ndvm.calibrate.lm import LM
from ndvm.calibrate.losses import get_loss
from ndvm.calibrate.native import prep_lm_ok
from ndvm.calibrate.objective import ProgramObjective, TorchObjective
from ndvm.calibrate.result import Calibration, build, lane_objective
from ndvm.calibrate.starts import place_roles, program_roles
from ndvm.errors import NdvmError
from ndvm.prims.constraints import constraint

__all__ = ["Calibration", "calibrate"]

DEFAULT_STARTS = 16  # starts=None: the declared inits and 15 jittered starts (as search)
POLISH_STARTS = 8  # optimizer="auto" with Adam: L-BFGS polishes this many best starts
POLISH_ITERATIONS = 200


class _Seed(np.random.SeedSequence):
    """An int seed's ``SeedSequence`` that hashes its entropy into a bit generator's state
    once (``PCG64(seed)`` asks for the same four words on every call); the same stream."""

    def generate_state(self, n_words: int, dtype: Any = np.uint32) -> np.ndarray:
        key = (n_words, np.dtype(dtype).str)
        cache = self.__dict__.setdefault("_states", {})
        state = cache.get(key)
        if state is None:
            state = cache[key] = super().generate_state(n_words, dtype)
        return state.copy()


_SEEDS: dict[int, _Seed] = {}  # seed -> its SeedSequence


def _rng(seed: Any) -> np.random.Generator:
    """``np.random.default_rng(seed)``, the same stream; an int seed's entropy hashed once."""
    if type(seed) is not int or seed < 0:
        return np.random.default_rng(seed)
    seq = _SEEDS.get(seed)
    if seq is None or seq.n_children_spawned:  # spawned from: no longer as new
        if len(_SEEDS) >= 1024:
            _SEEDS.clear()
        seq = _SEEDS[seed] = _Seed(seed)
    return np.random.Generator(np.random.PCG64(seq))


def _init_theta(
    program: Program, init: Any, starts: int, rng: np.random.Generator,
    inputs: Mapping[str, Any] | None = None, target: Any = None,
) -> tuple[np.ndarray, optim.Sampler]:  # fmt: skip
    """Unconstrained [starts, P] starts and the sampler used for restarts. Without ``init``:
    the declared values, then jittered starts, of which the odd ones start each parameter
    that shifts, scales or oscillates an input from the data (``ndvm.calibrate.starts``)."""
    P = len(program.param_specs)
    if callable(init):

        def sample(r: np.random.Generator, n: int) -> np.ndarray:
            return program.unconstrain(np.asarray(init(r, (n, P)), dtype=np.float64))

        return sample(rng, starts), sample
    base = program.init_theta()

    scale = np.maximum(1.0, np.abs(base))  # jitter in proportion to each declared init

    def jitter(r: np.random.Generator, n: int) -> np.ndarray:
        z = r.standard_normal((n, P))
        z *= scale
        z += base  # base + scale * z, bitwise
        return z

    if init is None:
        theta = np.empty((starts, P))
        theta[0] = base
        if starts > 1:
            theta[1:] = jitter(rng, starts - 1)
            if inputs:
                place_roles(theta, starts, program_roles(program), inputs, rng, target)
        return theta, jitter
    if isinstance(init, Mapping):
        unknown = set(init) - set(program.params)
        if unknown:
            raise NdvmError(f"init: unknown parameter(s) {sorted(unknown)}")
        vals = np.array([init.get(s.name, s.init) for s in program.param_specs], dtype=float)
        init = vals
    vals = np.asarray(init, dtype=np.float64)
    if vals.shape == (P,):
        center = program.unconstrain(vals)
        theta = np.tile(center, (starts, 1))
        if starts > 1:
            theta[1:] += np.maximum(1.0, np.abs(center)) * rng.standard_normal((starts - 1, P))
        return theta, jitter
    if vals.shape == (starts, P):
        return program.unconstrain(vals), jitter
    raise NdvmError(f"init must have shape [{P}] or [{starts}, {P}], got {vals.shape}")


def _theta_bound(program: Program, i: int, value: float | None, side: float) -> float:
    """Parameter ``i``'s bound ``value`` (constrained space) in theta space; ``side`` = -inf
    or inf for None or a bound at/after the edge of the parameter's own constraint."""
    if value is None:
        return side
    spec = program.param_specs[i]
    row = np.array([s.init for s in program.param_specs], dtype=np.float64)  # valid elsewhere
    row[i] = value
    try:
        return float(program.unconstrain(row)[i])
    except ValueError:  # outside the constraint's open range: the constraint is the bound
        lo, hi = constraint(spec.constraint).bounds
        if (side < 0 and value <= lo) or (side > 0 and value >= hi):
            return side
        raise NdvmError(
            f"constraints: bound {value} for {spec.name!r} is outside its {spec.constraint} range"
        ) from None


def _projector(program: Program, constraints: Any) -> optim.Project | None:
    """Box bounds {name: (lo, hi)} in the constrained space, enforced by projection on theta."""
    if not constraints:
        return None
    P = len(program.params)
    lo = np.full(P, -np.inf)
    hi = np.full(P, np.inf)
    for name, bounds in dict(constraints).items():
        if name not in program.params:
            raise NdvmError(
                f"constraints: unknown parameter {name!r} (parameters: {', '.join(program.params)})"
            )
        a, b = bounds
        if a is not None and b is not None and not a <= b:
            raise NdvmError(f"constraints: {name!r} has lower bound {a} > upper bound {b}")
        i = program.params.index(name)
        lo[i] = _theta_bound(program, i, a, -np.inf)
        hi[i] = _theta_bound(program, i, b, np.inf)

    return optim.Box(lo, hi)


def calibrate(
    program: Program | str,
    inputs: Mapping[str, Any] | Any = None,
    target: Any = None,
    *,
    loss: str | Any | Callable[..., Any] = "mse",
    starts: int | None = None,
    steps: int = 200,
    optimizer: str | optim.Optimizer = "auto",
    lr: float = 0.05,
    lr_final: float | None = None,
    init: Any = None,
    seed: int | np.random.Generator = 0,
    constraints: Mapping[str, tuple[float | None, float | None]] | None = None,
    early_stop: float | optim.EarlyStop | None = None,
    backend: str | None = None,
    on_failure: str = "drop",
    callback: Callable[[int, int], None] | None = None,
    engine: str = "auto",
    time_limit: float | None = None,
    polish: int | None = None,
    diagnostics: bool = True,
    warn: bool = True,
    sigma: Any = None,
    absolute_sigma: bool = False,
    fixed: Mapping[str, float] | None = None,
    nan_policy: str = "raise",
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
    if engine not in ("auto", "numpy", "native"):
        raise NdvmError(f"engine must be 'auto', 'numpy' or 'native', got {engine!r}")
    if on_failure not in ("drop", "restart"):
        raise NdvmError(f"on_failure must be 'drop' or 'restart', got {on_failure!r}")
    default_starts = starts is None  # adaptive starts (waves) at any data size
    starts = DEFAULT_STARTS if starts is None else starts
    if starts < 1 or steps < 0:
        raise NdvmError("calibrate needs starts >= 1 and steps >= 0")
    inputs, target, sigma = user_data(program, inputs, target, sigma, nan_policy)
    program = _program(program, inputs, backend)
    rng = _rng(seed)
    theta0, sampler = _init_theta(program, init, starts, rng, inputs, target)
    pinned, constraints, theta0, sampler = _pin(program, fixed, constraints, theta0, sampler)
    prepared, objective, extra_names, loss_name = _objective(program, loss, inputs, target)
    if sigma is not None:
        prepared, objective = _weighted(prepared, sigma)
    if prepared is not None and prepared.extra0:
        theta0 = np.concatenate([theta0, np.tile(prepared.extra0, (starts, 1))], axis=1)
        base_sampler = sampler

        def sampler(r: np.random.Generator, n: int) -> np.ndarray:
            return np.concatenate([base_sampler(r, n), np.tile(prepared.extra0, (n, 1))], axis=1)

    if isinstance(early_stop, (int, float)):
        early_stop = optim.EarlyStop(rtol=float(early_stop))
    control = optim.Control(on_failure=on_failure, sampler=sampler, early_stop=early_stop,
                            project=_projector(program, constraints), rng=rng,
                            callback=callback, time_limit=time_limit)  # fmt: skip
    tgt = getattr(prepared, "target", None)
    if tgt is not None and tgt.ndim == 2 and tgt.shape[0] != starts:
        raise NdvmError(f"a per-start target has one row per start: {starts}, got {tgt.shape[0]}")
    opt, auto = _optimizer(optimizer, prepared, on_failure, lr, lr_final, sigma)
    native = _native(prepared, opt, control) if engine in ("auto", "native") else None
    if engine == "native" and native is None:
        raise NdvmError(f"backend {program.backend!r} has no in-runtime optimizer for this fit")
    trace = waves.minimize(
        native or opt, prepared, objective, theta0, steps, control, diagnostics, default_starts
    )
    nit = trace.history.shape[0] - 1
    n_polish = (POLISH_STARTS if auto else 0) if polish is None else int(polish)
    if n_polish > 0:
        trace, extra_it = _polish(trace, objective, prepared, control, n_polish)
        nit += extra_it
    name = "adam+lbfgs-polish" if n_polish > 0 and auto else opt.name
    meta = dict(nit=nit, optimizer=name, loss_name=loss_name, inputs=inputs, target=target,
                absolute_sigma=bool(absolute_sigma), fixed=pinned)  # fmt: skip
    return build(
        program, trace, extra_names, prepared, objective, meta, control.project, diagnostics, warn
    )


def _fixed(program: Program, fixed: Mapping[str, float] | None) -> dict[str, float]:
    """``fixed`` checked: known parameter names, finite numbers inside each constraint."""
    out: dict[str, float] = {}
    for name, value in dict(fixed or {}).items():
        if name not in program.params:
            raise NdvmError(
                f"fixed: unknown parameter {name!r} (parameters: {', '.join(program.params)})"
            )
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise NdvmError(f"fixed: {name!r} must be a number, got {value!r}") from None
        if not np.isfinite(v):
            raise NdvmError(f"fixed: {name!r} must be finite, got {v}")
        i = program.params.index(name)
        _theta_bound(program, i, v, 0.0)  # inside the parameter's constraint
        out[name] = v
    return out


def _pin(
    program: Program, fixed: Any, constraints: Any, theta0: np.ndarray, sampler: optim.Sampler
) -> tuple[dict[str, float], Any, np.ndarray, optim.Sampler]:
    """(the checked ``fixed``, the box bounds with each pinned parameter's equal bounds, the
    starts and restarts with the pinned parameters at their values (theta space))."""
    pinned = _fixed(program, fixed)
    if not pinned:
        return pinned, constraints, theta0, sampler
    box = {**dict(constraints or {}), **{k: (v, v) for k, v in pinned.items()}}
    cols = [program.params.index(k) for k in pinned]
    vals = [_theta_bound(program, i, pinned[program.params[i]], 0.0) for i in cols]

    def pin(th: np.ndarray) -> np.ndarray:
        th[:, cols] = vals
        return th

    def sample(r: np.random.Generator, n: int) -> np.ndarray:
        return pin(sampler(r, n))

    return pinned, box, pin(theta0), sample


def _optimizer(
    optimizer: Any, prepared: Any, on_failure: str, lr: float, lr_final: float | None, sigma: Any
) -> tuple[optim.Optimizer, bool]:
    """(the optimizer, whether it is auto's Adam + polish): "auto" is Levenberg–Marquardt for
    a sum of squares against a target (unless restarts are asked for), else Adam."""
    auto = optimizer == "auto"
    least_squares = prepared is not None and prep_lm_ok(prepared)
    if auto and least_squares and on_failure == "drop":  # restarts: the Adam path
        optimizer, auto = "lm", False
    opt = LM() if optimizer == "lm" else optim.make_optimizer(
        "adam" if auto else optimizer, lr, lr_final
    )
    if sigma is not None and not isinstance(opt, LM):
        raise NdvmError("sigma= weights a least-squares fit: use loss='mse' with optimizer "
                        "'auto' or 'lm'")  # fmt: skip
    return opt, auto


def _weighted(prepared: Any, sigma: Any) -> tuple[Any, Any]:
    """The least-squares loss with residuals divided by ``sigma`` (one per target entry)."""
    if prepared is None or prepared.kind != "mse" or prepared.target is None:
        raise NdvmError("sigma= needs loss='mse' and a target")
    n = prepared.target.shape[-1] if prepared.target.ndim else 1
    try:
        given = np.asarray(sigma, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise NdvmError(f"sigma must be numeric: {exc}") from None
    if given.ndim > 1 or given.size not in (1, n):
        raise NdvmError(f"sigma has shape {given.shape}; give one number per target entry "
                        f"({n}) or one number")  # fmt: skip
    sig = np.broadcast_to(given.reshape(-1), (n,)).copy()
    if not (np.isfinite(sig).all() and (sig > 0).all()):
        raise NdvmError("sigma must be finite and > 0 for every target entry")
    prepared = replace(prepared, residual_weight=1.0 / sig)
    return prepared, ProgramObjective(prepared)


def _program(program: Program | str, inputs: Mapping[str, Any], backend: str | None) -> Program:
    if isinstance(program, str):
        return compile_program(program, inputs=tuple(inputs), backend=backend)
    if backend is not None:
        return program.with_options(backend=registry.get(backend).name)
    return program


def _objective(
    program: Program, loss: Any, inputs: Mapping[str, Any], target: Any
) -> tuple[Any, Any, tuple[str, ...], str]:
    """(prepared or None, objective, loss-owned extra names, loss name) for ``loss``."""
    lossobj = get_loss(loss)
    if hasattr(lossobj, "prepare"):
        prepared = lossobj.prepare(program, inputs, target)
        return prepared, ProgramObjective(prepared), tuple(lossobj.extra_names), lossobj.name
    objective = TorchObjective(program, inputs, target, lossobj)
    return None, objective, (), getattr(lossobj, "__name__", "callable")


def _polish(
    trace: optim.Trace, objective: Any, prepared: Any, control: optim.Control, k: int
) -> tuple[optim.Trace, int]:
    """L-BFGS from the best iterate of the ``k`` best finite starts (all, for per-start
    targets); a start keeps the polished point only where it lowered the loss."""
    finite = np.flatnonzero(np.isfinite(trace.best_loss))
    if finite.size == 0:
        return trace, 0
    per_lane = prepared is not None and prepared.per_lane
    rows = finite if per_lane else finite[np.argsort(trace.best_loss[finite])[:k]]
    sub = optim.Control(project=control.project, rng=control.rng)
    obj = lane_objective(objective, prepared, rows)
    lbfgs = optim.LBFGS()
    if prepared is not None and per_lane:
        prepared = replace(prepared, target=prepared.target[rows])
    runner = _native(prepared, lbfgs, sub) or lbfgs  # in the runtime where the backend can
    out = runner.minimize(obj, trace.best_theta[rows], POLISH_ITERATIONS, sub)
    gain = np.isfinite(out.best_loss) & (out.best_loss < trace.best_loss[rows])
    best_theta = trace.best_theta.copy()
    best_loss = trace.best_loss.copy()
    best_theta[rows[gain]] = out.best_theta[gain]
    best_loss[rows[gain]] = out.best_loss[gain]
    polished = optim.Trace(
        trace.theta,
        best_theta,
        best_loss,
        trace.history,
        trace.state,
        trace.reasons,
        trace.restarts,
        trace.evaluations + out.evaluations,
    )
    return polished, int(out.history.shape[0] - 1)


def _native(prepared: Any, opt: optim.Optimizer, control: optim.Control) -> Any:
    """The backend's in-runtime optimizer for this built-in loss, when it has one (else None)."""
    if prepared is None or control.on_failure != "drop":
        return None
    backend = registry.get(prepared.model.backend)
    if not native.supports(backend, prepared, opt):
        return None
    return native.NativeOptimizer(backend, opt, prepared)
