"""Gradients of every golden program with parameters against finite differences of ndvm itself.

``check_grads`` (tests/helpers/fd.py) draws a random covector ``v`` over the result lanes and a
random tangent ``u`` over theta, and compares ``<v, J u>`` by float64 central differences of
``Program.eval`` with ``<value_and_grad(cotangent=v), u>``. Only lanes with status ok take
part (failed lanes have NaN gradients by contract). Golden lanes sit away from kinks, so the
first-order check applies everywhere; the kink conventions themselves are tested exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
from tests.golden.test_golden import GOLDENS, host_inputs, load
from tests.helpers.fd import check_grads

import ndvm

WITH_GRAD = [g for g in GOLDENS if load(g)[1]["grad"] is not None and load(g)[1]["params"]]


@pytest.mark.parametrize("name", WITH_GRAD)
def test_fd_golden(name: str) -> None:
    source, spec = load(name)
    inputs = host_inputs(spec)
    prog = ndvm.compile(source, inputs=tuple(inputs), backend="reference", strict=False)
    theta = np.asarray(spec["theta"], dtype=np.float64)
    status = np.asarray(spec["status"]).reshape(theta.shape[0], -1)
    theta = theta[(status == 0).all(axis=1)]
    assert theta.shape[0] > 0

    def f(th: np.ndarray) -> np.ndarray:
        return np.asarray(prog.eval(th, **inputs), dtype=np.float64)

    def vjp(v: np.ndarray) -> tuple[np.ndarray]:
        return (prog.value_and_grad(theta, cotangent=v, **inputs)[1],)

    rng = np.random.default_rng(sum(map(ord, name)))
    check_grads(f, vjp, [theta], rng, eps=1e-6, rtol=2e-6, atol=1e-7)


def _grad(src: str, theta: list[float]) -> np.ndarray:
    return ndvm.compile(src, backend="reference").value_and_grad(np.asarray(theta))[1]


@pytest.mark.parametrize(
    ("src", "theta", "want"),
    [
        ("(abs a)", [0.0], [0.0]),  # abs'(0) = 0
        ("(min a b)", [1.0, 1.0], [1.0, 0.0]),  # ties: the first extremal argument
        ("(max a b 1)", [1.0, 1.0], [1.0, 0.0]),
        ("(max 1 a)", [1.0], [0.0]),
        ("(floor (* 3 a))", [0.7], [0.0]),  # piecewise-constant
        ("(round a)", [2.5], [0.0]),
        ("(modulo a 2)", [3.5], [1.0]),  # gradient to the dividend is 1
        ("(remainder a 2)", [-3.5], [1.0]),
        ("(if (< a 0) (- a) (* 2 a))", [0.0], [2.0]),  # branch edge: the realized path
        ("(clamp a 0 1)", [2.0], [0.0]),
    ],
)
def test_kink_conventions(src: str, theta: list[float], want: list[float]) -> None:
    np.testing.assert_array_equal(_grad(src, theta), want)


def test_kink_one_sided_fd() -> None:
    """Order-1 check at a kink: the gradient equals the one-sided difference of its side."""
    prog = ndvm.compile("(if (< a 0) (- (* a a) a) (* 2 a))", backend="reference")
    for t in (0.0, 1e-3):
        g = prog.value_and_grad(np.array([t]))[1][0]
        h = 1e-7
        fd = (prog.eval(np.array([t + h])) - prog.eval(np.array([t]))) / h
        assert abs(g - fd) < 1e-6


def test_det_gradient_at_singular_matrix() -> None:
    g = _grad("(det (mat (vec a 1) (vec 2 b)))", [1.0, 2.0])
    np.testing.assert_allclose(g, [2.0, 1.0])
