"""Replay's forward pass and the reverse sweep run the fast records lying between two general
records (a record without a fast form, or a fused lane form in a run that is not fused) as one
loop without a per-record check (``Interp::list_slow``). A tape that interleaves the two kinds
gives, replayed, what the walk gives, bit for bit (values, gradients, statuses, steps), at one
lane and over several lanes, fused and not, in both dtypes, by both clients.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from tests.native.test_fused_vjp import _evaluations
from tests.native.test_replay import _perturbed

import ndvm

pytestmark = pytest.mark.native

# one lane: sin, exp and log are general records between fast + * matmul matvec dot and the
# 2x2 inverse and logdet; over several lanes (not fused), the products and the inverse are
SOURCE = """
(params a b)
(let loop ((i 0) (m (eye 2)) (acc 0))
  (if (= i 6)
      (+ acc (logdet m))
      (let* ((s (sin a))
             (m2 (matmul m (+ (eye 2) (* 0.1 (* s b)))))
             (w (matvec (inv m2) (vector a 1)))
             (e (exp (* 0.01 (dot w (vector b a)))))
             (l (log (+ 2 (* e e)))))
        (loop (+ i 1) m2 (+ acc l)))))
"""


@pytest.mark.parametrize("B", [1, 4])
@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_replayed_runs_between_general_records_equal_the_walk(
    B: int, fused: bool, dtype: str, client: str
) -> None:
    rng = np.random.default_rng(B)
    theta = rng.uniform(0.2, 0.9, size=(B, 2))
    thetas = [t for t in _perturbed(theta, 5) for _ in range(2)]  # each twice: replayed
    opts: dict[str, Any] = {"backend": client, "dtype": dtype}
    replayed = list(_evaluations(SOURCE, thetas, {}, fused, **opts))
    walked = list(_evaluations(SOURCE, thetas, {}, fused, replay=False, **opts))
    assert replayed == walked
    assert all(isinstance(k[1], bytes) for k in replayed)  # every evaluation has its gradient


@pytest.mark.parametrize("B", [1, 4])
def test_the_program_replays(B: int) -> None:
    theta = np.full((B, 2), 0.5)
    prog = ndvm.compile(SOURCE, strict=False)
    stats = [prog.evaluate(theta, {}, grad=True).stats["replayed"] for _ in range(3)]
    assert stats == [False, True, True]
