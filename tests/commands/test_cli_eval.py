"""``ndvm eval``: in process via ``ndvm.cli.main`` and as ``python -m ndvm`` in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ndvm import cli

MODEL = "(params (a 1.0) (k 0.5 positive))\n(* a k x)\n"


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "model.scm"
    path.write_text(MODEL)
    return path


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_json_value_and_grad(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(
        ["eval", str(model), "--param", "a=2", "--input", "x=3", "--grad", "--json"], capsys
    )
    assert code == 0 and err == ""
    data = json.loads(out)
    assert set(data) == {"value", "grad", "grad_of"}
    assert (
        data["grad_of"] == "d value / d parameter value (constrained space), summed over data lanes"
    )
    assert data["value"] == pytest.approx(3.0)
    # gradients with respect to the parameter values the program sees (not theta)
    assert data["grad"] == {"a": pytest.approx(1.5), "k": pytest.approx(6.0)}


def test_json_without_grad_and_defaults(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(["eval", str(model), "--input", "x=2", "--json"], capsys)
    assert code == 0 and json.loads(out) == {"value": pytest.approx(1.0)}


def test_data_lanes(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(["eval", str(model), "--input", "x=1,2,3", "--grad", "--json"], capsys)
    data = json.loads(out)
    assert code == 0
    np.testing.assert_allclose(data["value"], [0.5, 1.0, 1.5])
    assert data["grad"]["a"] == pytest.approx(3.0) and data["grad"]["k"] == pytest.approx(6.0)
    code, out, _ = run_main(["eval", str(model), "--input", "x=[1, 2]", "--json"], capsys)
    assert json.loads(out)["value"] == [0.5, 1.0]


def test_matrix_input_and_text_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "m.scm"
    path.write_text("(* s (trace M))")
    code, out, _ = run_main(
        ["eval", str(path), "--param", "s=2", "--input", "M=[[1, 2], [3, 4]]", "--grad"], capsys
    )
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "value: 10" and lines[2] == "d/ds: 5"
    assert lines[1].startswith("gradient (d value / d parameter value")


def test_structural_and_nonfinite_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.scm"
    path.write_text("(list 1 'a (/ 1 0))")
    code, out, _ = run_main(["eval", str(path), "--json"], capsys)
    assert code == 0 and json.loads(out) == {"value": [1.0, "a", None]}  # RFC 8259: no inf
    assert "Infinity" not in out and "NaN" not in out


@pytest.mark.parametrize(
    ("text", "where", "kind", "status"),
    [
        ("(+ 1\n  (car 5))", "2:3", "ProgramError", 1),  # ran and failed: 1
        ("(+ 1 (", "1:6", "ReadError", 2),  # not a program: an input error, 2
        ("(+ 1 (sin))", "1:6", "CompileError", 2),
        ("(set! a 1)", "1:1", "UnsupportedForm", 2),
        ("(dot [1] [1 2])", "1:1", "ShapeError", 1),
        ("(define (f n) (+ 1 (f n)))\n(f 1)", None, "DepthLimitExceeded", 1),
    ],
)
def test_errors_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, where: str | None, kind: str,
    status: int,
) -> None:  # fmt: skip
    path = tmp_path / "bad.scm"
    path.write_text(text)
    code, out, err = run_main(["eval", str(path)], capsys)
    assert code == status and out == ""
    line = err.strip()
    prefix = f"{path}:{where}: {kind}: " if where else f"{path}: {kind}: "
    assert line.startswith(prefix), line


def test_usage_errors(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(["eval", str(model), "--param", "zz=1", "--input", "x=1"], capsys)
    assert code == 2 and "unknown parameter" in err
    code, _, err = run_main(["eval", str(model), "--param", "a"], capsys)
    assert code == 2 and "NAME=VALUE" in err
    code, _, err = run_main(["eval", str(model)], capsys)
    assert code == 2 and "2:8: CompileError: unbound variable 'x'" in err
    code, _, err = run_main(["eval", str(model.parent / "nope.scm")], capsys)
    assert code == 2 and "nope.scm" in err


def _python_m(args: list[str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)  # the installed package (the artifact under test)
    return subprocess.run(
        [sys.executable, "-m", "ndvm", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_subprocess_python_m(model: Path) -> None:
    proc = _python_m(["eval", str(model), "--param", "a=2", "--input", "x=3", "--grad", "--json"])
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["value"] == pytest.approx(3.0) and data["grad"]["k"] == pytest.approx(6.0)


def test_subprocess_stdin_error() -> None:
    proc = _python_m(["eval", "-"], stdin="(+ 1\n  (car 5))")
    assert proc.returncode == 1 and proc.stdout == ""  # it ran and failed: status 1
    assert proc.stderr.strip() == "<stdin>:2:3: ProgramError: car: expected a pair, got a number"
    proc = _python_m(["eval", "-", "--json"], stdin="(* 2 3)")
    assert proc.returncode == 0 and json.loads(proc.stdout) == {"value": 6.0}


def test_misspelt_parameter_and_input_names_get_suggestions(tmp_path: Path) -> None:
    """``--param vmx=1`` / ``--input xx=1`` name the close parameter or free name (subprocess)."""
    path = tmp_path / "mm.scm"
    path.write_text("(/ (* vmax x) (+ km x))")
    for flag, bad, close in (("--param", "vmx", "vmax"), ("--input", "xx", "x")):
        args = [flag, f"{bad}=1"] + (["--input", "x=1"] if flag == "--param" else [])
        res = subprocess.run(
            [sys.executable, "-m", "ndvm", "eval", str(path), *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert res.returncode == 2, res.stderr
        assert f"did you mean '{close}'?" in res.stderr, res.stderr
