"""Reverse mode with the lane kernels adding a later cotangent into an operand's adjoint
themselves and the det/logdet VJPs reading the inverse a taped ``inv`` of the same operand
computed (``RunOptions.fused``, the default; over W > 1 lanes, and at one lane through the
one-lane fast records) equals the buffered path (the cotangent written to a buffer, then the
accumulate pass; the inverse recomputed) bit for bit: values, gradients, statuses, errors and
steps, on the differential and golden programs, over several lanes and at one lane, over
several parameter vectors, in both dtypes, by both clients, with replay on and off.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from tests.native.run_options import ORIGINAL, run_options_with
from tests.native.test_differential import PROGRAMS
from tests.native.test_replay import GOLDENS, _key, _perturbed, golden_case

import ndvm
from ndvm.backends import native

pytestmark = pytest.mark.native

DTYPES = ("float64", "float32")


_buffered = run_options_with(fused=False)  # the buffer and the accumulate pass
_ORIGINAL = ORIGINAL


def _evaluations(
    src: str, thetas: list[np.ndarray], inputs: dict[str, Any], fused: bool, **options: Any
) -> Iterator[Any]:
    mp = pytest.MonkeyPatch()
    if not fused:
        mp.setattr(native, "_run_options", _buffered)
    try:
        prog = ndvm.compile(src, inputs=tuple(inputs), strict=False, **options)
        for th in thetas:
            try:
                yield _key(prog.evaluate(th, inputs, grad=True))
            except ndvm.NdvmError as exc:
                yield (type(exc).__name__, str(exc))
    finally:
        mp.undo()


def check(src: str, theta: np.ndarray, inputs: dict[str, Any], **options: Any) -> None:
    thetas = _perturbed(theta, 3)
    fused = list(_evaluations(src, thetas, inputs, True, **options))
    buffered = list(_evaluations(src, thetas, inputs, False, **options))
    for k, (a, b) in enumerate(zip(fused, buffered)):
        assert a == b, f"evaluation {k} differs from the buffered path"


def test_the_option_reaches_the_core() -> None:
    opts = _buffered(ndvm.Limits(), None)
    assert opts.fused is False and _ORIGINAL(ndvm.Limits(), None).fused is True


@pytest.mark.parametrize("B", [1, 6])
@pytest.mark.parametrize("replay", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,source,inputs", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_fused_equals_buffered_on_the_differential_programs(
    name: str, source: str, inputs: dict[str, Any], dtype: str, replay: bool, B: int, client: str
) -> None:
    n = len(ndvm.compile(source, inputs=tuple(inputs), backend="reference").params)
    theta = np.random.default_rng(5).normal(size=(B, n))
    check(source, theta, inputs, backend=client, dtype=dtype, replay=replay)


@pytest.mark.parametrize("lanes", ["one", "several"])
@pytest.mark.parametrize("replay", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", GOLDENS)
def test_fused_equals_buffered_on_the_goldens(
    name: str, dtype: str, replay: bool, lanes: str, client: str
) -> None:
    src, inputs, theta, options = golden_case(name)
    if lanes == "several":
        theta = np.concatenate([theta, theta * 0.9, theta + 0.1])
    else:
        theta = theta[:1]
    check(src, theta, inputs, backend=client, dtype=dtype, replay=replay, **options)


# logdet / det of a 2 x 2 matrix that is also inverted, the inverse taped before or after
# them, or a matrix inverted only, or only its logdet taken (the one-lane fast records)
ONE_LANE_INVERSES = [
    "(let* ((s (mat (vec (+ 2 a) b) (vec (* a b) (+ 3 b)))) (si (inv s)))"
    " (+ (logdet s) (dot (vec a b) (matvec si (vec b a)))))",
    "(let* ((s (mat (vec (+ 2 a) b) (vec (* a b) (+ 3 b)))) (d (det s)) (si (inv s)))"
    " (+ d (logdet s) (vsum (matvec si (vec a a)))))",
    "(let* ((s (mat (vec (+ 2 a) b) (vec (* a b) (+ 3 b)))) (t (+ s (eye 2))))"
    " (+ (logdet s) (det t) (vsum (matvec (inv t) (vec a b))) (logdet (inv s))))",
    "(let* ((s (mat (vec a b) (vec (* 2 b) a)))) (+ (logdet s) (det s)))",
]


def _bits(a: Any) -> bytes:
    """The array's bytes with every NaN made the same NaN (the sign of a NaN produced from two
    NaNs depends on operand order, which the one-lane and the lane kernels need not share)."""
    a = np.asarray(a)
    return np.where(np.isnan(a), np.nan, a).tobytes()


@pytest.mark.parametrize("src", ONE_LANE_INVERSES)
def test_one_lane_logdet_reads_the_inverse_bitwise(src: str, client: str) -> None:
    # at one lane the logdet/det VJP of a matrix that a taped inv also inverted reads that
    # inverse (fused) instead of recomputing it (buffered): the same bits, non-finite lanes
    # included; and each lane of a batch equals that lane run alone (NaNs: as NaNs)
    theta = np.array([[0.3, -0.7], [1.1, 0.4], [2.0, 2.0], [np.inf, 0.5], [-1.5, 0.0]])
    for dtype in DTYPES:
        for replay in (True, False):
            for b in range(len(theta)):
                check(src, theta[b : b + 1], {}, backend=client, dtype=dtype, replay=replay,
                      params=["a", "b"])  # fmt: skip
        _lanes_equal_single_lanes(src, theta, client, dtype)


def test_a_matrix_chain_gets_several_cotangents_per_operand(client: str) -> None:
    # every operand of the products, the inverse and logdet receives more than one cotangent
    # (the fused path's case), some operands twice in one record; logdet of a matrix that is
    # also inverted (not symmetric: the inverse is read transposed); B lanes = single lanes
    src = (
        "(let* ((m (mat (vec a b) (vec (* a b) (+ 2 a)))) (s (+ (eye 2) (matmul m m))) "
        "(si (inv s)) (v (vec a b)))"
        " (+ (logdet s) (det si) (dot v (matvec si v)) (vsum (matvec (matmul si m) v))"
        " (trace (matmul (outer v v) si)) (dot v v)))"
    )
    theta = np.random.default_rng(1).normal(scale=0.5, size=(7, 2))
    for dtype in DTYPES:
        check(src, theta, {}, backend=client, dtype=dtype, params=["a", "b"])
        prog = ndvm.compile(src, ["a", "b"], backend=client, dtype=dtype)
        v, g = prog.value_and_grad(theta)
        for b in range(len(theta)):
            v1, g1 = prog.value_and_grad(theta[b])
            assert v1.tobytes() == v[b].tobytes() and g1.tobytes() == g[b].tobytes()


def _lanes_equal_single_lanes(src: str, theta: np.ndarray, client: str, dtype: str) -> None:
    """Each lane of a B-lane run equals that lane run alone, bitwise (NaNs as NaNs)."""
    prog = ndvm.compile(src, ["a", "b"], backend=client, dtype=dtype, strict=False)
    many = prog.evaluate(theta, {}, grad=True)
    for b in range(len(theta)):
        one = prog.evaluate(theta[b : b + 1], {}, grad=True)
        assert _bits(one.value) == _bits(np.asarray(many.value)[b : b + 1])
        assert _bits(one.grad) == _bits(np.asarray(many.grad)[b : b + 1])


def _sized_chain(n: int, c: int) -> str:
    """dot, matvec (n x c and n x n), n x n matmul (an operand given twice), and for n = 2 the
    inverse, logdet and det (non-symmetric operands, with and without a taped inverse)."""

    def mat(r: int, k: int, shift: float) -> str:
        rows = [" ".join(f"(+ (* {1 + (i + j) % 3} a) (* {shift + 0.1 * j} b) "
                         f"{3.0 if i == j else 0.2 * (i - j)})" for j in range(k))
                for i in range(r)]  # fmt: skip
        return "(mat " + " ".join(f"(vec {row})" for row in rows) + ")"

    v = f"(vec {' '.join(f'(* {k + 1} a)' for k in range(n))})"
    w = f"(vec {' '.join(f'(- b {k})' for k in range(c))})"
    body = (f"(let* ((m {mat(n, n, 0.5)}) (p {mat(n, c, -0.3)}) (v {v}) (w {w}) "
            f"(mm (matmul m m)) (x (matvec p w)) (y (matvec mm v)))"
            f" (+ (dot v x) (dot y y) (vsum (matvec (matmul mm m) x))")  # fmt: skip
    if n == 2:
        body += " (logdet m) (det mm) (vsum (matvec (inv m) v)) (det (inv mm))"
    return body + "))"


@pytest.mark.parametrize("n,c", [(1, 1), (2, 2), (2, 3), (3, 1), (3, 3), (4, 2), (4, 4)])
def test_fused_lane_forms_of_every_size_equal_the_general_path(n: int, c: int, client: str) -> None:
    # the lane forms of small products and 2x2 inverse/logdet/det (fused path) against the
    # general kernels (buffered path), bitwise; and B lanes = single lanes
    src = _sized_chain(n, c)
    theta = np.random.default_rng(n * 10 + c).normal(scale=0.4, size=(9, 2))
    for dtype in DTYPES:
        for replay in (True, False):
            check(src, theta, {}, backend=client, dtype=dtype, replay=replay,
                  params=["a", "b"])  # fmt: skip
        _lanes_equal_single_lanes(src, theta, client, dtype)
