"""The primitive registry: one declaration per primitive drives every consumer.

The reader's global environment, the resolver (name -> opcode), every evaluator's dispatch
table, the reference tape (VJP rules), the generated C++ opcode header and docs/primitives.md
are all derived from the ``Prim`` records registered here. Opcodes are stable and never reused
(``tests/prims/test_registry.py`` checks them against a committed snapshot).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any


class Kind(enum.IntEnum):
    """How a primitive is evaluated."""

    NUMERIC = 0  # lane-wise on payload arrays, taped, has a VJP rule
    STRUCTURAL = 1  # on structural values (pairs, symbols, shapes); never taped
    PREDICATE = 2  # lane-wise, returns booleans per lane; never taped
    PRELUDE = 3  # defined in ndvm source (``prelude`` field), compiled with the program
    CONTROL = 4  # needs the evaluator's control stack (``apply``, ``error``)


class Shape(enum.IntEnum):
    """How a NUMERIC primitive treats vector/matrix operands."""

    ELEMENTWISE = 0  # scalars broadcast against vectors/matrices of one common shape
    SCALAR = 1  # every operand must be a scalar
    CUSTOM = 2  # operands have fixed ranks; ``shape_rule`` computes the result shape


class Domain(enum.IntEnum):
    """Input domain policy; only the ``dmci`` dialect changes behaviour outside it."""

    ALL = 0
    POSITIVE = 1  # sqrt, log: the dmci dialect clamps the argument at 1e-8


@dataclass(frozen=True, slots=True)
class Arity:
    """``min_args`` .. ``max_args`` arguments (``max_args`` None: variadic)."""

    min_args: int
    max_args: int | None

    def accepts(self, n: int) -> bool:
        return n >= self.min_args and (self.max_args is None or n <= self.max_args)

    def describe(self) -> str:
        if self.max_args == self.min_args:
            return f"exactly {self.min_args}"
        if self.max_args is None:
            return f"at least {self.min_args}"
        return f"{self.min_args} to {self.max_args}"


def fixed(n: int) -> Arity:
    return Arity(n, n)


def between(lo: int, hi: int) -> Arity:
    return Arity(lo, hi)


def variadic(lo: int = 0) -> Arity:
    return Arity(lo, None)


# ref for NUMERIC/PREDICATE: (*payloads) -> payload, payloads are float or float64 ndarrays of
#   shape lanes + struct (lanes broadcastable, struct shapes already aligned by the evaluator).
# vjp for NUMERIC: (g, ans, *payloads) -> tuple of cotangents (or None where no gradient flows);
#   cotangents may be broadcast: the tape sums them back to each operand's shape.
# shape_rule for Shape.CUSTOM: (*struct_shapes) -> result struct shape, or raises ShapeError.
Ref = Callable[..., Any]
Vjp = Callable[..., tuple[Any, ...]]
ShapeRule = Callable[..., tuple[int, ...]]
# formula for NUMERIC: (array namespace) -> fn over framework payloads (torch, JAX, sympy)
Formula = Callable[[Any], Callable[..., Any]]


@dataclass(frozen=True, slots=True)
class Prim:
    name: str
    code: int
    arity: Arity
    kind: Kind
    ref: Ref | None = None
    vjp: Vjp | None = None
    family: str = "misc"
    doc: str = ""
    aliases: tuple[str, ...] = ()
    shape: Shape = Shape.ELEMENTWISE
    shape_rule: ShapeRule | None = None
    in_ranks: tuple[int, ...] | None = None  # CUSTOM: rank of each operand (last repeats)
    domain: Domain = Domain.ALL
    prelude: str | None = None  # PRELUDE: ndvm source defining ``name``
    deps: tuple[str, ...] = field(default=())  # PRELUDE: other prelude/prim names it uses
    formula: Formula | None = None  # NUMERIC/PREDICATE: the rule over an array namespace

    @property
    def upper(self) -> str:
        """C/Python identifier of the opcode: ``null?`` -> ``IS_NULL``, ``c+`` -> ``ADD``."""
        return opcode_identifier(self.name)

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)


_SPECIAL = {
    "+": "ADD",
    "-": "SUB",
    "*": "MUL",
    "/": "DIV",
    "=": "NUM_EQ",
    "<": "LT",
    ">": "GT",
    "<=": "LE",
    ">=": "GE",
}


def opcode_identifier(name: str) -> str:
    if name in _SPECIAL:
        return _SPECIAL[name]
    out = name.replace("%", "internal-")
    if out.endswith("?"):
        out = "is-" + out[:-1]
    out = out.replace("->", "-to-").replace("*", "-star").replace("!", "-bang")
    return out.replace("-", "_").upper()


class Registry:
    """Ordered, append-only table of primitives, indexed by opcode and by surface name."""

    def __init__(self) -> None:
        self._by_code: dict[int, Prim] = {}
        self._by_name: dict[str, Prim] = {}

    def add(self, prim: Prim) -> Prim:
        if prim.code in self._by_code:
            raise ValueError(f"opcode {prim.code} of {prim.name!r} already used")
        for name in prim.names:
            if name in self._by_name:
                raise ValueError(f"primitive name {name!r} registered twice")
        if prim.kind is Kind.NUMERIC and None in (prim.ref, prim.vjp, prim.formula):
            raise ValueError(f"numeric primitive {prim.name!r} needs ref, vjp and formula")
        if prim.kind is Kind.PREDICATE and None in (prim.ref, prim.formula):
            raise ValueError(f"predicate {prim.name!r} needs ref and formula")
        if prim.kind is Kind.PRELUDE and not prim.prelude:
            raise ValueError(f"prelude primitive {prim.name!r} needs source")
        self._by_code[prim.code] = prim
        for name in prim.names:
            self._by_name[name] = prim
        return prim

    def __iter__(self) -> Iterator[Prim]:
        return iter(sorted(self._by_code.values(), key=lambda p: p.code))

    def __len__(self) -> int:
        return len(self._by_code)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def by_name(self, name: str) -> Prim:
        return self._by_name[name]

    def get(self, name: str) -> Prim | None:
        return self._by_name.get(name)

    def by_code(self, code: int) -> Prim:
        return self._by_code[code]

    def of_kind(self, kind: Kind) -> list[Prim]:
        return [p for p in self if p.kind is kind]

    def numeric(self) -> list[Prim]:
        return self.of_kind(Kind.NUMERIC)

    def names(self) -> dict[str, Prim]:
        return dict(self._by_name)

    @property
    def max_code(self) -> int:
        return max(self._by_code)


F = Callable[..., Any]


class ImplTable:
    """One evaluator's own implementations of primitives, keyed by opcode (JAX ``def_impl``).

    The declarations live in the registry; an evaluator (the reference machine, the export
    tracer) registers here its implementation of each primitive it runs itself. Coverage is
    checked from the declarations (tests/eval/test_impls.py), not from this table.
    """

    def __init__(self, registry: Registry, evaluator: str) -> None:
        self.registry = registry
        self.evaluator = evaluator
        self._impls: dict[int, F] = {}

    def register(self, name: str, fn: F) -> None:
        prim = self.registry.by_name(name)
        if prim.code in self._impls:
            raise ValueError(f"{self.evaluator}: {name!r} implemented twice")
        self._impls[prim.code] = fn

    def __getitem__(self, code: int) -> F:
        return self._impls[code]

    def __contains__(self, code: object) -> bool:
        return code in self._impls
