"""Structural primitives: pairs, lists, type tests, equality, and the control primitives.

Declarations only. Structural values (pairs, symbols, shapes) are never taped and are not
lane payloads, so each evaluator implements these itself: the reference machine in
``ndvm.eval.lists``, the export tracer in ``ndvm.export.structural``, the native core in C++.
"""

from __future__ import annotations

from ndvm.prims.registry import Arity, Kind, Prim, between, fixed, variadic
from ndvm.prims.table import PRIMS

CXR_PATHS = ("aa", "ad", "da", "dd", "aaa", "aad", "ada", "add", "daa", "dad", "dda", "ddd")
TYPE_TESTS = (
    ("number?", 220),
    ("boolean?", 221),
    ("symbol?", 222),
    ("string?", 223),
    ("pair?", 224),
    ("null?", 225),
    ("vector?", 228),
    ("matrix?", 229),
)


def _add(
    name: str,
    code: int,
    arity: Arity,
    doc: str,
    family: str = "lists",
    kind: Kind = Kind.STRUCTURAL,
) -> None:
    PRIMS.add(Prim(name, code, arity, kind, family=family, doc=doc))


_add("cons", 200, fixed(2), "A new pair (car . cdr).")
_add("car", 201, fixed(1), "First element of a pair.")
_add("cdr", 202, fixed(1), "Rest of a pair.")
for _i, _path in enumerate(CXR_PATHS):
    _add(f"c{_path}r", 203 + _i, fixed(1), f"Composition of car/cdr: c{_path}r.")
_add("list", 215, variadic(0), "A new proper list of the arguments.")
_add("length", 216, fixed(1), "Number of elements of a proper list.")
_add("append", 217, variadic(0), "Concatenation of lists (the last is shared).")
_add("reverse", 218, fixed(1), "A reversed copy of a list.")
_add("list-ref", 219, fixed(2), "Element k of a list (k lane-uniform).")
for _name, _code in TYPE_TESTS:
    _add(_name, _code, fixed(1), f"Type test: {_name}", family="predicates")
_add("list?", 226, fixed(1), "True for a proper list.", family="predicates")
_add("procedure?", 227, fixed(1), "True for closures and primitives.", family="predicates")
_add("list-tail", 230, fixed(2), "The list after dropping k elements.")
_add("iota", 231, between(1, 3), "(iota n [start [step]]): n numbers start + k*step.")
_add("not", 232, fixed(1), "#t for #f, else #f (per lane for lane booleans).", "predicates")
_add("eq?", 233, fixed(2), "Identity; numbers and booleans compare per lane.", "predicates")
_add("eqv?", 234, fixed(2), "Like eq?; numbers compare by value per lane.", "predicates")
_add("equal?", 235, fixed(2), "Structural equality, per lane on numbers.", "predicates")
_add("void", 260, variadic(0), "The void value.", family="control")
_add(
    "apply",
    350,
    variadic(2),
    "(apply f a ... lst): call f with the arguments and the list's elements.",
    family="control",
    kind=Kind.CONTROL,
)
_add(
    "error",
    351,
    variadic(0),
    "Raise ProgramError with the message and irritants (the failing lanes).",
    family="control",
    kind=Kind.CONTROL,
)
