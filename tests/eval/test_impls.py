"""Every STRUCTURAL primitive of the table has an implementation in every Python evaluator.

The list of primitives comes from the table (``PRIMS``), not from the implementation tables
being checked; the native core is checked by running each primitive (tests/native/
test_structural.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from tests.helpers.structural_calls import STRUCTURAL, example

import ndvm
from ndvm.eval import treewalk  # noqa: F401  (the machine registers its implementations)
from ndvm.eval.runtime import REFERENCE
from ndvm.export.structural import EXPORT


@pytest.mark.parametrize("table", [REFERENCE, EXPORT], ids=lambda t: t.evaluator)
def test_evaluator_implements_every_structural_primitive(table: object) -> None:
    missing = [p.name for p in STRUCTURAL if p.code not in table]  # type: ignore[operator]
    assert missing == []


@pytest.mark.parametrize("prim", STRUCTURAL, ids=lambda p: p.name)
def test_reference_runs_each_structural_primitive(prim: object) -> None:
    """The example of each primitive evaluates on every lane (the native and export tests
    compare against these runs)."""
    prog = ndvm.compile(example(prim.name), backend="reference")  # type: ignore[attr-defined]
    out = prog.evaluate(np.array([[0.5, -1.5], [2.0, 2.0]]))
    assert (np.asarray(out.status) == 0).all(), out.errors
