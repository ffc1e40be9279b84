"""Issue 48, data never misread: identity caches hold their key; None and complex values are
typed errors, not NaN or a dropped imaginary part."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import ndvm
from ndvm.errors import NdvmError
from ndvm.tasks.base import from_arrays


def test_for_search_views_follow_each_derived_task(monkeypatch: pytest.MonkeyPatch) -> None:
    """A dead task's id is reused by the next one (CPython reuses addresses): simulated by
    giving every task the same id; each derived task must still get its own view."""
    x = np.linspace(0.1, 6.0, 64)
    base = from_arrays(x[:, None], 2.0 * x, names=["x"])
    monkeypatch.setattr("ndvm.tasks.base.id", lambda _: 12345, raising=False)
    for steps in (7, 8, 9):
        task = base.with_calib(steps=steps)
        view = task.for_search()
        assert view.calib.steps == steps
        assert task.for_search() is view
        del task, view
        gc.collect()


PROG = "(params a) (* a x)"


@pytest.mark.parametrize(
    ("theta", "x", "message"),
    [
        ([1.0], None, "is None"),
        ([1.0], [1.0, None], "holds None"),
        (np.array([1.0 + 2.0j]), 1.0, "complex"),
        ([1.0 + 2.0j], 1.0, "complex"),
        ([1.0], 1.0 + 2.0j, "complex"),
        ([1.0], np.array([1.0, 2.0 + 1.0j]), "complex"),
        ([1.0], "1_0", "not numeric"),
        ([1.0], ["1", "2"], "not numeric"),
        (["2"], 1.0, "not numeric"),
        ([1.0], np.array(["2020-01-01"], dtype="datetime64[D]"), "not numeric"),
    ],
)
def test_none_and_complex_are_typed_errors(theta, x, message: str) -> None:  # type: ignore[no-untyped-def]
    prog = ndvm.compile(PROG, inputs=["x"])
    with pytest.raises(NdvmError, match=message):
        prog.eval(theta, x=x)
    with pytest.raises(NdvmError, match=message):
        prog.value_and_grad(theta, x=x)


def test_complex_cotangent_is_a_typed_error() -> None:
    prog = ndvm.compile(PROG, inputs=["x"])
    with pytest.raises(NdvmError, match="cotangent has complex values"):
        prog.value_and_grad([1.0], np.array([1.0 + 1.0j]), x=np.array([2.0]))


def test_const_none_is_a_typed_error() -> None:
    with pytest.raises(NdvmError, match="None"):
        ndvm.const(None)


def test_real_values_still_evaluate() -> None:
    prog = ndvm.compile(PROG, inputs=["x"])
    np.testing.assert_array_equal(prog.eval([3.0], x=np.array([1.0, -2.0])), [3.0, -6.0])
