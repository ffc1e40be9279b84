"""Tasks (nile vs statsmodels, kalman-80, sr-damped protocol) and the ``ndvm fit`` CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tests.calibrate.conftest import DAMPED, TRUE

from ndvm import tasks
from ndvm.cli import main


@pytest.mark.data
def test_nile_matches_statsmodels_mle() -> None:
    from ndvm.tasks.nile import statsmodels_mle

    task = tasks.get("nile")
    result = task.evaluate(None, backend="reference")
    m = result.metrics
    assert m["rel_irregular"] <= 1e-4 and m["rel_level"] <= 1e-4, m
    assert m["rel_llf"] <= 1e-6, m
    assert result.success
    # the program's log-likelihood is statsmodels' own, not just near its optimum
    import statsmodels.api as sm

    ref = statsmodels_mle()
    model = sm.tsa.UnobservedComponents(task.data().meta["y"], level="local level")
    llf = model.loglike(np.array([ref["sigma2_irregular"], ref["sigma2_level"]]))
    prog = task.compile(backend="reference")
    theta = np.log([ref["sigma2_irregular"], ref["sigma2_level"]])
    assert abs(-float(prog.eval(theta, **task.data().train_inputs)) - llf) < 1e-9


def test_kalman80_fit_decreases_nll(backend: str) -> None:
    task = tasks.get("kalman-80")
    Y = task.data().meta["Y"]
    np.testing.assert_array_equal(Y, np.random.default_rng(0).standard_normal((80, 2)))
    result = task.evaluate(None, backend=backend, steps=10)
    assert result.success and result.calibration.history.shape == (11, 1)
    assert result.metrics["nll"] < result.metrics["nll0"]


def test_sr_damped_protocol_and_candidates() -> None:
    task = tasks.get("sr-damped")
    d = task.data()
    assert len(d.train_target) == 44 and len(d.test_target) == 20
    assert np.array_equal(
        np.sort(np.concatenate([d.train_inputs["x"], d.test_inputs["x"]])),
        np.linspace(0.1, 6.0, 64),
    )
    good = task.evaluate(None, backend="reference")
    assert good.calibration is not None and np.isfinite(good.metrics["test_r2"])
    rec = json.dumps({"src": "(* a (log (* b x)))", "params": ["a", "b"]})
    bad = task.evaluate(rec, backend="reference", init=np.array([1.0, -1.0]))
    assert not bad.success and "non-finite" in (bad.error or "")
    unbound = task.evaluate("(* a x", backend="reference")
    assert not unbound.success and unbound.calibration is None
    assert (unbound.error or "").startswith("ReadError")
    assert set(tasks.names()) >= {"sr-damped", "kalman-80", "nile"}


def _csv(tmp_path: Path) -> Path:
    x = np.linspace(0.1, 6.0, 30)
    y = TRUE["a"] * np.exp(-TRUE["k"] * x) * np.cos(TRUE["w"] * x + TRUE["phi"])
    path = tmp_path / "data.csv"
    path.write_text("t,obs\n" + "".join(f"{float(a)!r},{float(b)!r}\n" for a, b in zip(x, y)))
    return path


@pytest.mark.plot
def test_cli_fit_json_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prog = tmp_path / "damped.scm"
    prog.write_text(DAMPED)
    data = _csv(tmp_path)
    png = tmp_path / "fit.png"
    argv = [
        "fit",
        str(prog),
        "--data",
        str(data),
        "--x",
        "t",
        "--as",
        "x",
        "--y",
        "obs",
        "--starts",
        "8",
        "--steps",
        "40",
        "--optimizer",
        "adam+lbfgs",
        "--json",
        "--plot",
        str(png),
        "--backend",
        "reference",
        "--progress",
    ]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["starts"] == 8 and out["loss"] < 1e-16
    assert abs(out["params"]["w"] - TRUE["w"]) < 1e-6
    assert png.exists() and png.stat().st_size > 1000


def test_cli_fit_text_and_errors(tmp_path: Path) -> None:
    prog = tmp_path / "line.scm"
    prog.write_text("(+ (* a x) b)")
    data = tmp_path / "d.csv"
    data.write_text("x,y\n0,1\n1,3\n2,5\n")
    run = [
        sys.executable,
        "-m",
        "ndvm",
        "fit",
        str(prog),
        "--data",
        str(data),
        "--x",
        "x",
        "--y",
        "y",
        "--steps",
        "60",
        "--optimizer",
        "lbfgs",
        "--backend",
        "reference",
    ]
    res = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "a = 2" in res.stdout and "b = 1" in res.stdout
    res = subprocess.run(run[:-8] + ["--y", "nope"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "no column 'nope'" in res.stderr
