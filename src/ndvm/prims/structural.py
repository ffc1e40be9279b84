"""Structural primitives: lists, symbols, type tests, vector construction and indexing.

Their implementations take the evaluator's runtime (``rt``) first: it counts heap cells,
raises positioned errors, requires lane-uniform indices (``rt.index``; differing indices split
the lanes), and tapes the numeric side of vector construction and indexing (``rt.tape_op``).
No structural operation ever adds a tape record of its own.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ndvm import prims as _p
from ndvm.payload import Arr, BoolArr
from ndvm.prims.registry import Kind, Prim, between, fixed, variadic
from ndvm.values import NIL, VOID, Pair, String, Symbol, from_iterable

PRIMS = _p.PRIMS
_LIST_LIMIT = 10_000_000


def _rt_types():  # type: ignore[no-untyped-def]
    from ndvm.eval.runtime import Closure, PrimProc, type_name

    return Closure, PrimProc, type_name


def _tn(x: Any) -> str:
    return _rt_types()[2](x)


def _add(
    name: str,
    code: int,
    arity: Any,
    impl: Any,
    doc: str,
    family: str = "lists",
    aliases: tuple[str, ...] = (),
    kind: Kind = Kind.STRUCTURAL,
) -> None:
    PRIMS.add(Prim(name, code, arity, kind, ref=impl, family=family, doc=doc, aliases=aliases))


def _elements(rt: Any, lst: Any, who: str) -> list[Any]:
    """The elements of a proper list; each element traversed is a step of the running lanes."""
    out = []
    x = lst
    while type(x) is Pair:
        out.append(x.car)
        x = x.cdr
        if len(out) > _LIST_LIMIT:
            raise rt.error(f"{who}: list too long")
    rt.spend(len(out))
    if x is not NIL:
        raise rt.error(f"{who}: expected a proper list, got {_tn(lst)}")
    return out


def _pair(rt: Any, x: Any, who: str) -> Pair:
    if type(x) is not Pair:
        raise rt.error(f"{who}: expected a pair, got {_tn(x)}")
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
    return from_iterable(xs)


def _length(rt: Any, x: Any) -> float:
    return float(len(_elements(rt, x, "length")))


def _append(rt: Any, *xs: Any) -> Any:
    if not xs:
        return NIL
    out = xs[-1]
    for lst in reversed(xs[:-1]):
        items = _elements(rt, lst, "append")
        rt.alloc(len(items))
        out = from_iterable(items, out)
    return out


def _reverse(rt: Any, x: Any) -> Any:
    items = _elements(rt, x, "reverse")
    rt.alloc(len(items))
    return from_iterable(reversed(items))


def _list_tail(rt: Any, x: Any, k: Any) -> Any:
    n = rt.index(k, "list-tail")
    for _ in range(n):
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
    add, mul = PRIMS.by_name("+"), PRIMS.by_name("*")
    items = [rt.numeric(add, (start, rt.numeric(mul, (float(k), step)))) for k in range(count)]
    return from_iterable(items)


# -- predicates and equality ------------------------------------------------------------
def _not(rt: Any, x: Any) -> Any:
    if type(x) is BoolArr:
        return BoolArr(~x.val)
    return x is False


def _is_number(rt: Any, x: Any) -> bool:
    return type(x) is float or (type(x) is Arr and x.rank == 0)


def _is_list(rt: Any, x: Any) -> bool:
    n = 0
    while type(x) is Pair:
        x = x.cdr
        n += 1
    rt.spend(n)
    return x is NIL


def _is_procedure(rt: Any, x: Any) -> bool:
    closure, primproc, _ = _rt_types()
    return type(x) is closure or type(x) is primproc


def _num_eq(rt: Any, a: Any, b: Any) -> Any:
    return rt.numeric(PRIMS.by_name("="), (a, b))


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


_TYPE_TESTS = [
    ("number?", 220, lambda x: type(x) is float or (type(x) is Arr and x.rank == 0)),
    ("boolean?", 221, lambda x: type(x) in (bool, BoolArr)),
    ("symbol?", 222, lambda x: type(x) is Symbol),
    ("string?", 223, lambda x: type(x) is String),
    ("pair?", 224, lambda x: type(x) is Pair),
    ("null?", 225, lambda x: x is NIL),
    ("vector?", 228, lambda x: type(x) is Arr and x.rank == 1),
    ("matrix?", 229, lambda x: type(x) is Arr and x.rank == 2),
]

_add("cons", 200, fixed(2), _cons, "A new pair (car . cdr).")
_add("car", 201, fixed(1), _cxr("a"), "First element of a pair.")
_add("cdr", 202, fixed(1), _cxr("d"), "Rest of a pair.")
_CXR = ["aa", "ad", "da", "dd", "aaa", "aad", "ada", "add", "daa", "dad", "dda", "ddd"]
for _i, _path in enumerate(_CXR):
    _add(f"c{_path}r", 203 + _i, fixed(1), _cxr(_path), f"Composition of car/cdr: c{_path}r.")
_add("list", 215, variadic(0), _list, "A new proper list of the arguments.")
_add("length", 216, fixed(1), _length, "Number of elements of a proper list.")
_add("append", 217, variadic(0), _append, "Concatenation of lists (the last is shared).")
_add("reverse", 218, fixed(1), _reverse, "A reversed copy of a list.")
_add("list-ref", 219, fixed(2), _list_ref, "Element k of a list (k lane-uniform).")
for _name, _code, _test in _TYPE_TESTS:
    _add(_name, _code, fixed(1), _type_test(_test), f"Type test: {_name}", family="predicates")
_add("list?", 226, fixed(1), _is_list, "True for a proper list.", family="predicates")
_add(
    "procedure?",
    227,
    fixed(1),
    _is_procedure,
    "True for closures and primitives.",
    family="predicates",
)
_add("list-tail", 230, fixed(2), _list_tail, "The list after dropping k elements.")
_add("iota", 231, between(1, 3), _iota, "(iota n [start [step]]): n numbers start + k*step.")
_add(
    "not",
    232,
    fixed(1),
    _not,
    "#t for #f, else #f (per lane for lane booleans).",
    family="predicates",
)
_add(
    "eq?",
    233,
    fixed(2),
    _eqv,
    "Identity; numbers and booleans compare per lane.",
    family="predicates",
)
_add(
    "eqv?", 234, fixed(2), _eqv, "Like eq?; numbers compare by value per lane.", family="predicates"
)
_add(
    "equal?",
    235,
    fixed(2),
    _equal,
    "Structural equality, per lane on numbers.",
    family="predicates",
)
_add("void", 260, variadic(0), _void, "The void value.", family="control")
PRIMS.add(
    Prim(
        "apply",
        350,
        variadic(2),
        Kind.CONTROL,
        family="control",
        doc="(apply f a ... lst): call f with the arguments and the list's elements.",
    )
)
PRIMS.add(
    Prim(
        "error",
        351,
        variadic(0),
        Kind.CONTROL,
        family="control",
        doc="Raise ProgramError with the message and irritants (the failing lanes).",
    )
)
