"""``ndvm.prims.constraints``: forward, inverse and derivative of every constraint kind."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ndvm.lang.ir import CONSTRAINT_RANGES, CONSTRAINTS
from ndvm.prims.constraints import constraint

THETA = np.array([-40.0, -3.0, -0.5, 0.0, 1e-3, 0.7, 4.0, 35.0])
# Independent closed forms (math module, not the table's NumPy rules).
EXPECTED = {
    "free": lambda t: t,
    "positive": lambda t: max(t, 0.0) + math.log1p(math.exp(-abs(t))),
    "unit": lambda t: 1.0 / (1.0 + math.exp(-t)),
    "signed-unit": math.tanh,
}


@pytest.mark.parametrize("kind", CONSTRAINTS)
def test_forward_matches_closed_form(kind: str) -> None:
    got = constraint(kind).forward(THETA)
    np.testing.assert_allclose(got, [EXPECTED[kind](t) for t in THETA], rtol=1e-15, atol=0)


@pytest.mark.parametrize("kind", CONSTRAINTS)
def test_inverse_round_trips_inside_the_range(kind: str) -> None:
    c = constraint(kind)
    t = THETA[np.abs(THETA) < 15]  # where the forward map is still invertible in float64
    np.testing.assert_allclose(c.inverse(c.forward(t)), t, rtol=1e-9, atol=1e-12)
    lo, hi = CONSTRAINT_RANGES[kind]
    if math.isfinite(lo):
        with pytest.raises(ValueError, match="must be in"):
            c.inverse(np.array([lo]))


@pytest.mark.parametrize("kind", CONSTRAINTS)
def test_derivative_matches_central_differences(kind: str) -> None:
    c = constraint(kind)
    t = THETA[np.abs(THETA) < 10]
    h = 1e-6
    fd = (c.forward(t + h) - c.forward(t - h)) / (2 * h)
    np.testing.assert_allclose(c.derivative(t), fd, rtol=1e-7, atol=1e-10)
