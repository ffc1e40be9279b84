"""``to_sympy``: a closed-form scalar program as an exact sympy expression."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ndvm.api import Program
from ndvm.errors import ExportUnsupported
from ndvm.export.binding import trace
from ndvm.export.namespaces import constant, sympy_namespace
from ndvm.export.values import Arr

# The tree size (nodes, a shared subexpression once per use) past which the translation stops:
# sympy's evaluation walks the tree (``free_symbols``, ``has``, ``atoms``), so a program that
# doubles its expression each step (Newton's iteration unrolled) costs twice as much each step.
MAX_NODES = 1_000_000


def export_sympy(
    program: Program,
    values: Mapping[str, float] | None,
    max_ops: int,
    deadline: float,
    max_nodes: int = MAX_NODES,
) -> Any:
    """Parameters as real symbols (or the exact ``values``), inputs as real symbols.

    sympy evaluates as usual, except where its evaluation would drop an operation that
    decides a NaN (``tracer._impls``): ``(/ x x)``, ``(- x x)``, ``(* 0 x)`` and
    ``(exp (log x))`` stay as written (NaN at x = 0, x = inf or x < 0 as in ndvm), and
    ``nan?``/``finite?`` are tests on the value (``Ne(x, x)``, ``Eq(x - x, 0)``), not
    constants."""
    ns = sympy_namespace()
    import sympy as sp
    from sympy.core.cache import clear_cache
    from sympy.core.parameters import evaluate

    compiled = program.compiled
    values = dict(values or {})
    params = [
        constant(values[s.name]) if s.name in values else sp.Symbol(s.name, real=True)
        for s in compiled.params
    ]
    inputs = [Arr(sp.Symbol(n, real=True), ()) for n in compiled.inputs]
    clear_cache()  # sympy's cache ignores ``evaluate``: an evaluated form from earlier work
    try:  # must not stand in for an operation this translation keeps unevaluated
        with evaluate(True):
            out = trace(ns, compiled, [Arr(p, ()) for p in params], inputs, max_ops=max_ops,
                        deadline=deadline, max_nodes=max_nodes)  # fmt: skip
        return out.val
    except RecursionError:
        raise ExportUnsupported("expression too deep for sympy") from None
