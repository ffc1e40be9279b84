"""Helpers for the primitives' formulas over an array namespace (``Prim.formula``).

A formula is ``formula(o) -> fn``: ``o`` is an array namespace (torch, jax.numpy, sympy; see
``ndvm.export.namespaces``) and ``fn`` computes the primitive on payloads shaped
``(*lanes, *struct)``, so the framework's autograd differentiates it. Where the reference VJP
fixes a convention (the first extremal operand of ``min``/``max``/``clamp`` takes the
gradient, piecewise-constant primitives give 0) the formula is written with ``where`` so that
autograd reproduces it. Nothing here imports a framework.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Fn = Callable[..., Any]


def add(o: Any) -> Fn:
    def fn(*xs: Any) -> Any:
        out: Any = 0.0
        for k, x in enumerate(xs):
            out = x if k == 0 else out + x
        return out

    return fn


def sub(o: Any) -> Fn:
    def fn(x: Any, *ys: Any) -> Any:
        if not ys:
            return -x
        for y in ys:
            x = x - y
        return x

    return fn


def mul(o: Any) -> Fn:
    def fn(*xs: Any) -> Any:
        out: Any = 1.0
        for k, x in enumerate(xs):
            out = x if k == 0 else out * x
        return out

    return fn


def div(o: Any) -> Fn:
    def fn(x: Any, *ys: Any) -> Any:
        if not ys:
            return 1.0 / x
        for y in ys:
            x = x / y
        return x

    return fn


def log(o: Any) -> Fn:
    """``(log x)`` and ``(log x b)`` = ln x / ln b."""
    return lambda x, b=None: o.log(x) if b is None else o.log(x) / o.log(b)


def atan(o: Any) -> Fn:
    """``(atan y)`` and ``(atan y x)`` = atan2(y, x)."""
    return lambda y, x=None: o.atan(y) if x is None else o.atan2(y, x)


def first_extremal(better: Fn) -> Callable[[Any], Fn]:
    """Left fold keeping the running value unless a later operand is strictly better (or NaN)."""

    def formula(o: Any) -> Fn:
        def fold(x: Any, *ys: Any) -> Any:
            for y in ys:
                x = o.where(better(y, x) | o.isnan(y), y, x)
            return x

        return fold

    return formula


def clamp(o: Any) -> Fn:
    def fn(x: Any, lo: Any, hi: Any) -> Any:
        inner = o.where((x >= lo) | o.isnan(x), x, lo)
        return o.where((inner <= hi) | o.isnan(inner), inner, hi)

    return fn


def dot(o: Any) -> Fn:
    return lambda v, w: o.sum(v * w, -1)


def norm(o: Any) -> Fn:
    return lambda v: o.sqrt(o.sum(v * v, -1))


def normalize(floor: float | None) -> Callable[[Any], Fn]:
    """``v / |v|``; with ``floor``, the norm is ``max(|v|, floor)`` (NaN kept)."""

    def formula(o: Any) -> Fn:
        def fn(v: Any) -> Any:
            n = norm(o)(v)
            if floor is not None:
                n = o.where(n < floor, floor, n)
            return v / n[..., None]

        return fn

    return formula


def chain(op: Callable[[Any, Any, Any], Any]) -> Callable[[Any], Fn]:
    """A comparison over its operands in order; one operand: #t on every lane."""

    def formula(o: Any) -> Fn:
        def pred(x: Any, *ys: Any) -> Any:
            out = o.eq(x, x) | o.isnan(x)  # all #t, in x's lane shape
            for a, b in zip((x, *ys), ys):
                out = out & op(o, a, b)
            return out

        return pred

    return formula
