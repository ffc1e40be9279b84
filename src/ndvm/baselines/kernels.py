"""Numeric primitive formulas written once over an array namespace (torch or jax.numpy).

``numeric_impls(ops)`` returns ``{opcode: fn}`` covering every NUMERIC primitive of the registry,
for payloads shaped ``(*lanes, *struct)``; the framework's autograd then differentiates them.
Where the reference VJP fixes a convention (first extremal operand of ``min``/``max``/``clamp``
takes the gradient, piecewise-constant primitives give 0) the formula is written with ``where``
so autograd reproduces it. Nothing here imports torch or jax.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ndvm.prims import PRIMS, Kind

Fn = Callable[..., Any]


class ArrayOps(Protocol):
    """The handful of framework functions whose names or signatures differ."""

    def __getattr__(self, name: str) -> Fn: ...


def _first_extremal(ops: ArrayOps, better: Fn) -> Fn:
    """Left fold keeping the running value unless a later operand is strictly better (or NaN)."""

    def fold(x: Any, *ys: Any) -> Any:
        for y in ys:
            x = ops.where(better(y, x) | ops.isnan(y), y, x)
        return x

    return fold


def _clamp(ops: ArrayOps) -> Fn:
    def clamp(x: Any, lo: Any, hi: Any) -> Any:
        inner = ops.where((x >= lo) | ops.isnan(x), x, lo)
        return ops.where((inner <= hi) | ops.isnan(inner), inner, hi)

    return clamp


def _arith() -> dict[str, Fn]:
    def add(*xs: Any) -> Any:
        if not xs:
            return 0.0
        out = xs[0]
        for x in xs[1:]:
            out = out + x
        return out

    def sub(x: Any, *ys: Any) -> Any:
        if not ys:
            return -x
        for y in ys:
            x = x - y
        return x

    def mul(*xs: Any) -> Any:
        if not xs:
            return 1.0
        out = xs[0]
        for x in xs[1:]:
            out = out * x
        return out

    def div(x: Any, *ys: Any) -> Any:
        if not ys:
            return 1.0 / x
        for y in ys:
            x = x / y
        return x

    return {"+": add, "-": sub, "*": mul, "/": div, "square": lambda x: x * x}


def _linalg(o: ArrayOps) -> dict[str, Fn]:
    def dot(v: Any, w: Any) -> Any:
        return o.sum(v * w, -1)

    def norm(v: Any) -> Any:
        return o.sqrt(dot(v, v))

    def floored(n: Any) -> Any:  # max(n, 1e-8), NaN kept
        return o.where(n < 1e-8, 1e-8, n)

    return {
        "dot": dot,
        "vsum": lambda v: o.sum(v, -1),
        "vmean": lambda v: o.sum(v, -1) / v.shape[-1],
        "norm": norm,
        "normalize": lambda v: v / norm(v)[..., None],
        "cross": o.cross,
        "scale": lambda a, b: a * b,  # scalars arrive padded, as for *
        "outer": lambda v, w: v[..., :, None] * w[..., None, :],
        "matvec": lambda a, v: o.matmul(a, v[..., None])[..., 0],
        "matmul": o.matmul,
        "transpose": lambda a: o.swapaxes(a, -1, -2),
        "trace": o.trace,
        "det": o.det,
        "logdet": o.logdet,
        "inv": o.inv,
        "solve": lambda a, b: o.solve(a, b[..., None])[..., 0],
        "cholesky": o.cholesky,
        "%dmci-normalize": lambda v: v / floored(norm(v))[..., None],
    }


def numeric_impls(o: ArrayOps) -> dict[int, Fn]:
    """``{opcode: fn}`` for every NUMERIC primitive, built on the namespace ``o``."""
    by_name: dict[str, Fn] = {
        **_arith(),
        "abs": o.abs,
        "min": _first_extremal(o, lambda y, x: y < x),
        "max": _first_extremal(o, lambda y, x: y > x),
        "exp": o.exp,
        "log": lambda x, b=None: o.log(x) if b is None else o.log(x) / o.log(b),
        "log1p": o.log1p,
        "expm1": o.expm1,
        "sqrt": o.sqrt,
        "cbrt": o.cbrt,
        "expt": o.pow,
        "sin": o.sin,
        "cos": o.cos,
        "tan": o.tan,
        "asin": o.asin,
        "acos": o.acos,
        "atan": lambda y, x=None: o.atan(y) if x is None else o.atan2(y, x),
        "sinh": o.sinh,
        "cosh": o.cosh,
        "tanh": o.tanh,
        "asinh": o.asinh,
        "acosh": o.acosh,
        "atanh": o.atanh,
        "sigmoid": o.sigmoid,
        "softplus": o.softplus,
        "erf": o.erf,
        "hypot": o.hypot,
        "clamp": _clamp(o),
        "floor": o.floor,
        "ceiling": o.ceil,
        "round": o.round,
        "truncate": o.trunc,
        "sign": o.sign,
        "quotient": lambda a, b: o.trunc(a / b),
        "remainder": o.fmod,
        "modulo": lambda a, b: a - b * o.floor(a / b),
        **_linalg(o),
    }
    out: dict[int, Fn] = {}
    for prim in PRIMS.numeric():
        out[prim.code] = by_name[prim.name]
    return out


def _chain(o: ArrayOps, op: Fn) -> Fn:
    def pred(x: Any, *ys: Any) -> Any:
        out = o.eq(x, x) | o.isnan(x)  # one operand: #t on every lane, in x's lane shape
        for a, b in zip((x, *ys), ys):
            out = out & op(a, b)
        return out

    return pred


def predicate_impls(o: ArrayOps) -> dict[int, Fn]:
    """``{opcode: fn}`` for every PREDICATE primitive: a boolean array per lane."""
    by_name: dict[str, Fn] = {
        "=": _chain(o, o.eq),
        "<": _chain(o, lambda a, b: a < b),
        ">": _chain(o, lambda a, b: a > b),
        "<=": _chain(o, lambda a, b: a <= b),
        ">=": _chain(o, lambda a, b: a >= b),
        "zero?": lambda x: o.eq(x, o.asarray(0.0)),
        "positive?": lambda x: x > 0,
        "negative?": lambda x: x < 0,
        "finite?": o.isfinite,
        "nan?": o.isnan,
    }
    return {p.code: by_name[p.name] for p in PRIMS.of_kind(Kind.PREDICATE)}
