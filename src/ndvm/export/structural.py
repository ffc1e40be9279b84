"""Structural primitives at trace time: lists, type tests, vector/matrix construction, indexing.

Indices and sizes must be constants (known at trace time); a vector built from traced numbers
is a traced payload stacked on its last axis.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ndvm.errors import NdvmError
from ndvm.export.tracer import Arr, Bool, Closure, Prim
from ndvm.prims import PRIMS
from ndvm.values import NIL, VOID, Pair, from_iterable, iter_list

_CXR = ("a", "d", "aa", "ad", "da", "dd", "aaa", "aad", "ada", "add",
        "daa", "dad", "dda", "ddd")  # fmt: skip


def _index(x: Any) -> int:
    if type(x) is Arr or isinstance(x, bool) or not float(x).is_integer():
        raise NdvmError(f"expected a constant integer index, got {x!r}")
    return int(x)


def _cxr(path: str) -> Callable[[Any], Any]:
    def impl(x: Any) -> Any:
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


def structural_impls(tracer: Any) -> dict[str, Callable[..., Any]]:
    """``{name: fn}`` of the structural primitives the tracer supports, over its namespace."""
    ns = tracer.ns

    def vec(*xs: Any) -> Arr:
        vals = [tracer.lanes(x) for x in xs]
        if all(tracer.concrete(x) for x in xs):
            return Arr(np.asarray(vals, dtype=np.float64).reshape(len(vals)), (len(vals),))
        if ns.scalar:
            raise NdvmError("vectors have no closed form for sympy")
        vals = [tracer._framework(v) for v in vals]
        lane = ns.broadcast_shapes(*(tuple(v.shape) for v in vals))
        return Arr(ns.stack([ns.broadcast_to(v, lane) for v in vals]), (len(vals),))

    def mat(*rows: Any) -> Arr:
        vecs = [r if type(r) is Arr else vec(*iter_list(r)) for r in rows]
        width = {v.struct for v in vecs}
        if len(width) != 1 or len(next(iter(width))) != 1:
            raise NdvmError("mat: rows must be vectors of one length")
        if all(tracer.concrete(v) for v in vecs):
            return Arr(np.stack([v.val for v in vecs]), (len(vecs), vecs[0].struct[0]))
        vals = [tracer._framework(v.val) for v in vecs]
        lane = ns.broadcast_shapes(*(tuple(v.shape) for v in vals))
        stacked = ns.stack([ns.broadcast_to(v, lane) for v in vals])  # (*lanes, n, m)
        return Arr(ns.swapaxes(stacked, -1, -2), (len(vecs), vecs[0].struct[0]))

    def filled(value: float) -> Callable[..., Arr]:
        def impl(n: Any, m: Any = None) -> Arr:
            dims = (_index(n),) if m is None else (_index(n), _index(m))
            return Arr(np.full(dims, value), dims)

        return impl

    def ref(v: Arr, i: Any, j: Any = None) -> Any:
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

    def not_(x: Any) -> Any:
        return Bool(~x.val) if type(x) is Bool else x is False

    def same(a: Any, b: Any, deep: bool) -> Any:
        """eq?/eqv? (deep=False) and equal? (deep=True); numbers compare per lane."""
        nums = (float, Arr)
        if type(a) in nums and type(b) in nums and not (a.struct if type(a) is Arr else ()):
            return tracer.predicate(PRIMS.by_name("="), [a, b])
        if deep and type(a) is Pair and type(b) is Pair:
            head = same(a.car, b.car, deep)
            return head if head is False else _and(head, same(a.cdr, b.cdr, deep))
        if (type(a) in nums) != (type(b) in nums):
            return False
        if type(a) in nums or Bool in (type(a), type(b)):
            raise NdvmError("equality of vectors or per-lane booleans")
        return a is b or (type(a) is type(b) and a == b and (deep or type(a) is not Pair))

    def eye(n: Any) -> Arr:
        k = _index(n)
        return Arr(np.eye(k), (k, k))

    out: dict[str, Callable[..., Any]] = {
        "cons": Pair,
        "list": lambda *xs: from_iterable(xs),
        "length": lambda x: float(len(list(iter_list(x)))),
        "append": lambda *xs: from_iterable(
            [e for x in xs[:-1] for e in iter_list(x)], xs[-1] if xs else NIL
        ),
        "reverse": lambda x: from_iterable(reversed(list(iter_list(x)))),
        "list-ref": lambda x, k: list(iter_list(x))[_index(k)],
        "list-tail": lambda x, k: _cxr("d" * _index(k))(x) if _index(k) else x,
        "iota": lambda n, s=0.0, d=1.0: from_iterable(
            tracer.numeric(
                PRIMS.by_name("+"), [s, tracer.numeric(PRIMS.by_name("*"), [float(k), d])]
            )
            for k in range(_index(n))
        ),
        "null?": lambda x: x is NIL,
        "pair?": lambda x: type(x) is Pair,
        "number?": lambda x: type(x) is float or (type(x) is Arr and not x.struct),
        "vector?": lambda x: type(x) is Arr and len(x.struct) == 1,
        "matrix?": lambda x: type(x) is Arr and len(x.struct) == 2,
        "procedure?": lambda x: type(x) in (Closure, Prim),
        "boolean?": lambda x: type(x) in (bool, Bool),
        "not": not_,
        "eq?": lambda a, b: same(a, b, False),
        "eqv?": lambda a, b: same(a, b, False),
        "equal?": lambda a, b: same(a, b, True),
        "vec": vec,
        "mat": mat,
        "zeros": filled(0.0),
        "ones": filled(1.0),
        "eye": eye,
        "make-vector": lambda n, fill=0.0: vec(*([fill] * _index(n))),
        "ref": ref,
        "vlen": lambda v: float(v.struct[0]),
        "rows": lambda m: float(m.struct[0]),
        "cols": lambda m: float(m.struct[1]),
        "vector->list": lambda v: from_iterable(ref(v, float(k)) for k in range(v.struct[0])),
        "list->vector": lambda x: vec(*iter_list(x)),
        "void": lambda *xs: VOID,
    }
    for path in _CXR:
        out[f"c{path}r"] = _cxr(path)
    return out
