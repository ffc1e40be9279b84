"""The export tracer's structural primitives: lists, type tests, vectors/matrices, indexing.

Each implementation takes the tracer (``t``) first and is registered in ``EXPORT`` (the tracer
looks primitives up there by opcode). Indices and sizes must be constants (known at trace
time); a vector built from traced numbers is a traced payload stacked on its last axis.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ndvm.errors import NdvmError
from ndvm.export.values import Arr, Bool, Closure, Prim
from ndvm.prims import PRIMS, ImplTable
from ndvm.prims.structural import CXR_PATHS
from ndvm.values import NIL, VOID, Pair, String, Symbol, from_iterable, iter_list

EXPORT = ImplTable(PRIMS, "export")
_NUM_EQ, _ADD, _MUL = PRIMS.by_name("="), PRIMS.by_name("+"), PRIMS.by_name("*")


def _index(x: Any) -> int:
    if type(x) is Arr or isinstance(x, bool) or not float(x).is_integer():
        raise NdvmError(f"expected a constant integer index, got {x!r}")
    return int(x)


def _cxr(path: str) -> Callable[..., Any]:
    def impl(t: Any, x: Any) -> Any:
        for step in reversed(path):
            if type(x) is not Pair:
                raise NdvmError(f"c{path}r: expected a pair")
            x = x.car if step == "a" else x.cdr
        return x

    return impl


def _and(a: Any, b: Any) -> Any:
    if a is False or b is False:
        return False
    if a is True:
        return b
    if b is True:
        return a
    return Bool(a.val & b.val)


# -- lists ----------------------------------------------------------------------------------
def _append(t: Any, *xs: Any) -> Any:
    return from_iterable([e for x in xs[:-1] for e in iter_list(x)], xs[-1] if xs else NIL)


def _list_tail(t: Any, x: Any, k: Any) -> Any:
    n = _index(k)
    return _cxr("d" * n)(t, x) if n else x


def _is_list(t: Any, x: Any) -> bool:
    while type(x) is Pair:
        x = x.cdr
    return x is NIL


def _iota(t: Any, n: Any, start: Any = 0.0, step: Any = 1.0) -> Any:
    return from_iterable(
        t.numeric(_ADD, [start, t.numeric(_MUL, [float(k), step])]) for k in range(_index(n))
    )


# -- equality -------------------------------------------------------------------------------
def _not(t: Any, x: Any) -> Any:
    return Bool(~x.val) if type(x) is Bool else x is False


def _same(t: Any, a: Any, b: Any, deep: bool) -> Any:
    """eq?/eqv? (deep=False) and equal? (deep=True); numbers compare per lane."""
    nums = (float, Arr)
    if type(a) in nums and type(b) in nums and not (a.struct if type(a) is Arr else ()):
        return t.predicate(_NUM_EQ, [a, b])
    if deep and type(a) is Pair and type(b) is Pair:
        head = _same(t, a.car, b.car, deep)
        return head if head is False else _and(head, _same(t, a.cdr, b.cdr, deep))
    if (type(a) in nums) != (type(b) in nums):
        return False
    if type(a) in nums or Bool in (type(a), type(b)):
        raise NdvmError("equality of vectors or per-lane booleans")
    return a is b or (type(a) is type(b) and a == b and (deep or type(a) is not Pair))


# -- vectors and matrices -------------------------------------------------------------------
def _vec(t: Any, *xs: Any) -> Arr:
    vals = [t.lanes(x) for x in xs]
    if all(t.concrete(x) for x in xs):
        return Arr(np.asarray(vals, dtype=np.float64).reshape(len(vals)), (len(vals),))
    ns = t.ns
    if ns.scalar:
        raise NdvmError("vectors have no closed form for sympy")
    vals = [t._framework(v) for v in vals]
    lane = ns.broadcast_shapes(*(tuple(v.shape) for v in vals))
    return Arr(ns.stack([ns.broadcast_to(v, lane) for v in vals]), (len(vals),))


def _mat(t: Any, *rows: Any) -> Arr:
    vecs = [r if type(r) is Arr else _vec(t, *iter_list(r)) for r in rows]
    width = {v.struct for v in vecs}
    if len(width) != 1 or len(next(iter(width))) != 1:
        raise NdvmError("mat: rows must be vectors of one length")
    if all(t.concrete(v) for v in vecs):
        return Arr(np.stack([v.val for v in vecs]), (len(vecs), vecs[0].struct[0]))
    ns = t.ns
    vals = [t._framework(v.val) for v in vecs]
    lane = ns.broadcast_shapes(*(tuple(v.shape) for v in vals))
    stacked = ns.stack([ns.broadcast_to(v, lane) for v in vals])  # (*lanes, n, m)
    return Arr(ns.swapaxes(stacked, -1, -2), (len(vecs), vecs[0].struct[0]))


def _filled(value: float) -> Callable[..., Arr]:
    def impl(t: Any, n: Any, m: Any = None) -> Arr:
        dims = (_index(n),) if m is None else (_index(n), _index(m))
        return Arr(np.full(dims, value), dims)

    return impl


def _eye(t: Any, n: Any) -> Arr:
    k = _index(n)
    return Arr(np.eye(k), (k, k))


def _ref(t: Any, v: Arr, i: Any, j: Any = None) -> Any:
    if type(v) is not Arr or not v.struct:
        raise NdvmError("ref: expected a vector or matrix")
    ii = _index(i)
    if not 0 <= ii < v.struct[0]:
        raise NdvmError(f"ref: index {ii} out of range")
    if len(v.struct) == 1:
        return Arr(v.val[..., ii], ())
    if j is None:
        return Arr(v.val[..., ii, :], v.struct[1:])
    return Arr(v.val[..., ii, _index(j)], ())


_IMPLS: dict[str, Callable[..., Any]] = {
    "cons": lambda t, a, b: Pair(a, b),
    "list": lambda t, *xs: from_iterable(xs),
    "length": lambda t, x: float(len(list(iter_list(x)))),
    "append": _append,
    "reverse": lambda t, x: from_iterable(reversed(list(iter_list(x)))),
    "list-ref": lambda t, x, k: list(iter_list(x))[_index(k)],
    "list-tail": _list_tail,
    "iota": _iota,
    "null?": lambda t, x: x is NIL,
    "pair?": lambda t, x: type(x) is Pair,
    "list?": _is_list,
    "symbol?": lambda t, x: type(x) is Symbol,
    "string?": lambda t, x: type(x) is String,
    "number?": lambda t, x: type(x) is float or (type(x) is Arr and not x.struct),
    "vector?": lambda t, x: type(x) is Arr and len(x.struct) == 1,
    "matrix?": lambda t, x: type(x) is Arr and len(x.struct) == 2,
    "procedure?": lambda t, x: type(x) in (Closure, Prim),
    "boolean?": lambda t, x: type(x) in (bool, Bool),
    "not": _not,
    "eq?": lambda t, a, b: _same(t, a, b, False),
    "eqv?": lambda t, a, b: _same(t, a, b, False),
    "equal?": lambda t, a, b: _same(t, a, b, True),
    "vec": _vec,
    "mat": _mat,
    "zeros": _filled(0.0),
    "ones": _filled(1.0),
    "eye": _eye,
    "make-vector": lambda t, n, fill=0.0: _vec(t, *([fill] * _index(n))),
    "ref": _ref,
    "vlen": lambda t, v: float(v.struct[0]),
    "rows": lambda t, m: float(m.struct[0]),
    "cols": lambda t, m: float(m.struct[1]),
    "vector->list": lambda t, v: from_iterable(_ref(t, v, float(k)) for k in range(v.struct[0])),
    "list->vector": lambda t, x: _vec(t, *iter_list(x)),
    "void": lambda t, *xs: VOID,
    **{f"c{path}r": _cxr(path) for path in ("a", "d", *CXR_PATHS)},
}
for _name, _fn in _IMPLS.items():
    EXPORT.register(_name, _fn)
