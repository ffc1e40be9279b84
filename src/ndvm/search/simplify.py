"""Parsimony for proposers: algebraic identities removed from a program before it is scored.

``simplify(datum)`` rewrites bottom-up: ``(/ e e)`` -> 1, ``(- e e)`` -> 0 (the language is
pure, so structurally equal operands are equal values), ``(* 1 e)``, ``(* e 1)``, ``(+ 0 e)``,
``(+ e 0)``, ``(- e 0)``, ``(/ e 1)``, ``(log (exp e))`` -> e, ``(* 0 e)`` -> 0, and
arithmetic on literals is folded. ``(sin (/ x x))`` thus becomes ``(sin 1)``, which the
funnel then rejects for having no parameter, instead of a bloated winner.
"""

from __future__ import annotations

import math
import operator

from ndvm.lang.datum import Datum, Num, SList, Sym, to_source

_FOLD = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}


def _num(v: float) -> Num:
    return Num(float(v), f"{v:g}" if float(v).is_integer() else repr(float(v)))


def _is(d: Datum, v: float) -> bool:
    return isinstance(d, Num) and d.value == v


def _binary(op: str, a: Datum, b: Datum) -> Datum | None:
    if isinstance(a, Num) and isinstance(b, Num):
        try:
            v = _FOLD[op](a.value, b.value)
        except ZeroDivisionError:
            return None
        return _num(v) if math.isfinite(v) else None
    same = to_source(a) == to_source(b)
    if op == "/" and same:
        return _num(1.0)
    if op == "-" and same:
        return _num(0.0)
    if op == "*":
        if _is(a, 0.0) or _is(b, 0.0):
            return _num(0.0)
        if _is(a, 1.0):
            return b
        if _is(b, 1.0):
            return a
    if op == "+":
        if _is(a, 0.0):
            return b
        if _is(b, 0.0):
            return a
    if op in ("-", "/") and _is(b, 0.0 if op == "-" else 1.0):
        return a
    return None


def simplify(d: Datum) -> Datum:
    """``d`` with the identities above applied, bottom-up (quoted data left alone)."""
    if not isinstance(d, SList) or not d.items or d.tail is not None:
        return d
    head = d.items[0]
    if isinstance(head, Sym) and head.name == "quote":
        return d
    items = tuple(simplify(x) for x in d.items)
    if isinstance(head, Sym) and head.name in _FOLD and len(items) == 3:
        out = _binary(head.name, items[1], items[2])
        if out is not None:
            return out
    if isinstance(head, Sym) and head.name == "log" and len(items) == 2:
        arg = items[1]  # (log (exp e)) -> e
        if isinstance(arg, SList) and len(arg.items) == 2 and _sym(arg.items[0], "exp"):
            return arg.items[1]
    return SList(items, None, d.line, d.column)


def _sym(d: Datum, name: str) -> bool:
    return isinstance(d, Sym) and d.name == name
