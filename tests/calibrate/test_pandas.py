"""pandas DataFrames and Series wherever arrays are accepted: ``calibrate``'s inputs (by
column name) and target, ``Task.from_arrays``'s X (its columns name the inputs) and y; each
against the same call with plain arrays."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ndvm
from ndvm.errors import NdvmError
from ndvm.tasks.base import from_arrays

pytestmark = pytest.mark.data  # pandas comes with the data extra (statsmodels)

SRC = "(* amp (sin (+ (* w t) ph)))"


def _frame() -> Any:
    import pandas as pd

    t = np.linspace(0.0, 3.0, 40)
    return pd.DataFrame({"t": t, "y": 2.0 * np.sin(1.5 * t + 0.3), "other": np.arange(40.0)})


def test_calibrate_takes_a_dataframe_and_a_series() -> None:
    df = _frame()
    prog = ndvm.compile(SRC, ["amp", "w", "ph"], ["t"])
    plain = ndvm.calibrate(prog, {"t": df["t"].to_numpy()}, df["y"].to_numpy(), seed=3)
    framed = ndvm.calibrate(prog, df, df["y"], seed=3)  # columns other than inputs: unused
    assert framed.params == plain.params and framed.loss == plain.loss
    by_source = ndvm.calibrate(SRC, df[["t"]], df[["y"]], seed=3)  # inputs: the columns
    np.testing.assert_allclose(list(by_source.params.values()), list(plain.params.values()))


@pytest.mark.parametrize(
    "inputs,target,match",
    [
        (lambda df: df[["other"]], lambda df: df["y"], "no column 't'.*its columns: other"),
        (lambda df: df.set_axis([0, 1, 2], axis=1), lambda df: df["y"], "named by strings"),
        (lambda df: df.assign(t="x"), lambda df: df["y"], "column 't': not numeric"),
        (lambda df: df, lambda df: df[["y", "t"]], "exactly one column"),
    ],
)
def test_bad_frames_are_typed_errors(inputs: Any, target: Any, match: str) -> None:
    df = _frame()
    prog = ndvm.compile(SRC, ["amp", "w", "ph"], ["t"])
    with pytest.raises(NdvmError, match=match):
        ndvm.calibrate(prog, inputs(df), target(df), steps=2, starts=2)


def test_task_from_arrays_names_inputs_by_column() -> None:
    df = _frame()
    task = from_arrays(df[["t", "other"]], df["y"], seed=1)
    plain = from_arrays(df[["t", "other"]].to_numpy(), df["y"].to_numpy(), names=["t", "other"],
                        seed=1)  # fmt: skip
    assert task.inputs == ("t", "other") == plain.inputs
    a, b = task.data(), plain.data()
    for name in task.inputs:
        np.testing.assert_array_equal(a.train_inputs[name], b.train_inputs[name])
    np.testing.assert_array_equal(a.train_target, b.train_target)
    assert from_arrays(df["t"], df["y"]).inputs == ("t",)
    assert from_arrays(df[["t"]], df["y"], names=["s"]).inputs == ("s",)


def test_program_calls_take_a_dataframe_by_column_name() -> None:
    import pandas as pd

    prog = ndvm.compile("(* k theta)", params=["k"], inputs=["theta"])
    df = pd.DataFrame({"other": [9.0, 9.0], "theta": [1.0, 2.0]})
    theta = np.array([2.0])
    np.testing.assert_allclose(prog.eval(theta, df), [2.0, 4.0])
    np.testing.assert_allclose(prog.evaluate(theta, df).value[0], [2.0, 4.0])
    np.testing.assert_allclose(prog.value_and_grad(theta, None, df)[1], [3.0])
    np.testing.assert_allclose(prog.jacobian(theta, df)[:, 0], [1.0, 2.0])
