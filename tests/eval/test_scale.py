"""``scale``: a scalar times a vector or a matrix, in either operand order, on every backend;
values against closed forms, gradients against central finite differences (native against
reference: tests/native/test_differential.py)."""

from __future__ import annotations

import numpy as np
import pytest

import ndvm
from ndvm.backends import registry
from ndvm.errors import ShapeError

BACKENDS = registry.available()
M = "(mat (vec 1 2) (vec 3 4))"

# (source, value as a function of the parameter lane)
CASES = [
    (f"(params q r) (trace (matmul (scale q (eye 2)) {M}))", lambda q, r: 5 * q),
    (f"(params q r) (ref (scale {M} (* q r)) 1 0)", lambda q, r: 3 * q * r),
    ("(params q r) (vsum (scale 2 (vec q (* q r))))", lambda q, r: 2 * (q + q * r)),
    ("(params q r) (dot (vec 1 -1) (scale (vec q r) (* q r)))", lambda q, r: (q - r) * q * r),
    ("(params q r) (vsum (scale r (scale (vec q 1 2) q)))", lambda q, r: r * (q * q + 3 * q)),
    ("(params q r) (det (scale (mat (vec q 1) (vec r 2)) r))", lambda q, r: r * r * (2 * q - r)),
]
THETA = np.array([[0.3, -1.2], [1.5, 0.7], [-2.0, 0.4]])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("source,want", CASES, ids=[str(i) for i in range(len(CASES))])
def test_scale_either_order_values_and_fd_gradients(backend: str, source: str, want) -> None:
    prog = ndvm.compile(source, backend=backend)
    value, grad = prog.value_and_grad(THETA)
    np.testing.assert_allclose(value, want(THETA[:, 0], THETA[:, 1]), rtol=1e-13, atol=1e-13)
    eps = 1e-6
    for j in range(2):
        step = np.zeros(2)
        step[j] = eps
        fd = (prog.eval(THETA + step) - prog.eval(THETA - step)) / (2 * eps)
        np.testing.assert_allclose(grad[:, j], fd, rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("backend", BACKENDS)
def test_scale_mismatched_shapes_is_a_shape_error(backend: str) -> None:
    prog = ndvm.compile("(params q) (scale (vec q 1) (vec 1 2 3))", backend=backend)
    with pytest.raises(ShapeError, match="scale"):
        prog.eval(np.array([0.5]))
