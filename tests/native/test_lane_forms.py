"""Lane forms (cpp/include/ndvm/fast.hpp): over W > 1 lanes, + - * /, sqrt, log and the
elementwise unary primitives replay and differentiate through their own kernels. Each lane of a
many-lane evaluation must equal, bitwise, the same lane evaluated alone (one-lane fast forms or
the general path), walked and replayed, on both clients and in float32, out-of-domain lanes
(NaN, inf) included; records under a partial lane mask (an `if` over lanes) and dmci records of
sqrt and log keep the general path beside lane-form records.
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
    ("divide", "(+ (/ a (+ 2 (sin b))) (/ (* a b)) (/ (exp a) 3) (/ 2 (+ 3 b)) (/ (- a) (exp b)))"),
    ("roots", "(let ((w (+ 0.5 (square b)))) (* (sqrt w) (log w) (log (sqrt (+ w a a)))))"),
    (
        "vector-div",
        "(let ((v (vec (exp a) (+ 2 b) (exp b))))"
        " (vsum (+ (/ (sqrt v) (log (+ 1 v)) v) (/ v 2) (/ (log v) (sqrt v)) (/ v))))",
    ),
]

# out of the domain on some lanes: sqrt and log of negative numbers and 0, division by 0
DOMAIN = "(+ (sqrt a) (log b) (/ 1 a) (/ b a) (/ (- b 0.5)) (sqrt (* a b)) (log (* a b)))"
DOMAIN_THETA = [
    [0.7, 1.3],
    [-0.4, 0.9],
    [0.0, 0.5],
    [0.3, 0.0],
    [-0.0, -2.0],
    [2.5, -0.1],
    [0.0, 0.0],
    [1e-300, 1e300],
    [-3.0, 0.5],
]


def _run(src: str, theta: np.ndarray, backend: str, dtype: str, dialect: Any = None) -> list[Any]:
    prog = ndvm.compile(
        src, params=("a", "b"), inputs=("x",), backend=backend, dtype=dtype, dialect=dialect
    )
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


@pytest.mark.parametrize("dialect", [None, "dmci"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_out_of_domain_lanes_equal_the_lane_alone(dtype: str, dialect: Any, client: str) -> None:
    theta = np.array(DOMAIN_THETA)
    lanes = _run(DOMAIN, theta, client, dtype, dialect)
    assert lanes[0] == lanes[1] == lanes[2]  # replay (lane forms) == walk (general kernels)
    value = np.frombuffer(lanes[0][0], dtype=dtype)
    if dialect is None:  # NaN, inf and finite lanes side by side
        assert np.isnan(value).any() and np.isinf(value).any() and np.isfinite(value).any()
    width = len(lanes[0][0]) // len(theta)
    gwidth = len(lanes[0][1]) // len(theta)
    for b in range(len(theta)):
        alone = _run(DOMAIN, theta[b : b + 1], client, dtype, dialect)[0]
        assert lanes[0][0][b * width : (b + 1) * width] == alone[0], f"value, lane {b}"
        assert lanes[0][1][b * gwidth : (b + 1) * gwidth] == alone[1], f"gradient, lane {b}"


@pytest.mark.parametrize("src", ["(/ a x)", "(* (sqrt (* b x)) (log (* b x)))", "(/ x a b)"])
def test_data_lanes_replay_as_walked(src: str, client: str) -> None:
    # 44 data lanes, three parameter lanes: x <= 0 on some of them
    prog = ndvm.compile(src, params=("a", "b"), inputs=("x",), backend=client)
    theta = np.array([[0.8, 1.1], [-0.5, 0.0], [0.0, 2.0]])
    x = np.linspace(-1.0, 1.5, 44)
    runs = [prog.value_and_grad(theta, x=x) for _ in range(3)]
    got = [(np.asarray(v).tobytes(), np.asarray(g).tobytes()) for v, g in runs]
    assert got[0] == got[1] == got[2]
