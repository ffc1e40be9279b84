"""The reference backend checks its deadline inside bulk primitives (``iota``, ``apply``,
list building, ``vector->list``, ``vec`` of many numbers), not only between machine steps.

The clock is replaced by one that has passed the deadline at its second reading, so the
tests are deterministic: a bulk primitive that reads the clock while it works stops with
``DeadlineExceeded`` inside the first few machine steps; one that does not would return.
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np
import pytest

import ndvm
from ndvm import errors
from ndvm.eval import clock
from ndvm.eval.limits import Limits

QUOTED = "'(" + " ".join(str(k) for k in range(20_000)) + ")"

BULK = [
    "(begin (iota 100000) a)",
    "(begin (iota 20000 a) a)",
    f"(begin (apply list {QUOTED}) a)",
    f"(begin (apply (lambda xs 0) {QUOTED}) a)",
    f"(begin (apply vec {QUOTED}) a)",
    f"(begin (list->vector {QUOTED}) a)",
    "(begin (vector->list (make-vector 100000 a)) a)",
    f"(begin (list? {QUOTED}) a)",
    f"(begin (list-tail {QUOTED} 19999) a)",
]


class _LateClock:
    """Each reading is 100 seconds after the previous one."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        self.now += 100.0
        return self.now


@pytest.mark.parametrize("source", BULK)
def test_bulk_primitive_reads_the_deadline(source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    prog = ndvm.compile(source, ["a"], backend="reference", limits=Limits(deadline=30.0))
    assert float(prog.eval([2.0])) == 2.0  # the real clock: well within the deadline
    monkeypatch.setattr(clock, "time", types.SimpleNamespace(monotonic=_LateClock().monotonic))
    with pytest.raises(errors.DeadlineExceeded):
        prog.eval([2.0])


def test_bulk_primitives_without_deadline_never_read_the_clock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    prog = ndvm.compile(BULK[0], ["a"], backend="reference")
    monkeypatch.setattr(clock, "time", types.SimpleNamespace(monotonic=_LateClock().monotonic))
    assert float(prog.eval([2.0])) == 2.0


def _fd(prog: ndvm.Program, theta: np.ndarray, h: float = 1e-6) -> np.ndarray:
    out = np.empty_like(theta)
    for i in range(theta.size):
        e = np.zeros_like(theta)
        e[i] = h
        out[i] = (float(prog.eval(theta + e)) - float(prog.eval(theta - e))) / (2 * h)
    return out


VECTORIZED = [
    ("(vsum (make-vector 5 (* a b)))", lambda a, b: 5 * a * b),
    ("(vsum (scale a (make-vector 3 b)))", lambda a, b: 3 * a * b),
    (
        "(dot (make-vector 4 a) (list->vector (vector->list (make-vector 4 b))))",
        lambda a, b: 4 * a * b,
    ),
    ("(apply + (iota 6 a b))", lambda a, b: sum(a + k * b for k in range(6))),
    ("(vsum (list->vector (iota 7 (* a a) b)))", lambda a, b: sum(a * a + k * b for k in range(7))),
]


@pytest.mark.parametrize("source,expect", VECTORIZED)
def test_vectorized_bulk_values_and_gradients(source: str, expect: Any) -> None:
    prog = ndvm.compile(source, ["a", "b"], backend="reference")
    theta = np.array([0.7, -1.3])
    value, grad = prog.value_and_grad(theta)
    assert float(value) == pytest.approx(expect(*theta), rel=1e-12)
    np.testing.assert_allclose(grad, _fd(prog, theta), rtol=1e-6, atol=1e-8)


def test_make_vector_lanes_and_errors() -> None:
    prog = ndvm.compile("(make-vector 3 a)", ["a"], backend="reference")
    got = prog.eval(np.array([[1.0], [2.0]]))
    np.testing.assert_array_equal(got, [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]])
    assert ndvm.compile("(vlen (make-vector 0 'x))", backend="reference").eval() == 0.0
    with pytest.raises(errors.ProgramError, match="vector elements must be numbers"):
        ndvm.compile("(make-vector 2 'x)", backend="reference").eval()
