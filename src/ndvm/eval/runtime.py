"""Reference runtime services: procedures, environments, numeric dispatch with taping.

``Runtime`` is created once per evaluation. It owns the tape, the heap-cell counter, the
current lane mask (set by the machine as threads switch) and the error log. Primitive
implementations receive it as their first argument.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ndvm.errors import HeapLimitExceeded, ProgramError, ShapeError
from ndvm.lang import ir
from ndvm.payload import (
    MAX_PAYLOAD_DOUBLES,
    PAYLOAD_LIMIT_MESSAGE,
    Arr,
    BoolArr,
    uniform_under,
)
from ndvm.prims import PRIMS, ImplTable, Kind, Prim, Shape
from ndvm.prims.numeric import dmci_rule
from ndvm.tape import Tape
from ndvm.values import NIL, VOID, Pair, String, Symbol

CLOCK_EVERY = 1 << 22  # payload elements computed between two deadline checks
LIST_LIMIT = 10_000_000  # elements of a list a primitive walks
BULK_CHUNK = 4096  # elements a bulk primitive handles between two deadline checks
INT64_MAX = 2**63 - 1  # indices beyond int64 are clamped to its bounds, as in the core

# The reference machine's structural primitives, registered by ``ndvm.eval.lists`` and
# ``ndvm.eval.vectors`` (imported by the machine, ``ndvm.eval.treewalk``).
REFERENCE = ImplTable(PRIMS, "reference")


class Env:
    """A frame of the lexical environment (``Local(depth, index)`` walks ``parent``)."""

    __slots__ = ("vals", "parent")

    def __init__(self, vals: list[Any], parent: Env | None) -> None:
        self.vals = vals
        self.parent = parent


class Closure:
    __slots__ = ("lam", "env")

    def __init__(self, lam: ir.Lambda, env: Env | None) -> None:
        self.lam = lam
        self.env = env

    def __repr__(self) -> str:
        return f"#<procedure {self.lam.name}>"


class PrimProc:
    """A primitive used as a first-class value."""

    __slots__ = ("prim",)

    def __init__(self, prim: Prim) -> None:
        self.prim = prim

    def __repr__(self) -> str:
        return f"#<primitive {self.prim.name}>"


class Unassigned:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


class Diverge(Exception):
    """A structural argument differs across active lanes: the machine splits the lanes."""

    def __init__(self, groups: list[np.ndarray]) -> None:
        super().__init__("lanes diverge")
        self.groups = groups


def constant(out: np.ndarray, rank: int) -> Any:
    """An untaped result: a lane-uniform scalar becomes a plain float."""
    if rank == 0 and out.shape == (1, 1):
        return float(out[0, 0])
    return Arr(out, -1, rank)


def type_name(x: Any) -> str:
    t = type(x)
    if t is float or (t is Arr and x.rank == 0):
        return "a number"
    if t is Arr:
        return "a vector" if x.rank == 1 else "a matrix"
    if t is bool or t is BoolArr:
        return "a boolean"
    if t is Pair:
        return "a pair"
    if x is NIL:
        return "the empty list"
    if t is Symbol:
        return f"the symbol {x.name}"
    if t is String:
        return "a string"
    if t is Closure or t is PrimProc:
        return "a procedure"
    if x is VOID:
        return "void"
    return t.__name__


class Runtime:
    """Per-evaluation state shared by the machine and the primitive implementations."""

    def __init__(self, B: int, Ng: int, max_heap: int, dialect: str | None) -> None:
        self.B = B
        self.Ng = Ng
        self.tape = Tape()
        self.mask: np.ndarray | None = None
        self.heap = 0
        self.payload = 0  # float64 elements of the payloads computed so far
        self._clock_at = CLOCK_EVERY  # payload elements at which the deadline is checked
        self.max_heap = max_heap
        self.node: Any = None  # IR node being applied, for error positions
        self.dialect = dialect
        self._prim_procs = {p.code: PrimProc(p) for p in PRIMS}

    # -- errors -------------------------------------------------------------------------
    def error(self, msg: str, cls: type[ProgramError] = ProgramError) -> ProgramError:
        node = self.node
        line = getattr(node, "line", None) or None
        col = getattr(node, "column", None) if line else None
        return cls(msg, line, col)

    def alloc(self, n: int = 1) -> None:
        self.heap += n
        if self.heap > self.max_heap:
            raise HeapLimitExceeded(f"heap limit of {self.max_heap} cells exceeded")

    def payload_alloc(self, n: int) -> None:
        """Account ``n`` float64 payload elements (before allocating them when possible)."""
        self.payload += n
        if self.payload >= self._clock_at:
            self._payload_checks()

    def _payload_checks(self) -> None:
        """The payload cap, and the deadline during big numeric work between steps."""
        if self.payload > MAX_PAYLOAD_DOUBLES:
            raise HeapLimitExceeded(PAYLOAD_LIMIT_MESSAGE)
        self._clock_at = min(self.payload + CLOCK_EVERY, MAX_PAYLOAD_DOUBLES + 1)
        self.tick()

    def _apply(self, ref: Any, payloads: list[Any]) -> Any:
        try:
            out = ref(*payloads)
        except MemoryError:
            raise HeapLimitExceeded(PAYLOAD_LIMIT_MESSAGE) from None
        self.payload += out.size if type(out) is np.ndarray else 1
        if self.payload >= self._clock_at:
            self._payload_checks()
        return out

    def spend(self, n: int) -> None:
        """Charge ``n`` steps of work done inside a primitive (the machine replaces this)."""

    def tick(self) -> None:
        """Check the deadline now (the machine replaces this)."""

    def chunks(self, n: int) -> Iterator[range]:
        """``range(n)`` in chunks of ``BULK_CHUNK``, the deadline checked before each chunk
        after the first: a bulk primitive (``iota``, ``apply``, ``make-vector``, list
        building) stops within a chunk of its deadline, as the native core's does."""
        for lo in range(0, n, BULK_CHUNK):
            if lo:
                self.tick()
            yield range(lo, min(n, lo + BULK_CHUNK))

    def build(self, items: Sequence[Any], tail: Any = NIL) -> Any:
        """The list of ``items`` ending in ``tail`` (cells counted by the caller)."""
        out = tail
        n = len(items)
        for part in self.chunks(n):
            for k in part:
                out = Pair(items[n - 1 - k], out)
        return out

    def walk(self, lst: Any, who: str, cap: bool = True) -> tuple[list[Any], Any]:
        """The elements of the pairs of ``lst`` and the tail after them. No steps are charged
        (each caller charges what the native core charges); the deadline is checked as the
        walk goes."""
        out: list[Any] = []
        x = lst
        while type(x) is Pair:
            out.append(x.car)
            x = x.cdr
            if not len(out) & (BULK_CHUNK - 1):
                if cap and len(out) > LIST_LIMIT:
                    raise self.error(f"{who}: list too long")
                self.tick()
        return out, x

    def prim_proc(self, code: int) -> PrimProc:
        return self._prim_procs[code]

    # -- lane-uniform structural arguments ----------------------------------------------
    def uniform(self, x: Any, what: str) -> float:
        """A number that must be the same on every active lane (an index, a size)."""
        if type(x) is float:
            return x
        if type(x) is Arr and x.rank == 0:
            same, value = uniform_under(x.val, self.mask)
            if same:
                return float(value) if value is not None else 0.0
            raise Diverge(self.groups_of(x.val))
        raise self.error(f"{what}: expected a number, got {type_name(x)}")

    def index(self, x: Any, what: str) -> int:
        v = self.uniform(x, what)
        if not float(v).is_integer():
            raise self.error(f"{what}: expected an integer, got {v!r}")
        if abs(v) > 9.0e18:  # as the core: beyond int64, an index is its nearest bound
            return INT64_MAX if v > 0 else -INT64_MAX - 1
        return int(v)

    def groups_of(self, val: np.ndarray) -> list[np.ndarray]:
        full = np.broadcast_to(val, (self.B, self.Ng))
        active = np.ones((self.B, self.Ng), bool) if self.mask is None else self.mask
        groups = []
        keys = full[active]
        for key in np.unique(keys[~np.isnan(keys)]) if keys.dtype.kind == "f" else np.unique(keys):
            groups.append(active & (full == key))
        if keys.dtype.kind == "f" and np.isnan(keys).any():
            groups.append(active & np.isnan(full))
        return groups

    # -- numbers ------------------------------------------------------------------------
    def numeric(self, prim: Prim, args: tuple[Any, ...]) -> Any:
        """Apply a NUMERIC or PREDICATE primitive lane-wise, taping it when needed."""
        payloads = []
        ranks = []
        for i, a in enumerate(args):
            t = type(a)
            if t is float:
                payloads.append(a)
                ranks.append(0)
            elif t is Arr:
                payloads.append(a.val)
                ranks.append(a.rank)
            else:
                raise self.error(
                    f"{prim.name}: argument {i + 1} must be a number, got {type_name(a)}"
                )
        ref, vjp = dmci_rule(prim) if self.dialect == "dmci" else (prim.ref, prim.vjp)
        assert ref is not None
        if prim.shape is Shape.CUSTOM:
            return self._custom(prim, args, payloads, ranks, ref, vjp)
        rank = max(ranks) if ranks else 0
        if rank:
            struct = None
            for a in args:
                if type(a) is Arr and a.rank:
                    if struct is None:
                        struct = a.struct
                    elif a.struct != struct:
                        raise self.error(
                            f"{prim.name}: shapes {struct} and {a.struct} differ", ShapeError
                        )
            if prim.shape is Shape.SCALAR:
                raise self.error(f"{prim.name}: expects numbers, got a vector/matrix", ShapeError)
            payloads = [
                p if r == rank or type(p) is float else p.reshape(p.shape + (1,) * rank)
                for p, r in zip(payloads, ranks)
            ]
        out = self._apply(ref, payloads)
        if prim.kind is Kind.PREDICATE:
            if isinstance(out, np.ndarray) and out.ndim:
                return BoolArr(out)
            return bool(out)
        if not isinstance(out, np.ndarray) or out.ndim == 0:
            return float(out)
        if out.dtype != np.float64:
            out = out.astype(np.float64)
        return self._result(prim, vjp, args, payloads, out, rank)

    def _result(
        self,
        prim: Prim,
        vjp: Any,
        args: tuple[Any, ...],
        payloads: list[Any],
        out: np.ndarray,
        rank: int,
    ) -> Arr:
        ins = tuple(a.node if type(a) is Arr else -1 for a in args)
        if max(ins, default=-1) < 0:
            return constant(out, rank)
        shapes = tuple(np.shape(p) for p in payloads)
        node = self.tape.record(vjp, ins, tuple(payloads), out, self.mask, shapes)
        return Arr(out, node, rank)

    def _custom(
        self,
        prim: Prim,
        args: tuple[Any, ...],
        payloads: list[Any],
        ranks: list[int],
        ref: Any,
        vjp: Any,
    ) -> Any:
        want = prim.in_ranks or ()
        structs = []
        for i, r in enumerate(ranks):
            need = want[min(i, len(want) - 1)] if want else r
            if r != need:
                kinds = ("a number", "a vector", "a matrix")
                raise self.error(
                    f"{prim.name}: argument {i + 1} must be {kinds[need]}, got {kinds[r]}",
                    ShapeError,
                )
            structs.append(np.shape(payloads[i])[2:] if r else ())
        assert prim.shape_rule is not None
        try:
            out_struct = prim.shape_rule(*structs)
        except ShapeError as exc:
            raise self.error(exc.message, ShapeError) from None
        payloads = [np.full((1, 1), p) if type(p) is float else p for p in payloads]
        lanes = max(p.shape[0] for p in payloads) * max(p.shape[1] for p in payloads)
        self.payload_alloc(lanes * int(np.prod(out_struct, dtype=np.float64)))
        out = np.asarray(self._apply(ref, payloads), dtype=np.float64)
        return self._result(prim, vjp, args, payloads, out, len(out_struct))

    def tape_op(
        self,
        vjp: Any,
        args: tuple[Any, ...],
        payloads: tuple[Any, ...],
        out: np.ndarray,
        rank: int,
        counted: bool = False,
    ) -> Arr:
        """Record a generic numeric op (stack, gather, merge) defined outside the table;
        ``counted``: its payload was accounted (``payload_alloc``) before it was computed."""
        if not counted:
            self.payload_alloc(out.size)
        ins = tuple(a.node if type(a) is Arr else -1 for a in args)
        if max(ins, default=-1) < 0:
            return constant(out, rank)
        shapes = tuple(np.shape(p) for p in payloads)
        node = self.tape.record(vjp, ins, payloads, out, self.mask, shapes)
        return Arr(out, node, rank)
