"""The float32 core (``dtype="float32"``, ``ndvm._core32``) against the float64 reference: the
programs of the differential suite within the float32 tolerances of docs/native.md, B lanes
equal to B single-lane runs, and evidence that the arithmetic itself is float32."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from tests.native.test_differential import PROGRAMS, _same_errors

import ndvm

pytestmark = pytest.mark.native

# docs/native.md, "float32": relative to the float64 reference (about 170 float32 ulps; the
# suite's worst case is 7e-6), plus an absolute floor of FLOOR x the largest magnitude of the
# compared array, for entries that cancel to near zero.
RTOL = 2e-5
FLOOR = 1e-6


def _evaluate(source: str, inputs: dict[str, Any], theta: np.ndarray, backend: str,
              dtype: str) -> Any:  # fmt: skip
    prog = ndvm.compile(source, inputs=tuple(inputs), backend=backend, strict=False, dtype=dtype)
    try:
        return prog.evaluate(theta, inputs, grad=True)
    except ndvm.NdvmError as exc:
        if "numeric result" not in str(exc):
            raise
        return prog.evaluate(theta, inputs, grad=False)


def _close(got: np.ndarray, want: np.ndarray) -> None:
    want = np.asarray(want, dtype=np.float64)
    scale = np.max(np.abs(want[np.isfinite(want)]), initial=0.0)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=FLOOR * scale, equal_nan=True)


def _theta(source: str, inputs: dict[str, Any], B: int, seed: int) -> np.ndarray:
    prog = ndvm.compile(source, inputs=tuple(inputs), backend="reference", strict=False)
    theta = np.random.default_rng(seed).normal(size=(B, len(prog.params)))
    return theta.astype(np.float32).astype(np.float64)  # the same theta on both sides


@pytest.mark.parametrize("name,source,inputs", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_float32_matches_float64_reference(
    name: str, source: str, inputs: dict[str, Any], client: str
) -> None:
    theta = _theta(source, inputs, 6, seed=len(name))
    ref = _evaluate(source, inputs, theta, "reference", "float64")
    f32 = _evaluate(source, inputs, theta, client, "float32")
    assert ref.numeric == f32.numeric
    np.testing.assert_array_equal(ref.status, f32.status)
    _same_errors(ref.errors, f32.errors)
    if ref.numeric:
        _close(f32.value, ref.value)
    else:
        assert repr(f32.value.tolist()) == repr(ref.value.tolist()) or name == "list-result"
    if ref.grad is not None:
        _close(f32.grad, ref.grad)


@pytest.mark.parametrize("name,source,inputs", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_float32_lanes_equal_single_runs(
    name: str, source: str, inputs: dict[str, Any], client: str
) -> None:
    """Vector bodies and scalar remainders of the float32 kernels give the same bits."""
    theta = _theta(source, inputs, 9, seed=len(name) + 1)
    full = _evaluate(source, inputs, theta, client, "float32")
    for b in range(theta.shape[0]):
        one = _evaluate(source, inputs, theta[b : b + 1], client, "float32")
        np.testing.assert_array_equal(one.status[0], full.status[b])
        if full.numeric and one.numeric:
            np.testing.assert_array_equal(one.value[0], full.value[b])
            if full.grad is not None:
                np.testing.assert_array_equal(one.grad[0], full.grad[b])


def test_float32_arithmetic_is_float32(client: str) -> None:
    """a + 2^-30 is a in float32 (a = 1, 2): the float32 core loses the difference that the
    float64 core keeps (computing in float64 and rounding would give 1.0)."""
    source = "(* (- (+ a 9.313225746154785e-10) a) 1073741824)"
    theta = np.array([[1.0], [2.0]])
    v64, _ = ndvm.compile(source, backend=client).value_and_grad(theta)
    v32, g32 = ndvm.compile(source, backend=client, dtype="float32").value_and_grad(theta)
    np.testing.assert_array_equal(np.asarray(v64), [1.0, 1.0])
    np.testing.assert_array_equal(np.asarray(v32), [0.0, 0.0])
    assert np.asarray(v32).dtype == np.float32 and g32.dtype == np.float32
    np.testing.assert_array_equal(g32, [[0.0], [0.0]])
