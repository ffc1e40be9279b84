"""Fused Gaussian updates (``RunOptions.updates``, cpp/src/updates.cpp, cpp/src/fast_updates.hpp):
the 13 records of a 2 x 2 Kalman-type measurement update (S = Pp + R, its inverse, the gain,
m + K v, Pp - K Pp, log|S| + v' S^-1 v, ...) run as one superinstruction in replay and the
reverse sweep. Values, gradients, statuses and errors are bitwise those of the path without
them (``updates=False``, with and without pairs) and of the buffered path (``fused=False``),
a NaN as any NaN: on the Kalman filter (whose last update, with m2 and P2 unread, runs the
fallback), a filter whose result reads only the state (every update's nll2 without a
cotangent), in both dtypes, by both clients, at one lane and over lanes, in lane blocks, with a
non-finite lane, with values and gradients asked in turn (a tape's first sweep shares no adjoint
storage: the fallback); gradients also against central differences; each lane of a batch as
that lane alone; a deadline in the sweep fails every lane on both paths. Programs that differ
from the update anywhere (a fixed R, an inner value read again, another operand order, a 3 x 3
state) run no update and the same bits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.native.run_options import run_options_with
from tests.native.test_blocks import _key
from tests.native.test_chains import compare_paths

import ndvm
from ndvm.backends import native

pytestmark = pytest.mark.native

DTYPES = ("float64", "float32")
KALMAN = (Path(__file__).resolve().parents[2] / "examples" / "kalman80.scm").read_text()
PATHS = [{"updates": True}, {"updates": False}, {"updates": False, "pairs": False},
         {"fused": False}]  # fmt: skip

# The filter with the step's pieces as parameters of the template: {R} the observation noise,
# {S} the innovation covariance, {gain}, {step} the NLL term and {out} the loop's result.
FILTER = """(params (q 0.3 positive) (r 0.3 positive))
(define Q (* (eye {n}) (* q q)))
(define R {R})
(let loop ((t 0) (m (zeros {n})) (P (eye {n})) (nll 0))
  (if (= t (rows Y))
      {out}
      (let* ((Pp (+ P Q)) (y (ref Y t)) (v (- y m)) (S {S}) (Si (inv S)) (K {gain})
             (m2 (+ m (matvec K v))) (P2 (- Pp (matmul K Pp)))
             (step (* 0.5 (+ (logdet S) (dot v (matvec Si v)) {c}))))
        (loop (+ t 1) m2 P2 {nll}))))"""
BASE = {"n": 2, "R": "(* (eye 2) (* r r))", "S": "(+ Pp R)", "gain": "(matmul Pp Si)",
        "c": "3.6757541328186907", "out": "nll", "nll": "(+ nll step)"}  # fmt: skip


def _filter(**changes: str) -> str:
    return FILTER.format(**(BASE | changes))


def _data(T: int = 12, n: int = 2, seed: int = 0) -> dict[str, Any]:
    return {"Y": ndvm.const(np.random.default_rng(seed).normal(size=(T, n)).cumsum(axis=0))}


def _theta(B: int, seed: int = 2) -> np.ndarray:
    return np.random.default_rng(seed).normal(scale=0.3, size=(B, 2))


def check(
    src: str, theta: np.ndarray, inputs: dict[str, Any], rows: int = 0, **options: Any
) -> int:
    """Compares the paths of PATHS (in lane blocks of ``rows`` rows when it is not 0) over
    perturbed thetas; returns the updates the first path's replays ran (the most in one
    evaluation, of one block when blocked)."""
    paths = [p | {"block_rows": rows} for p in PATHS]
    runs = compare_paths(src, theta, inputs, paths, "updates", **options)
    for other in runs[1:]:
        assert not any(other), "updates ran where they were not asked for"
    return max(runs[0], default=0)


def test_the_option_reaches_the_core() -> None:
    assert run_options_with(updates=False)(ndvm.Limits(), None).updates is False
    assert native._run_options(ndvm.Limits(), None).updates is True


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("B", [1, 40])
def test_updates_on_the_kalman_filter(B: int, dtype: str, client: str) -> None:
    Y = ndvm.const(np.random.default_rng(0).normal(size=(80, 2)))
    theta = np.abs(np.random.default_rng(2).normal(scale=0.3, size=(B, 2))) + 0.05
    # one update a step but at t = 0, where v = y - m is data (its products are no lane forms)
    # and nll the number 0; the last one's m2 and P2 are read by nothing (its sweep runs the
    # fallback). Lane blocks of 16 rows fixed (16, 16 and 8 lanes): the tuned choice changes
    # block size at a run that timing decides, and the first run at a size is not replayed.
    assert check(KALMAN, theta, {"Y": Y}, 16, backend=client, dtype=dtype) == 79


@pytest.mark.parametrize("rows", [2, 16])
def test_updates_in_lane_blocks(rows: int, client: str) -> None:
    theta = _theta(40)
    assert check(KALMAN, theta, _data(30), rows, backend=client) == 29


def test_updates_when_only_the_state_has_a_cotangent(client: str) -> None:
    # the result reads m and P only: no update's nll2 has a cotangent, so each update's VJP
    # runs at P2's place (the fallback: its state is not the steady one)
    src = _filter(out="(+ (vsum m) (logdet P))")
    assert check(src, _theta(9), _data(), backend=client) == 11


def test_updates_with_a_non_finite_lane(client: str) -> None:
    theta = _theta(9)
    theta[3] = [800.0, -800.0]  # q^2 overflows: that lane's filter is NaN
    assert check(KALMAN, theta, _data(), backend=client, dtype="float32") == 11
    assert check(KALMAN, theta, _data(), backend=client) == 11


@pytest.mark.parametrize("extra", [0, 3, 7, 11])
@pytest.mark.parametrize("B", [1, 3])
def test_updates_where_the_loops_cut_the_tape(extra: int, B: int, client: str) -> None:
    # The replay steps from an update's first member to its last and the sweep from its last
    # to before its first, each within its own bounds: the replay's spans of 1024 records and
    # the sweep's stretches of 4096. 300 steps make a tape of 4505 + extra records (the first
    # update at record 22, one every 15): the replay's spans end inside updates (at 1024,
    # 2048, 3072 and 4096: at an update's 13th, 2nd, 6th and 10th member), and `extra`
    # records after the loop move the sweep's first cut, at 409 + extra, to an update's 13th,
    # 1st, 5th or 9th member (extra 0, 3, 7, 11).
    out = "nll"
    for _ in range(extra):
        out = f"(* 1.0 {out})"
    assert check(_filter(out=out), _theta(B), _data(300), backend=client) == 299


# Each differs from the update in one place: no update forms, the same bits.
DIFFERENT = {
    "a fixed R (untaped)": {"R": "(* (eye 2) 0.09)"},
    "S read again (its det)": {"c": "(* 0 (det S))"},
    "R + Pp (the other order)": {"S": "(+ R Pp)"},
    "the gain read again": {"nll": "(+ nll step (* 0 (vsum (matvec K v))))"},
    "a 3 x 3 state": {"n": "3", "R": "(* (eye 3) (* r r))"},
}


@pytest.mark.parametrize("name", list(DIFFERENT))
def test_programs_that_differ_run_no_update(name: str, client: str) -> None:
    n = int(DIFFERENT[name].get("n", "2"))
    assert check(_filter(**DIFFERENT[name]), _theta(6), _data(n=n), backend=client) == 0


def test_the_filter_as_a_template_runs_updates(client: str) -> None:
    assert check(_filter(), _theta(6), _data(), backend=client) == 11


def test_updated_gradients_match_central_differences(client: str) -> None:
    theta = _theta(5)
    inputs = _data()
    prog = ndvm.compile(KALMAN, inputs=("Y",), backend=client)
    prog.evaluate(theta, inputs, grad=True)
    r = prog.evaluate(theta, inputs, grad=True)
    assert r.stats["replayed"] and r.stats["updates"] == 11
    h = 1e-6
    for j in range(2):
        e = np.zeros(2)
        e[j] = h
        up = np.asarray(prog.evaluate(theta + e, inputs).value)
        down = np.asarray(prog.evaluate(theta - e, inputs).value)
        fd = ((up - down) / (2 * h)).reshape(-1)
        g = np.asarray(r.grad)[:, j]
        np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-6 * max(1.0, np.abs(g).max()))


@pytest.mark.parametrize("dtype", DTYPES)
def test_lanes_of_an_updated_batch_equal_single_lanes(dtype: str, client: str) -> None:
    theta = _theta(10)
    inputs = _data()
    prog = ndvm.compile(KALMAN, inputs=("Y",), backend=client, dtype=dtype)
    prog.evaluate(theta, inputs, grad=True)
    batch = prog.evaluate(theta, inputs, grad=True)
    assert batch.stats["replayed"] and batch.stats["updates"] == 11
    for b in range(len(theta)):
        prog.evaluate(theta[b : b + 1], inputs, grad=True)
        one = prog.evaluate(theta[b : b + 1], inputs, grad=True)
        assert one.stats["replayed"] and one.stats["updates"] == 11
        assert np.asarray(batch.value)[b].tobytes() == np.asarray(one.value)[0].tobytes()
        assert np.asarray(batch.grad)[b].tobytes() == np.asarray(one.grad)[0].tobytes()


def test_an_updated_sweep_meets_the_deadline_as_one_without(client: str) -> None:
    # a deadline of 1 us has passed when the sweep ends (the walk and the replay, of too few
    # records, do not look at the clock): every lane fails in the sweep on both paths
    theta = _theta(10)
    inputs = _data()
    keys = []
    for updates in (True, False):
        mp = pytest.MonkeyPatch()
        mp.setattr(native, "_run_options", run_options_with(updates=updates))
        try:
            prog = ndvm.compile(KALMAN, inputs=("Y",), backend=client, strict=False,
                                limits=ndvm.Limits(deadline=1e-6))  # fmt: skip
            prog.evaluate(theta, inputs)
            r = prog.evaluate(theta, inputs, grad=True)
        finally:
            mp.undo()
        assert r.stats["replayed"] and (r.stats["updates"] > 0) == updates
        assert r.status.tolist() == [[2]] * 10
        assert np.isnan(r.grad).all()
        keys.append(_key(r))
    assert keys[0] == keys[1]


@pytest.mark.parametrize("B", [1, 12])
def test_values_and_gradients_in_turn(B: int, client: str) -> None:
    # a value first (a walk without a sweep), then gradients: the first sweep, of a replay
    # that ran the updates, shares no adjoint storage, so every update takes the fallback;
    # later sweeps share it and run the one-loop VJP
    theta = _theta(B)
    inputs = _data()
    runs = []
    for updates in (True, False):
        mp = pytest.MonkeyPatch()
        mp.setattr(native, "_run_options", run_options_with(updates=updates))
        try:
            prog = ndvm.compile(KALMAN, inputs=("Y",), backend=client)
            run = [prog.evaluate(theta, inputs, grad=g) for g in (False, True, True, False, True)]
        finally:
            mp.undo()
        assert [r.stats["updates"] > 0 for r in run] == [False] + [updates] * 4
        runs.append([_key(r) for r in run])
    assert runs[0] == runs[1]
