"""The fused reverse sweep's shared adjoint storage (Interp::plan_adjoints: a payload whose
first cotangent is a + or - record's output cotangent takes over that output's adjoint
storage instead of a copy) and the lane forms of + - * with a one-lane data row: values,
gradients, statuses and errors equal the buffered path bit for bit (``RunOptions(fused=
False)``: every adjoint in its own storage, the cotangent copied), in both dtypes, by both
clients, with replay on and off, over several lanes and at one lane; and each lane of a
batch equals that lane run alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.native.test_fused_vjp import DTYPES, _bits, check

import ndvm

pytestmark = pytest.mark.native

KALMAN = (Path(__file__).resolve().parents[2] / "examples" / "kalman80.scm").read_text()

# chains of + and -: an operand named twice in one record, an operand whose first cotangent
# comes from a + but which other records read too, a data row on either side of + - *, a
# chain that ends in a parameter's own adjoint, a sum whose two operands could both take over
CHAINS = [
    "(let* ((u (vec a b)) (w (+ u u)) (z (- w (vec b a))) (s (+ z (vec 1 2))))"
    " (+ (dot s s) (vsum (- (vec 3 4) s)) (vsum (* (vec 2 5) s)) (vsum (+ (vec 0.5 1) w))))",
    "(let loop ((k 0) (x (vec a b)) (acc 0))"
    " (if (= k 5) (+ acc (dot x x))"
    "  (let* ((y (+ x (vec 0.1 0.2))) (z (- y (* 0.5 x))) (w (- (vec 1 -1) z)))"
    "   (loop (+ k 1) (+ z (* 0.1 w)) (+ acc (vsum w) (dot y z))))))",
    "(let* ((m (mat (vec a b) (vec b a))) (p (+ m (eye 2))) (q (- p (matmul m p))))"
    " (+ (logdet (+ q (* 3 (eye 2)))) (vsum (matvec (- q m) (vec 1 2))) a))",
    "(let* ((x (+ a b)) (y (+ x b)) (z (- y a))) (+ (* z z) (- x) y))",
]


def _lanes_equal_single_lanes(src: str, theta: np.ndarray, inputs: dict[str, Any],
                              **options: Any) -> None:  # fmt: skip
    prog = ndvm.compile(src, inputs=tuple(inputs), strict=False, **options)
    many = prog.evaluate(theta, inputs, grad=True)
    for b in range(len(theta)):
        one = prog.evaluate(theta[b : b + 1], inputs, grad=True)
        assert _bits(one.value) == _bits(np.asarray(many.value)[b : b + 1])
        assert _bits(one.grad) == _bits(np.asarray(many.grad)[b : b + 1])


@pytest.mark.parametrize("B", [1, 5])
@pytest.mark.parametrize("replay", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
def test_kalman_filter_shared_equals_buffered(B: int, replay: bool, dtype: str,
                                              client: str) -> None:  # fmt: skip
    rng = np.random.default_rng(3)
    inputs = {"Y": ndvm.const(rng.normal(size=(12, 2)).cumsum(axis=0))}
    theta = rng.normal(scale=0.3, size=(B, 2))
    check(KALMAN, theta, inputs, backend=client, dtype=dtype, replay=replay)
    if B > 1:
        _lanes_equal_single_lanes(KALMAN, theta, inputs, backend=client, dtype=dtype)


@pytest.mark.parametrize("src", CHAINS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_chains_of_sums_shared_equals_buffered(src: str, dtype: str, client: str) -> None:
    theta = np.random.default_rng(7).normal(scale=0.6, size=(6, 2))
    for replay in (True, False):
        for rows in (theta, theta[:1]):
            check(src, rows, {}, backend=client, dtype=dtype, replay=replay, params=["a", "b"])
    _lanes_equal_single_lanes(src, theta, {}, backend=client, dtype=dtype, params=["a", "b"])
