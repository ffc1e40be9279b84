"""The primitives' formulas instantiated over an array namespace (torch, jax.numpy, sympy).

``numeric_impls(o)`` returns ``{opcode: fn}`` for every NUMERIC primitive from its declared
``formula`` (``ndvm.prims.formulas``), for payloads shaped ``(*lanes, *struct)``; the
framework's autograd then differentiates them. ``predicate_impls(o)`` does the same for the
PREDICATE primitives. Nothing here imports torch or jax.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ndvm.prims import PRIMS, Kind

Fn = Callable[..., Any]


class ArrayOps(Protocol):
    """The handful of framework functions whose names or signatures differ."""

    def __getattr__(self, name: str) -> Fn: ...


def numeric_impls(o: ArrayOps) -> dict[int, Fn]:
    """``{opcode: fn}`` for every NUMERIC primitive: its ``formula`` over the namespace ``o``."""
    out: dict[int, Fn] = {}
    for prim in PRIMS.numeric():
        assert prim.formula is not None  # the registry refuses a numeric prim without one
        out[prim.code] = prim.formula(o)
    return out


def predicate_impls(o: ArrayOps) -> dict[int, Fn]:
    """``{opcode: fn}`` for every PREDICATE primitive (a boolean array per lane)."""
    out: dict[int, Fn] = {}
    for prim in PRIMS.of_kind(Kind.PREDICATE):
        assert prim.formula is not None, prim.name
        out[prim.code] = prim.formula(o)
    return out
