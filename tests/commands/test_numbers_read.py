"""One numeric reader for CSV cells and CLI values (issue 48): what NumPy/pandas read as a
number and nothing else; duplicate headers, empty list items and repeated options refused;
DataFrame dates and categories never converted silently."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from tests.helpers.extras import need

import ndvm
from ndvm import cli
from ndvm.errors import NdvmError
from ndvm.tasks.columns import read_csv
from ndvm.textnum import parse_number, parse_numbers

GOOD = {"1": 1.0, "-2.5": -2.5, ".5": 0.5, "3.": 3.0, "1e-3": 1e-3, "+1E+300": 1e300,
        " 7 ": 7.0, "\t-0\t": -0.0, "inf": math.inf, "-Infinity": -math.inf}  # fmt: skip
BAD = ["1_0", "\u0661\u0662", "\uff11", "1\u00a0", "0x10", "1e", "e5", "--1", "1.2.3", "",
       "nan1", "1,5", "\u2212" + "1", "١.٥"]  # fmt: skip


@pytest.mark.parametrize(("text", "value"), GOOD.items())
def test_numbers_numpy_reads_are_read(text: str, value: float) -> None:
    got = parse_number(text)
    assert got == value and math.copysign(1.0, got) == math.copysign(1.0, value)
    assert np.float64(text.strip()) == value  # NumPy agrees


@pytest.mark.parametrize("text", BAD)
def test_python_float_quirks_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_number(text)


def test_nan_is_read_and_lists_keep_every_item() -> None:
    assert math.isnan(parse_number("NaN"))
    assert parse_numbers("1, 2,3") == [1.0, 2.0, 3.0]
    for text, item in (("1,,2", "item 2"), ("1,2,", "item 3"), (",1", "item 1")):
        with pytest.raises(ValueError, match=item):
            parse_numbers(text)


def _csv(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "d.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_csv_duplicate_header_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NdvmError, match=r"d.csv:1: .*'x' more than once"):
        read_csv(_csv(tmp_path, "x,x,y\n1,2,3\n4,5,6\n"), ["x", "y"])


@pytest.mark.parametrize("cell", ["1_0", "\u0661\u0662", "\uff11"])
def test_csv_cell_python_would_misread_names_row_and_column(tmp_path: Path, cell: str) -> None:
    path = _csv(tmp_path, f"x,y\n1,2\n{cell},3\n")
    with pytest.raises(NdvmError, match=r"d.csv:3: error: column 'x': not a number"):
        read_csv(path, ["x", "y"])
    assert read_csv(path, ["y"])["y"].tolist() == [2.0, 3.0]  # an unused column may hold it


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "m.scm"
    path.write_text("(params a) (* a x)\n")
    return path


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--input", "x=1,,2"], "item 2: empty"),
        (["--input", "x=1,2,"], "item 3: empty"),
        (["--input", "x=1_0"], "is not a number"),
        (["--input", "x=[1, null]"], "holds None"),
        (["--input", "x=1", "--param", "a=1", "--param", "a=2"], "--param a is given more"),
        (["--input", "x=1", "--input", "x=2"], "--input x is given more"),
        (["--input", "x=1", "--param", "a=\u0661"], "is not a number"),
    ],
)
def test_eval_refuses_values_it_would_misread(
    model: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert cli.main(["eval", str(model), *argv]) != 0
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err


def test_eval_reads_good_values(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["eval", str(model), "--param", "a=2", "--input", "x=1, .5,-3e0"]) == 0
    assert capsys.readouterr().out.strip() == "value: (2 1 -6)"


@pytest.mark.data
def test_dataframe_dates_and_categories_are_refused_when_used() -> None:
    pd = need("pandas")
    prog = ndvm.compile("(params a) (* a x)", inputs=["x"])
    frame = pd.DataFrame({"x": [1.0, 2.0], "when": pd.to_datetime(["2020-01-01", "2020-01-02"]),
                          "kind": pd.Categorical(["u", "v"])})  # fmt: skip
    np.testing.assert_array_equal(prog.eval([2.0], frame), [2.0, 4.0])  # unused: ignored
    for col, what in (("when", "datetime64"), ("kind", "category")):
        renamed = frame.drop(columns="x").rename(columns={col: "x"})
        with pytest.raises(NdvmError, match=f"column 'x': a {what}"):
            prog.eval([2.0], renamed)
    with pytest.raises(NdvmError, match="category"):
        prog.eval([2.0], pd.DataFrame({"x": pd.Categorical([1.5, 2.5])}))
    with pytest.raises(NdvmError, match="not numeric .holds str values"):
        prog.eval([2.0], pd.DataFrame({"x": pd.Series(["1_0", "2"], dtype=object)}))
