"""Native vs reference, one NUMERIC primitive at a time: values and gradients on valid lanes.

The primitives, their arities and operand shapes come from the table
(tests/helpers/prim_programs.py); a primitive added to the table is tested here without an
edit. The reference gradient is also checked against central finite differences of the
reference values, so a wrong rule cannot pass by being wrong the same way on both backends.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from tests.helpers.prim_programs import Case, cases, tangents, theta

import ndvm

pytestmark = pytest.mark.native
CASES = cases()
LANES = 5


def _run(case: Case, backend: str, th: np.ndarray, ct: np.ndarray | None) -> object:
    prog = ndvm.compile(case.source, backend=backend)
    return prog.evaluate(th, grad=ct is not None, cotangent=ct)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_native_matches_reference_per_primitive(case: Case, client: str) -> None:
    rng = np.random.default_rng(zlib.crc32(case.id.encode()))
    th = theta(case, LANES, rng)
    value = _run(case, "reference", th, None).value  # type: ignore[attr-defined]
    ct = rng.standard_normal(np.shape(value))
    ref = _run(case, "reference", th, ct)
    nat = _run(case, client, th, ct)
    np.testing.assert_array_equal(nat.status, ref.status)  # type: ignore[attr-defined]
    assert (np.asarray(ref.status) == 0).all()  # type: ignore[attr-defined]
    np.testing.assert_allclose(nat.value, ref.value, rtol=1e-12, atol=1e-14)  # type: ignore[attr-defined]
    np.testing.assert_allclose(nat.grad, ref.grad, rtol=1e-10, atol=1e-12)  # type: ignore[attr-defined]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_reference_gradient_matches_central_differences(case: Case) -> None:
    rng = np.random.default_rng(zlib.crc32(case.id.encode()) + 1)
    th = theta(case, LANES, rng)
    prog = ndvm.compile(case.source, backend="reference")
    value = prog.evaluate(th).value
    ct = rng.standard_normal(np.shape(value))
    grad = prog.evaluate(th, grad=True, cotangent=ct).grad
    K, h = 3, 1e-6
    u = tangents(case, LANES, K, rng)
    lanes = np.concatenate([th + h * u, th - h * u]).reshape(-1, th.shape[1])
    v = prog.evaluate(lanes).value.reshape(2, K, LANES, -1)
    f = (v * ct.reshape(1, 1, LANES, -1)).sum(axis=-1)  # [2, K, LANES]
    fd = (f[0] - f[1]) / (2 * h)
    np.testing.assert_allclose(np.einsum("klp,lp->kl", u, grad), fd, rtol=1e-5, atol=1e-6)
