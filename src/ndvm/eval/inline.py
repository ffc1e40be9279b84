"""Closure compilation of leaf expressions for the reference machine.

Variable references, constants and trees of NUMERIC/PREDICATE primitive calls over them
cannot split lanes or call procedures, so the machine evaluates them as one Python closure
instead of one continuation step per node. Lane-uniform float operands of the commonest
operators take a scalar shortcut with the same IEEE results as the table's reference rule.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from ndvm.eval.runtime import Runtime, Unassigned
from ndvm.lang import ir
from ndvm.prims import PRIMS, Kind

Getter = Callable[[Any], Any]
MAX_INLINE_DEPTH = 12

# Exact for float operands: Python float +, -, * and comparisons are IEEE operations.
_SCALAR: dict[str, Callable[..., Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "<": operator.lt,
    ">": operator.gt,
    "<=": operator.le,
    ">=": operator.ge,
    "=": operator.eq,
}
_SCALAR_BY_CODE = {PRIMS.by_name(k).code: f for k, f in _SCALAR.items()}


def make_inline(
    rt: Runtime, e: ir.Node, params: list[Any], inputs: list[Any], depth: int = 0
) -> Getter | None:
    """A closure ``env -> value`` for ``e``, or None if ``e`` needs the machine."""
    t = type(e)
    if t is ir.Const:
        value = e.value  # type: ignore[union-attr]
        return lambda env: value
    if t is ir.Param:
        pv = params[e.index]  # type: ignore[union-attr]
        return lambda env: pv
    if t is ir.Input:
        iv = inputs[e.index]  # type: ignore[union-attr]
        return lambda env: iv
    if t is ir.Local:
        return _local(rt, e)  # type: ignore[arg-type]
    if t is not ir.PrimCall or depth > MAX_INLINE_DEPTH:
        return None
    prim = PRIMS.by_code(e.code)  # type: ignore[union-attr]
    if prim.kind is not Kind.NUMERIC and prim.kind is not Kind.PREDICATE:
        return None
    getters = []
    for a in e.args:  # type: ignore[union-attr]
        g = make_inline(rt, a, params, inputs, depth + 1)
        if g is None:
            return None
        getters.append(g)
    numeric = rt.numeric
    node = e
    fast = _SCALAR_BY_CODE.get(prim.code) if len(getters) == 2 else None
    if fast is not None:
        g0, g1 = getters

        def binary(env: Any) -> Any:
            a = g0(env)
            b = g1(env)
            if type(a) is float and type(b) is float:
                return fast(a, b)
            rt.node = node
            return numeric(prim, (a, b))

        return binary

    def call(env: Any) -> Any:
        args = tuple(g(env) for g in getters)
        rt.node = node
        return numeric(prim, args)

    return call


def _local(rt: Runtime, e: ir.Local) -> Getter:
    depth, index = e.depth, e.index

    def unassigned(v: Unassigned) -> Any:
        rt.node = e
        raise rt.error(f"variable {v.name!r} used before its definition")

    if depth == 0:

        def get0(env: Any) -> Any:
            v = env.vals[index]
            return unassigned(v) if type(v) is Unassigned else v

        return get0
    if depth == 1:

        def get1(env: Any) -> Any:
            v = env.parent.vals[index]
            return unassigned(v) if type(v) is Unassigned else v

        return get1

    def get(env: Any) -> Any:
        for _ in range(depth):
            env = env.parent
        v = env.vals[index]
        return unassigned(v) if type(v) is Unassigned else v

    return get
