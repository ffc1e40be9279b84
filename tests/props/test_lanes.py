"""Lane properties over generated programs: batching, permutation and data lanes are exact."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.helpers.genprog import programs

import ndvm
from ndvm.backends import registry

LIMITS = ndvm.Limits(max_steps=200_000, deadline=5.0)
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
coord = st.floats(-3, 3, allow_nan=False, width=64)
thetas = st.lists(st.lists(coord, min_size=3, max_size=3), min_size=2, max_size=4)
# The data-lane gradient is a sum over points taken in another order than the per-point runs'
# sum: where terms of 1/v for a tiny v cancel (``(/ b b x)`` at b = 5e-178), the two sums
# differ by an ulp of 1e177, which no tolerance on the (zero) result can hold; that test
# draws zero or magnitudes of at least 1e-3.
moderate = st.one_of(st.just(0.0), st.floats(1e-3, 3), st.floats(-3, -1e-3))
moderate_thetas = st.lists(st.lists(moderate, min_size=3, max_size=3), min_size=2, max_size=4)


def _compile(src: str, backend: str) -> ndvm.Program:
    return ndvm.compile(src, inputs=("x",), backend=backend, limits=LIMITS, strict=False)


def _run(prog: ndvm.Program, theta: np.ndarray, x: object) -> ndvm.backends.base.RunResult:
    return prog.evaluate(theta, {"x": x}, grad=True)


def _same(a: np.ndarray, b: np.ndarray) -> None:
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-300, equal_nan=True)


@pytest.mark.parametrize("backend", registry.available())
@SETTINGS
@given(programs(), thetas, coord)
def test_batch_equals_single_lanes(
    backend: str, src: str, theta: list[list[float]], x: float
) -> None:
    prog = _compile(src, backend)
    th = np.asarray(theta)
    batch = _run(prog, th, x)
    for b in range(th.shape[0]):
        one = _run(prog, th[b : b + 1], x)
        np.testing.assert_array_equal(one.status[0], batch.status[b])
        _same(one.value[0], batch.value[b])
        _same(one.grad[0], batch.grad[b])


@pytest.mark.parametrize("backend", registry.available())
@SETTINGS
@given(programs(), thetas, coord, st.randoms(use_true_random=False))
def test_permuting_lanes_permutes_results(
    backend: str, src: str, theta: list, x: float, rnd
) -> None:  # type: ignore[no-untyped-def]
    prog = _compile(src, backend)
    th = np.asarray(theta)
    perm = list(range(th.shape[0]))
    rnd.shuffle(perm)
    base = _run(prog, th, x)
    moved = _run(prog, th[perm], x)
    np.testing.assert_array_equal(moved.status, base.status[perm])
    _same(moved.value, base.value[perm])
    _same(moved.grad, base.grad[perm])


@pytest.mark.parametrize("backend", registry.available())
@SETTINGS
@given(programs(), moderate_thetas, st.lists(moderate, min_size=1, max_size=4))
def test_data_lanes_equal_per_point_runs(
    backend: str, src: str, theta: list, xs: list[float]
) -> None:
    prog = _compile(src, backend)
    th = np.asarray(theta)
    grid = _run(prog, th, np.asarray(xs))
    assert grid.data_lanes and grid.value.shape[:2] == (th.shape[0], len(xs))
    grad_sum = np.zeros_like(th)
    for n, x in enumerate(xs):
        point = _run(prog, th, x)
        np.testing.assert_array_equal(point.status[:, 0], grid.status[:, n])
        _same(point.value[:, 0], grid.value[:, n])
        grad_sum += point.grad
    ok = np.isfinite(grad_sum).all(axis=1) & (grid.status == 0).all(axis=1)
    np.testing.assert_allclose(grid.grad[ok], grad_sum[ok], rtol=1e-9, atol=1e-9)
