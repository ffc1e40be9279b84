"""The native backend: the C++ runtime (``ndvm._core``) behind the Backend protocol.

This is the only module that imports ``ndvm._core``. A ``CompiledProgram`` is lowered once
into flat tables (the direct-threaded form: a node table, child lists, a constant pool and a
string table) and cached; each evaluation passes theta and the inputs as NumPy arrays, and the
core runs with the GIL released on a per-thread context whose arenas are reused.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np

from ndvm.backends.base import RunResult
from ndvm.backends.inputs import classify_inputs
from ndvm.backends.native_lower import NativeUnsupported, lower_tables
from ndvm.errors import (
    DeadlineExceeded,
    DepthLimitExceeded,
    NdvmError,
    ProgramError,
    ShapeError,
    StepLimitExceeded,
)
from ndvm.eval.export import Budget, error_message, object_grid
from ndvm.eval.limits import Limits
from ndvm.lang.ir import CompiledProgram
from ndvm.payload import Arr, BoolArr
from ndvm.prims import PRIMS
from ndvm.values import NIL, VOID, Pair, String, Symbol

try:
    from ndvm import _core
except ImportError:  # pragma: no cover - exercised only without the extension
    _core = None
try:
    from ndvm import _core32
except ImportError:  # pragma: no cover - a build without the float32 core
    _core32 = None

AVAILABLE = _core is not None


def _module(dtype: str) -> Any:
    """The core computing in ``dtype``: ``_core`` (float64) or ``_core32`` (float32)."""
    if dtype == "float32":
        if _core32 is None:
            raise NdvmError("the native float32 core is not built (ndvm._core32 is missing)")
        return _core32
    return _core


_KINDS = {"scalar": 0, "data": 1, "const": 2}


class _Lowered:
    """Flat tables of one program plus the core's Program built from them (per dtype)."""

    __slots__ = ("args", "strings", "constraints", "_cores", "__weakref__")

    def __init__(self, args: tuple[Any, ...], strings: list[str], constraints: Any) -> None:
        self.args = args
        self.strings = strings
        self.constraints = constraints
        self._cores: dict[str, Any] = {}

    @property
    def core(self) -> Any:
        """The float64 core's Program."""
        return self.program("float64")

    def program(self, dtype: str) -> Any:
        """The Program of the core computing in ``dtype`` (built on first use)."""
        prog = self._cores.get(dtype)
        if prog is None:
            prog = self._cores[dtype] = _module(dtype).Program(*self.args)
        return prog


def lower(program: CompiledProgram) -> _Lowered:
    """Lower the resolved IR into the core's flat tables (``native_lower``)."""
    return _Lowered(*lower_tables(program))


# -- exported values -> reference-style Python values ----------------------------------------


class _ProcedureView:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _decode(export: tuple[np.ndarray, list[np.ndarray]], strings: list[str]) -> list[Any]:
    """Rebuild the exported values as the reference backend's value objects."""
    enc, arrays = export
    rows = enc.tolist()
    built: dict[int, Any] = {}
    out: list[Any] = []
    pos = 0

    def one() -> Any:
        # Iterative preorder decoding; pairs are filled once both children are known.
        nonlocal pos
        root: list[Any] = []
        work: list[tuple[Any, int]] = [(root, 0)]
        while work:
            holder, slot = work.pop()
            tag, a, b, c = rows[pos]
            idx = pos
            pos += 1
            value = _leaf(tag, a, b, c, arrays, strings, built)
            if tag == 5:
                value = Pair(None, None)
                built[idx] = value
                work.append((value, 2))
                work.append((value, 1))
            _place(holder, slot, value)
        return root[0]

    while pos < len(rows):
        out.append(one())
    return out


def _place(holder: Any, slot: int, value: Any) -> None:
    if slot == 0:
        holder.append(value)
    elif slot == 1:
        holder.car = value
    else:
        holder.cdr = value


def _leaf(
    tag: int, a: int, b: int, c: int, arrays: list[np.ndarray], strings: list[str], built: dict
) -> Any:
    if tag == 0:
        arr = np.asarray(arrays[a])
        if b == 0 and arr.shape == (1, 1) and not c:
            return float(arr[0, 0])
        return Arr(arr, 0 if c else -1, b)
    if tag == 1:
        return bool(a)
    if tag == 2:
        return BoolArr(np.asarray(arrays[a]) != 0)
    if tag == 3:
        return NIL
    if tag == 4:
        return VOID
    if tag == 6:
        return Symbol(strings[a])
    if tag == 7:
        return String(strings[a])
    if tag == 8:
        return _ProcedureView(f"#<procedure {strings[a]}>")
    if tag == 9:
        return _ProcedureView(f"#<primitive {PRIMS.by_code(a).name}>")
    if tag == 11:
        return built[a]
    return None


# ErrClass (cpp/include/ndvm/interp.hpp) -> the error class of a lane error
_ERROR_CLASSES: tuple[type[NdvmError], ...] = (
    ProgramError,
    ShapeError,
    StepLimitExceeded,
    DepthLimitExceeded,
    DeadlineExceeded,
)


def _errors(raw: list[Any], strings: list[str]) -> list[tuple[np.ndarray, NdvmError]]:
    out = []
    for mask, cls, message, line, column, lanes, error_prim, irritants in raw:
        if error_prim:
            message = error_message(tuple(_decode(irritants, strings)))
        exc = _ERROR_CLASSES[cls](message, line or None, column if line else None)
        exc.lanes = tuple(lanes)
        out.append((np.asarray(mask, dtype=bool), exc))
    return out


def _object_grid(
    groups: list[Any], strings: list[str], B: int, Ng: int, budget: Budget
) -> np.ndarray:
    decoded = [(np.asarray(m, dtype=bool), _decode(export, strings)[0]) for m, export in groups]
    return object_grid(decoded, B, Ng, budget)


def _input_arrays(
    program: CompiledProgram, inputs: Mapping[str, Any]
) -> tuple[list[int], list[np.ndarray], int | None]:
    kinds, n_data = classify_inputs(program.inputs, inputs, program.input_positions)
    arrays = [
        np.ascontiguousarray(a, dtype=np.float64).reshape(-1 if k != "const" else a.shape)
        for k, a in kinds
    ]
    return [_KINDS[k] for k, _ in kinds], arrays, n_data


def _limit_args(limits: Limits, dialect: str | None) -> tuple[int, int, int, float, bool]:
    return (
        int(limits.max_steps),
        int(limits.max_heap),
        int(limits.max_depth),
        float(limits.deadline or 0.0),
        dialect == "dmci",
    )


def _reason_text(code: int, errors: list[tuple[np.ndarray, NdvmError]]) -> str | None:
    """A lane's failure reason as ``calibrate.losses.lane_reasons`` / ``objective`` word it."""
    if code >= 0:
        err = errors[code][1]
        return f"{type(err).__name__}: {err}"
    return {-2: "non-finite loss", -3: "non-finite gradient"}.get(code)


def _adam_args(
    options: Mapping[str, Any],
    lower: np.ndarray | None,
    upper: np.ndarray | None,
    early_stop: tuple[float, float, int] | None,
) -> tuple[Any, ...]:
    """``Context.optimize``'s lr, betas, eps, box and early-stop arguments."""
    b1, b2 = options.get("betas", (0.9, 0.999))
    lo, hi = (
        None if x is None else np.ascontiguousarray(x, dtype=np.float64).reshape(-1)
        for x in (lower, upper)
    )
    rtol, atol, patience = early_stop if early_stop is not None else (0.0, 0.0, 0)
    lr, eps = float(options.get("lr", 0.05)), float(options.get("eps", 1e-8))
    stop = early_stop is not None
    return lr, float(b1), float(b2), eps, lo, hi, stop, float(rtol), float(atol), int(patience)


def _target_args(lr_schedule: np.ndarray | None, target: np.ndarray | None) -> tuple[Any, ...]:
    """``Context.optimize``'s learning-rate schedule and target arguments."""
    sched = None if lr_schedule is None else np.ascontiguousarray(lr_schedule, dtype=np.float64)
    if target is None:
        return sched, None, False
    shape = (-1,) if np.ndim(target) < 2 else np.shape(target)
    return (
        sched,
        np.ascontiguousarray(target, dtype=np.float64).reshape(shape),
        np.ndim(target) == 2,
    )


class NativeBackend:
    name = "native"
    # in-runtime optimizer methods (ndvm.calibrate.native.supports consults this)
    optimize_methods = ("adam",)

    def __init__(self) -> None:
        if _core is None:
            raise NdvmError("the native backend is not built (ndvm._core is missing)")
        self._local = threading.local()
        self._cache: weakref.WeakKeyDictionary[Any, _Lowered] = weakref.WeakKeyDictionary()
        self._by_id: dict[int, tuple[Any, _Lowered]] = {}
        self._lock = threading.Lock()

    def _context(self, dtype: str = "float64") -> Any:
        """This thread's context of the core computing in ``dtype``."""
        name = "ctx32" if dtype == "float32" else "ctx"
        ctx = getattr(self._local, name, None)
        if ctx is None:
            ctx = _module(dtype).Context()
            setattr(self._local, name, ctx)
        return ctx

    def lowered(self, program: CompiledProgram) -> _Lowered:
        """The cached lowered form of ``program`` (built on first use)."""
        hit = self._by_id.get(id(program))
        if hit is not None and hit[0] is program:
            return hit[1]
        low = lower(program)
        with self._lock:
            if len(self._by_id) > 4096:
                self._by_id.clear()
            self._by_id[id(program)] = (program, low)
        return low

    def prepare(self, program: CompiledProgram) -> None:
        """Lower ``program`` now; raises ``NativeUnsupported`` for what the core cannot run."""
        self.lowered(program)

    def run(
        self,
        program: CompiledProgram,
        theta: np.ndarray,
        inputs: Mapping[str, Any],
        *,
        grad: bool,
        cotangent: np.ndarray | None,
        limits: Limits,
        dialect: str | None,
        dtype: str = "float64",
    ) -> RunResult:
        """One evaluation; ``dtype="float32"`` computes in the float32 core (``_core32``)."""
        low = self.lowered(program)
        theta = np.ascontiguousarray(theta, dtype=np.float64)
        B = theta.shape[0]
        kinds, arrays, n_data = _input_arrays(program, inputs)
        Ng = n_data or 1
        ctx = self._context(dtype)
        t0 = time.monotonic()
        raw = ctx.run(
            low.program(dtype),
            theta,
            low.constraints,
            kinds,
            arrays,
            Ng,
            False,
            *_limit_args(limits, dialect),
        )
        errors = _errors(raw["errors"], low.strings)
        status = raw["status"]
        if raw["numeric"]:
            result = RunResult(raw["value"], status, errors, numeric=True)
        else:
            budget = Budget(limits, t0)
            value = _object_grid(raw["groups"], low.strings, B, Ng, budget)
            result = RunResult(value, status, errors, numeric=False)
        result.data_lanes = n_data is not None
        result.stats = {"steps": raw["steps"], "tape": raw["tape"], "heap": raw["heap"]}
        if grad:
            if not result.numeric:
                raise NdvmError(
                    "value_and_grad needs a numeric result (a number, vector or matrix)"
                )
            ct = None
            if cotangent is not None:
                ct = np.ascontiguousarray(
                    np.broadcast_to(np.asarray(cotangent, dtype=np.float64), result.value.shape)
                )
            result.grad = ctx.gradient(ct, len(program.params))
        return result

    def optimize(
        self,
        program: CompiledProgram,
        theta0: np.ndarray,
        inputs: Mapping[str, Any],
        *,
        weight: float,
        method: str,
        steps: int,
        options: Mapping[str, Any],
        lower: np.ndarray | None,
        upper: np.ndarray | None,
        early_stop: tuple[float, float, int] | None,
        limits: Limits,
        dialect: str | None,
        lr_schedule: np.ndarray | None = None,
        target: np.ndarray | None = None,
        time_limit: float | None = None,
    ) -> dict[str, Any]:
        """Adam over the lanes of ``theta0`` inside the runtime (``ndvm.calibrate.native``).

        The loss of lane b is ``weight * sum(value[b, ...])``, or with ``target`` ([N] shared
        or [B, N] per lane) ``weight * sum((value[b] - target[b])**2)``; the semantics are those
        of ``ndvm.calibrate.optim.Adam`` with ``on_failure="drop"``. ``lr_schedule[t-1]`` is a
        lane's learning rate at its t-th step; ``time_limit`` (seconds) fails the lanes still
        running when it passes. Only ``method="adam"`` (``optimize_methods``). Raises
        ``NativeUnsupported`` when the value grid does not have N numbers per lane.
        """
        if method not in self.optimize_methods:
            raise NativeUnsupported(f"native backend: no in-runtime {method!r} optimizer")
        low = self.lowered(program)
        theta0 = np.ascontiguousarray(theta0, dtype=np.float64)
        kinds, arrays, n_data = _input_arrays(program, inputs)
        raw = self._context().optimize(
            low.core,
            theta0,
            low.constraints,
            kinds,
            arrays,
            n_data or 1,
            *_limit_args(limits, dialect),
            float(weight),
            int(steps),
            *_adam_args(options, lower, upper, early_stop),
            *_target_args(lr_schedule, target),
            float(time_limit or 0.0),
        )
        if raw["target_mismatch"]:
            raise NativeUnsupported("native optimizer: value grid does not match the target")
        if raw["non_numeric"]:
            raise NdvmError("value_and_grad needs a numeric result (a number, vector or matrix)")
        errors = _errors(raw["errors"], low.strings)
        return {
            "theta": raw["theta"],
            "best_theta": raw["best_theta"],
            "best_loss": raw["best_loss"],
            "history": raw["history"],
            "state": raw["state"],
            "reasons": [
                _reason_text(int(c), errors)
                if c != -4
                else f"time limit of {time_limit:g} s reached after {raw['stopped_at']} steps"
                for c in raw["reason"]
            ],
            "evaluations": int(raw["evaluations"]),
        }
