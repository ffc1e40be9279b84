"""The native backend: the C++ runtime (``ndvm._core``) behind the Backend protocol.

This is the only module that imports ``ndvm._core``. A ``CompiledProgram`` is lowered once by
the core into its ``Program`` (the direct-threaded form: a node table, child lists, a constant
pool and a string table) and cached; each evaluation passes theta and the inputs as NumPy
arrays, and the core runs with the GIL released on a per-thread context whose arenas are
reused.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from ndvm.backends.base import RunResult
from ndvm.backends.inputs import F64, Prepared, classify_inputs
from ndvm.backends.native_lower import NativeUnsupported, constraint_codes, lower_program
from ndvm.backends.native_options import adam_options, lbfgs_options, lm_options
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
from ndvm.identity import ByIdentity
from ndvm.lang.ir import CompiledProgram, ParamSpecs
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
    """The core's Program of one compiled program (per dtype), its strings and constraints."""

    __slots__ = ("_strings", "_front", "constraints", "core", "_core32")

    def __init__(self, compiled: CompiledProgram) -> None:
        # core: the float64 core's Program (lower_program, its front-end case inline: the
        # path of every compile); the float32 one is lowered on first use; the strings of the
        # front end's tables on first use (only errors and structural values read them)
        front = compiled.front
        if type(front) is _core.FrontProgram:
            self.core = front.program()
            self._front = front
            self._strings: list[str] | None = None
        else:
            self.core, self._strings = lower_program(_core, compiled)
            self._front = None
        specs = compiled.params
        memo = specs.__dict__ if type(specs) is ParamSpecs else {}  # kept with the specs
        codes = memo.get("codes")
        if codes is None:
            codes = memo["codes"] = constraint_codes(compiled)
        self.constraints = codes
        self._core32: Any = None

    @property
    def strings(self) -> list[str]:
        """The Program's strings (the names its errors and symbols print)."""
        if self._strings is None:
            self._strings = self._front.strings
        return self._strings  # type: ignore[return-value]

    def program(self, dtype: str, compiled: CompiledProgram) -> Any:
        """The Program of the core computing in ``dtype`` (the float32 one lowered from
        ``compiled``, the program this was lowered from, on first use)."""
        if dtype != "float32":
            return self.core
        if self._core32 is None:
            self._core32 = lower_program(_module(dtype), compiled)[0]
        return self._core32


def lower(program: CompiledProgram) -> _Lowered:
    """Lower the resolved IR to the core's Program (``native_lower``)."""
    return _Lowered(program)


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
    leaves = _LEAF_BY_CODE

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
            if tag == _PAIR:
                value = Pair(None, None)
                built[idx] = value
                work.append((value, 2))
                work.append((value, 1))
            else:
                value = leaves[tag](a, b, c, arrays, strings, built)
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


def _num(a: int, b: int, c: int, arrays: list[np.ndarray], *_: Any) -> Any:
    arr = np.asarray(arrays[a])
    if b == 0 and arr.shape == (1, 1) and not c:
        return float(arr[0, 0])
    return Arr(arr, 0 if c else -1, b)


# ExportTag name -> (a, b, c, arrays, strings, built) -> value; PAIR is built by _decode
_LEAVES: dict[str, Any] = {
    "NUM": _num,
    "BOOL": lambda a, *_: bool(a),
    "BOOLS": lambda a, b, c, arrays, *_: BoolArr(np.asarray(arrays[a]) != 0),
    "NIL": lambda *_: NIL,
    "VOID": lambda *_: VOID,
    "SYMBOL": lambda a, b, c, arrays, strings, built: Symbol(strings[a]),
    "STRING": lambda a, b, c, arrays, strings, built: String(strings[a]),
    "CLOSURE": lambda a, b, c, arrays, strings, built: _ProcedureView(f"#<procedure {strings[a]}>"),
    "PRIMPROC": lambda a, *_: _ProcedureView(f"#<primitive {PRIMS.by_code(a).name}>"),
    "OTHER": lambda *_: None,
    "SHARED": lambda a, b, c, arrays, strings, built: built[a],
}
if _core is not None:
    _PAIR = _core.ExportTag.PAIR.value
    _LEAF_BY_CODE = {_core.ExportTag[name].value: fn for name, fn in _LEAVES.items()}
else:  # pragma: no cover - without the extension nothing is exported
    _PAIR, _LEAF_BY_CODE = -1, {}


# ErrClass (cpp/include/ndvm/interp.hpp) -> the error class of a lane error
_ERROR_CLASSES: tuple[type[NdvmError], ...] = (
    ProgramError,
    ShapeError,
    StepLimitExceeded,
    DepthLimitExceeded,
    DeadlineExceeded,
)


def _errors(raw: list[Any], low: _Lowered) -> list[tuple[np.ndarray, NdvmError]]:
    """The lane errors of a run (``low``: the program's lowered form, whose strings an
    ``error`` call's irritants are decoded with)."""
    out = []
    for mask, cls, message, line, column, lanes, error_prim, irritants in raw:
        if error_prim:
            message = error_message(tuple(_decode(irritants, low.strings)))
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
    if type(inputs) is Prepared and inputs.names == program.inputs:  # laid out already
        layout = inputs.memo.get("native")
        if layout is None:
            layout = inputs.memo["native"] = (
                [_KINDS[k] for k, _ in inputs.kinds], [a for _, a in inputs.kinds],
                inputs.n_data,
            )  # fmt: skip
        return layout  # type: ignore[no-any-return]
    kinds, n_data = classify_inputs(program.inputs, inputs, program.input_positions)
    # float64 already; a scalar becomes [1], data [N], a constant keeps its shape
    arrays = [np.ascontiguousarray(a) for _, a in kinds]
    return [_KINDS[k] for k, _ in kinds], arrays, n_data


# (Limits, dialect, dtype, client, replay) -> the core's RunOptions; Limits is frozen, and the
# cached objects are never mutated: one RunOptions serves every evaluation under equal limits
_RUN_OPTIONS: dict[tuple[Limits, str | None, str, int, bool], Any] = {}
_RUN_OPTIONS_OF = ByIdentity(64)  # a Limits object -> {key[1:]: RunOptions}: no hash of Limits
# the core's clients of one lowered program: the CEK tree walker and the bytecode VM
# RunResult.stats: the core's counters of a run (docs/native.md)
_STATS = ("steps", "tape", "heap", "replayed", "blocks", "chains", "pairs", "updates")
_STATS_AT = 7  # where they start in the core's Run, whose last fields they are
CLIENTS = {"native": 0, "vm": 1}


def _run_options(
    limits: Limits,
    dialect: str | None,
    dtype: str = "float64",
    client: int = 0,
    replay: bool = True,
) -> Any:
    """The core's ``RunOptions`` for ``limits``, ``dialect``, ``client`` and ``replay``
    (built once, then cached)."""
    mine = _RUN_OPTIONS_OF.get(limits) or _RUN_OPTIONS_OF.put(limits, {})
    key = (limits, dialect, dtype, client, replay)
    opts = mine.get(key[1:])
    if opts is not None:
        return opts
    opts = _RUN_OPTIONS.get(key)
    if opts is None:
        opts = _module(dtype).RunOptions(
            max_steps=int(limits.max_steps),
            max_heap=int(limits.max_heap),
            max_depth=int(limits.max_depth),
            deadline=float(limits.deadline or 0.0),
            dmci=dialect == "dmci",
            replay=replay,
            client=client,
        )
        if len(_RUN_OPTIONS) > 256:
            _RUN_OPTIONS.clear()
        _RUN_OPTIONS[key] = opts
    mine[key[1:]] = opts
    return opts


def _reason_text(code: int, errors: list[tuple[np.ndarray, NdvmError]]) -> str | None:
    """A lane's failure reason as ``calibrate.losses.lane_reasons`` / ``objective`` word it."""
    if code >= 0:
        err = errors[code][1]
        return f"{type(err).__name__}: {err}"
    return _REASONS.get(code)


_REASONS = {-2: "non-finite loss", -3: "non-finite gradient"}


def _reasons(
    codes: list[int], errors: list[tuple[np.ndarray, NdvmError]], time_limit: Any, at: int
) -> list[str | None]:
    """Each lane's failure reason from the core's codes (-1: none, -4: the time limit)."""
    if max(codes, default=-1) == -1 and min(codes, default=-1) == -1:
        return [None] * len(codes)
    return [
        _reason_text(c, errors)
        if c != -4
        else f"time limit of {time_limit:g} s reached after {at} steps"
        for c in codes
    ]


class NativeBackend:
    """The native runtime; ``client`` picks the core's evaluator: ``"native"`` the CEK tree
    walker, ``"vm"`` the bytecode VM (both on the same payloads, tape and lane machinery)."""

    # in-runtime optimizer methods (ndvm.calibrate.native.supports consults this)
    optimize_methods = ("adam", "lm", "lbfgs")
    # its LM runs adaptive starts (ndvm.calibrate.waves) in the same call: options["wave"]
    optimize_waves = True

    def __init__(self, client: str = "native") -> None:
        if _core is None:
            raise NdvmError("the native backend is not built (ndvm._core is missing)")
        if client not in CLIENTS:
            raise NdvmError(f"unknown native client {client!r} (one of: {', '.join(CLIENTS)})")
        self.name = client
        self._client = CLIENTS[client]
        self._local = threading.local()

    def _context(self, dtype: str = "float64") -> Any:
        """This thread's context of the core computing in ``dtype``."""
        name = "ctx32" if dtype == "float32" else "ctx"
        ctx = getattr(self._local, name, None)
        if ctx is None:
            ctx = _module(dtype).Context()
            setattr(self._local, name, ctx)
        return ctx

    def lowered(self, program: CompiledProgram) -> _Lowered:
        """The lowered form of ``program``, built on first use and kept with the program (both
        clients share it; two threads lowering it at once build equal forms, one is kept)."""
        low = program.derived.get("native")
        if low is None:
            low = program.derived.setdefault("native", _Lowered(program))
        return low  # type: ignore[no-any-return]

    # prepare(program): lower ``program`` now (the Backend protocol's hook, run by
    # ``ndvm.compile``); raises ``NativeUnsupported`` for what the core cannot run
    prepare = lowered

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
        replay: bool = True,
    ) -> RunResult:
        """One evaluation; ``dtype="float32"`` computes in the float32 core (``_core32``).

        With ``replay`` the context replays its recorded trace when it applies (same program,
        inputs and limits; every guard holds): the same result bitwise, without the walk."""
        low = self.lowered(program)
        if type(theta) is not np.ndarray or theta.dtype is not F64:
            theta = np.ascontiguousarray(theta, dtype=np.float64)  # (the core reads any layout)
        B = theta.shape[0]
        kinds, arrays, n_data = _input_arrays(program, inputs)
        Ng = n_data or 1
        ctx = self._context(dtype)
        t0 = time.monotonic()
        ct = None
        if grad and cotangent is not None:
            ct = np.ascontiguousarray(cotangent, dtype=np.float64)
        raw = ctx.run(
            low.program(dtype, program),
            theta,
            low.constraints,
            kinds,
            arrays,
            Ng,
            _run_options(limits, dialect, dtype, self._client, replay),
            grad,
            ct,
        )
        errors = _errors(raw.errors, low) if raw.errors else []
        numeric = raw.numeric
        if numeric:
            value = raw.value
        else:
            value = _object_grid(raw.groups, low.strings, B, Ng, Budget(limits, t0))
        if raw.grad_needs_numeric:
            raise NdvmError("value_and_grad needs a numeric result (a number, vector or matrix)")
        stats = dict(zip(_STATS, raw[_STATS_AT:], strict=True))
        return RunResult(value, raw.status, errors, raw.grad, n_data is not None, numeric,
                         stats)  # fmt: skip

    def values(
        self, program: CompiledProgram, theta: np.ndarray, inputs: Prepared, *,
        limits: Limits, dialect: str | None, replay: bool = True,
    ) -> tuple[np.ndarray, bool, list[tuple[np.ndarray, NdvmError]]] | None:  # fmt: skip
        """``run``'s value grid, whether it has data lanes, and its lane errors, for a float64
        evaluation of ``theta [B, P]`` on prepared inputs that gave numbers; None otherwise
        (``run`` then gives the full result: its object values). The evaluation of ``run``,
        without the result's bookkeeping."""
        low = self.lowered(program)
        kinds, arrays, n_data = _input_arrays(program, inputs)
        raw = self._context().run(
            low.program("float64", program), np.ascontiguousarray(theta, dtype=np.float64),
            low.constraints, kinds, arrays, n_data or 1,
            _run_options(limits, dialect, "float64", self._client, replay), False, None,
        )  # fmt: skip
        if not raw.numeric:
            return None
        errors = _errors(raw.errors, low) if raw.errors else []
        return raw.value, n_data is not None, errors

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
        replay: bool = True,
    ) -> dict[str, Any]:
        """Adam over the lanes of ``theta0`` inside the runtime (``ndvm.calibrate.native``).

        The loss of lane b is ``weight * sum(value[b, ...])``, or with ``target`` ([N] shared
        or [B, N] per lane) ``weight * sum((value[b] - target[b])**2)``; the semantics are those
        of ``ndvm.calibrate.optim.Adam`` with ``on_failure="drop"``. ``lr_schedule[t-1]`` is a
        lane's learning rate at its t-th step; ``time_limit`` (seconds) fails the lanes still
        running when it passes. Only ``method="adam"`` (``optimize_methods``). Raises
        ``NativeUnsupported`` when the value grid does not have N numbers per lane. Besides
        ``ndvm.calibrate.native``'s fields it returns best_grad [B, P], the loss gradient at
        best_theta (NaN for a lane without one), and best_sse [B], the unweighted sum there
        (of squared residuals, with a target).
        """
        if method not in self.optimize_methods:
            raise NativeUnsupported(f"native backend: no in-runtime {method!r} optimizer")
        if method == "lm" and target is None:
            raise NativeUnsupported("native backend: Levenberg-Marquardt needs a target")
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
            _run_options(limits, dialect, "float64", self._client, replay),
            adam_options(
                weight, steps, options, (lower, upper), early_stop, lr_schedule, target, time_limit
            ),
        ) if method not in ("lm", "lbfgs") else self._context().optimize(
            low.core, theta0, low.constraints, kinds, arrays, n_data or 1,
            _run_options(limits, dialect, "float64", self._client, replay),
            lm_options(weight, steps, options, (lower, upper), target, time_limit)
            if method == "lm"
            else lbfgs_options(weight, steps, options, (lower, upper), early_stop, target),
        )  # fmt: skip
        if raw["target_mismatch"]:
            raise NativeUnsupported("native optimizer: value grid does not match the target")
        if raw["non_numeric"]:
            raise NdvmError("value_and_grad needs a numeric result (a number, vector or matrix)")
        errors = _errors(raw["errors"], low)
        return {
            "theta": raw["theta"],
            "best_theta": raw["best_theta"],
            "best_loss": raw["best_loss"],
            "best_grad": raw["best_grad"],
            "best_sse": raw["best_sse"],
            "history": raw["history"],
            "state": raw["state"],
            "reasons": _reasons(raw["reason"].tolist(), errors, time_limit, raw["stopped_at"]),
            "evaluations": int(raw["evaluations"]),
            "fresh": True,  # the core's arrays, new to this call
            **({"jtj": raw["jtj"], "why": raw["why"]} if method == "lm" else {}),
        }
