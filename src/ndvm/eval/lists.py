"""The reference machine's pairs, lists, type tests and equality (``ndvm.prims.structural``).

Each implementation takes the evaluator's runtime (``rt``) first: it counts heap cells,
raises positioned errors, requires lane-uniform indices (``rt.index``; differing indices split
the lanes), and charges the steps of list traversals (``rt.spend``). No structural operation
adds a tape record of its own; numbers they compute (``iota``, ``=``) go through ``rt.numeric``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ndvm.eval.runtime import REFERENCE, Closure, PrimProc, type_name
from ndvm.payload import Arr, BoolArr
from ndvm.prims import PRIMS
from ndvm.prims.structural import CXR_PATHS
from ndvm.values import NIL, VOID, Pair, String, Symbol

_NUM_EQ, _ADD, _MUL = PRIMS.by_name("="), PRIMS.by_name("+"), PRIMS.by_name("*")


def elements(rt: Any, lst: Any, who: str) -> list[Any]:
    """The elements of a proper list; each element traversed is a step of the running lanes."""
    out, x = rt.walk(lst, who)
    rt.spend(len(out))
    if x is not NIL:
        raise rt.error(f"{who}: expected a proper list, got {type_name(lst)}")
    return out


def _pair(rt: Any, x: Any, who: str) -> Pair:
    if type(x) is not Pair:
        raise rt.error(f"{who}: expected a pair, got {type_name(x)}")
    return x


# -- pairs and lists --------------------------------------------------------------------
def _cons(rt: Any, a: Any, b: Any) -> Pair:
    rt.alloc()
    return Pair(a, b)


def _cxr(path: str) -> Any:
    name = f"c{path}r"

    def impl(rt: Any, x: Any) -> Any:
        for step in reversed(path):
            p = _pair(rt, x, name)
            x = p.car if step == "a" else p.cdr
        return x

    return impl


def _list(rt: Any, *xs: Any) -> Any:
    rt.alloc(len(xs))
    return rt.build(xs)


def _length(rt: Any, x: Any) -> float:
    return float(len(elements(rt, x, "length")))


def _append(rt: Any, *xs: Any) -> Any:
    if not xs:
        return NIL
    out = xs[-1]
    for lst in reversed(xs[:-1]):
        items = elements(rt, lst, "append")
        rt.alloc(len(items))
        out = rt.build(items, out)
    return out


def _reverse(rt: Any, x: Any) -> Any:
    items = elements(rt, x, "reverse")
    rt.alloc(len(items))
    items.reverse()
    return rt.build(items)


def _list_tail(rt: Any, x: Any, k: Any) -> Any:
    n = rt.index(k, "list-tail")
    for part in rt.chunks(max(n, 0)):
        for _ in part:
            if type(x) is not Pair:
                raise rt.error(f"list-tail: index {n} out of range")
            x = x.cdr
    if n < 0:
        raise rt.error(f"list-tail: index {n} out of range")
    rt.spend(n)
    return x


def _list_ref(rt: Any, x: Any, k: Any) -> Any:
    n = rt.index(k, "list-ref")
    tail = _list_tail(rt, x, float(n))
    if type(tail) is not Pair:
        raise rt.error(f"list-ref: index {n} out of range")
    return tail.car


def _iota(rt: Any, n: Any, start: Any = 0.0, step: Any = 1.0) -> Any:
    count = rt.index(n, "iota")
    if count < 0:
        raise rt.error(f"iota: count must be non-negative, got {count}")
    rt.alloc(count)
    items: list[Any] = []
    if type(start) is float and type(step) is float:  # constants: plain floats, as + and * give
        for part in rt.chunks(count):
            items += [start + k * step for k in part]
    else:
        add, mul = _ADD, _MUL
        for part in rt.chunks(count):
            items += [rt.numeric(add, (start, rt.numeric(mul, (float(k), step)))) for k in part]
    return rt.build(items)


# -- predicates and equality ------------------------------------------------------------
def _not(rt: Any, x: Any) -> Any:
    if type(x) is BoolArr:
        return BoolArr(~x.val)
    return x is False


def _is_number(rt: Any, x: Any) -> bool:
    return type(x) is float or (type(x) is Arr and x.rank == 0)


def _is_list(rt: Any, x: Any) -> bool:
    items, tail = rt.walk(x, "list?", cap=False)
    rt.spend(len(items))
    return tail is NIL


def _is_procedure(rt: Any, x: Any) -> bool:
    return type(x) is Closure or type(x) is PrimProc


def _num_eq(rt: Any, a: Any, b: Any) -> Any:
    return rt.numeric(_NUM_EQ, (a, b))


def _is_num_like(x: Any) -> bool:
    return type(x) is float or type(x) is Arr


def _and(a: Any, b: Any) -> Any:
    if a is False or b is False:
        return False
    if a is True:
        return b
    if b is True:
        return a
    return BoolArr(np.logical_and(a.val, b.val))


def _bool_eq(a: Any, b: Any) -> Any:
    if type(a) is bool and type(b) is bool:
        return a is b
    va = a.val if type(a) is BoolArr else np.asarray(a)
    vb = b.val if type(b) is BoolArr else np.asarray(b)
    return BoolArr(np.asarray(va == vb))


def _eqv(rt: Any, a: Any, b: Any) -> Any:
    if _is_num_like(a) and _is_num_like(b):
        ra = a.rank if type(a) is Arr else 0
        rb = b.rank if type(b) is Arr else 0
        if ra or rb:
            return a is b
        return _num_eq(rt, a, b)
    if type(a) in (bool, BoolArr) and type(b) in (bool, BoolArr):
        return _bool_eq(a, b)
    if type(a) is String and type(b) is String:
        return a is b
    return a is b


def _equal(rt: Any, a: Any, b: Any) -> Any:
    """Structural equality; a pair of pairs is compared once (shared structure stays linear),
    and every comparison is a step of the running lanes."""
    result: Any = True
    stack = [(a, b)]
    seen: set[tuple[int, int]] = set()
    while stack:
        x, y = stack.pop()
        rt.spend(1)
        if type(x) is Pair and type(y) is Pair:
            key = (id(x), id(y))
            if key in seen:
                continue
            seen.add(key)
            stack.append((x.cdr, y.cdr))
            stack.append((x.car, y.car))
            continue
        if type(x) is Arr and type(y) is Arr and x.rank and y.rank:
            if x.struct != y.struct:
                return False
            eq = np.all(x.val == y.val, axis=tuple(range(2, 2 + x.rank)))
            r = BoolArr(np.asarray(eq))
        elif type(x) is String and type(y) is String:
            r = x.text == y.text
        else:
            r = _eqv(rt, x, y)
        result = _and(result, r)
        if result is False:
            return False
    return result


def _void(rt: Any, *xs: Any) -> Any:
    return VOID


def _type_test(test: Any) -> Any:
    def impl(rt: Any, x: Any) -> bool:
        return bool(test(x))

    return impl


def _type_test(test: Callable[[Any], bool]) -> Callable[[Any, Any], bool]:
    def impl(rt: Any, x: Any) -> bool:
        return bool(test(x))

    return impl


_TYPE_TESTS: dict[str, Callable[[Any], bool]] = {
    "number?": lambda x: type(x) is float or (type(x) is Arr and x.rank == 0),
    "boolean?": lambda x: type(x) in (bool, BoolArr),
    "symbol?": lambda x: type(x) is Symbol,
    "string?": lambda x: type(x) is String,
    "pair?": lambda x: type(x) is Pair,
    "null?": lambda x: x is NIL,
    "vector?": lambda x: type(x) is Arr and x.rank == 1,
    "matrix?": lambda x: type(x) is Arr and x.rank == 2,
}

for _path in ("a", "d", *CXR_PATHS):
    REFERENCE.register(f"c{_path}r", _cxr(_path))
for _name, _test in _TYPE_TESTS.items():
    REFERENCE.register(_name, _type_test(_test))
for _name, _fn in {
    "cons": _cons,
    "list": _list,
    "length": _length,
    "append": _append,
    "reverse": _reverse,
    "list-ref": _list_ref,
    "list-tail": _list_tail,
    "iota": _iota,
    "list?": _is_list,
    "procedure?": _is_procedure,
    "not": _not,
    "eq?": _eqv,
    "eqv?": _eqv,
    "equal?": _equal,
    "void": _void,
}.items():
    REFERENCE.register(_name, _fn)
