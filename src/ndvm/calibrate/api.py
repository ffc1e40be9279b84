"""``ndvm.calibrate``: fit a program's parameters to data from many starts in one lane batch.

Starts are parameter lanes; each optimizer step is one evaluation of all of them. Built-in losses
run as one-walk objectives (``losses``); a callable loss runs through the torch boundary. When a
backend offers an in-runtime optimizer (``backend.optimize``), built-in losses dispatch to it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ndvm.api import Program
from ndvm.calibrate import optim
from ndvm.calibrate.losses import get_loss
from ndvm.calibrate.objective import ProgramObjective, TorchObjective
from ndvm.errors import NdvmError

STATUS_NAMES = {optim.OK: "ok", optim.CONVERGED: "ok", optim.FAILED: "failed"}


@dataclass(frozen=True)
class Calibration:
    """The result of ``calibrate``: the best start and every start's trajectory.

    params: best lane's parameter values by name (constrained space, plus loss-owned extras such
    as ``sigma``); loss: its loss; theta: its unconstrained vector. history [k+1, starts]: loss
    of every lane at every iterate (NaN after a lane failed). all_params [starts, P'] / all_losses
    [starts]: each lane's best iterate. status: per start "ok" or "failed: <reason>".
    """

    program: Program
    names: tuple[str, ...]
    theta: np.ndarray
    loss: float
    params: dict[str, float]
    history: np.ndarray
    all_theta: np.ndarray
    all_params: np.ndarray
    all_losses: np.ndarray
    status: tuple[str, ...]
    best: int
    restarts: np.ndarray
    evaluations: int
    optimizer: str
    loss_name: str
    inputs: Mapping[str, Any]
    target: Any = None

    @property
    def ok(self) -> bool:
        return bool(np.isfinite(self.loss))

    @property
    def n_failed(self) -> int:
        return sum(s != "ok" for s in self.status)

    def predict(self, inputs: Mapping[str, Any] | None = None, lane: int | None = None) -> Any:
        """The program's value at the best (or given lane's) parameters on ``inputs``."""
        P = len(self.program.params)
        th = self.theta if lane is None else self.all_theta[lane]
        return self.program.eval(th[:P], **dict(self.inputs if inputs is None else inputs))

    def plot(self, path: str | None = None, **kwargs: Any) -> Any:
        """Loss history of every start and (for 1-D data) the fit; needs matplotlib."""
        from ndvm.calibrate.plot import plot_calibration

        return plot_calibration(self, path, **kwargs)

    def summary(self) -> dict[str, Any]:
        """JSON-ready: best params/loss, failures, steps, evaluations."""
        return {
            "loss": float(self.loss),
            "params": {k: float(v) for k, v in self.params.items()},
            "best_start": int(self.best),
            "starts": len(self.status),
            "failed": self.n_failed,
            "steps": int(self.history.shape[0] - 1),
            "evaluations": int(self.evaluations),
            "optimizer": self.optimizer,
            "loss_name": self.loss_name,
            "failures": {i: s for i, s in enumerate(self.status) if s != "ok"},
        }


def _init_theta(
    program: Program, init: Any, starts: int, rng: np.random.Generator
) -> tuple[np.ndarray, optim.Sampler]:
    """Unconstrained [starts, P] starts and the sampler used for restarts."""
    P = len(program.params)
    base = program.init_theta()

    def jitter(r: np.random.Generator, n: int) -> np.ndarray:
        return base + r.standard_normal((n, P))

    if init is None:
        theta = np.tile(base, (starts, 1))
        if starts > 1:
            theta[1:] = jitter(rng, starts - 1)
        return theta, jitter
    if callable(init):

        def sample(r: np.random.Generator, n: int) -> np.ndarray:
            return program.unconstrain(np.asarray(init(r, (n, P)), dtype=np.float64))

        return sample(rng, starts), sample
    if isinstance(init, Mapping):
        unknown = set(init) - set(program.params)
        if unknown:
            raise NdvmError(f"init: unknown parameter(s) {sorted(unknown)}")
        vals = np.array([init.get(s.name, s.init) for s in program.param_specs], dtype=float)
        init = vals
    vals = np.asarray(init, dtype=np.float64)
    if vals.shape == (P,):
        theta = np.tile(program.unconstrain(vals), (starts, 1))
        if starts > 1:
            theta[1:] += rng.standard_normal((starts - 1, P))
        return theta, jitter
    if vals.shape == (starts, P):
        return program.unconstrain(vals), jitter
    raise NdvmError(f"init must have shape [{P}] or [{starts}, {P}], got {vals.shape}")


def _projector(program: Program, constraints: Any) -> optim.Project | None:
    """Box bounds {name: (lo, hi)} in the constrained space, enforced by projection on theta."""
    if not constraints:
        return None
    P = len(program.params)
    lo = np.full(P, -np.inf)
    hi = np.full(P, np.inf)
    for name, (a, b) in dict(constraints).items():
        if name not in program.params:
            raise NdvmError(f"constraints: unknown parameter {name!r}")
        i = program.params.index(name)
        spec = program.param_specs[i]
        one = np.zeros(P)
        if a is not None:
            one[i] = a
            lo[i] = program.unconstrain(one)[i] if spec.constraint != "free" else a
        if b is not None:
            one[i] = b
            hi[i] = program.unconstrain(one)[i] if spec.constraint != "free" else b

    def project(theta: np.ndarray) -> np.ndarray:
        out = theta.copy()
        out[:, :P] = np.clip(theta[:, :P], lo, hi)
        return out

    return project


def calibrate(
    program: Program | str,
    inputs: Mapping[str, Any] | None = None,
    target: Any = None,
    *,
    loss: str | Any | Callable[..., Any] = "mse",
    starts: int = 1,
    steps: int = 50,
    optimizer: str | optim.Optimizer = "adam",
    lr: float = 0.05,
    lr_final: float | None = None,
    init: Any = None,
    seed: int = 0,
    constraints: Mapping[str, tuple[float | None, float | None]] | None = None,
    early_stop: float | optim.EarlyStop | None = None,
    backend: str | None = None,
    on_failure: str = "drop",
    callback: Callable[[int, int], None] | None = None,
    engine: str = "auto",
    time_limit: float | None = None,
) -> Calibration:
    """Fit ``program``'s parameters to ``target`` (or minimize its value) from ``starts`` starts.

    Args:
        program: a compiled Program or source text (inputs are then the keys of ``inputs``).
        inputs: data inputs by name (1-D arrays are data lanes; ``ndvm.const`` for matrices).
        target: observed values (mse / gaussian_nll): ``[N]`` per data lane, or ``[starts, N]``
            one series per start (each start fits its own series, e.g. one cell per lane);
            None for ``loss="value"``.
        loss: "mse", "gaussian_nll" (learned noise; ``GaussianNLL(sigma=..)`` fixes it),
            "value" (the program's output is the loss), or a callable
            ``fn(value: torch.Tensor [B, ...], target: torch.Tensor) -> [B]`` (torch path).
        starts: independent starts, run as parameter lanes of one evaluation per step.
        steps: optimizer steps (L-BFGS: iterations). history has steps + 1 rows.
        optimizer: "adam", "lbfgs", "adam+lbfgs", or an ``optim.Optimizer``.
        lr: Adam learning rate.
        lr_final: if given, Adam's learning rate decays from ``lr`` to ``lr_final`` on a
            cosine over each start's steps.
        init: None (declared inits; further starts jittered by N(0, 1) in theta space), values
            [P] / [starts, P] / {name: value} in the constrained space, or a callable
            ``(rng, shape) -> values``, which also draws restarts.
        seed: seeds the start jitter and restarts.
        constraints: {name: (lo, hi)} box bounds (constrained space), kept by projection.
        early_stop: rtol or ``optim.EarlyStop``: freeze lanes whose loss stopped improving.
        backend: override the program's backend.
        on_failure: "drop" (freeze failed lanes) or "restart" (re-draw them, at most 3 times).
        callback: called as ``callback(iterate, total)`` after every iterate (progress bars;
            an in-runtime optimizer calls it once at the end).
        engine: "auto" (the backend's in-runtime optimizer when it has one for this loss,
            optimizer and on_failure="drop"; else NumPy), "numpy", or "native" (required).
        time_limit: seconds for the whole fit (Adam): when it passes, the starts still running
            fail with reason "time limit ..." and keep their best iterate so far; no single
            evaluation outlives it.
    """
    import ndvm

    if engine not in ("auto", "numpy", "native"):
        raise NdvmError(f"engine must be 'auto', 'numpy' or 'native', got {engine!r}")
    if on_failure not in ("drop", "restart"):
        raise NdvmError(f"on_failure must be 'drop' or 'restart', got {on_failure!r}")
    if starts < 1 or steps < 0:
        raise NdvmError("calibrate needs starts >= 1 and steps >= 0")
    inputs = dict(inputs or {})
    if isinstance(program, str):
        program = ndvm.compile(program, inputs=tuple(inputs), backend=backend)
    elif backend is not None:
        from ndvm.backends import registry

        program = program.with_options(backend=registry.get(backend).name)
    rng = np.random.default_rng(seed)
    theta0, sampler = _init_theta(program, init, starts, rng)
    lossobj = get_loss(loss)
    if hasattr(lossobj, "prepare"):
        prepared = lossobj.prepare(program, inputs, target)
        objective: Any = ProgramObjective(prepared)
        extra_names = tuple(lossobj.extra_names)
        if prepared.extra0:
            theta0 = np.concatenate([theta0, np.tile(prepared.extra0, (starts, 1))], axis=1)
            base_sampler = sampler

            def sampler(r: np.random.Generator, n: int) -> np.ndarray:
                return np.concatenate(
                    [base_sampler(r, n), np.tile(prepared.extra0, (n, 1))], axis=1
                )

        loss_name = lossobj.name
    else:
        prepared = None
        objective = TorchObjective(program, inputs, target, lossobj)
        extra_names = ()
        loss_name = getattr(lossobj, "__name__", "callable")
    if isinstance(early_stop, (int, float)):
        early_stop = optim.EarlyStop(rtol=float(early_stop))
    control = optim.Control(
        on_failure=on_failure,
        sampler=sampler,
        project=_projector(program, constraints),
        early_stop=early_stop,
        rng=rng,
        callback=callback,
        time_limit=time_limit,
    )
    tgt = getattr(prepared, "target", None)
    if tgt is not None and tgt.ndim == 2 and tgt.shape[0] != starts:
        raise NdvmError(f"a per-start target has one row per start: {starts}, got {tgt.shape[0]}")
    opt = optim.make_optimizer(optimizer, lr, lr_final)
    native = _native(prepared, opt, control) if engine in ("auto", "native") else None
    if engine == "native" and native is None:
        raise NdvmError(f"backend {program.backend!r} has no in-runtime optimizer for this fit")
    trace = (native or opt).minimize(objective, theta0, steps, control)
    return _result(program, trace, extra_names, prepared, opt, loss_name, inputs, target)


def _native(prepared: Any, opt: optim.Optimizer, control: optim.Control) -> Any:
    """The backend's in-runtime optimizer for this built-in loss, when it has one (else None)."""
    if prepared is None or control.on_failure != "drop":
        return None
    from ndvm.backends import registry
    from ndvm.calibrate import native

    backend = registry.get(prepared.model.backend)
    if not native.supports(backend, prepared, opt):
        return None
    return native.NativeOptimizer(backend, opt, prepared)


def _result(
    program: Program,
    trace: optim.Trace,
    extra_names: tuple[str, ...],
    prepared: Any,
    opt: optim.Optimizer,
    loss_name: str,
    inputs: Mapping[str, Any],
    target: Any,
) -> Calibration:
    P = len(program.params)
    losses = trace.best_loss
    best = int(np.nanargmin(losses)) if np.isfinite(losses).any() else 0
    values = program.constrain(trace.best_theta[:, :P])
    if extra_names and prepared is not None:
        values = np.concatenate([values, prepared.constrain_extra(trace.best_theta[:, P:])], 1)
    names = tuple(program.params) + extra_names
    status = tuple(
        STATUS_NAMES.get(int(s), "failed") if s != optim.FAILED else f"failed: {r or 'unknown'}"
        for s, r in zip(trace.state, trace.reasons)
    )
    return Calibration(
        program=program,
        names=names,
        theta=trace.best_theta[best].copy(),
        loss=float(losses[best]),
        params={n: float(v) for n, v in zip(names, values[best])},
        history=trace.history,
        all_theta=trace.best_theta,
        all_params=values,
        all_losses=losses,
        status=status,
        best=best,
        restarts=trace.restarts,
        evaluations=trace.evaluations,
        optimizer=opt.name,
        loss_name=loss_name,
        inputs=inputs,
        target=target,
    )
