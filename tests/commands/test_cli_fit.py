"""``ndvm fit`` as a user runs it (subprocess): converging defaults, uncertainty, JSON, errors
that name the right file and option, several inputs, limits, progress and Ctrl-C."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ndvm.backends import registry

LOGISTIC = (
    "(params (K 10.0 positive) (r 0.5 positive) (N0 1.0 positive))\n"
    "(/ K (+ 1 (* (/ (- K N0) N0) (exp (- (* r t))))))\n"
)


def _ndvm(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ndvm", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ),
    )


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    t = np.linspace(0.0, 30.0, 31)
    y = 50.0 / (1.0 + 49.0 * np.exp(-0.3 * t)) + np.random.default_rng(2).standard_normal(31)
    data = tmp_path / "logistic.csv"
    data.write_text("t,N\n" + "".join(f"{float(a)!r},{float(b)!r}\n" for a, b in zip(t, y)))
    prog = tmp_path / "logistic.scm"
    prog.write_text(LOGISTIC)
    nohdr = tmp_path / "nohdr.scm"
    nohdr.write_text("(/ K (+ 1 (* (/ (- K N0) N0) (exp (- (* r x))))))\n")
    return {"data": data, "prog": prog, "nohdr": nohdr}


def test_defaults_converge_and_report_json(files: dict[str, Path]) -> None:
    res = _ndvm(
        "fit", str(files["prog"]), "--data", str(files["data"]), "--x", "t", "--y", "N", "--json"
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["success"] and out["message"].startswith("converged")
    assert out["starts"] == 4  # adaptive starts: the first wave of the default 16 agreed
    assert abs(out["params"]["K"] - 50.0) < 2.0 and out["r2"] > 0.99
    assert out["stderr"]["K"] > 0 and len(out["cov"]) == 3 and out["optimizer"] == "lm"
    assert "warning" not in res.stderr


def test_text_output_has_errors_and_unconverged_warns(files: dict[str, Path]) -> None:
    base = ["fit", str(files["prog"]), "--data", str(files["data"]), "--x", "t", "--y", "N"]
    res = _ndvm(*base)
    assert res.returncode == 0 and "K = 49." in res.stdout and " ± " in res.stdout
    res = _ndvm(*base, "--starts", "1", "--steps", "3", "--optimizer", "adam")
    assert res.returncode == 1 and "warning: not converged" in res.stderr
    assert "K = " in res.stdout  # the values are still printed
    slow = ("--starts", "1", "--steps", "3", "--optimizer", "adam")
    res = _ndvm(*base, *slow, "--allow-unconverged")
    assert res.returncode == 0 and "warning: not converged" in res.stderr


def test_json_is_strict_rfc8259(tmp_path: Path) -> None:
    """A fit whose every start fails prints NaN as null, never a bare NaN."""
    prog = tmp_path / "bad.scm"
    prog.write_text("(params (a 1.0))\n(* a (log (- x)))\n")
    data = tmp_path / "d.csv"
    data.write_text("x,y\n1,2\n2,4\n")
    res = _ndvm(
        "fit",
        str(prog),
        "--data",
        str(data),
        "--x",
        "x",
        "--y",
        "y",
        "--json",
        "--starts",
        "2",
        "--steps",
        "3",
    )
    assert res.returncode == 1
    out = json.loads(res.stdout, parse_constant=lambda c: pytest.fail(f"bare {c} in JSON"))
    assert out["loss"] is None and out["success"] is False and out["failed"] == 2


def test_help_shows_defaults() -> None:
    res = _ndvm("fit", "--help")
    assert res.returncode == 0
    text = " ".join(res.stdout.split())
    assert "default 16" in text and "(default: 200)" in text and "(default: auto)" in text
    top = _ndvm("--help").stdout
    assert "Evaluate, fit and search small model programs" in top and "examples:" in top


def test_errors_name_the_file_and_the_option(files: dict[str, Path], tmp_path: Path) -> None:
    res = _ndvm(
        "fit", str(files["prog"]), "--data", str(tmp_path / "nope.csv"), "--x", "t", "--y", "N"
    )
    assert res.returncode == 2 and len(res.stderr.splitlines()) == 1
    assert res.stderr.startswith(f"{tmp_path / 'nope.csv'}: error: cannot read data file")
    assert "Traceback" not in res.stderr
    res = _ndvm("eval", str(files["prog"]), "--param", "K=abc", "--input", "t=1")
    assert res.returncode == 2 and "--param K=abc: 'abc' is not a number" in res.stderr


def test_unused_input_and_input_without_column(files: dict[str, Path]) -> None:
    res = _ndvm("fit", str(files["nohdr"]), "--data", str(files["data"]), "--x", "t", "--y", "N")
    assert res.returncode == 2
    assert "input 't' is not used by the program; its free names are: K, N0, r, x" in res.stderr
    hdr = files["prog"].with_name("hdr.scm")
    hdr.write_text(LOGISTIC.replace("(* r t)", "(* r t s)"))
    res = _ndvm("fit", str(hdr), "--data", str(files["data"]), "--x", "t", "--y", "N")
    assert res.returncode == 2 and "program input 's' has no column" in res.stderr
    res = _ndvm(
        "fit",
        str(files["nohdr"]),
        "--data",
        str(files["data"]),
        "--x",
        "t",
        "--as",
        "x",
        "--y",
        "N",
        "--json",
    )
    assert res.returncode == 0 and json.loads(res.stdout)["success"]


def test_several_inputs(tmp_path: Path) -> None:
    prog = tmp_path / "plane.scm"
    prog.write_text("(+ (* a u) (* b v) c)\n")
    rng = np.random.default_rng(0)
    u, v = rng.standard_normal(20), rng.standard_normal(20)
    data = tmp_path / "p.csv"
    data.write_text(
        "u,v,y\n"
        + "".join(f"{float(a)!r},{float(b)!r},{float(2 * a - 3 * b + 1)!r}\n" for a, b in zip(u, v))
    )
    res = _ndvm("fit", str(prog), "--data", str(data), "--x", "u", "--x", "v", "--y", "y", "--json")
    assert res.returncode == 0, res.stderr
    p = json.loads(res.stdout)["params"]
    assert math.isclose(p["a"], 2, abs_tol=1e-6) and math.isclose(p["b"], -3, abs_tol=1e-6)


def test_eval_max_steps_and_deadline(tmp_path: Path) -> None:
    prog = tmp_path / "loop.scm"
    prog.write_text("(define (f n) (if (= n 0) 0 (f (- n 1))))\n(f 100000)\n")
    res = _ndvm("eval", str(prog), "--max-steps", "1000")
    assert res.returncode == 1 and "StepLimitExceeded" in res.stderr
    assert _ndvm("eval", str(prog)).stdout == "value: 0\n"
    res = _ndvm("eval", str(prog), "--deadline", "0")
    assert res.returncode == 2 and "--deadline" in res.stderr and "Traceback" not in res.stderr


def test_fit_stopped_by_a_limit_of_the_whole_run(tmp_path: Path, files: dict[str, Path]) -> None:
    """The payload cap stops the whole run (a HeapLimitExceeded raised, not a lane's error):
    the run failed, exit 1 as when every start fails (as ``ndvm eval``), not 2 (bad input);
    under a deadline, which of the two ends a growing run first depends on the machine."""
    prog = tmp_path / "big.scm"
    prog.write_text("(params a)\n(+ (* a t) (vsum (outer (ones 65536) (ones 65536))))\n")
    res = _ndvm("fit", str(prog), "--data", str(files["data"]), "--x", "t", "--y", "N")
    assert res.returncode == 1, res.stderr
    assert res.stderr.startswith(f"{prog}: HeapLimitExceeded: payload memory limit")
    assert len(res.stderr.strip().splitlines()) == 1 and res.stdout == ""


def test_eval_prints_values_as_the_language_writes_them(tmp_path: Path) -> None:
    prog = tmp_path / "s.scm"
    prog.write_text("(list 1 'a (list #t #f) (/ 0. 0.) 2.5)\n")
    assert _ndvm("eval", str(prog)).stdout == "value: (1 a (#t #f) +nan.0 2.5)\n"
    out = json.loads(_ndvm("eval", str(prog), "--json").stdout)
    assert out == {"value": [1.0, "a", [True, False], None, 2.5]}


@pytest.mark.skipif("native" not in registry.available(), reason="native backend not built")
def test_progress_and_ctrl_c_in_the_native_optimizer(files: dict[str, Path]) -> None:
    args = [
        sys.executable,
        "-m",
        "ndvm",
        "fit",
        str(files["prog"]),
        "--data",
        str(files["data"]),
        "--x",
        "t",
        "--y",
        "N",
        "--steps",
        "1000000",
        "--starts",
        "1",
        "--optimizer",
        "adam",
        "--backend",
        "native",
        "--progress",
    ]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stderr is not None
        # unbuffered: the first byte of the progress bar, so the run is inside the loop
        seen = os.read(proc.stderr.fileno(), 1)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    text = (seen + err).decode()
    assert proc.returncode == 130, text
    # tqdm's bar (when installed) or the plain line, both named "fit"
    assert text.startswith("\rfit") and text.endswith("ndvm: interrupted\n"), text
    assert "Traceback" not in text and out == b""


def test_fit_max_steps_fails_the_starts(tmp_path: Path) -> None:
    prog = tmp_path / "loop.scm"
    prog.write_text(
        "(params (a 1.0))\n(define (f n) (if (= n 0) (* a x) (f (- n 1))))\n(f 100000)\n"
    )
    data = tmp_path / "d.csv"
    data.write_text("x,y\n1,2\n2,4\n")
    base = ["fit", str(prog), "--data", str(data), "--x", "x", "--y", "y", "--json"]
    quick = ["--starts", "2", "--steps", "3", "--optimizer", "adam"]
    res = _ndvm(*base, *quick, "--max-steps", "1000")
    assert res.returncode == 1 and "StepLimitExceeded: step limit of 1000" in res.stderr
    assert json.loads(_ndvm(*base, *quick).stdout)["failed"] == 0


@pytest.mark.parametrize("brk", ["\r", "\x0c", "\x0b", "\r\n"])
def test_free_names_count_lines_as_the_reader_does(brk: str) -> None:
    """Only "\\n" ends a line for the reader; other line-break characters inside the header
    (whitespace to the reader) must not shift where the body starts."""
    from ndvm.commands.common import free_names

    src = f"(params{brk} (a 1.0)\n  (k 0.5 positive){brk})\n\n  (+ a (* k b x))"
    assert free_names(src) == (("a", "k", "b", "x"), ("a", "k"))
    assert free_names(f"(params{brk}(a 1.0))\n(+ a x)") == (("a", "x"), ("a",))
