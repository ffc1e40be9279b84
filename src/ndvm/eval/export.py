"""Structural results -> plain Python data, within the evaluation's limits.

A structural result (lists, symbols, booleans, procedures) becomes one Python value per lane:
floats, lists (``ndvm.structure.StructList``: bounded printing, sharing-aware equality and
pickling), ``str`` for symbols and strings, NumPy arrays for vectors and matrices. Sharing
is preserved within a lane (a pair reached twice becomes the same Python list), so a result
built from a few shared pairs with exponentially many paths exports in linear time. The work
counts against the limits: every exported element is a cell against ``Limits.max_heap``, and
the deadline of the evaluation holds during the export. Both backends use this module.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ndvm.errors import DeadlineExceeded, HeapLimitExceeded
from ndvm.eval.limits import Limits
from ndvm.payload import Arr, BoolArr
from ndvm.structure import StructList
from ndvm.values import NIL, VOID, Pair, String, Symbol, show

_DOT = object()
_CHECK_EVERY = 4096


class Budget:
    """What a result export may still spend: cells (``max_heap``) and time (the deadline)."""

    __slots__ = ("cells", "limit", "deadline", "t0", "_next")

    def __init__(self, limits: Limits, t0: float) -> None:
        self.cells = 0
        self.limit = int(limits.max_heap)
        self.deadline = limits.deadline
        self.t0 = t0
        self._next = _CHECK_EVERY

    def spend(self, n: int = 1) -> None:
        self.cells += n
        if self.cells > self.limit:
            raise HeapLimitExceeded(
                f"result export: more than {self.limit} cells (Limits.max_heap)"
            )
        if self.cells >= self._next:
            self._next = self.cells + _CHECK_EVERY
            if self.deadline is not None and time.monotonic() - self.t0 > self.deadline:
                raise DeadlineExceeded(
                    f"evaluation exceeded its deadline of {self.deadline} s (result export)"
                )


def to_python(v: Any, b: int, n: int, budget: Budget | None = None) -> Any:
    """The value of lane (b, n) as plain Python data; iterative, sharing-preserving."""
    box: list[Any] = [None]
    memo: dict[int, list[Any]] = {}
    stack: list[tuple[Any, list[Any], int]] = [(v, box, 0)]
    while stack:
        x, into, i = stack.pop()
        if type(x) is not Pair:
            into[i] = _leaf(x, b, n)
            continue
        done = memo.get(id(x))
        if done is not None:
            into[i] = done
            continue
        head = x
        items = []
        while type(x) is Pair:
            items.append(x.car)
            x = x.cdr
        if x is not NIL:
            items += [_DOT, x]
        if budget is not None:
            budget.spend(len(items))
        out = StructList([None] * len(items))
        memo[id(head)] = into[i] = out
        for k, item in enumerate(items):
            if item is _DOT:
                out[k] = "."
            else:
                stack.append((item, out, k))
    return box[0]


def object_grid(
    groups: list[tuple[np.ndarray, Any]], B: int, Ng: int, budget: Budget | None
) -> np.ndarray:
    """The ``[B, Ng]`` object array of per-lane Python values of the final lane groups."""
    value = np.empty((B, Ng), dtype=object)
    for mask, v in groups:
        for b, n in np.argwhere(mask):
            value[b, n] = to_python(v, int(b), int(n), budget)
    return value


def _leaf(v: Any, b: int, n: int) -> Any:
    t = type(v)
    if t is float:
        return v
    if t is Arr:
        val = v.val
        lane = val[b if val.shape[0] > 1 else 0, n if val.shape[1] > 1 else 0]
        return float(lane) if v.rank == 0 else np.array(lane)
    if t is BoolArr:
        val = v.val
        return bool(val[b if val.shape[0] > 1 else 0, n if val.shape[1] > 1 else 0])
    if t is bool:
        return v
    if v is NIL:
        return StructList()
    if t is Symbol:
        return v.name
    if t is String:
        return v.text
    if v is VOID:
        return None
    return repr(v)


def error_message(args: tuple[Any, ...]) -> str:
    """The message of ``(error "text" irritant ...)``: the text, then the printed irritants."""
    parts = []
    for i, a in enumerate(args):
        if i == 0 and type(a) is String:
            parts.append(a.text)
        else:
            parts.append(show_value(a))
    return " ".join(parts) if parts else "error"


def show_value(a: Any, limit: int = 200) -> str:
    """A runtime value printed for a message (lists cut at ``limit`` characters)."""

    def leaf(x: Any) -> str:
        if type(x) is Arr:
            return np.array2string(np.squeeze(x.val), precision=6)
        return repr(x)

    return show(a, limit, leaf)
