"""Reverse sweeps: linear-time VJPs of the variadic primitives, and the deadline honoured in
the reverse sweep as in the forward pass (docs/language.md, "Limits"), on every backend.

Expected gradients are computed independently (``math.prod`` of the other operands, the index
of the first extremal operand); the deadline tests check the typed error and the status, with
a generous wall-clock bound (the deadline plus 2 s) that only a hang can miss.
"""

from __future__ import annotations

import math
import time
import types

import numpy as np
import pytest

import ndvm
from ndvm import errors
from ndvm.backends import reference, registry
from ndvm.backends.base import RunResult
from ndvm.eval.limits import Limits
from ndvm.prims import PRIMS

BACKENDS = registry.available()
SLACK = 2.0  # seconds past the deadline that a test accepts (a hang takes far longer)


def _variadic_numeric() -> list[str]:
    return sorted(
        p.name
        for p in PRIMS
        if p.arity.max_args is None and p.vjp is not None and p.ref is not None
    )


def test_the_variadic_numeric_primitives_are_known() -> None:
    # a new variadic primitive must join the linear-time checks below
    assert _variadic_numeric() == ["*", "+", "-", "/", "max", "min"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "xs",
    [
        [2.0, 3.0, 0.5, 4.0, -1.5, 7.0],
        [2.0, 0.0, 0.5, 4.0, -1.5, 7.0],  # one zero: only its own derivative is non-zero
        [0.0, 3.0, 0.5, 0.0, -1.5, 7.0],  # two zeros: every derivative is zero
        [1e200, 1e200, 1e-200, 3.0, 2.0],
    ],
)
def test_product_gradient_is_the_product_of_the_others(backend: str, xs: list[float]) -> None:
    names = [f"p{i}" for i in range(len(xs))]
    prog = ndvm.compile(f"(* {' '.join(names)})", params=names, backend=backend)
    value, grad = prog.value_and_grad(np.array(xs))
    assert float(value) == pytest.approx(math.prod(xs), rel=1e-14)
    expected = [math.prod(x for j, x in enumerate(xs) if j != i) for i in range(len(xs))]
    np.testing.assert_allclose(grad, expected, rtol=1e-14, atol=0.0)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["max", "min"])
def test_extremal_gradient_goes_to_the_first_extremal_operand(backend: str, op: str) -> None:
    xs = [1.0, 5.0, -2.0, 5.0, -2.0, 3.0]
    names = [f"p{i}" for i in range(len(xs))]
    prog = ndvm.compile(f"({op} {' '.join(names)})", params=names, backend=backend)
    value, grad = prog.value_and_grad(np.array(xs))
    first = xs.index(max(xs) if op == "max" else min(xs))
    assert float(value) == xs[first]
    assert grad.tolist() == [1.0 if i == first else 0.0 for i in range(len(xs))]
    # a NaN operand: the result is NaN and no operand equals it
    _, grad = prog.value_and_grad(np.array(xs[:2] + [np.nan] + xs[3:]))
    assert grad.tolist() == [0.0] * len(xs)


def test_many_operand_gradients_agree_bitwise_across_backends() -> None:
    xs = np.random.default_rng(7).uniform(-2.0, 2.0, (3, 9))
    names = [f"p{i}" for i in range(9)]
    for op in ("*", "max", "min"):
        src = f"({op} {' '.join(names)} (* p0 p1) 1.5)"
        grads = [ndvm.compile(src, params=names, backend=b).value_and_grad(xs)[1] for b in BACKENDS]
        for g in grads[1:]:
            np.testing.assert_array_equal(g, grads[0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_product_of_thirty_vectors_with_zeros(backend: str) -> None:
    # 30 operands (blocks of 6 natively), vectors of 3 elements over 2 lanes, a zero in
    # elements 1 and 2; d sum(prod) / d p_i = sum over elements of the product of the others
    rng = np.random.default_rng(11)
    theta = rng.uniform(0.5, 1.5, (2, 30))
    names = [f"p{i}" for i in range(30)]
    c = np.ones((30, 3))
    c[7, 1] = c[20, 2] = 0.0  # element 1 of p7 and element 2 of p20 are 0 * p
    terms = [f"(vec (* {n} {c[i, 0]}) (* {n} {c[i, 1]}) (* {n} {c[i, 2]}))"
             for i, n in enumerate(names)]  # fmt: skip
    prog = ndvm.compile(f"(vsum (* {' '.join(terms)}))", params=names, backend=backend)
    _, grad = prog.value_and_grad(theta)
    for b in range(2):
        x = theta[b][:, None] * c
        expected = [
            sum(c[i, e] * math.prod(np.delete(x[:, e], i)) for e in range(3)) for i in range(30)
        ]
        assert all(v != 0.0 for v in expected)  # element 0 has no zero operand
        np.testing.assert_allclose(grad[b], expected, rtol=1e-13, atol=0.0)


def _timed_value_and_grad(prog: ndvm.Program, theta: np.ndarray) -> tuple[float, object]:
    t0 = time.monotonic()
    try:
        out: object = prog.value_and_grad(theta)
    except errors.DeadlineExceeded as exc:
        out = exc
    return time.monotonic() - t0, out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["*", "max"])
def test_forty_thousand_operands_end_within_the_deadline(backend: str, op: str) -> None:
    src = f"(apply {op} (map (lambda (i) (* a 1.0)) (iota 40000)))"
    prog = ndvm.compile(src, params=["a"], backend=backend, limits=Limits(deadline=1.0))
    elapsed, out = _timed_value_and_grad(prog, np.array([1.0]))
    assert elapsed < 1.0 + SLACK
    if backend != "reference":  # the native core is fast enough to finish: check the answer
        assert isinstance(out, tuple), out
        value, grad = out
        assert float(value) == 1.0
        assert grad.tolist() == [40000.0 if op == "*" else 1.0]
    elif not isinstance(out, tuple):
        assert isinstance(out, errors.DeadlineExceeded)


def _timed_runaway(
    backend: str, src: str, deadline: float, theta: list[list[float]], grad: bool = True
) -> tuple[float, RunResult]:
    """The seconds ``evaluate`` takes under ``deadline`` (no step or heap limit: a loop
    allocates a frame each turn, and the default 20M cells take about a second here, less on
    a faster machine), and its result."""
    limits = Limits(deadline=deadline, max_steps=10**12, max_heap=10**12)
    prog = ndvm.compile(src, params=["a"], backend=backend, limits=limits, strict=False)
    t0 = time.monotonic()
    result = prog.evaluate(np.array(theta), grad=grad)
    return time.monotonic() - t0, result


RUNAWAY = (  # a long tape (the product), then every lane runs away until the deadline
    "(let ((s (apply * (map (lambda (i) (* a 1.0)) (iota {n})))))"
    " (let loop ((k 0.0)) (loop (+ k s))))"
)


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_reverse_sweep_once_every_lane_has_failed(backend: str) -> None:
    elapsed, result = _timed_runaway(backend, RUNAWAY.format(n=20000), 0.5, [[1.0], [2.0]])
    assert elapsed < 0.5 + SLACK
    assert result.status.tolist() == [[2], [2]]
    assert np.isnan(result.grad).all()
    assert all(isinstance(e, errors.DeadlineExceeded) for _, e in result.errors)


@pytest.mark.parametrize("grad", [True, False])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_tape_of_millions_of_records_ends_at_the_deadline(backend: str, grad: bool) -> None:
    # both lanes run away for 1 s, recording a tape of ~10^7 records natively: its arrays grow
    # without copying (cpp/include/ndvm/grow.hpp), so no growth holds the forward pass long
    # past the deadline (a copying one held it up to 2.3 s past; benchmarks/bench_deadline.py)
    src = RUNAWAY.format(n=40000)
    elapsed, result = _timed_runaway(backend, src, 1.0, [[1.0], [2.0]], grad=grad)
    assert elapsed < 1.0 + 1.5
    assert result.status.tolist() == [[2], [2]]
    assert [type(e) for _, e in result.errors] == [errors.DeadlineExceeded]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_lane_finished_before_the_deadline_keeps_a_short_sweep(backend: str) -> None:
    # lane 0 ends at once, lane 1 runs away: the forward pass ends at the deadline and the
    # reverse sweep (a few hundred records) runs within the grace, so lane 0 keeps its value
    # and its gradient (docs/language.md, "Limits")
    src = (
        "(let ((s (apply * (map (lambda (i) (* a 1.0)) (iota 300)))))"
        " (if (> a 0.0) s (let loop ((k 0.0)) (loop (+ k 1.0)))))"
    )
    elapsed, result = _timed_runaway(backend, src, 0.5, [[1.0], [-1.0]])
    assert elapsed < 0.5 + SLACK
    assert result.status.tolist() == [[0], [2]]
    assert float(result.value[0, 0]) == 1.0
    assert result.grad[0].tolist() == [300.0]
    assert np.isnan(result.grad[1]).all()


def test_the_grace_is_a_quarter_of_the_deadline_at_most_a_quarter_second() -> None:
    assert reference.reverse_grace(0.2) == 0.05
    assert reference.reverse_grace(1.0) == 0.25
    assert reference.reverse_grace(60.0) == 0.25


class _LateClock:
    """The real clock at the first reading (the sweep's start), then 1000 s later at each."""

    def __init__(self) -> None:
        self.now: float | None = None

    def __call__(self) -> float:
        self.now = time.monotonic() if self.now is None else self.now + 1000.0
        return self.now


def test_reference_reverse_sweep_reads_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    # the forward pass ends well within the deadline; the sweep's clock reads past it
    src = "(apply * (map (lambda (i) (* a 1.0)) (iota 600)))"
    prog = ndvm.compile(src, params=["a"], backend="reference", limits=Limits(deadline=30.0))
    assert prog.value_and_grad(np.array([1.0]))[1].tolist() == [600.0]
    monkeypatch.setattr(reference, "time", types.SimpleNamespace(monotonic=_LateClock()))
    with pytest.raises(errors.DeadlineExceeded, match="reverse sweep"):
        prog.value_and_grad(np.array([1.0]))
    monkeypatch.setattr(reference, "time", types.SimpleNamespace(monotonic=_LateClock()))
    result = prog.with_options(strict=False).evaluate(np.array([[1.0], [2.0]]), grad=True)
    assert result.status.tolist() == [[2], [2]]  # every lane standing fails in the sweep
    assert result.value.tolist() == [[1.0], [2.0**600]]  # its value kept
    assert np.isnan(result.grad).all()


# docs/language.md, "Limits": the steps each backend counts (Limits(max_steps=10**9)); the
# reference is counted at 10^4 elements (10^5 takes it a minute)
STEP_TABLE = {
    "(apply + (map (lambda (i) (* a i)) (iota {n})))": {
        "native": 1_400_028, "vm": 1_600_030, "reference": 200_036,
    },
    "(fold-left (lambda (acc i) (+ acc (* a i))) 0.0 (iota {n}))": {
        "native": 7_400_034, "vm": 9_000_038, "reference": 1_120_040,
    },
}  # fmt: skip


@pytest.mark.parametrize("src", list(STEP_TABLE))
def test_step_counts_differ_by_backend_both_ways(src: str) -> None:
    for backend in BACKENDS:
        n = 10_000 if backend == "reference" else 100_000
        text = src.format(n=n)
        prog = ndvm.compile(text, params=["a"], backend=backend, limits=Limits(max_steps=10**9))
        assert prog.evaluate([1.0]).stats["steps"] == STEP_TABLE[src][backend]
    # the fold-left needs 74% of a budget on the walker and fails it on the reference
    if "fold-left" in src:
        small = Limits(max_steps=1_000_000)
        for backend, status in (("reference", 2), ("native", 0)):
            if backend not in BACKENDS:
                continue
            text = src.format(n=10_000)
            prog = ndvm.compile(text, params=["a"], backend=backend, limits=small, strict=False)
            assert prog.evaluate([1.0]).status.tolist() == [[status]], backend
