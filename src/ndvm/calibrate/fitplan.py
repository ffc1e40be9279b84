"""A prepared calibration (``Plan``): what a fit's data and settings fix, made once, run per
program.

``calibrate(program, inputs, target, ...)`` is ``plan(program, inputs, target, ...)`` (the
data checked — a DataFrame's columns, NaN policy —, a built-in loss's target and weight,
``sigma``'s weights, the optimizer, the target's scale; the inputs laid out for the runtime
per program input names, on first use) then ``Plan.run(program, init, seed,
time_limit)``: the program-dependent part — the starts, pinned parameters and box bounds, the
loss bound to the program, the optimizer's run (in the runtime where the backend has one), the
polish and the ``Calibration``. A caller that fits many programs to the same data with the
same settings (co-search's worker: ``Task.plan``) makes the plan once and runs it per program;
each run gives the ``Calibration`` that ``calibrate`` gives for that program.

What a plan prepares once applies to a built-in loss (mse, gaussian_nll, value); a ``Loss``
object of the caller's or a callable (torch) loss is prepared per run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from ndvm.api import Program
from ndvm.api import compile as compile_program
from ndvm.backends import registry
from ndvm.backends.inputs import prepared as laid_out
from ndvm.calibrate import native, optim, waves
from ndvm.calibrate.lm import LM
from ndvm.calibrate.losses import loss_data
from ndvm.calibrate.native import prep_lm_ok
from ndvm.calibrate.objective import ProgramObjective, TorchObjective
from ndvm.calibrate.result import Calibration, build, lane_objective, target_scale
from ndvm.calibrate.theta import init_theta, pin, projector, seeded
from ndvm.errors import NdvmError
from ndvm.frozen import frozen

POLISH_STARTS = 8  # optimizer="auto" with Adam: L-BFGS polishes this many best starts
POLISH_ITERATIONS = 200


@frozen
class Plan:
    """A calibration's data and settings, checked and prepared (``ndvm.calibrate.fitplan``).

    inputs / target: the data as ``calibrate`` fits them (NaN policy applied); loss: the loss
    object and its name; data: a built-in loss's data part, weighted by ``sigma`` (None: a
    loss prepared per run); opt / auto: the optimizer and whether it is
    ``optimizer="auto"``'s Adam (None when a per-run loss decides it); settings: the rest of
    ``calibrate``'s keywords; layouts: the inputs checked and laid out for the runtime, per
    program input names (``backends.inputs.prepared``), made by the second run with those
    names."""

    inputs: dict[str, Any]
    target: Any
    sigma: Any
    loss: Any
    loss_name: str
    data: Any
    opt: optim.Optimizer | None
    auto: bool
    starts: int
    default_starts: bool
    steps: int
    settings: dict[str, Any]
    layouts: dict[tuple[str, ...], dict[Any, Any]]  # input names -> their layout's memo
    scale: float | None = None  # the data part's ``result.target_scale``

    def __post_init__(self) -> None:
        if self.data is not None:
            self.__dict__["scale"] = target_scale(self.data)

    def run(
        self, program: Program | str, init: Any = None, seed: int | np.random.Generator = 0,
        time_limit: float | None = None, stacklevel: int = 2,
    ) -> Calibration:  # fmt: skip
        """Fit ``program`` (``calibrate``'s ``init``, ``seed`` and ``time_limit``); a
        ``ConvergenceWarning`` points at the ``stacklevel``-th frame up (2: the caller's)."""
        s = self.settings
        program = _program(program, self.inputs, s["backend"])
        rng = seeded(seed)
        theta0, sampler = init_theta(program, init, self.starts, rng, self.inputs, self.target)
        pinned, box, theta0, sampler = pin(program, s["fixed"], s["constraints"], theta0, sampler)
        prepared, objective, extra_names, opt, auto = self._loss(program)
        if prepared is not None and prepared.extra0:
            theta0 = np.concatenate([theta0, np.tile(prepared.extra0, (self.starts, 1))], axis=1)
            base_sampler = sampler

            def sampler(r: np.random.Generator, n: int) -> np.ndarray:
                extra = np.tile(prepared.extra0, (n, 1))
                return np.concatenate([base_sampler(r, n), extra], axis=1)

        control = optim.Control(on_failure=s["on_failure"], sampler=sampler,
                                early_stop=s["early_stop"], project=projector(program, box),
                                rng=rng, callback=s["callback"],
                                time_limit=time_limit)  # fmt: skip
        engine, diagnostics = s["engine"], s["diagnostics"]
        runner = _native(prepared, opt, control) if engine in ("auto", "native") else None
        if engine == "native" and runner is None:
            raise NdvmError(f"backend {program.backend!r} has no in-runtime optimizer for this fit")
        trace = waves.minimize(runner or opt, prepared, objective, theta0, self.steps, control,
                               diagnostics, self.default_starts)  # fmt: skip
        nit = trace.history.shape[0] - 1
        polish = s["polish"]
        n_polish = (POLISH_STARTS if auto else 0) if polish is None else int(polish)
        if n_polish > 0:
            trace, extra_it = _polish(trace, objective, prepared, control, n_polish)
            nit += extra_it
        name = "adam+lbfgs-polish" if n_polish > 0 and auto else opt.name
        meta = dict(nit=nit, optimizer=name, loss_name=self.loss_name, inputs=self.inputs,
                    target=self.target, absolute_sigma=s["absolute_sigma"],
                    fixed=pinned)  # fmt: skip
        return build(program, trace, extra_names, prepared, objective, meta, control.project,
                     diagnostics, s["warn"], stacklevel + 1, self.scale)  # fmt: skip

    def _loss(self, program: Program) -> tuple[Any, Any, tuple[str, ...], Any, bool]:
        """(prepared, objective, loss-owned extra names, optimizer, auto) for ``program``: the
        plan's data part bound to it (its inputs laid out once per input names, from the
        second run with those names), else the loss prepared for it (``loss_settings``)."""
        if self.data is None:
            return loss_settings(program, self.loss, self.inputs, self.target, self.sigma,
                                 self.starts, self.settings)  # fmt: skip
        names, inputs = program.inputs, self.data.model_inputs
        if names in self.layouts:  # a second run for these names on: laid out once, kept
            inputs = laid_out(self.layouts[names], names, inputs)
        else:  # a plan run once costs no layout (the runtime checks the inputs it is given)
            self.layouts[names] = {}
        prepared = self.data.bind(program, inputs)
        extra = tuple(self.loss.extra_names)
        return prepared, ProgramObjective(prepared), extra, self.opt, self.auto


def loss_settings(
    program: Program | None, lossobj: Any, inputs: dict[str, Any], target: Any, sigma: Any,
    starts: int, s: dict[str, Any],
) -> tuple[Any, Any, tuple[str, ...], Any, bool]:  # fmt: skip
    """(prepared, objective, extra names, optimizer, auto) of the loss ``lossobj`` on
    ``inputs`` and ``target``: for ``program``, or with no program the built-in loss's data
    part (``losses.loss_data``; prepared None for any other loss). ``sigma`` weights the
    residuals; a per-start target is checked against the ``starts``; ``s``: the plan's
    settings (the optimizer's)."""
    if program is None:
        prepared = loss_data(lossobj, inputs, target)
        if prepared is None:
            return None, None, (), None, False
        objective, extra = None, tuple(lossobj.extra_names)
    else:
        prepared, objective, extra = _objective(program, lossobj, inputs, target)
    if sigma is not None:
        prepared = _weighted(prepared, sigma)
        objective = None if program is None else ProgramObjective(prepared)
    tgt = getattr(prepared, "target", None)
    if tgt is not None and tgt.ndim == 2 and tgt.shape[0] != starts:
        raise NdvmError(f"a per-start target has one row per start: {starts}, got {tgt.shape[0]}")
    opt, auto = _optimizer(s["optimizer"], prepared, s["on_failure"], s["lr"], s["lr_final"],
                           sigma)  # fmt: skip
    return prepared, objective, extra, opt, auto


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


def _weighted(prepared: Any, sigma: Any) -> Any:
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
    return replace(prepared, residual_weight=1.0 / sig)


def _program(program: Program | str, inputs: Mapping[str, Any], backend: str | None) -> Program:
    if isinstance(program, str):
        return compile_program(program, inputs=tuple(inputs), backend=backend)
    if backend is not None:
        return program.with_options(backend=registry.get(backend).name)
    return program


def _objective(
    program: Program, lossobj: Any, inputs: Mapping[str, Any], target: Any
) -> tuple[Any, Any, tuple[str, ...]]:
    """(prepared or None, objective, loss-owned extra names) of ``lossobj`` for ``program``."""
    if hasattr(lossobj, "prepare"):
        prepared = lossobj.prepare(program, inputs, target)
        return prepared, ProgramObjective(prepared), tuple(lossobj.extra_names)
    return None, TorchObjective(program, inputs, target, lossobj), ()


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

