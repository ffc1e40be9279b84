"""Fused pairs (``RunOptions.pairs``, cpp/src/pairs.cpp, cpp/src/fast_pairs.cpp): a lane-form
product (dot, matvec, matmul of K x K; or a * of two factors) whose output only the next
record reads, a + or - (or a dot after a matvec), runs with it as one superinstruction in
replay and the reverse sweep. Values, gradients, statuses
and errors are bitwise the unpaired path's (``pairs=False``) and the buffered path's
(``fused=False``), a NaN as any NaN: on the Kalman filter, on programs built to give a pair
of every kind (both operand orders, + and -, sizes 2 to 4, the other operand also an operand
of the product, whose adjoint storage is the sum's), on the differential programs, in both
dtypes, by both clients, at one lane (no pairs) and in lane blocks; gradients also against
central differences; a deadline in the sweep fails every lane on both paths.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.native.run_options import run_options_with
from tests.native.test_blocks import _key
from tests.native.test_chains import compare_paths
from tests.native.test_differential import PROGRAMS

import ndvm
from ndvm.backends import native

pytestmark = pytest.mark.native

DTYPES = ("float64", "float32")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
KALMAN = (EXAMPLES / "kalman80.scm").read_text()


def check(
    src: str, theta: np.ndarray, inputs: dict[str, Any], updates: bool = True, rows: int = 0,
    **options: Any,
) -> int:  # fmt: skip
    """Compares the paired, unpaired and buffered paths (with fused updates or without; in
    lane blocks of ``rows`` rows when it is not 0) over perturbed thetas; returns the pairs the
    paired replays ran (the most in one evaluation)."""
    paths = [{"pairs": True}, {"pairs": False}, {"fused": False}]
    paths = [p | {"updates": updates, "block_rows": rows} for p in paths]
    paired, unpaired, buffered = compare_paths(src, theta, inputs, paths, "pairs", **options)
    assert not any(unpaired), "pairs ran where they were not asked for"
    assert not any(buffered), "pairs ran in a run that is not fused"
    return max(paired, default=0)


def test_the_option_reaches_the_core() -> None:
    assert run_options_with(pairs=False)(ndvm.Limits(), None).pairs is False
    assert native._run_options(ndvm.Limits(), None).pairs is True


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("B", [1, 40])
def test_pairs_on_the_kalman_filter(B: int, dtype: str, client: str) -> None:
    Y = ndvm.const(np.random.default_rng(0).normal(size=(80, 2)))
    theta = np.abs(np.random.default_rng(2).normal(scale=0.3, size=(B, 2))) + 0.05
    # without the fused updates (test_updates.py), whose members pair with nothing; lane
    # blocks of 16 rows fixed (16, 16 and 8 lanes): the tuned choice changes block size at a
    # run that timing decides, and the first run at a size is not replayed
    kw = {"rows": 16, "backend": client, "dtype": dtype}
    ran = check(KALMAN, theta, {"Y": Y}, updates=False, **kw)
    # with them, the one pair of t = 0 (K Pp into Pp - K Pp), whose step is no update
    assert check(KALMAN, theta, {"Y": Y}, **kw) == (0 if B == 1 else 1)
    # four pairs a step (K v into m + K v; K Pp into Pp - K Pp, whose Pp is the product's
    # operand and shares the difference's adjoint storage; Si v into the dot with v, the
    # matvec's operand; 0.5 (...) into nll + step), less the two with v at t = 0 (v = y - m
    # there is untaped: its products are no lane forms) and nll + step there (nll is the
    # number 0); none at one lane
    assert ran == (0 if B == 1 else 317)


# Every kind of pair: dot, matvec and matmul of 2 x 2, 3 x 3 and 4 x 4, the product as the
# first and second operand of + and -, the other operand an operand of the product (its
# adjoint stored in the sum's when the sweep shares storage, from the second sweep of a
# tape on), inside a loop (so the pairs repeat and replays share storage); and products that
# cannot pair (read twice; read by a guard; a one-lane data operand; three operands).
def _mat(k: int, s: str) -> str:
    rows = []
    for i in range(k):
        row = [f"(* {s} {0.1 * (i + 1)})" if i == j else f"{0.05 * (i - j)}" for j in range(k)]
        rows.append("(vec " + " ".join(row) + ")")
    return "(mat " + " ".join(rows) + ")"


def _vec(k: int, s: str) -> str:
    return "(vec " + " ".join(f"(+ {s} {0.2 * i})" for i in range(k)) + ")"


def _paired(k: int) -> str:
    A, B, v = _mat(k, "a"), _mat(k, "b"), _vec(k, "b")
    return (
        f"(let loop ((i 0) (p {A}) (x {v}) (s 0))"
        f" (if (= i 4) (+ s (vsum (matvec p x)))"
        f"  (let* ((q (+ p {B})) (r (* 0.5 q))"
        f"         (p2 (- q (matmul r q)))"  # X (last read here) is the product's operand 1
        f"         (p3 (+ p2 (matmul p2 r)))"  # X (last read here) is its operand 0
        f"         (x2 (- (matvec p3 x) x))"  # the product first, -
        f"         (x3 (+ x2 (matvec r x2)))"  # X is the vector operand
        f"         (d (- s (dot x3 x2)))"  # a dot, second operand of - (s: a number at i = 0)
        f"         (e (dot (matvec q x3) x2))"  # a matvec into a dot, first operand
        f"         (x4 (- x3 (* x2 x3)))"  # a * of two vectors, X its second factor
        f"         (x5 (+ (* 0.5 x4) x2)))"  # a * by a number, first operand of +
        f"    (loop (+ i 1) (* 0.25 p3) (* 0.5 x5) (+ d (dot x (matvec r x)) e)))))"
    )


# 9 a step (the last: r x into the dot with x, its second operand), 4 steps, less d at i = 0 (s
# there is an untaped number)
PAIRS = 35


UNPAIRED = [
    # the product read twice, and by a guard (a branch on its value)
    "(let* ((m (mat (vec a b) (vec (* a b) (+ 2 a)))) (p (matmul m m)))"
    " (+ (vsum (+ p m)) (if (< (ref (ref p 0) 0) 100) (vsum (- m p)) 0)))",
    # a one-lane data row and a three-operand sum
    "(let* ((m (mat (vec a b) (vec (* a b) (+ 2 a)))) (v (matvec m (vec a b))))"
    " (+ (vsum (- y (matvec m v))) (vsum (+ v (matvec m v) v))))",
]


@pytest.mark.parametrize("replay", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", [2, 3, 4])
def test_pairs_of_every_kind(k: int, dtype: str, replay: bool, client: str) -> None:
    theta = np.random.default_rng(k).normal(size=(9, 2)) + np.array([1.5, 0.5])
    theta[4] = [np.inf, 0.5]  # a non-finite lane goes NaN or fails alone
    ran = check(_paired(k), theta, {}, backend=client, dtype=dtype, replay=replay,
                params=["a", "b"])  # fmt: skip
    assert ran == (PAIRS if replay else 0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("src", UNPAIRED)
def test_products_that_cannot_pair(src: str, dtype: str, client: str) -> None:
    theta = np.random.default_rng(1).normal(size=(6, 2)) + np.array([1.5, 0.5])
    ran = check(src, theta, {"y": np.array([0.3, -1.2])}, backend=client, dtype=dtype,
                params=["a", "b"])  # fmt: skip
    assert ran == 0


def test_a_dot_between_two_pairs_joins_one(client: str) -> None:
    # matvec -> dot -> -: the dot is the first pair's consumer, so it is no second pair's product
    src = (
        "(let* ((m (mat (vec a b) (vec (* a b) (+ 2 a)))) (v (vec a b)) (w (vec b (* a a))))"
        " (- (dot v v) (dot w (matvec m v))))"
    )
    theta = np.random.default_rng(6).normal(size=(5, 2))
    assert check(src, theta, {}, backend=client, params=["a", "b"]) == 1


@pytest.mark.parametrize("name,source,inputs", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_pairs_on_the_differential_programs(
    name: str, source: str, inputs: dict[str, Any], client: str
) -> None:
    n = len(ndvm.compile(source, inputs=tuple(inputs), backend="reference").params)
    theta = np.random.default_rng(5).normal(size=(7, n))
    check(source, theta, inputs, backend=client)


def test_paired_gradients_match_central_differences(client: str) -> None:
    src = _paired(2)
    theta = np.random.default_rng(8).normal(scale=0.2, size=(6, 2)) + np.array([1.5, 0.5])
    prog = ndvm.compile(src, params=["a", "b"], backend=client)
    prog.evaluate(theta, {}, grad=True)
    r = prog.evaluate(theta, {}, grad=True)
    assert r.stats["replayed"] and r.stats["pairs"] == PAIRS
    h = 1e-6
    for j in range(2):
        e = np.zeros(2)
        e[j] = h
        up = np.asarray(prog.evaluate(theta + e, {}).value)
        down = np.asarray(prog.evaluate(theta - e, {}).value)
        fd = ((up - down) / (2 * h)).reshape(-1)
        g = np.asarray(r.grad)[:, j]
        np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-6 * max(1.0, np.abs(g).max()))


def test_lanes_of_a_paired_batch_equal_single_lanes(client: str) -> None:
    theta = np.random.default_rng(4).normal(size=(10, 2)) + np.array([1.5, 0.5])
    prog = ndvm.compile(_paired(3), params=["a", "b"], backend=client)
    prog.evaluate(theta, {}, grad=True)
    batch = prog.evaluate(theta, {}, grad=True)
    assert batch.stats["replayed"] and batch.stats["pairs"] == PAIRS
    for b in range(len(theta)):
        one = prog.evaluate(theta[b : b + 1], {}, grad=True)
        assert np.asarray(batch.value)[b].tobytes() == np.asarray(one.value)[0].tobytes()
        assert np.asarray(batch.grad)[b].tobytes() == np.asarray(one.grad)[0].tobytes()


def test_a_paired_sweep_meets_the_deadline_and_step_limit_as_an_unpaired_one(client: str) -> None:
    # a deadline of 1 us (which the walk and the replay, of too few records to look at the
    # clock, do not see) has passed when the sweep ends: every lane fails in the sweep on both
    # paths; a step limit below the walk's steps fails every lane in the walk on both paths
    theta = np.random.default_rng(4).normal(size=(10, 2)) + np.array([1.5, 0.5])
    for limits, status in ((ndvm.Limits(deadline=1e-6), 2), (ndvm.Limits(max_steps=50), None)):
        keys = []
        for pairs in (True, False):
            mp = pytest.MonkeyPatch()
            mp.setattr(native, "_run_options", run_options_with(pairs=pairs))
            try:
                prog = ndvm.compile(_paired(2), params=["a", "b"], backend=client, strict=False,
                                    limits=limits)  # fmt: skip
                prog.evaluate(theta, {})
                r = prog.evaluate(theta, {}, grad=True)
            finally:
                mp.undo()
            if status is not None:
                assert r.stats["replayed"] and (r.stats["pairs"] > 0) == pairs
                assert r.status.tolist() == [[status]] * 10
                assert np.isnan(r.grad).all()
            else:
                assert np.asarray(r.status).min() > 0 and r.errors
            keys.append(_key(r))
        assert keys[0] == keys[1]
