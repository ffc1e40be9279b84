"""A numeric option given something that is not a number: one line on stderr naming the
option and the value, exit status 2, as the range checks' lines (``--budget -1``), for every
command's ``type=int`` / ``type=float`` options (``cli.Parser``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ndvm import cli


def _code(argv: list[str]) -> int:
    try:
        return cli.main(argv)
    except SystemExit as exc:  # argparse ends with SystemExit
        return int(exc.code or 0)


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    (tmp_path / "m.scm").write_text("(* k x)")
    (tmp_path / "d.csv").write_text("x,y\n1,2\n2,4\n3,6\n")
    return [str(tmp_path / "m.scm"), str(tmp_path / "d.csv")]


CASES = [
    ("search", "--budget", "abc", "a number"), ("search", "--workers", "1.5", "an integer"),
    ("search", "--seed", "x", "an integer"), ("search", "--success-r2", "high", "a number"),
    ("search", "--holdout", "", "a number"), ("search", "--max-candidates", "1e3", "an integer"),
    ("fit", "--starts", "x", "an integer"), ("fit", "--steps", "many", "an integer"),
    ("fit", "--lr", "fast", "a number"), ("fit", "--polish", "-", "an integer"),
    ("eval", "--max-steps", "lots", "an integer"), ("eval", "--deadline", "soon", "a number"),
    ("sweep", "--layers", "q", "an integer"), ("sweep", "--repeats", "2.5", "an integer"),
    ("report", "--run", "latest", "an integer"),
]  # fmt: skip


@pytest.mark.parametrize(("command", "option", "value", "kind"), CASES)
def test_a_value_that_is_not_a_number_is_one_line_and_exit_status_2(
    files: list[str], capsys: pytest.CaptureFixture[str], command: str, option: str,
    value: str, kind: str,
) -> None:  # fmt: skip
    prog, data = files
    head = {"search": ["search", "--task", "sr-damped"], "report": ["report", "--db", data],
            "fit": ["fit", prog, "--data", data, "--x", "x", "--y", "y"], "eval": ["eval", prog],
            "sweep": ["sweep"]}[command]  # fmt: skip
    assert _code([*head, f"{option}={value}"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1
    assert out.err == f"ndvm {command}: {option} must be {kind}, got {value!r}\n"


@pytest.mark.parametrize(
    ("option", "value", "line"),
    [("--starts", "0", "--starts must be a whole number >= 1, got 0"),
     ("--steps", "-1", "--steps must be a whole number >= 0, got -1"),
     ("--polish", "-3", "--polish must be a whole number >= 0, got -3"),
     ("--seed", "-1", "--seed must be a whole number >= 0, got -1"),
     ("--lr", "nan", "--lr must be a finite number > 0, got nan"),
     ("--lr", "0", "--lr must be a finite number > 0, got 0.0")],
)  # fmt: skip
def test_fit_numbers_out_of_range_are_one_line_and_exit_status_2(
    files: list[str], capsys: pytest.CaptureFixture[str], option: str, value: str, line: str
) -> None:
    prog, data = files
    assert _code(["fit", prog, "--data", data, "--x", "x", "--y", "y", option, value]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err == f"ndvm fit: {line}\n"


def test_other_usage_errors_keep_the_usage_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert _code(["search", "--budget"]) == 2  # no value at all: argparse's message
    err = capsys.readouterr().err
    assert err.startswith("usage: ndvm search") and "expected one argument" in err
