"""Native vs reference, one structural primitive at a time (the primitives come from the table)."""

from __future__ import annotations

import numpy as np
import pytest
from tests.helpers.structural_calls import STRUCTURAL, example

import ndvm
from ndvm.prims import Prim

pytestmark = pytest.mark.native
THETA = np.array([[0.5, -1.5], [2.0, 2.0], [-0.25, 3.0]])


@pytest.mark.parametrize("prim", STRUCTURAL, ids=lambda p: p.name)
def test_native_runs_each_structural_primitive_like_the_reference(prim: Prim, client: str) -> None:
    runs = [
        ndvm.compile(example(prim.name), backend=b).evaluate(THETA) for b in ("reference", client)
    ]
    ref, nat = runs
    np.testing.assert_array_equal(nat.status, ref.status)
    assert (np.asarray(ref.status) == 0).all()
    assert repr(nat.value.tolist()) == repr(ref.value.tolist())
