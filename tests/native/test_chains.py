"""Fused chains (``RunOptions.chain_lanes``, cpp/src/chains.cpp): a replayed run of lane-form
records, run block by block of lanes in a scratch arena (inner payloads never stored) and
differentiated by recomputing it, gives bitwise the values, gradients, statuses and errors of
the unchained path (``chain_lanes`` too large to apply) and of the buffered path
(``fused=False``), a NaN as any NaN (its sign may follow its place in a vector loop): on the
differential and golden programs, the Kalman filter, and programs built to give a chain every
kind of input and output (one-lane data rows, lane-uniform numbers, an inverse read by a later
logdet, an output read again inside its chain), in both dtypes, by both clients, with replay
on and off, with blocks whose last one is shorter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.native.run_options import ORIGINAL, run_options_with
from tests.native.test_blocks import _key
from tests.native.test_differential import PROGRAMS
from tests.native.test_replay import GOLDENS, _perturbed, golden_case

import ndvm
from ndvm.backends import native

pytestmark = pytest.mark.native

DTYPES = ("float64", "float32")
NEVER = 1 << 30  # lanes per block no batch here has twice of: chains never apply
_ORIGINAL = ORIGINAL
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _options(lanes: int, fused: bool = True) -> Callable[..., Any]:
    """``native._run_options`` with ``chain_lanes=lanes`` (and ``fused``)."""
    return run_options_with(chain_lanes=lanes, fused=fused)


def evaluations(
    src: str, thetas: list[np.ndarray], inputs: dict[str, Any], changes: dict[str, Any],
    stat: str, **options: Any,
) -> Iterator[Any]:  # fmt: skip
    """Each evaluation's key and (replayed, stats[stat]) with the run options ``changes``."""
    mp = pytest.MonkeyPatch()
    mp.setattr(native, "_run_options", run_options_with(**changes))
    try:
        prog = ndvm.compile(src, inputs=tuple(inputs), strict=False, **options)
        for th in thetas:
            try:
                r = prog.evaluate(th, inputs, grad=True)
                yield _key(r), (r.stats["replayed"], r.stats[stat])
            except ndvm.NdvmError as exc:
                yield (type(exc).__name__, str(exc)), None
    finally:
        mp.undo()


def compare_paths(
    src: str, theta: np.ndarray, inputs: dict[str, Any], paths: list[dict[str, Any]], stat: str,
    **options: Any,
) -> list[list[int]]:  # fmt: skip
    """Runs perturbed thetas on each path (run option changes); every path's results must be
    the first's. Returns each path's stats[stat] per evaluation (that did not raise)."""
    thetas = _perturbed(theta, 3)
    runs = [list(evaluations(src, thetas, inputs, p, stat, **options)) for p in paths]
    for k, row in enumerate(zip(*runs)):
        a, ra = row[0]
        for j, (b, rb) in enumerate(row[1:], 1):
            assert ra is None or rb is None or ra[0] == rb[0], f"evaluation {k}: replayed differs"
            assert a == b, f"evaluation {k} differs on the path {paths[j]}"
    return [[r[1] for _, r in run if r is not None] for run in runs]


def check(
    src: str, theta: np.ndarray, inputs: dict[str, Any], lanes: int, rows: int = 0,
    **options: Any,
) -> int:  # fmt: skip
    """Compares the chained, unchained and buffered paths, run in lane blocks of ``rows`` rows
    when it is not 0; returns the chains run."""
    paths = [
        {"chain_lanes": n, "fused": f, "block_rows": rows}
        for n, f in ((lanes, True), (NEVER, True), (NEVER, False))
    ]
    chained, unchained, buffered = compare_paths(src, theta, inputs, paths, "chains", **options)
    assert not any(unchained), "chains ran where they cannot apply"
    assert not any(buffered), "chains ran in a run that is not fused"
    return sum(chained)


def test_the_option_reaches_the_core() -> None:
    assert _options(3)(ndvm.Limits(), None).chain_lanes == 3
    assert _ORIGINAL(ndvm.Limits(), None).chain_lanes == 0


@pytest.mark.parametrize("replay", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,source,inputs", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_chains_on_the_differential_programs(
    name: str, source: str, inputs: dict[str, Any], dtype: str, replay: bool, client: str
) -> None:
    n = len(ndvm.compile(source, inputs=tuple(inputs), backend="reference").params)
    theta = np.random.default_rng(5).normal(size=(7, n))  # blocks of 3, 3 and 1 lanes
    check(source, theta, inputs, 3, backend=client, dtype=dtype, replay=replay)


@pytest.mark.parametrize("replay", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", GOLDENS)
def test_chains_on_the_goldens(name: str, dtype: str, replay: bool, client: str) -> None:
    src, inputs, theta, options = golden_case(name)
    theta = np.concatenate([theta, theta * 0.9, theta + 0.1, theta * 1.1, theta - 0.2])
    check(src, theta, inputs, 2, backend=client, dtype=dtype, replay=replay, **options)


# Chains with every kind of operand: a one-lane data row (y), lane-uniform numbers, a matrix
# inverted and its logdet taken later (the VJP reads the inverse), an output that a later
# record of the same chain reads again, and a result taken from the middle of a chain.
CHAINED = [
    "(let* ((m (mat (vec a b) (vec (* a b) (+ 2 a)))) (s (+ (eye 2) (matmul m m)))"
    " (si (inv s)) (r (- y (matvec m (vec a b)))))"
    " (+ (logdet s) (dot r (matvec si r)) (* 0.5 (dot r r))))",
    "(let loop ((k 0) (p (mat (vec a 0.1) (vec 0.1 b))) (acc 0))"
    " (if (= k 6) (+ acc (vsum (matvec p (vec 1 1))))"
    "  (let* ((q (+ (matmul p (mat (vec 0.9 0.1) (vec 0.0 0.8))) (eye 2)))"
    "         (qi (inv q)) (e (- y (matvec q (vec a b)))))"
    "    (loop (+ k 1) (* 0.5 (+ q (matmul qi q))) (+ acc (logdet q) (dot e (matvec qi e)))))))",
    "(let* ((m (mat (vec (+ 2 a) b) (vec (* a b) (+ 3 b)))) (v (vec a b)) (d (det m))"
    " (mi (inv m)) (t (matmul mi m)) (u (matvec (+ t (eye 2)) v)))"
    " (vec (+ d (dot u v)) (logdet m)))",
]


@pytest.mark.parametrize("replay", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("src", CHAINED)
def test_chains_with_every_kind_of_operand(src: str, dtype: str, replay: bool, client: str) -> None:
    theta = np.random.default_rng(1).normal(size=(9, 2)) + np.array([1.5, 0.5])
    theta[4] = [np.inf, 0.5]  # a non-finite lane fails or goes NaN alone
    inputs = {"y": np.array([0.3, -1.2])}
    for lanes in (2, 4):  # blocks of 2 (a last one of 1) and of 4
        ran = check(src, theta, inputs, lanes, backend=client, dtype=dtype, replay=replay,
                    params=["a", "b"])  # fmt: skip
        assert (ran > 0) == replay


@pytest.mark.parametrize("dtype", DTYPES)
def test_chains_on_the_kalman_filter(dtype: str, client: str) -> None:
    src = (EXAMPLES / "kalman80.scm").read_text()
    Y = ndvm.const(np.random.default_rng(0).normal(size=(80, 2)))
    theta = np.abs(np.random.default_rng(2).normal(scale=0.3, size=(40, 2))) + 0.05
    # the 40 rows run as lane blocks of 16, 16 and 8 rows on every path: chains of 4 lanes fit
    # twice into each. The rows are fixed: the automatic choice tunes them by timing, and a
    # block size that changes records its trace again (that run is not replayed), at a run
    # that depends on the timing, so paths would not replay at the same runs
    ran = check(src, theta, {"Y": Y}, 4, rows=16, backend=client, dtype=dtype, replay=True)
    assert ran > 0


def test_lanes_of_a_chained_batch_equal_single_lanes(client: str) -> None:
    src = CHAINED[1]
    theta = np.random.default_rng(4).normal(size=(10, 2)) + np.array([1.5, 0.5])
    inputs = {"y": np.array([0.3, -1.2])}
    mp = pytest.MonkeyPatch()
    mp.setattr(native, "_run_options", _options(3))
    try:
        prog = ndvm.compile(src, inputs=("y",), params=["a", "b"], backend=client)
        prog.evaluate(theta, inputs, grad=True)
        batch = prog.evaluate(theta, inputs, grad=True)
        assert batch.stats["replayed"] and batch.stats["chains"] > 0
    finally:
        mp.undo()
    for b in range(len(theta)):
        one = prog.evaluate(theta[b : b + 1], inputs, grad=True)
        assert np.asarray(batch.value)[b].tobytes() == np.asarray(one.value)[0].tobytes()
        assert np.asarray(batch.grad)[b].tobytes() == np.asarray(one.grad)[0].tobytes()


def test_a_chained_sweep_meets_the_deadline_as_an_unchained_one(client: str) -> None:
    # The sweep after a chained replay looks at the clock as vjp_fast does: a deadline of 1 us
    # (which the walk and the replay, of too few steps and records to look at the clock, do not
    # see) has passed, with its grace, when the sweep ends: every lane fails in the sweep, on
    # the chained path as on the unchained one (deterministic: no timing decides it)
    theta = np.random.default_rng(4).normal(size=(10, 2)) + np.array([1.5, 0.5])
    inputs = {"y": np.array([0.3, -1.2])}
    keys = []
    for lanes in (3, NEVER):
        mp = pytest.MonkeyPatch()
        mp.setattr(native, "_run_options", _options(lanes))
        try:
            prog = ndvm.compile(CHAINED[1], inputs=("y",), params=["a", "b"], backend=client,
                                strict=False, limits=ndvm.Limits(deadline=1e-6))  # fmt: skip
            assert prog.evaluate(theta, inputs).status.tolist() == [[0, 0]] * 10  # the trace
            r = prog.evaluate(theta, inputs, grad=True)
        finally:
            mp.undo()
        assert r.stats["replayed"] and (r.stats["chains"] > 0) == (lanes == 3)
        assert r.status.tolist() == [[2, 2]] * 10
        assert [str(e) for _, e in r.errors] == [
            "evaluation exceeded its deadline of 1e-06 s (in the reverse sweep)"
        ]
        assert np.isnan(r.grad).all()
        keys.append(_key(r))
    assert keys[0] == keys[1]
