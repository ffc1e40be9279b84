"""Lane-wise predicate primitives (opcodes 100-149): comparisons and number tests.

Each has the float64 NumPy rule (``ref``: a bool per lane, a Python bool when lane-uniform)
and its ``formula`` over an array namespace (``ndvm.prims.formulas``). No gradient flows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ndvm.prims import formulas as fm
from ndvm.prims.registry import Formula, Kind, Prim, Shape, fixed, variadic
from ndvm.prims.table import PRIMS


def _as_bool(x: Any) -> Any:
    """Lane masks stay bool arrays; a lane-uniform result becomes a Python bool."""
    if isinstance(x, np.ndarray) and x.ndim > 0:
        return x
    return bool(x)


def _chain(op: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    def ref(*xs: Any) -> Any:
        out: Any = True
        for a, b in zip(xs, xs[1:]):
            out = np.logical_and(out, op(a, b))
        return _as_bool(out)

    return ref


def _test(op: Callable[[Any], Any]) -> Callable[..., Any]:
    return lambda x: _as_bool(op(x))


_CHAINS: tuple[tuple[str, int, Callable[[Any, Any], Any], str, Formula], ...] = (
    ("=", 100, np.equal, "equal", fm.chain(lambda o, a, b: o.eq(a, b))),
    ("<", 101, np.less, "strictly increasing", fm.chain(lambda o, a, b: a < b)),
    (">", 102, np.greater, "strictly decreasing", fm.chain(lambda o, a, b: a > b)),
    ("<=", 103, np.less_equal, "non-decreasing", fm.chain(lambda o, a, b: a <= b)),
    (">=", 104, np.greater_equal, "non-increasing", fm.chain(lambda o, a, b: a >= b)),
)
_TESTS: tuple[tuple[str, int, Callable[[Any], Any], str, Formula], ...] = (
    ("zero?", 105, lambda x: x == 0, "x = 0", lambda o: lambda x: o.eq(x, o.asarray(0.0))),
    ("positive?", 106, lambda x: x > 0, "x > 0", lambda o: lambda x: x > 0),
    ("negative?", 107, lambda x: x < 0, "x < 0", lambda o: lambda x: x < 0),
    ("finite?", 108, np.isfinite, "x is neither infinite nor NaN", lambda o: o.isfinite),
    ("nan?", 109, np.isnan, "x is NaN", lambda o: o.isnan),
)
for _name, _code, _op, _what, _formula in _CHAINS:
    _doc = f"#t per lane when the operands are {_what} (NaN: #f). No gradient."
    PRIMS.add(Prim(_name, _code, variadic(1), Kind.PREDICATE, _chain(_op), None, "comparison",
                   _doc, shape=Shape.SCALAR, formula=_formula))  # fmt: skip
for _name, _code, _op, _what, _formula in _TESTS:
    PRIMS.add(Prim(_name, _code, fixed(1), Kind.PREDICATE, _test(_op), None, "comparison",
                   f"#t per lane when {_what}. No gradient.", shape=Shape.SCALAR,
                   formula=_formula))  # fmt: skip
