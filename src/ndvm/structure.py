"""``StructList``: the Python type of a list in a structural result.

Every list of an exported result (``Program.eval``/``evaluate`` of a program returning
lists) is a ``StructList``, a ``list`` subclass, so indexing, ``len`` and iteration work as
on lists; sharing is kept (a pair reached twice is the same ``StructList``). What a plain
nested list would do recursively, per path, it does iteratively and per shared node:

- ``repr``/``str``: the one printer (``ndvm.printer``), cut after ``PRINT_LIMIT``
  characters and below ``PRINT_DEPTH`` levels, shared lists labelled (``#0=[...]``, ``#0#``);
- ``==``: structural equality in time linear in the distinct pairs compared;
- pickling and ``copy.deepcopy``: a flat table of nodes, sharing kept;
- ``to_list(limit)``: plain nested lists (shared parts copied per path), a
  ``ResultTooLarge`` error past ``limit`` elements or ``max_depth`` levels.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ndvm.errors import ResultTooLarge
from ndvm.printer import PYTHON, render

PRINT_LIMIT = 10_000  # characters of a printed result before it is cut with "..."
PRINT_DEPTH = 1_000  # levels of a printed result; deeper lists print as [...]
TO_LIST_LIMIT = 1_000_000  # elements ``to_list`` expands by default


class StructList(list):  # type: ignore[type-arg]
    """A list of a structural result (see the module doc)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return render(self, PYTHON, max_chars=PRINT_LIMIT, max_depth=PRINT_DEPTH)

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return equal(self, other)

    def __ne__(self, other: object) -> bool:
        return not equal(self, other)

    __hash__ = None  # type: ignore[assignment]

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return _rebuild, (_table(self),)

    def __copy__(self) -> StructList:
        return StructList(self)

    def to_list(self, limit: int = TO_LIST_LIMIT, max_depth: int | None = None) -> list[Any]:
        """Plain nested Python lists (a tree: shared parts are copied once per path)."""
        return to_list(self, limit, max_depth)


def _is_seq(x: Any) -> bool:
    return isinstance(x, list)


def _leaf_equal(a: Any, b: Any) -> bool:
    if a is b:  # as list equality: an object equals itself (NaN included)
        return True
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.array_equal(a, b)
    if type(a) is bool or type(b) is bool:
        return type(a) is type(b) and a == b
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def equal(a: Any, b: Any) -> bool:
    """Structural equality of two (possibly shared, deeply nested) lists; a pair of lists is
    compared once."""
    stack = [(a, b)]
    seen: set[tuple[int, int]] = set()
    while stack:
        x, y = stack.pop()
        if _is_seq(x) and _is_seq(y):
            key = (id(x), id(y))
            if key in seen or x is y:
                continue
            seen.add(key)
            if len(x) != len(y):
                return False
            stack += zip(x, y)
        elif _is_seq(x) or _is_seq(y) or not _leaf_equal(x, y):
            return False
    return True


def to_list(value: Any, limit: int = TO_LIST_LIMIT, max_depth: int | None = None) -> Any:
    """``value`` with every list copied into plain nested lists, iteratively; more than
    ``limit`` elements (counted per path) or more than ``max_depth`` levels raise
    ``ResultTooLarge``."""
    box: list[Any] = [None]
    stack: list[tuple[Any, list[Any], int, int]] = [(value, box, 0, 0)]
    cells = 0
    while stack:
        x, into, i, depth = stack.pop()
        cells += 1
        if cells > limit:
            raise ResultTooLarge(
                f"the value has more than {limit} elements (shared parts count once per path); "
                "pass a larger limit to to_list"
            )
        if not _is_seq(x):
            into[i] = x
            continue
        if max_depth is not None and depth >= max_depth:
            raise ResultTooLarge(f"the value is nested deeper than {max_depth} levels")
        out: list[Any] = [None] * len(x)
        into[i] = out
        stack += [(item, out, k, depth + 1) for k, item in enumerate(x)]
    return box[0]


def _table(root: list[Any]) -> list[tuple[list[Any], tuple[int, ...]]]:
    """The distinct lists reachable from ``root`` as rows ``(items, positions)``: the items
    at ``positions`` are row numbers of nested lists (row 0 is ``root``)."""
    index = {id(root): 0}
    order = [root]
    rows: list[tuple[list[Any], tuple[int, ...]]] = []
    k = 0
    while k < len(order):
        node = order[k]
        k += 1
        items = list(node)
        refs = []
        for pos, item in enumerate(items):
            if _is_seq(item):
                j = index.get(id(item))
                if j is None:
                    j = index[id(item)] = len(order)
                    order.append(item)
                items[pos] = j
                refs.append(pos)
        rows.append((items, tuple(refs)))
    return rows


def _rebuild(rows: list[tuple[list[Any], tuple[int, ...]]]) -> StructList:
    nodes = [StructList() for _ in rows]
    for node, (items, refs) in zip(nodes, rows):
        items = list(items)
        for pos in refs:
            items[pos] = nodes[items[pos]]
        node.extend(items)
    return nodes[0]
