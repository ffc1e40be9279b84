"""Central finite-difference gradient checks in float64 (autograd/JAX ``check_grads`` style).

A random covector ``v`` and tangent ``u`` are drawn; ``<v, J u>`` from central differences is
compared with ``<vjp(v), u>``. Cotangents may be broadcast: they are summed back to each
operand's shape first; a ``None`` cotangent means "no gradient" and is checked as zero.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

Arr = np.ndarray[Any, np.dtype[np.float64]]


def unbroadcast(ct: Any, shape: tuple[int, ...]) -> Arr:
    """Sum a cotangent broadcast against ``shape`` back down to ``shape``."""
    ct = np.asarray(ct, dtype=np.float64)
    ct = np.broadcast_to(ct, np.broadcast_shapes(ct.shape, shape))
    lead = ct.ndim - len(shape)
    if lead:
        ct = ct.sum(axis=tuple(range(lead)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and ct.shape[i] != 1)
    if axes:
        ct = ct.sum(axis=axes, keepdims=True)
    return np.asarray(ct).reshape(shape)


def directional_fd(
    f: Callable[..., Any], xs: Sequence[Arr], us: Sequence[Arr], eps: float = 1e-6
) -> Arr:
    """Central difference ``(f(x + eps u) - f(x - eps u)) / (2 eps)``."""
    plus = np.asarray(f(*(x + eps * u for x, u in zip(xs, us))), dtype=np.float64)
    minus = np.asarray(f(*(x - eps * u for x, u in zip(xs, us))), dtype=np.float64)
    return (plus - minus) / (2.0 * eps)


def check_grads(
    f: Callable[..., Any],
    vjp: Callable[[Arr], Sequence[Any]],
    xs: Sequence[Any],
    rng: np.random.Generator,
    *,
    tangents: Sequence[Arr] | None = None,
    eps: float = 1e-6,
    rtol: float = 1e-6,
    atol: float = 1e-8,
) -> None:
    """Assert ``<v, J u>`` (central differences) equals ``<vjp(v), u>`` for random ``v``, ``u``.

    Args:
        f: the function of ``xs`` (float64 arrays in, array out).
        vjp: maps a covector ``v`` (output-shaped) to one cotangent (or None) per operand.
        xs: the point; Python floats are promoted to 0-d arrays.
        rng: a seeded generator.
        tangents: directions to use instead of random ones (e.g. symmetric for cholesky).
    """
    xs = [np.asarray(x, dtype=np.float64) for x in xs]
    ans = np.asarray(f(*xs), dtype=np.float64)
    v = rng.standard_normal(ans.shape)
    us = list(tangents) if tangents is not None else [rng.standard_normal(x.shape) for x in xs]
    cts = vjp(v)
    assert len(cts) == len(xs), f"vjp returned {len(cts)} cotangents for {len(xs)} operands"
    analytic = 0.0
    for ct, x, u in zip(cts, xs, us):
        if ct is not None:
            analytic += float(np.sum(unbroadcast(ct, x.shape) * u))
    numeric = float(np.sum(v * directional_fd(f, xs, us, eps)))
    scale = max(abs(numeric), abs(analytic), 1.0)
    assert abs(numeric - analytic) <= atol + rtol * scale, (
        f"<v, J u> by finite differences = {numeric!r}, <vjp(v), u> = {analytic!r}"
    )


def check_prim_vjp(
    ref: Callable[..., Any],
    vjp: Callable[..., Sequence[Any]],
    xs: Sequence[Any],
    rng: np.random.Generator,
    **kw: Any,
) -> None:
    """``check_grads`` for a primitive's ``(ref, vjp)`` pair."""
    arrs = [np.asarray(x, dtype=np.float64) for x in xs]
    ans = ref(*arrs)
    check_grads(ref, lambda v: vjp(v, ans, *arrs), arrs, rng, **kw)
