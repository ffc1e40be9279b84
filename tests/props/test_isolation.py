"""Lane isolation over generated programs with failing and runaway lanes: a lane's value,
gradient, status and error class are bitwise the same alone and in any batch (other lanes,
their order, duplicates), on every backend. Runaway lanes fail alone with StepLimitExceeded
(steps are counted per lane), failing lanes fail alone with their typed error."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.helpers.genprog import programs

import ndvm
from ndvm.backends import registry
from ndvm.backends.base import RunResult

LIMITS = ndvm.Limits(max_steps=4_000, deadline=30.0)
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
coord = st.floats(-3, 3, allow_nan=False, width=64)
thetas = st.lists(st.lists(coord, min_size=3, max_size=3), min_size=2, max_size=4)


def _run(prog: ndvm.Program, theta: np.ndarray, x: float) -> RunResult:
    res = prog.evaluate(theta, {"x": x})
    if res.numeric:  # the gradient of a batch in which lanes failed or ran away
        res = prog.evaluate(theta, {"x": x}, grad=True)
    return res


def _lane_errors(res: RunResult, b: int) -> list[str]:
    return [type(e).__name__ for mask, e in res.errors if mask[b].any()]


def _same_lane(one: RunResult, batch: RunResult, b: int) -> None:
    np.testing.assert_array_equal(one.status[0], batch.status[b])
    assert _lane_errors(one, 0) == _lane_errors(batch, b)
    assert one.numeric == batch.numeric
    if one.numeric:
        np.testing.assert_array_equal(one.value[0], batch.value[b])  # NaN == NaN here
        np.testing.assert_array_equal(one.grad[0], batch.grad[b])


@pytest.mark.parametrize("backend", registry.available())
@SETTINGS
@given(programs(hostile=True), thetas, coord, st.randoms(use_true_random=False))
def test_lane_alone_equals_lane_in_any_batch(
    backend: str, src: str, theta: list, x: float, rnd
) -> None:  # type: ignore[no-untyped-def]
    prog = ndvm.compile(src, inputs=("x",), backend=backend, limits=LIMITS, strict=False)
    th = np.asarray(theta)
    order = [*range(th.shape[0]), rnd.randrange(th.shape[0])]  # every lane, one twice
    rnd.shuffle(order)
    batch = _run(prog, th[order], x)
    for k, b in enumerate(order):
        _same_lane(_run(prog, th[b : b + 1], x), batch, k)


@pytest.mark.parametrize("backend", registry.available())
def test_isolation_covers_failing_and_runaway_lanes(backend: str) -> None:
    """The kinds of lane failure the generator produces, in one batch next to good lanes."""
    src = (
        "(+ (* 0 a b c) (if (> a 1) (let loop ((i 0)) (loop (+ i 1))) "
        "(if (< a -1) (ref (vec a b) (floor (abs c))) (* a x))))"
    )
    prog = ndvm.compile(src, inputs=("x",), backend=backend, limits=LIMITS, strict=False)
    th = np.array([[2.0, 0, 0], [-2.0, 1, 5], [0.5, 0, 0], [-2.0, 1, 1]])
    batch = _run(prog, th, 3.0)
    assert batch.status.reshape(-1).tolist() == [2, 2, 0, 0]
    assert [_lane_errors(batch, b) for b in range(4)] == [
        ["StepLimitExceeded"],
        ["ProgramError"],
        [],
        [],
    ]
    assert batch.value[2, 0] == 1.5 and batch.value[3, 0] == 1.0
    for b in range(4):
        _same_lane(_run(prog, th[b : b + 1], 3.0), batch, b)


@pytest.mark.parametrize("backend", registry.available())
@pytest.mark.parametrize("max_steps", range(2_500, 6_500, 250))
def test_a_lane_that_ends_just_past_its_limit_fails_alike_alone_and_in_a_batch(
    backend: str, max_steps: int
) -> None:
    """A lane whose own step count crosses ``max_steps`` shortly before it ends (with a value
    or its own error) ends with StepLimitExceeded, alone and in a batch alike: the limit is
    checked when a lane ends, not only at check points whose phase follows the whole walk."""
    src = (
        "(+ (* 0 a b c) (let loop ((i 0)) (if (< i (* 3 (abs (let loop ((i 0)) (if (< i (* 3 "
        "(abs (log (abs c))))) (loop (+ i 1)) c))))) (loop (+ i 1)) (if (> x 0.5) (car a) a))))"
    )
    limits = ndvm.Limits(max_steps=max_steps, deadline=30.0)
    prog = ndvm.compile(src, inputs=("x",), backend=backend, limits=limits, strict=False,
                        free_params=True)  # fmt: skip
    th = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 1.4e-45], [0.0, 0.0, 1e-300]])
    for x in (0.0, 1.0):  # the lane's end: its value, or its own ProgramError
        batch = _run(prog, th, x)
        for b in range(th.shape[0]):
            _same_lane(_run(prog, th[b : b + 1], x), batch, b)
