"""The native core's parameter constraints mirror ``ndvm.prims.constraints``.

The core is sent, per parameter, the opcode of the constraint's forward primitive and applies
that unary kernel (``cpp/src/interp.cpp``, ``Interp::bind``; 0 is the identity), so it holds no
copy of the table; each constraint kind of the language (``ndvm.lang.ir.CONSTRAINTS``) is run
on both backends, values and gradients.
"""

from __future__ import annotations

import numpy as np
import pytest

import ndvm
from ndvm.lang.ir import CONSTRAINTS
from ndvm.prims.constraints import constraint

pytestmark = pytest.mark.native


@pytest.mark.parametrize("kind", CONSTRAINTS)
def test_native_constraint_values_and_gradients_match_reference(kind: str) -> None:
    src = f"(params (p {constraint(kind).forward(np.float64(0.3))} {kind}) q) (* (+ p 2) q q)"
    theta = np.array([[-2.5, 0.5], [0.0, -1.0], [1.7, 2.0], [31.0, 0.25]])
    ref, nat = (
        ndvm.compile(src, backend=b).evaluate(theta, grad=True) for b in ("reference", "native")
    )
    np.testing.assert_allclose(nat.value, ref.value, rtol=1e-13, atol=0)
    np.testing.assert_allclose(nat.grad, ref.grad, rtol=1e-12, atol=1e-300)
    values = constraint(kind).forward(theta[:, 0])
    np.testing.assert_allclose(ref.value[:, 0], (values + 2) * theta[:, 1] ** 2, rtol=1e-14)
