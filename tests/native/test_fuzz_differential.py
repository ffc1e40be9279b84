"""A short fixed-seed run of the differential fuzzer (``tools/fuzz/fuzz_differential.py``):
varied and mutated corpus programs on the walker, the VM, replay and the reference."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from ndvm.structure import StructList

pytestmark = pytest.mark.native
FUZZ = Path(__file__).resolve().parents[2] / "tools" / "fuzz"


@pytest.fixture(scope="module")
def fuzz():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(FUZZ))
    try:
        import fuzz_differential
    finally:
        sys.path.remove(str(FUZZ))
    return fuzz_differential


def test_clients_agree_on_varied_programs(fuzz) -> None:  # type: ignore[no-untyped-def]
    fuzz.SEEN.clear()
    assert fuzz.run(300, seed=5, minutes=0) == 0
    assert fuzz.SEEN["result"] >= 100 and fuzz.SEEN["replayed"] >= 50  # it compared something
    assert fuzz.SEEN["float32"] >= 100


def test_the_comparison_catches_a_difference(fuzz) -> None:  # type: ignore[no-untyped-def]
    a = np.array([[1.0, 2.0, np.nan]])
    assert fuzz.same_array(a, a.copy(), 0.0)
    assert not fuzz.same_array(a, a + [[0.0, 1e-15, 0.0]], 0.0)  # bitwise
    assert fuzz.same_array(a, a + [[0.0, 1e-15, 0.0]], 1e-9)
    assert not fuzz.same_array(a, a + [[0.0, 1e-6, 0.0]], 1e-9)
    assert not fuzz.same_array(a, np.array([[1.0, 2.0, 0.0]]), 1e-9)  # NaN against a number
    big = np.array([[6e19, 0.14]])
    assert fuzz.same_array(big, np.array([[6e19, 2413.0]]), 1e-9)  # within the lane's rounding


def test_messages_compare_their_numbers_within_the_tolerance(fuzz) -> None:  # type: ignore[no-untyped-def]
    a = "1:7: make-vector: expected an integer, got -0.9051482536448664"
    b = "1:7: make-vector: expected an integer, got -0.9051482536448665"
    assert fuzz.same_message(a, b, 1e-9) and not fuzz.same_message(a, b, 0.0)
    assert not fuzz.same_message(a, b.replace("-0.905", "-0.805"), 1e-9)
    assert not fuzz.same_message(a, b.replace("1:7", "1:8"), 1e-9)  # positions are exact


def _dag(levels: int, leaf: float) -> StructList:
    v = StructList([leaf])
    for _ in range(levels):
        v = StructList([v, *v])  # 2^levels paths over levels + 1 lists
    return v


def test_the_structural_comparison_walks_shared_lists_once(fuzz) -> None:  # type: ignore[no-untyped-def]
    a, b = _dag(60, 1.0), _dag(60, 1.0)
    assert fuzz.same_struct([a], [b], 0.0)
    assert not fuzz.same_struct([a], [_dag(60, 1.0 + 1e-12)], 0.0)  # bitwise
    assert fuzz.same_struct([a], [_dag(60, 1.0 + 1e-12)], 1e-9)
    assert not fuzz.same_struct([a], [_dag(59, 1.0)], 1e-9)
    assert not fuzz.same_struct([StructList(["a", 1.0])], [StructList(["b", 1.0])], 1e-9)
    assert fuzz.same_struct([StructList([1.0])], [StructList([7.0])], -1.0)  # float32: any number
