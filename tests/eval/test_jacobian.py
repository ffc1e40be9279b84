"""``Program.jacobian``: per-lane d value / d theta against central finite differences of
``eval`` and against ``value_and_grad`` (its sum over data lanes), on every backend."""

from __future__ import annotations

import numpy as np
import pytest

import ndvm
from ndvm.backends import registry

BACKENDS = registry.available()
X = np.linspace(0.0, 2.0, 7)
THETA = np.array([[1.0, 0.2], [2.0, -0.3], [-0.5, 1.1]])
MODEL = "(params a (k 0.5 positive)) (* a (exp (- (* k x))) (cos (* a x)))"


def _fd(prog: ndvm.Program, theta: np.ndarray, eps: float = 1e-6, **inputs: object) -> np.ndarray:
    cols = []
    for j in range(theta.shape[-1]):
        step = np.zeros(theta.shape[-1])
        step[j] = eps
        plus = np.asarray(prog.eval(theta + step, **inputs))
        minus = np.asarray(prog.eval(theta - step, **inputs))
        cols.append((plus - minus) / (2 * eps))
    return np.stack(cols, axis=-1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_jacobian_matches_finite_differences_and_grad(backend: str) -> None:
    prog = ndvm.compile(MODEL, inputs=("x",), backend=backend)
    jac = prog.jacobian(THETA, x=X)
    assert jac.shape == (3, X.size, 2)
    np.testing.assert_allclose(jac, _fd(prog, THETA, x=X), rtol=1e-7, atol=1e-9)
    _, grad = prog.value_and_grad(THETA, x=X)
    np.testing.assert_allclose(jac.sum(axis=1), grad, rtol=1e-13, atol=1e-14)
    # the unconstrained space: d/dk = d/d(theta_k) / softplus'(theta_k)
    dk = jac[..., 1] / prog.constrain_jacobian(THETA)[:, None, 1]
    k = prog.constrain(THETA)[:, 1:]
    a = THETA[:, :1]
    want = -X * a * np.exp(-k * X) * np.cos(a * X)
    np.testing.assert_allclose(dk, want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("backend", BACKENDS)
def test_jacobian_shapes(backend: str) -> None:
    prog = ndvm.compile(MODEL, inputs=("x",), backend=backend)
    assert prog.jacobian(THETA[0], x=X).shape == (X.size, 2)
    assert prog.jacobian(THETA, x=1.5).shape == (3, 2)  # no data lanes
    np.testing.assert_allclose(prog.jacobian(THETA[1], x=X), prog.jacobian(THETA, x=X)[1])
    vec = ndvm.compile("(params a b) (vec (* a b x) (sin a))", inputs=("x",), backend=backend)
    jac = vec.jacobian(THETA, x=X)
    assert jac.shape == (3, X.size, 2, 2)
    a, b = THETA[:, 0, None], THETA[:, 1, None]
    np.testing.assert_allclose(jac[:, :, 0, 0], b * X)
    np.testing.assert_allclose(jac[:, :, 0, 1], a * X)
    np.testing.assert_allclose(jac[:, :, 1, 0], np.cos(a) * np.ones_like(X))
    np.testing.assert_allclose(jac[:, :, 1, 1], 0.0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_jacobian_failing_lane_is_nan(backend: str) -> None:
    prog = ndvm.compile("(if (> (* a x) 1) (car a) (* a a x))", inputs=("x",), backend=backend,
                        strict=False)  # fmt: skip
    jac = prog.jacobian(np.array([[0.1], [1.0]]), x=np.array([0.5, 2.0]))
    np.testing.assert_allclose(jac[0, :, 0], [2 * 0.1 * 0.5, 2 * 0.1 * 2.0])
    assert np.isnan(jac[1]).all()


def test_jacobian_needs_a_numeric_result() -> None:
    with pytest.raises(ndvm.NdvmError, match="numeric result"):
        ndvm.compile("(list a)").jacobian([1.0])
