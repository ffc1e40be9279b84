"""Native equals reference on hypothesis-generated programs: values, gradients, status, errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.helpers.clients import NATIVE_CLIENTS
from tests.helpers.genprog import programs

import ndvm

pytestmark = pytest.mark.native

LIMITS = ndvm.Limits(max_steps=200_000, deadline=5.0)
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# coordinates of moderate magnitude: a tiny x makes (/ a a x) ~ 1e171, whose gradient terms
# cancel to a value that depends on the accumulation order (both backends are then right)
magnitude = st.floats(1e-3, 3, allow_nan=False, width=64)
coord = st.one_of(st.just(0.0), magnitude, magnitude.map(lambda v: -v))
thetas = st.lists(st.lists(coord, min_size=3, max_size=3), min_size=1, max_size=4)


def _errors(result: object) -> list[tuple[str, int | None, int | None, str, bytes]]:
    return sorted(
        (type(e).__name__, e.line, e.column, e.message, np.asarray(m).tobytes())
        for m, e in result.errors  # type: ignore[attr-defined]
    )


def _run(backend: str, src: str, theta: np.ndarray, x: object) -> object:
    prog = ndvm.compile(src, inputs=("x",), backend=backend, limits=LIMITS, strict=False)
    try:
        return prog.evaluate(theta, {"x": x}, grad=True)
    except ndvm.NdvmError as exc:  # a whole-run failure (non-numeric result, a limit)
        return (type(exc).__name__, exc.message)


@pytest.mark.parametrize("client", NATIVE_CLIENTS)
@SETTINGS
@given(programs(), thetas, st.lists(coord, min_size=1, max_size=3))
def test_native_equals_reference_on_generated_programs(
    client: str, src: str, theta: list[list[float]], xs: list[float]
) -> None:
    th = np.asarray(theta)
    for x in (xs[0], np.asarray(xs)):
        ref = _run("reference", src, th, x)
        nat = _run(client, src, th, x)
        if isinstance(ref, tuple) or isinstance(nat, tuple):
            assert ref == nat
            continue
        np.testing.assert_array_equal(nat.status, ref.status)
        assert _errors(nat) == _errors(ref)
        np.testing.assert_allclose(nat.value, ref.value, rtol=1e-12, atol=1e-300, equal_nan=True)
        np.testing.assert_allclose(nat.grad, ref.grad, rtol=1e-9, atol=1e-12, equal_nan=True)
