"""Lane blocking (``RunOptions.block_rows``, cpp/src/blocks.cpp): a batch run as blocks of a
few parameter rows equals the batch run whole bit for bit — values, gradients, statuses and
errors — on the differential and golden programs, in both dtypes, by both clients, with replay
on and off. NaNs compare as NaNs: the sign of a NaN may depend on a lane's place in a vector
loop (its body or its scalar tail), which a block changes. A block with an error or a
non-numeric result sends the batch to the whole path, so a failing lane fails alone, as it does
unblocked. Steps are not compared: a blocked run reports its largest block's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from tests.native.run_options import ORIGINAL, run_options_with
from tests.native.test_differential import PROGRAMS
from tests.native.test_replay import GOLDENS, _perturbed, golden_case

import ndvm
from ndvm.backends import native
from ndvm.errors import NativeError

pytestmark = pytest.mark.native

DTYPES = ("float64", "float32")
B, ROWS = 11, 3  # blocks of 3, 3, 3 and 2 rows: both child machines
_ORIGINAL = ORIGINAL


def _with_rows(rows: int) -> Callable[..., Any]:
    """``native._run_options`` with ``block_rows=rows`` (1 << 30: never blocked)."""
    return run_options_with(block_rows=rows)


def _bits(a: Any) -> bytes:
    a = np.asarray(a)
    return np.where(np.isnan(a), np.nan, a).tobytes()


def _key(r: Any) -> Any:
    """test_replay's key with NaNs made the same NaN, without steps."""
    errors = [
        (np.asarray(m).tobytes(), type(e).__name__, e.message, e.line, e.column)
        for m, e in r.errors
    ]
    grad = None if r.grad is None else _bits(r.grad)
    value = _bits(r.value) if r.numeric else repr(r.value.tolist())
    return (value, grad, np.asarray(r.status).tobytes(), errors)


def _evaluations(
    src: str, thetas: list[np.ndarray], inputs: dict[str, Any], rows: int, **options: Any
) -> tuple[list[Any], int]:
    """Each evaluation's results (without steps), and how many of them ran blocked."""
    mp = pytest.MonkeyPatch()
    mp.setattr(native, "_run_options", _with_rows(rows))
    keys, blocked = [], 0
    try:
        prog = ndvm.compile(src, inputs=tuple(inputs), strict=False, **options)
        for th in thetas:
            try:
                r = prog.evaluate(th, inputs, grad=True)
            except ndvm.NdvmError as exc:
                keys.append((type(exc).__name__, str(exc)))
                continue
            keys.append(_key(r))
            blocked += r.stats["blocks"] > 0
    finally:
        mp.undo()
    return keys, blocked


def check(src: str, theta: np.ndarray, inputs: dict[str, Any], **options: Any) -> int:
    """Blocked equals whole on perturbed thetas; returns how many evaluations ran blocked."""
    thetas = _perturbed(theta, 3)
    blocked, n = _evaluations(src, thetas, inputs, ROWS, **options)
    whole, none = _evaluations(src, thetas, inputs, 1 << 30, **options)
    assert none == 0
    for k, (a, b) in enumerate(zip(blocked, whole)):
        assert a == b, f"evaluation {k} differs from the whole batch"
    return n


def test_the_option_reaches_the_core() -> None:
    assert _with_rows(3)(ndvm.Limits(), None).block_rows == 3
    assert _ORIGINAL(ndvm.Limits(), None).block_rows == 0


@pytest.mark.parametrize("replay", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,source,inputs", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_blocked_equals_whole_on_the_differential_programs(
    name: str, source: str, inputs: dict[str, Any], dtype: str, replay: bool, client: str
) -> None:
    n = len(ndvm.compile(source, inputs=tuple(inputs), backend="reference").params)
    theta = np.random.default_rng(5).normal(size=(B, n))
    check(source, theta, inputs, backend=client, dtype=dtype, replay=replay)


@pytest.mark.parametrize("replay", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", GOLDENS)
def test_blocked_equals_whole_on_the_goldens(
    name: str, dtype: str, replay: bool, client: str
) -> None:
    src, inputs, theta, options = golden_case(name)
    rows = theta[np.arange(B) % len(theta)]
    theta = rows * (1 + 0.05 * np.random.default_rng(2).normal(size=rows.shape))
    check(src, theta, inputs, backend=client, dtype=dtype, replay=replay, **options)


KALMAN_LIKE = (
    "(let loop ((k 0) (m (vec 0 0)) (s 0))"
    " (if (= k 12) s"
    "  (let* ((y (vec (* 0.1 k) (sin k))) (r (- y m)) (S (+ (outer r r) (* (exp a) (eye 2)))))"
    "   (loop (+ k 1) (+ m (* b r)) (+ s (logdet S) (dot r (matvec (inv S) r)))))))"
)


@pytest.mark.parametrize("dtype", DTYPES)
def test_blocks_run_and_each_lane_equals_its_single_lane_run(dtype: str, client: str) -> None:
    theta = np.random.default_rng(0).normal(scale=0.3, size=(B, 2))
    assert check(KALMAN_LIKE, theta, {}, backend=client, dtype=dtype, params=["a", "b"]) == 5
    mp = pytest.MonkeyPatch()
    mp.setattr(native, "_run_options", _with_rows(ROWS))
    try:
        prog = ndvm.compile(KALMAN_LIKE, ["a", "b"], backend=client, dtype=dtype)
        many = prog.evaluate(theta, {}, grad=True)
        assert many.stats["blocks"] == 4
        for b in range(B):
            one = prog.evaluate(theta[b : b + 1], {}, grad=True)
            assert one.stats["blocks"] == 0
            assert _bits(one.value) == _bits(np.asarray(many.value)[b : b + 1])
            assert _bits(one.grad) == _bits(np.asarray(many.grad)[b : b + 1])
    finally:
        mp.undo()


@pytest.mark.parametrize("dtype", DTYPES)
def test_data_lanes_stay_in_their_row(dtype: str, client: str) -> None:
    # a row's gradient sums over its data lanes: blocks split rows, never a row's data lanes
    x = np.linspace(-1.5, 2.5, 7)
    src = "(* a (exp (- (* b x))) (cos (+ (* c x) d)))"
    theta = np.random.default_rng(3).normal(size=(B, 4))
    assert check(src, theta, {"x": x}, backend=client, dtype=dtype) == 5


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_failing_lane_fails_alone(dtype: str, client: str) -> None:
    # an error in one block: the batch runs whole, the error is the whole batch's, and every
    # other lane's value and gradient are as they are without the failing lane
    src = '(if (< a -1) (error "too small" a) (* a (exp b)))'
    theta = np.random.default_rng(4).normal(scale=0.3, size=(B, 2))
    theta[7, 0] = -2.0
    assert check(src, theta, {}, backend=client, dtype=dtype, params=["a", "b"]) == 0
    mp = pytest.MonkeyPatch()
    mp.setattr(native, "_run_options", _with_rows(ROWS))
    try:
        prog = ndvm.compile(src, ["a", "b"], backend=client, dtype=dtype, strict=False)
        r = prog.evaluate(theta, {}, grad=True)
        assert list(np.asarray(r.status).reshape(-1)) == [0] * 7 + [2] + [0] * 3
        ok = np.delete(theta, 7, axis=0)
        clean = prog.evaluate(ok, {}, grad=True)
        assert clean.stats["blocks"] == 4
        keep = np.arange(B) != 7
        assert np.asarray(r.value)[keep].tobytes() == np.asarray(clean.value).tobytes()
        assert np.asarray(r.grad)[keep].tobytes() == np.asarray(clean.grad).tobytes()
    finally:
        mp.undo()


def test_the_automatic_choice_blocks_a_long_tape_and_keeps_the_bits() -> None:
    # blocks from the budget once a whole walk has measured the tape's bytes per lane; the
    # budget is fixed at 32 MB (NDVM_BLOCK_BYTES, read once per process: a child process), so
    # the check does not depend on this machine's L3 (a fifth of it is the default budget)
    if os.environ.get("NDVM_BLOCK_ROWS"):
        pytest.skip("NDVM_BLOCK_ROWS sets the rows of every automatic choice")
    code = """
import numpy as np, ndvm
# about 100 KB of tape per lane: 600 lanes are over a 32 MB budget, 60 under it
src = "(let loop ((k 0) (s a)) (if (= k 2000) s (loop (+ k 1) (sin (+ s (* b k))))))"
theta = np.random.default_rng(6).normal(scale=0.3, size=(600, 2))
prog = ndvm.compile(src, ["a", "b"], backend="native")
first = prog.evaluate(theta, {}, grad=True)
second = prog.evaluate(theta, {}, grad=True)
assert first.stats["blocks"] == 0 and second.stats["blocks"] >= 2, (first.stats, second.stats)
assert np.asarray(first.value).tobytes() == np.asarray(second.value).tobytes()
assert np.asarray(first.grad).tobytes() == np.asarray(second.grad).tobytes()
small = prog.evaluate(theta[:60], {}, grad=True)
assert small.stats["blocks"] == 0, small.stats
"""
    env = {**os.environ, "NDVM_BLOCK_BYTES": str(32 << 20),
           "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # fmt: skip
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]


_TUNE = """
import numpy as np, ndvm
src = "(let loop ((k 0) (s a)) (if (= k 200) s (loop (+ k 1) (sin (+ s (* b k))))))"
theta = np.random.default_rng(7).normal(scale=0.3, size=(256, 2))
prog = ndvm.compile(src, ["a", "b"], backend="native")
runs = [prog.evaluate(theta, {}, grad=True) for _ in range(120)]
blocks = [r.stats["blocks"] for r in runs]
for r in runs:
    assert np.asarray(r.value).tobytes() == np.asarray(runs[0].value).tobytes()
    assert np.asarray(r.grad).tobytes() == np.asarray(runs[0].grad).tobytes()
print(blocks)
"""


def _block_counts(tune: str) -> list[int]:
    """The lane blocks of 120 gradient runs of one program at B = 256 in a child process whose
    block budget is 1 byte (the first choice: the fewest rows, 16), every run's bits equal."""
    env = {**os.environ, "NDVM_BLOCK_BYTES": "1", "NDVM_BLOCK_TUNE": tune,
           "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # fmt: skip
    run = subprocess.run([sys.executable, "-c", _TUNE], env=env, capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    return [int(b) for b in run.stdout.strip().strip("[]").split(",")]


def test_the_rows_per_block_are_tuned_then_kept() -> None:
    # the first run walks whole (it measures the bytes per lane); then the first choice (16
    # rows: 16 blocks); the tuner tries at least the next candidate (32 rows: 8 blocks), and
    # after at most 5 candidates x 17 runs keeps one: 16, 8, 4, 2 blocks or the whole batch
    if os.environ.get("NDVM_BLOCK_ROWS"):
        pytest.skip("NDVM_BLOCK_ROWS sets the rows of every automatic choice")
    blocks = _block_counts("1")
    assert blocks[0] == 0 and blocks[1] == 16, blocks
    assert 8 in blocks, blocks
    assert set(blocks) <= {0, 2, 4, 8, 16}, blocks
    assert len(set(blocks[-30:])) == 1, blocks


def test_without_tuning_the_first_choice_stays() -> None:
    if os.environ.get("NDVM_BLOCK_ROWS"):
        pytest.skip("NDVM_BLOCK_ROWS sets the rows of every automatic choice")
    blocks = _block_counts("0")
    assert blocks == [0] + [16] * 119, blocks


def test_only_a_run_with_its_gradient_is_blocked() -> None:
    # a run without grad may be differentiated after it (ctx.gradient, the fits): it runs
    # whole; after a blocked run, which kept no tape of the batch, gradient says so
    from ndvm.backends import registry

    program = ndvm.compile(KALMAN_LIKE, ["a", "b"], backend="native").compiled
    backend = registry.get("native")
    low = backend.lowered(program)
    ctx, core = backend._context("float64"), low.program("float64", program)
    theta = np.random.default_rng(1).normal(scale=0.3, size=(B, 2))
    opts = _with_rows(ROWS)(ndvm.Limits(), None)
    first = ctx.run(core, theta, low.constraints, [], [], 1, opts)
    assert first.blocks == 0
    then = ctx.gradient(None, 2)
    both = ctx.run(core, theta, low.constraints, [], [], 1, opts, True)
    assert both.blocks == 4 and both.grad.tobytes() == then.tobytes()
    with pytest.raises(NativeError, match="lane blocks"):
        ctx.gradient(None, 2)
