"""``ndvm fit`` when starts fail: every start failed exits 1 with each reason once and its
count (no numbers printed); ``--json`` groups the failures by reason. The not-converged
message advises ``optimizer='auto'`` only when another optimizer was in use."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ndvm
from ndvm.cli import main
from ndvm.commands.fit import failure_groups

TWO_REASONS = '(params (a 0.0)) (if (> a 0) (error "too big") (car x))'


def _files(tmp_path: Path, source: str) -> tuple[str, str]:
    prog, data = tmp_path / "m.scm", tmp_path / "d.csv"
    prog.write_text(source)
    data.write_text("x,y\n1,0.5\n2,1\n3,1.5\n")
    return str(prog), str(data)


def _fit(tmp_path: Path, source: str, *extra: str) -> list[str]:
    prog, data = _files(tmp_path, source)
    return ["fit", prog, "--data", data, "--x", "x", "--y", "y", "--steps", "3", *extra]


def test_every_start_failed_reports_each_reason_once(tmp_path: Path, capsys: Any) -> None:
    assert main(_fit(tmp_path, TWO_REASONS, "--starts", "64")) == 1
    out = capsys.readouterr()
    assert out.out == ""  # no loss, no parameter values: there are none
    (line,) = [ln for ln in out.err.splitlines() if "ndvm: warning" not in ln]
    assert "error: every start failed:" in line
    assert line.count("too big") == 1 and line.count("car: expected a pair") == 1
    counts = [int(c) for c in re.findall(r"\((\d+) of 64 starts\)", line)]
    assert len(counts) == 2 and sum(counts) == 64


def test_json_groups_failures_by_reason(tmp_path: Path, capsys: Any) -> None:
    assert main(_fit(tmp_path, TWO_REASONS, "--starts", "16", "--json")) == 1
    out = json.loads(capsys.readouterr().out)
    groups = out["failures"]
    assert out["failed"] == 16 and sum(g["count"] for g in groups) == 16
    assert len(groups) == 2 and len({g["reason"] for g in groups}) == 2
    starts = sorted(i for g in groups for i in g["starts"])
    assert starts == list(range(16))
    assert [g["count"] for g in groups] == sorted((g["count"] for g in groups), reverse=True)


def test_failure_groups_against_a_plain_count() -> None:
    status = ["ok", "failed: b", "failed: a", "failed: b", "ok", "failed: c", "failed: b"]
    groups = failure_groups(status)
    assert [(g["reason"], g["count"], g["starts"]) for g in groups] == [
        ("b", 3, [1, 3, 6]),
        ("a", 1, [2]),
        ("c", 1, [5]),
    ]
    assert failure_groups(["ok"]) == []


def test_some_starts_failed_still_prints_the_fit(tmp_path: Path, capsys: Any) -> None:
    src = '(params (a 0.0)) (if (> a 1) (error "too big") (* a x))'  # the fit: a = 0.5
    assert main(_fit(tmp_path, src, "--starts", "64", "--steps", "50")) == 0
    out = capsys.readouterr()
    assert out.out.startswith("loss:") and "a = 0.5" in out.out
    failed = [ln for ln in out.err.splitlines() if "start(s) failed" in ln]
    assert len(failed) == 1 and failed[0].count("too big") == 1


@pytest.mark.parametrize("optimizer,advises_auto", [("auto", False), ("adam", True)])
def test_not_converged_advice(optimizer: str, advises_auto: bool) -> None:
    # the minimum (a = 1) is a cusp: the gradient never vanishes, whatever the optimizer
    prog = ndvm.compile("(params (a 3.0)) (+ (* 0 x) (sqrt (abs (- a 1))))", inputs=["x"])
    x = np.linspace(0, 1, 5)
    with pytest.warns(ndvm.calibrate.ConvergenceWarning):
        cal = ndvm.calibrate(prog, {"x": x}, np.zeros(5), steps=5, starts=2, optimizer=optimizer)
    assert cal.message.startswith("not converged")
    assert ("use optimizer='auto'" in cal.message) is advises_auto
    # auto's Adam + L-BFGS says it was in use; auto on an mse is Levenberg-Marquardt
    assert ("optimizer='auto' was in use" in cal.message) is (cal.optimizer == "adam+lbfgs-polish")
    polished = ndvm.calibrate(prog, {"x": x}, np.zeros(5), steps=5, starts=2, loss="gaussian_nll",
                              warn=False)  # fmt: skip
    assert polished.optimizer == "adam+lbfgs-polish"
    assert "use optimizer='auto'" not in polished.message


def test_exit_status_is_the_verdict(tmp_path: Path, capsys: Any) -> None:
    """Converged: 0; a parameter the model does not use, or one row for two parameters: 1
    with the verdict on stderr and the values printed; --allow-unconverged: 0; errors: 2."""
    prog, data = _files(tmp_path, "(params (a 1.0) (b 1.0)) (* a x)")
    Path(data).write_text("x,y\n1,0.5\n2,1.1\n3,1.5\n")  # not an exact fit
    assert main(["fit", prog, "--data", data, "--x", "x", "--y", "y", "--steps", "50"]) == 1
    out = capsys.readouterr()
    assert "does not depend on b" in out.err and "a = 0.5" in out.out
    ok_src = _files(tmp_path, "(params (a 1.0)) (* a x)")[0]
    assert main(["fit", ok_src, "--data", data, "--x", "x", "--y", "y"]) == 0
    assert "warning" not in capsys.readouterr().err
    few = tmp_path / "few.csv"
    few.write_text("x,y\n1,0.5\n")
    args = ["fit", _files(tmp_path, "(params (a 1.0) (b 0.0)) (+ b (* a x))")[0], "--data",
            str(few), "--x", "x", "--y", "y"]  # fmt: skip
    assert main(args) == 1 and "not identifiable" in capsys.readouterr().err
    assert main([*args, "--allow-unconverged"]) == 0
    assert "warning: not identifiable" in capsys.readouterr().err
    for bad in (["--fix", "a=oops"], ["--y", "nope"]):
        assert main(["fit", ok_src, "--data", data, "--x", "x", "--y", "y", *bad]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
