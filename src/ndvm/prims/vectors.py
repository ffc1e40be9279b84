"""Vector and matrix construction, indexing and shapes (structural primitives).

Declarations only. Shapes are structural and lane-uniform; the numbers inside are payloads,
so an evaluator's construction (``vec``, ``mat``) and indexing (``ref``, ``vector->list``)
carry gradients to each element. Indices must agree across active lanes. The reference
machine's implementations are in ``ndvm.eval.vectors``.
"""

from __future__ import annotations

from ndvm.prims.registry import Arity, Kind, Prim, between, fixed, variadic
from ndvm.prims.table import PRIMS

_REF_DOC = "(ref v i), (ref m i j), or row (ref m i); 0-based."


def _add(name: str, code: int, arity: Arity, doc: str, aliases: tuple[str, ...] = ()) -> None:
    PRIMS.add(Prim(name, code, arity, Kind.STRUCTURAL, family="vectors", doc=doc, aliases=aliases))


_add("vec", 240, variadic(0), "A vector of numbers (gradients flow to each element).", ("vector",))
_add("mat", 241, variadic(1), "A matrix from rows (vectors or lists of numbers).")
_add("make-vector", 242, between(1, 2), "(make-vector n [fill]).")
_add("zeros", 243, between(1, 2), "(zeros n) vector or (zeros n m) matrix of 0.")
_add("ones", 244, between(1, 2), "(ones n) vector or (ones n m) matrix of 1.")
_add("eye", 245, fixed(1), "Identity matrix of size n.")
_add("ref", 246, between(2, 3), _REF_DOC, ("vector-ref",))
_add("vlen", 247, fixed(1), "Length of a vector.", ("vector-length",))
_add("rows", 248, fixed(1), "Number of rows of a matrix.")
_add("cols", 249, fixed(1), "Number of columns of a matrix.")
_add("vector->list", 250, fixed(1), "The elements of a vector as a list.")
_add("list->vector", 251, fixed(1), "A vector of a list's numbers.")
