"""Check a framework's formula of each NUMERIC primitive against the table's NumPy rule.

``check_formula`` evaluates ``impl`` (the baselines' formula over torch or jax.numpy) and the
reference ``ref`` on the same valid random operands (tests/helpers/prim_programs.py), and the
framework's autograd against the reference VJP with a random cotangent.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
from tests.helpers.fd import unbroadcast
from tests.helpers.prim_programs import Case, N, theta

LANES = 4


def operands(case: Case, rng: np.random.Generator) -> list[np.ndarray]:
    """The case's operands as payloads ``(LANES, *struct)``."""
    th = theta(case, LANES, rng)
    out, at = [], 0
    for r in case.ranks:
        out.append(th[:, at : at + N**r].reshape((LANES,) + (N,) * r))
        at += N**r
    return out


def check_formula(
    case: Case,
    impl: Callable[..., Any],
    value_and_vjp: Callable[[Callable[..., Any], list[np.ndarray], np.ndarray], Any],
) -> None:
    """``value_and_vjp(impl, xs, ct) -> (value, [cotangent per operand])`` in the framework."""
    rng = np.random.default_rng(zlib.crc32(case.id.encode()))
    xs = operands(case, rng)
    prim = case.prim
    assert prim.ref is not None and prim.vjp is not None
    want = np.asarray(prim.ref(*xs), dtype=np.float64)
    ct = rng.standard_normal(want.shape)
    got, cts = value_and_vjp(impl, xs, ct)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    ref_cts = prim.vjp(ct, want, *xs)
    for x, a, b in zip(xs, cts, ref_cts):
        b = np.zeros_like(x) if b is None else unbroadcast(b, x.shape)
        np.testing.assert_allclose(np.asarray(a), b, rtol=1e-10, atol=1e-12)
