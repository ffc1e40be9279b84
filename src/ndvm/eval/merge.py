"""Joining the lane groups of a divergent branch: merge per lane, or keep groups apart.

Two values merge when they share a structure (numbers with numbers, vectors of one shape,
pairs whose parts merge, identical symbols/closures...); the merged value selects each lane
from the arm that owned it, on the tape too. Values that do not merge stay separate groups
and the machine continues each group on its own.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ndvm.eval.runtime import Runtime
from ndvm.payload import Arr, BoolArr, mask_for
from ndvm.values import Pair

_MAX_MERGE_DEPTH = 200


class _NoMerge(Exception):
    pass


def _lane_shape(x: Any) -> tuple[str, tuple[int, ...]] | None:
    t = type(x)
    if t is float:
        return ("num", ())
    if t is Arr:
        return ("num", x.struct)
    if t is bool or t is BoolArr:
        return ("bool", ())
    return None


def merge_values(rt: Runtime, items: list[tuple[np.ndarray, Any]], depth: int = 0) -> Any:
    """Merge ``(mask, value)`` arms into one value, or raise ``_NoMerge``."""
    first = items[0][1]
    if all(v is first for _, v in items):
        return first
    if depth > _MAX_MERGE_DEPTH:
        raise _NoMerge
    kinds = {_lane_shape(v) for _, v in items}
    if len(kinds) == 1 and None not in kinds:
        kind, struct = kinds.pop()  # type: ignore[misc]
        if kind == "bool":
            vals = [np.asarray(v.val if type(v) is BoolArr else v) for _, v in items]
            out = vals[-1]
            for (m, _), v in zip(items[-2::-1], vals[-2::-1]):
                out = np.where(m, v, out)
            return BoolArr(np.asarray(out))
        return _merge_numbers(rt, items, len(struct))
    if all(type(v) is Pair for _, v in items):
        car = merge_values(rt, [(m, v.car) for m, v in items], depth + 1)
        cdr = merge_values(rt, [(m, v.cdr) for m, v in items], depth + 1)
        rt.alloc()
        return Pair(car, cdr)
    raise _NoMerge


def _merge_numbers(rt: Runtime, items: list[tuple[np.ndarray, Any]], rank: int) -> Any:
    values = [v for _, v in items]
    if all(type(v) is float for v in values) and len({v for v in values}) == 1:
        return values[0]
    payloads = tuple(np.asarray(v.val if type(v) is Arr else v, dtype=np.float64) for v in values)
    masks = [mask_for(m, 2 + rank) for m, _ in items]
    out = payloads[-1]
    for m, p in zip(masks[-2::-1], payloads[-2::-1]):
        out = np.where(m, p, out)
    out = np.asarray(out, dtype=np.float64)
    if out.ndim < 2:
        out = out.reshape((1, 1) + out.shape)

    def vjp(g: np.ndarray, ans: np.ndarray, *xs: Any) -> tuple[Any, ...]:
        return tuple(np.where(m, g, 0.0) for m in masks)

    return rt.tape_op(vjp, tuple(values), payloads, out, rank)


def merge_groups(
    rt: Runtime, results: list[tuple[np.ndarray, Any]]
) -> list[tuple[np.ndarray, Any]]:
    """Partition delivered ``(mask, value)`` results into mergeable groups and merge each."""
    groups: list[list[tuple[np.ndarray, Any]]] = []
    for item in results:
        for g in groups:
            try:
                merge_values(rt, [g[0], item])
            except _NoMerge:
                continue
            g.append(item)
            break
        else:
            groups.append([item])
    out = []
    for g in groups:
        mask = g[0][0]
        for m, _ in g[1:]:
            mask = mask | m
        out.append((mask, g[0][1] if len(g) == 1 else merge_values(rt, g)))
    return out
