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
from ndvm.errors import (
    BackendUnsupported,
    DeadlineExceeded,
    DepthLimitExceeded,
    NdvmError,
    ProgramError,
    ShapeError,
    StepLimitExceeded,
)
from ndvm.eval.export import Budget, error_message, object_grid
from ndvm.eval.limits import Limits
from ndvm.lang import ir
from ndvm.lang.ir import CompiledProgram
from ndvm.payload import Arr, BoolArr
from ndvm.prims import PRIMS
from ndvm.prims.constraints import constraint
from ndvm.values import NIL, VOID, Pair, String, Symbol

try:
    from ndvm import _core
except ImportError:  # pragma: no cover - exercised only without the extension
    _core = None

AVAILABLE = _core is not None


class NativeUnsupported(BackendUnsupported):
    """A program the native runtime cannot run (explicit ``backend="native"`` raises it)."""


# Node kinds (cpp/include/ndvm/program.hpp NodeKind) and constant kinds (ConstKind).
_CONST, _LOCAL, _PARAM, _INPUT, _PRIMREF, _IF, _SEQ, _OR = range(8)
_LAMBDA, _LET, _LETREC, _CALL, _PRIMCALL, _ASSERT = range(8, 14)
_C_NUM, _C_BOOL, _C_NIL, _C_VOID, _C_SYM, _C_STR, _C_PAIR = range(7)
_KINDS = {"scalar": 0, "data": 1, "const": 2}


class _Lowered:
    """Flat tables of one program plus the core's Program built from them."""

    __slots__ = ("core", "strings", "constraints", "__weakref__")

    def __init__(self, core: Any, strings: list[str], constraints: np.ndarray) -> None:
        self.core = core
        self.strings = strings
        self.constraints = constraints


class _Tables:
    def __init__(self) -> None:
        self.nodes: list[list[int]] = []
        self.kids: list[int] = []
        self.aux: list[int] = []
        self.consts: list[list[int]] = []
        self.nums: list[float] = []
        self.strings: list[str] = []
        self._interned: dict[str, int] = {}
        self._const_ids: dict[Any, int] = {}

    def string(self, text: str) -> int:
        sid = self._interned.get(text)
        if sid is None:
            sid = self._interned[text] = len(self.strings)
            self.strings.append(text)
        return sid

    def fresh_string(self, text: str) -> int:
        self.strings.append(text)
        return len(self.strings) - 1

    def const(self, value: Any) -> int:
        """Constant-pool index of ``value`` (pairs lowered children first, iteratively)."""
        order: list[Any] = []
        stack = [value]
        while stack:
            v = stack.pop()
            order.append(v)
            if type(v) is Pair:
                stack.append(v.car)
                stack.append(v.cdr)
        index: dict[int, int] = {}
        for v in reversed(order):
            index[id(v)] = self._const_one(v, index)
        return index[id(value)]

    def _const_one(self, v: Any, index: dict[int, int]) -> int:
        t = type(v)
        if t is Pair:
            row = [_C_PAIR, index[id(v.car)], index[id(v.cdr)]]
            num = 0.0
        elif t is bool:
            row, num = [_C_BOOL, int(v), 0], 0.0
        elif t in (float, int):
            row, num = [_C_NUM, 0, 0], float(v)
        elif t is Symbol:
            row, num = [_C_SYM, self.string(v.name), 0], 0.0
        elif t is String:
            row, num = [_C_STR, self.fresh_string(v.text), 0], 0.0
        elif v is NIL:
            row, num = [_C_NIL, 0, 0], 0.0
        elif v is VOID:
            row, num = [_C_VOID, 0, 0], 0.0
        else:
            raise NativeUnsupported(f"native backend: unsupported constant {v!r}")
        self.consts.append(row)
        self.nums.append(num)
        return len(self.consts) - 1


def _node_row(t: _Tables, n: Any) -> tuple[list[int], tuple[Any, ...]]:
    """``[kind, op, a, b, c]`` and the children of IR node ``n``."""
    k = type(n)
    if k is ir.Const:
        return [_CONST, 0, t.const(n.value), 0, 0], ()
    if k is ir.Local:
        return [_LOCAL, 0, n.depth, n.index, t.string(n.name)], ()
    if k is ir.Param:
        return [_PARAM, 0, n.index, 0, 0], ()
    if k is ir.Input:
        return [_INPUT, 0, n.index, 0, 0], ()
    if k is ir.PrimRef:
        return [_PRIMREF, n.code, 0, 0, 0], ()
    if k is ir.If:
        return [_IF, 0, 0, 0, 0], (n.test, n.then, n.orelse)
    if k is ir.Seq:
        return [_SEQ, 0, 0, 0, 0], tuple(n.exprs)
    if k is ir.Or:
        return [_OR, 0, 0, 0, 0], tuple(n.exprs)
    if k is ir.Lambda:
        return [_LAMBDA, 0, n.nreq, int(n.rest), t.string(n.name)], (n.body,)
    if k is ir.Let:
        return [_LET, 0, 0, 0, 0], (*n.inits, n.body)
    if k is ir.Letrec:
        names = list(n.names) or ["?"] * len(n.inits)
        off = len(t.aux)
        t.aux.extend(t.string(s) for s in names)
        return [_LETREC, 0, 0, off, 0], (*n.inits, n.body)
    if k is ir.Call:
        return [_CALL, 0, 0, 0, 0], (n.fn, *n.args)
    if k is ir.PrimCall:
        return [_PRIMCALL, n.code, 0, 0, 0], tuple(n.args)
    if k is ir.Assert:
        return [_ASSERT, 0, 0, 0, t.string(n.text)], (n.expr,)
    raise NativeUnsupported(f"native backend: unsupported IR node {k.__name__}")


def lower(program: CompiledProgram) -> _Lowered:
    """Lower the resolved IR into the core's flat tables (preorder ids, iteratively)."""
    t = _Tables()
    stack: list[tuple[Any, int]] = [(program.body, -1)]
    while stack:
        node, slot = stack.pop()
        nid = len(t.nodes)
        if slot >= 0:
            t.kids[slot] = nid
        row, children = _node_row(t, node)
        off = len(t.kids)
        t.kids.extend([0] * len(children))
        t.nodes.append(
            row + [off, len(children), getattr(node, "line", 0), getattr(node, "column", 0)]
        )
        for i in range(len(children) - 1, -1, -1):
            stack.append((children[i], off + i))
    core = _core.Program(
        np.asarray(t.nodes, dtype=np.int32).reshape(-1, 9),
        np.asarray(t.kids, dtype=np.int32),
        np.asarray(t.aux, dtype=np.int32),
        np.asarray(t.consts, dtype=np.int32).reshape(-1, 3),
        np.asarray(t.nums, dtype=np.float64),
        t.strings,
        0,
        len(program.params),
        len(program.inputs),
    )
    codes = [constraint(s.constraint).code for s in program.params]
    constraints = np.asarray(codes, dtype=np.int32)
    return _Lowered(core, t.strings, constraints)


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

    def _context(self) -> Any:
        ctx = getattr(self._local, "ctx", None)
        if ctx is None:
            ctx = self._local.ctx = _core.Context()
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
    ) -> RunResult:
        low = self.lowered(program)
        theta = np.ascontiguousarray(theta, dtype=np.float64)
        B = theta.shape[0]
        kinds, arrays, n_data = _input_arrays(program, inputs)
        Ng = n_data or 1
        ctx = self._context()
        t0 = time.monotonic()
        raw = ctx.run(
            low.core,
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
        b1, b2 = options.get("betas", (0.9, 0.999))
        box = [
            None if x is None else np.ascontiguousarray(x, dtype=np.float64).reshape(-1)
            for x in (lower, upper)
        ]
        rtol, atol, patience = early_stop if early_stop is not None else (0.0, 0.0, 0)
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
            float(options.get("lr", 0.05)),
            float(b1),
            float(b2),
            float(options.get("eps", 1e-8)),
            box[0],
            box[1],
            early_stop is not None,
            float(rtol),
            float(atol),
            int(patience),
            None if lr_schedule is None else np.ascontiguousarray(lr_schedule, dtype=np.float64),
            None if target is None else np.ascontiguousarray(target, dtype=np.float64).reshape(
                (-1,) if np.ndim(target) < 2 else np.shape(target)
            ),
            target is not None and np.ndim(target) == 2,
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
