"""Lane forms (cpp/include/ndvm/fast.hpp): over W > 1 lanes, + - * and the elementwise unary
primitives replay and differentiate through their own kernels. Each lane of a many-lane
evaluation must equal, bitwise, the same lane evaluated alone (one-lane fast forms or the
general path), walked and replayed, on both clients and in float32; records under a partial
lane mask (an `if` over lanes) keep the general path beside lane-form records.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ndvm

pytestmark = pytest.mark.native

# every unary row with a gradient, on arguments inside its domain (u in (-1, 1), w > 1)
UNARY = (
    "(let* ((u (* 0.5 (tanh (* a x)))) (w (+ 1.5 (square b))))"
    " (+ (abs u) (exp u) (log1p (+ 1 u)) (expm1 u) (cbrt w) (square u) (sin u) (cos u)"
    " (tan u) (asin u) (acos u) (sinh u) (cosh u) (asinh u) (acosh w) (atanh u)"
    " (sigmoid (* a b)) (softplus u) (erf u) (- u) (- w u 2) (* 3 u w) (+ u 1 w)))"
)
PROGRAMS = [
    ("unary", UNARY),
    ("mixed", "(* (+ a x) (- b x) (+ a b x 1) (exp (- (square (- x a)))) (/ 1 (+ 2 (sin b))))"),
    ("repeated", "(let ((y (* a a))) (+ (* y y y) (- y) (* 2 y a) (cos (* y b))))"),
    ("split", "(if (> (* a x) 0.1) (* a (sin x) (+ b 1)) (- (tanh (* b x)) a (exp a)))"),
    ("vectors", "(let ((v (vec a (* a b) (exp b)))) (vsum (* (sin v) (+ v 1) (cos (scale 2 v)))))"),
]


def _run(src: str, theta: np.ndarray, backend: str, dtype: str) -> list[Any]:
    prog = ndvm.compile(src, params=("a", "b"), inputs=("x",), backend=backend, dtype=dtype)
    x = np.array([0.37])
    out = []
    for _ in range(3):  # the walk, then replays of its trace
        value, grad = prog.value_and_grad(theta, x=x)
        out.append((np.asarray(value).tobytes(), np.asarray(grad).tobytes()))
    return out


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,src", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_each_lane_equals_the_lane_alone(name: str, src: str, dtype: str, client: str) -> None:
    theta = np.random.default_rng(len(name)).normal(scale=0.8, size=(9, 2))
    lanes = _run(src, theta, client, dtype)
    assert lanes[0] == lanes[1] == lanes[2]  # replay == walk
    value, grad = lanes[0]
    width = len(value) // len(theta)
    gwidth = len(grad) // len(theta)
    for b in range(len(theta)):
        alone = _run(src, theta[b : b + 1], client, dtype)[0]
        assert value[b * width : (b + 1) * width] == alone[0], f"value, lane {b}"
        assert grad[b * gwidth : (b + 1) * gwidth] == alone[1], f"gradient, lane {b}"
