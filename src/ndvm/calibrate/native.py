"""Drop-in dispatch to a backend's in-runtime optimizer (many steps per call, no Python per step).

A backend that defines ``optimize`` (signature below) runs the whole Adam / L-BFGS loop for a
built-in loss in which the loss is a weighted sum of the model's value grid, or of its squared
residual against a target (formed in the runtime: no loss-augmented copy is compiled); this
adapter turns its result into the same ``Trace`` the NumPy optimizers produce. When the runtime
cannot form the residual (the value grid does not have one number per target entry) it falls
back to the NumPy optimizer on the loss-augmented program.

    backend.optimize(program: CompiledProgram, theta0: f64[B, P], inputs: Mapping, *,
                     weight: float, method: "adam" | "lbfgs", steps: int, options: dict,
                     lower: f64[P] | None, upper: f64[P] | None,
                     early_stop: (rtol, atol, patience) | None,
                     limits: Limits, dialect: str | None,
                     lr_schedule: f64[steps] | None, target: f64[N] | f64[B, N] | None,
                     time_limit: float | None, replay: bool) -> dict with
        theta f64[B, P], best_theta f64[B, P], best_loss f64[B], history f64[k+1, B],
        state int8[B] (1 ok, 2 failed, 3 converged), reasons list[str | None], evaluations int,
        and optionally best_grad f64[B, P] (the loss gradient at best_theta), best_sse f64[B]
        (the sum of squared residuals there), which spare the result an evaluation, and fresh
        bool (every array is new to this call and shared with nothing: taken without copies)
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ndvm.calibrate import optim, waves
from ndvm.calibrate.lm import LM
from ndvm.calibrate.losses import Prepared
from ndvm.calibrate.objective import Objective
from ndvm.errors import BackendUnsupported
from ndvm.frozen import frozen


def supports(backend: Any, prepared: Prepared | None, opt: Any) -> bool:
    """True when ``backend`` can run ``opt`` on ``prepared`` in-runtime."""
    if prepared is None or not hasattr(backend, "optimize"):
        return False
    # a learned noise scale (gaussian_nll) needs loss-owned parameters: NumPy path
    if prepared.extra0 or (prepared.kind == "gaussian_nll" and prepared.sigma is None):
        return False
    if isinstance(opt, LM):
        return prep_lm_ok(prepared) and "lm" in getattr(backend, "optimize_methods", ())
    if not isinstance(opt, (optim.Adam, optim.LBFGS)):
        return False
    # a backend may run only some methods in-runtime (e.g. Adam); the rest stay in NumPy
    return opt.name in getattr(backend, "optimize_methods", ("adam", "lbfgs"))


def prep_lm_ok(prepared: Prepared) -> bool:
    """Levenberg–Marquardt applies: a sum of squares (mse) against a target."""
    return prepared.kind == "mse" and prepared.target is not None and prepared.target.ndim >= 1


CHUNK = 25  # steps per runtime call when a callback wants progress
_NO_EXTRA = np.zeros((1, 0))  # no loss-owned parameters (what the runtime's loss has)
_KEYS = ("lr", "betas", "eps", "ftol", "xtol", "gtol", "lambda0", "memory", "c1", "c2", "max_ls")
_OPTIONS: dict[Any, dict[str, Any]] = {}  # optimizer (frozen, hashable) -> the fields read


def _options(inner: Any) -> dict[str, Any]:
    """The optimizer fields the runtime reads (no ``dataclasses.asdict`` deep copy); kept per
    optimizer value (frozen dataclasses: equal settings, one entry)."""
    try:
        found = _OPTIONS.get(inner)
    except TypeError:  # not hashable
        found = None
    if found is None:
        found = {k: getattr(inner, k) for k in _KEYS if hasattr(inner, k)}
        try:
            if len(_OPTIONS) >= 64:
                _OPTIONS.clear()
            _OPTIONS[inner] = found
        except TypeError:
            pass
    return found


class _Run:
    """Per-lane bookkeeping across chunks (the NumPy ``_Book``'s result, filled by calls).

    The first call runs every lane from ``theta``: its arrays are taken as they are; a later
    call (chunks, for a callback) merges into them for the lanes it ran."""

    def __init__(self, theta: np.ndarray, steps: int) -> None:
        self.theta = theta
        self.steps = steps
        self.reasons: list[str | None] = [None] * theta.shape[0]
        self.evaluations = 0
        self.done = 0
        self.calls = 0

    def add(self, lanes: np.ndarray, out: dict[str, Any]) -> int:
        """Merge one call's result for ``lanes``; returns the steps it took."""
        h = np.asarray(out["history"], dtype=np.float64)
        bl = np.asarray(out["best_loss"], dtype=np.float64)
        st = np.asarray(out["state"], dtype=np.int8)
        took = h.shape[0] - 1
        self.calls += 1
        if self.done == 0:
            self._first(out, h, bl, st, took)
        else:
            rows = self.done + h.shape[0]
            if self.history.shape[0] < rows:  # NaN rows for the lanes this call leaves out
                more = self.steps + 1 - self.history.shape[0]
                pad = np.full((more, self.history.shape[1]), np.nan)
                self.history = np.concatenate([self.history, pad])
            self.history[self.done : rows, lanes] = h
            better = np.isfinite(bl) & (bl < self.best_loss[lanes])
            self.best_loss[lanes[better]] = bl[better]
            self.best_theta[lanes[better]] = np.asarray(out["best_theta"])[better]
            self.theta[lanes] = np.asarray(out["theta"])
            self.state[lanes] = st
            if self.best_grad is None or "best_grad" not in out:
                self.best_grad = self.best_sse = None
            else:
                self.best_grad[lanes[better]] = np.asarray(out["best_grad"])[better]
                self.best_sse[lanes[better]] = np.asarray(out["best_sse"])[better]
        codes = st.tolist()
        if optim.FAILED in codes:
            reasons = out["reasons"]
            for i, code in enumerate(codes):
                if code == optim.FAILED:
                    self.reasons[lanes[i]] = reasons[i]
        self.evaluations += int(out["evaluations"])
        self.done += took
        return took

    def _first(self, out: dict[str, Any], h: np.ndarray, bl: np.ndarray, st: np.ndarray,
               took: int) -> None:  # fmt: skip
        """The first call ran every lane from theta0: its arrays are taken as they are (the
        runtime's, owned by this run; copies of what it did not make)."""
        copy = None if out.get("fresh") else True  # fresh: the runtime's arrays, new to the call

        def own(a: Any) -> np.ndarray:
            return np.array(a, dtype=np.float64, copy=copy)

        if optim.all_finite(bl):
            self.best_loss = own(bl)
            self.best_theta = own(out["best_theta"])
        else:
            better = np.isfinite(bl)
            self.best_loss = np.where(better, bl, np.inf)
            self.best_theta = np.where(better[:, None], out["best_theta"], self.theta)
        # a later call (chunks) pads the rows it needs; trace() keeps the rows run
        self.history = own(h) if h is out["history"] else h
        self.theta = own(out["theta"])
        self.state = st if copy is None else st.copy()
        self.jtj, self.why = out.get("jtj"), out.get("why")
        bg, bs = out.get("best_grad"), out.get("best_sse")
        self.best_grad = None if bg is None else own(bg)
        self.best_sse = None if bs is None else own(bs)

    def trace(self, known: bool) -> optim.Trace:
        """The run's Trace; ``known``: its best_grad is the objective's (``_same_loss``)."""
        hist = self.history[: self.done + 1]
        state, best_loss = self.state, self.best_loss
        codes = state.tolist()
        # a frozen lane: its loss stays after its last iterate (one call's history already
        # holds it; a lane left out of later chunks has NaN rows there)
        if self.calls > 1 and optim.CONVERGED in codes:
            cols = np.flatnonzero(state == optim.CONVERGED)
            sub = hist[:, cols]
            fin = np.isfinite(sub)
            last = sub.shape[0] - 1 - np.argmax(fin[::-1], axis=0)
            after = (np.arange(sub.shape[0])[:, None] > last) & fin.any(axis=0)
            hist[:, cols] = np.where(after, sub[last, np.arange(cols.size)], sub)
        if not optim.all_finite(best_loss):
            failed = ~np.isfinite(best_loss)
            state = np.where(failed, optim.FAILED, state).astype(np.int8)
            best_loss = np.where(failed, np.nan, best_loss)
            codes = state.tolist()
        reasons: list[str | None] = [None] * len(codes)
        if optim.FAILED in codes:
            reasons = [r if s == optim.FAILED else None for r, s in zip(self.reasons, codes)]
        return optim.Trace(
            self.theta,
            self.best_theta,
            best_loss,
            hist,
            state,
            reasons,
            np.zeros(self.theta.shape[0], dtype=np.int64),
            self.evaluations,
            self.best_grad if known else None,
            self.best_sse if known else None,
            jtj=getattr(self, "jtj", None),
            why=getattr(self, "why", None),
        )


@frozen
class NativeOptimizer:
    """Runs ``inner``'s algorithm inside the backend runtime; same ``Optimizer`` protocol.

    Without a callback the whole run is one runtime call. With one, the run is split into
    calls of ``CHUNK`` steps over the lanes still running, calling back after each; each call
    starts Adam's moments (and the early-stop patience count) afresh, so a chunked run is not
    bitwise the one-call run. Either way Ctrl-C stops the runtime within about 20 ms of
    evaluation (the core polls Python's signals) and raises ``KeyboardInterrupt``.
    """

    backend: Any
    inner: optim.Adam | optim.LBFGS | LM
    prepared: Prepared
    name: str = "native"

    def minimize(
        self, objective: Objective, theta0: np.ndarray, steps: int, control: optim.Control,
        wave: tuple[int, int, int] | None = None,
    ) -> optim.Trace:  # fmt: skip
        """``inner``'s run in the runtime; ``wave`` (LM on a backend with ``optimize_waves``):
        adaptive starts in the same call (``ndvm.calibrate.waves``: the first wave's starts,
        its iterations, the starts that must agree), the trace then of the first wave's
        starts when it was enough."""
        prep = self.prepared
        schedule = self.inner.schedule(steps) if isinstance(self.inner, optim.Adam) else None
        run = _Run(np.array(theta0, dtype=np.float64), steps)
        lanes = np.arange(theta0.shape[0])
        # one call for LM (its damping would restart per chunk); progress after it
        one_call = control.callback is None or not isinstance(self.inner, optim.Adam)
        chunk = steps if one_call else CHUNK  # LM's damping, L-BFGS's memory: one call
        t0 = time.perf_counter()
        while True:
            n = min(chunk, steps - run.done)
            left = control.time_limit
            if left is not None and left > 0 and run.done:
                left = max(left - (time.perf_counter() - t0), 1e-9)
            tgt = prep.target
            if prep.per_lane and tgt is not None:
                tgt = tgt[lanes]
            sched = None if schedule is None else schedule[run.done : run.done + n]
            theta = run.theta if run.done == 0 else run.theta[lanes]  # the runtime copies it
            try:
                out = self._call(theta, n, sched, tgt, left, control, wave)
            except BackendUnsupported:
                if run.done:
                    raise
                if wave is not None:  # the NumPy engine's waves (two calls)
                    return waves.in_waves(self.inner, objective, theta0, steps, control)
                return self.inner.minimize(objective, theta0, steps, control)
            ran = len(out["state"])
            if wave is not None and ran < run.theta.shape[0]:  # the first wave was enough
                run.theta, run.reasons, lanes = run.theta[:ran], run.reasons[:ran], lanes[:ran]
            took = run.add(lanes, self._shift(out))
            if left is not None and left > 0 and run.done > took:  # the whole fit's limit
                why = f"time limit of {control.time_limit:g} s reached after {run.done} steps"
                for b in lanes:
                    if (run.reasons[b] or "").startswith("time limit of"):
                        run.reasons[b] = why
            if control.callback is not None:
                control.callback(run.done + 1, steps + 1)
            if run.done >= steps or took < n:
                break
            lanes = lanes[run.state[lanes] == optim.OK]
            if lanes.size == 0:
                break
        return run.trace(self._same_loss())

    def _call(self, theta, n, schedule, target, time_limit, control, wave=None):  # type: ignore[no-untyped-def]
        prep = self.prepared
        program = prep.model
        P = len(program.param_specs)
        lower = upper = None
        if control.project is not None:
            lower = control.project(np.full((1, P), -np.inf))[0]
            upper = control.project(np.full((1, P), np.inf))[0]
        es = control.early_stop
        inner = self.inner
        options = dict(_options(inner))
        if isinstance(inner, LM):
            options["residual_weight"] = prep.residual_weight
            if wave is not None:
                options["wave"] = wave
        return self.backend.optimize(
            program.compiled,
            theta,
            prep.model_inputs,
            weight=self._weight(),
            method=self.inner.name,
            steps=n,
            options=options,
            lower=lower,
            upper=upper,
            early_stop=None if es is None else (es.rtol, es.atol, es.patience),
            limits=program.limits,
            dialect=program.dialect,
            replay=program.replay,
            lr_schedule=schedule,
            target=target,
            time_limit=time_limit,
        )

    def _same_loss(self) -> bool:
        """The runtime's gradient is the NumPy objective's, bitwise: the loss weight is the
        objective's cotangent, and its residual is the objective's entry for entry (a target
        ``[N]``; one series per start is formed by the objective in NumPy)."""
        prep = self.prepared
        if float(prep.cotangent(_NO_EXTRA)) != self._weight():
            return False
        return prep.target is None or prep.per_lane or prep.squares

    def _weight(self) -> float:
        """The runtime's loss weight (gaussian_nll with fixed sigma: of the sum of squares)."""
        prep = self.prepared
        if prep.kind == "gaussian_nll":
            assert prep.sigma is not None
            return 0.5 * prep.weight / prep.sigma**2
        return prep.weight

    def _shift(self, out: dict[str, Any]) -> dict[str, Any]:
        """gaussian_nll with fixed sigma: the runtime minimized the weighted sum of squares."""
        prep = self.prepared
        if prep.kind != "gaussian_nll":
            return out
        shift = np.log(prep.sigma) + 0.5 * np.log(2 * np.pi)
        return {
            **out,
            "best_loss": np.asarray(out["best_loss"]) + shift,
            "history": np.asarray(out["history"]) + shift,
        }
