"""The native core's parameter constraints mirror ``ndvm.prims.constraints``.

The core maps each wire code to the opcode it applies to theta (``cpp/src/interp.cpp``,
``Interp::bind``, ``kTransform``); the Python table names a primitive per constraint. Both are
checked against the language's constraint kinds (``ndvm.lang.ir.CONSTRAINTS``), statically
from the C++ source and by running each constraint on both backends.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import ndvm
from ndvm.lang.ir import CONSTRAINTS
from ndvm.prims.constraints import constraint

pytestmark = pytest.mark.native
INTERP = Path(__file__).resolve().parents[2] / "cpp" / "src" / "interp.cpp"


def _native_transforms() -> list[str]:
    m = re.search(r"kTransform\[\d+\]\s*=\s*\{([^}]*)\}", INTERP.read_text(encoding="utf-8"))
    assert m is not None, "kTransform not found in interp.cpp"
    return [x.strip().removeprefix("Prim::") for x in m.group(1).split(",")]


@pytest.mark.parametrize("kind", CONSTRAINTS)
def test_native_code_applies_the_same_primitive(kind: str) -> None:
    c = constraint(kind)
    native = _native_transforms()
    assert 0 <= c.code < len(native)
    # code 0 is the identity: the core applies nothing (its table slot is a placeholder)
    want = "identity" if c.prim is None else c.prim.upper
    got = "identity" if c.code == 0 else native[c.code]
    assert got == want


@pytest.mark.parametrize("kind", CONSTRAINTS)
def test_native_constraint_values_and_gradients_match_reference(kind: str) -> None:
    src = f"(params (p {constraint(kind).forward(np.float64(0.3))} {kind}) q) (* (+ p 2) q q)"
    theta = np.array([[-2.5, 0.5], [0.0, -1.0], [1.7, 2.0], [31.0, 0.25]])
    ref, nat = (
        ndvm.compile(src, backend=b).evaluate(theta, grad=True) for b in ("reference", "native")
    )
    np.testing.assert_allclose(nat.value, ref.value, rtol=1e-13, atol=0)
    np.testing.assert_allclose(nat.grad, ref.grad, rtol=1e-12, atol=1e-300)
    values = constraint(kind).forward(theta[:, 0])
    np.testing.assert_allclose(ref.value[:, 0], (values + 2) * theta[:, 1] ** 2, rtol=1e-14)
