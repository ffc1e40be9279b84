"""The reference machine's vector and matrix construction, indexing and shapes.

Shapes are structural and lane-uniform; the numbers inside are payloads, so construction
(``vec``, ``mat``) and indexing (``ref``, ``vector->list``) tape a stack or gather operation
(``rt.tape_op``) and gradients flow to each element. Indices must agree across active lanes
(``rt.index``). Declarations: ``ndvm.prims.vectors``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ndvm.errors import ShapeError
from ndvm.eval.lists import elements
from ndvm.eval.runtime import REFERENCE, type_name
from ndvm.payload import Arr
from ndvm.values import NIL, Pair


def _num_payload(rt: Any, x: Any, who: str) -> Any:
    if type(x) is float:
        return x
    if type(x) is Arr and x.rank == 0:
        return x.val
    raise rt.error(f"{who}: vector elements must be numbers, got {type_name(x)}")


def _stack(rt: Any, items: list[Any], who: str, axis_rank: int) -> Any:
    """Stack numbers (axis_rank 0) into a vector, or vectors (1) into a matrix (rows)."""
    if not items:
        return Arr(np.zeros((1, 1, 0)), -1, 1)
    payloads: list[Any] = []
    arrays: list[np.ndarray] = []
    for part in rt.chunks(len(items)):
        for k in part:
            x = items[k]
            p = _num_payload(rt, x, who) if axis_rank == 0 else x.val
            payloads.append(p)
            arrays.append(np.asarray(p, dtype=np.float64).reshape(np.shape(p) or (1, 1)))
    lane = np.broadcast_shapes(*(a.shape[:2] for a in arrays))
    out = np.stack([np.broadcast_to(a, lane + a.shape[2:]) for a in arrays], axis=-1 - axis_rank)
    rt.alloc()

    def vjp(g: np.ndarray, ans: np.ndarray, *xs: Any) -> tuple[Any, ...]:
        if axis_rank == 0:
            return tuple(g[..., i] for i in range(len(xs)))
        return tuple(g[..., i, :] for i in range(len(xs)))

    return rt.tape_op(vjp, tuple(items), tuple(payloads), out, axis_rank + 1)


def _vec(rt: Any, *xs: Any) -> Any:
    return _stack(rt, list(xs), "vec", 0)


def _row(rt: Any, x: Any) -> Any:
    if type(x) is Arr and x.rank == 1:
        return x
    if type(x) is Pair or x is NIL:
        return _vec(rt, *elements(rt, x, "mat"))
    raise rt.error(f"mat: each row must be a vector or a list of numbers, got {type_name(x)}")


def _mat(rt: Any, *rows: Any) -> Any:
    vecs = [_row(rt, r) for r in rows]
    if not vecs:
        raise rt.error("mat: expected at least one row")
    n = vecs[0].struct
    for v in vecs[1:]:
        if v.struct != n:
            raise rt.error(f"mat: rows of lengths {n[0]} and {v.struct[0]} differ", ShapeError)
    return _stack(rt, vecs, "mat", 1)


def _size(rt: Any, x: Any, who: str) -> int:
    n = rt.index(x, who)
    if n < 0 or n > 10_000_000:
        raise rt.error(f"{who}: size {n} out of range")
    return n


_MAX_FILLED = 100_000_000  # elements of zeros/ones/eye (the native core's bound)


def _filled(rt: Any, value: float, dims: tuple[Any, ...], who: str) -> Arr:
    shape = tuple(_size(rt, d, who) for d in dims)
    if int(np.prod(shape, dtype=np.float64)) > _MAX_FILLED:
        raise rt.error(f"{who}: too large")
    rt.payload_alloc(int(np.prod(shape)))
    rt.alloc()
    return Arr(np.full((1, 1, *shape), value), -1, len(shape))


def _zeros(rt: Any, n: Any, m: Any = None) -> Arr:
    return _filled(rt, 0.0, (n,) if m is None else (n, m), "zeros")


def _ones(rt: Any, n: Any, m: Any = None) -> Arr:
    return _filled(rt, 1.0, (n,) if m is None else (n, m), "ones")


def _eye(rt: Any, n: Any) -> Arr:
    size = _size(rt, n, "eye")
    if size * size > _MAX_FILLED:
        raise rt.error("eye: too large")
    rt.payload_alloc(size * size)
    rt.alloc()
    return Arr(np.eye(size).reshape(1, 1, size, size), -1, 2)


def _make_vector(rt: Any, n: Any, fill: Any = 0.0) -> Any:
    """``size`` copies of ``fill`` in one array operation (its gradient: their sum)."""
    size = _size(rt, n, "make-vector")
    if size == 0:
        return _vec(rt)
    p = np.asarray(_num_payload(rt, fill, "vec"), dtype=np.float64)
    lane = np.shape(p) or (1, 1)
    rt.payload_alloc(int(np.prod(lane)) * size)
    out = np.repeat(p.reshape(lane)[..., None], size, axis=-1)
    rt.alloc()

    def vjp(g: np.ndarray, ans: np.ndarray, x: Any) -> tuple[Any, ...]:
        return (g.sum(axis=-1),)

    return rt.tape_op(vjp, (fill,), (p,), out, 1, counted=True)


def _check_index(rt: Any, i: int, n: int, who: str) -> None:
    if not 0 <= i < n:
        raise rt.error(f"{who}: index {i} out of range for length {n}")


def _gather(rt: Any, v: Arr, key: tuple[int, ...], rank: int) -> Any:
    out = v.val[(Ellipsis, *key)] if rank == 0 or len(key) == 2 else v.val[..., key[0], :]

    def vjp(g: np.ndarray, ans: np.ndarray, x: np.ndarray) -> tuple[Any, ...]:
        ct = np.zeros(np.broadcast_shapes(x.shape, x.shape[:2] + x.shape[2:]))
        ct = np.zeros(g.shape[:2] + x.shape[2:])
        if len(key) == 2 or v.rank == 1:
            ct[(Ellipsis, *key)] = g
        else:
            ct[..., key[0], :] = g
        return (ct,)

    return rt.tape_op(vjp, (v,), (v.val,), np.array(out, dtype=np.float64), rank)


def _ref(rt: Any, v: Any, i: Any, j: Any = None) -> Any:
    if type(v) is not Arr or v.rank == 0:
        raise rt.error(f"ref: expected a vector or matrix, got {type_name(v)}")
    ii = rt.index(i, "ref")
    _check_index(rt, ii, v.struct[0], "ref")
    if v.rank == 1:
        if j is not None:
            raise rt.error("ref: a vector takes one index")
        return _gather(rt, v, (ii,), 0)
    if j is None:
        return _gather(rt, v, (ii,), 1)
    jj = rt.index(j, "ref")
    _check_index(rt, jj, v.struct[1], "ref")
    return _gather(rt, v, (ii, jj), 0)


def _shape_of(rt: Any, v: Any, rank: int, who: str) -> tuple[int, ...]:
    if type(v) is not Arr or v.rank != rank:
        noun = "vector" if rank == 1 else "matrix"
        raise rt.error(f"{who}: expected a {noun}, got {type_name(v)}")
    return v.struct


def _vlen(rt: Any, v: Any) -> float:
    return float(_shape_of(rt, v, 1, "vlen")[0])


def _rows(rt: Any, m: Any) -> float:
    return float(_shape_of(rt, m, 2, "rows")[0])


def _cols(rt: Any, m: Any) -> float:
    return float(_shape_of(rt, m, 2, "cols")[1])


def _vector_to_list(rt: Any, v: Any) -> Any:
    n = _shape_of(rt, v, 1, "vector->list")[0]
    rt.alloc(n)
    items: list[Any] = []
    for part in rt.chunks(n):
        items += [_gather(rt, v, (i,), 0) for i in part]
    return rt.build(items)


def _list_to_vector(rt: Any, x: Any) -> Any:
    return _vec(rt, *elements(rt, x, "list->vector"))


for _name, _fn in {
    "vec": _vec,
    "mat": _mat,
    "make-vector": _make_vector,
    "zeros": _zeros,
    "ones": _ones,
    "eye": _eye,
    "ref": _ref,
    "vlen": _vlen,
    "rows": _rows,
    "cols": _cols,
    "vector->list": _vector_to_list,
    "list->vector": _list_to_vector,
}.items():
    REFERENCE.register(_name, _fn)
