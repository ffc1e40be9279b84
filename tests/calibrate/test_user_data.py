"""Inputs as users have them (issue 46): fixed parameters, DataFrames with columns the program
does not use, NaN rows, ``predict`` by keyword, and the CLI's ``--fix`` and did-you-mean."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ndvm
from ndvm.errors import NdvmError

# R's Puromycin, the 12 "treated" rows (public data)
CONC = np.array([0.02, 0.02, 0.06, 0.06, 0.11, 0.11, 0.22, 0.22, 0.56, 0.56, 1.10, 1.10])
RATE = np.array([76, 47, 97, 107, 123, 139, 159, 152, 191, 201, 207, 200], dtype=float)
MM = "(params (Vm 200.0) (K 0.1)) (/ (* Vm conc) (+ K conc))"
ENGINES = ["numpy", pytest.param("auto", marks=pytest.mark.native)]


def _se_vm_k_constant(k: float) -> tuple[float, float]:
    """Vm and its standard error for the model with K a constant, in closed form: the model
    is linear in Vm (f = Vm g), so Vm = gᵀy / gᵀg and se² = SSE / (N - 1) / gᵀg."""
    g = CONC / (k + CONC)
    vm = float(g @ RATE / (g @ g))
    r = RATE - vm * g
    return vm, float(np.sqrt(r @ r / (len(r) - 1) / (g @ g)))


@pytest.mark.parametrize("engine", ENGINES)
def test_fixed_parameter_puromycin(engine: str) -> None:
    """K fixed at 0.06: se(Vm) = 4.261 (the free column only; pinning by equal bounds gave
    6.88 and a standard error for K)."""
    cal = ndvm.calibrate(MM, {"conc": CONC}, RATE, fixed={"K": 0.06}, engine=engine)
    vm, se = _se_vm_k_constant(0.06)
    assert cal.success, cal.message
    assert cal.params["K"] == 0.06 and cal.fixed == {"K": 0.06}
    assert cal.params["Vm"] == pytest.approx(vm, rel=1e-9)
    assert cal.stderr is not None and set(cal.stderr) == {"Vm"}
    assert round(cal.stderr["Vm"], 3) == 4.261
    assert cal.stderr["Vm"] == pytest.approx(se, rel=1e-6)
    cov = cal.cov
    assert cov is not None and cov[1, 1] == 0.0 and cov[0, 1] == 0.0
    assert "fixed" in cal.summary() and cal.to_dict()["fixed"] == {"K": 0.06}


@pytest.mark.data  # scipy comes with the data extra
def test_fixed_parameter_matches_curve_fit() -> None:
    from scipy.optimize import curve_fit

    popt, pcov = curve_fit(lambda x, vm: vm * x / (0.06 + x), CONC, RATE, p0=[200.0])
    cal = ndvm.calibrate(MM, {"conc": CONC}, RATE, fixed={"K": 0.06})
    assert cal.params["Vm"] == pytest.approx(popt[0], rel=1e-7)
    assert cal.stderr is not None
    assert cal.stderr["Vm"] == pytest.approx(float(np.sqrt(pcov[0, 0])), rel=1e-6)


def test_fixed_errors() -> None:
    with pytest.raises(NdvmError, match="unknown parameter 'Kx'"):
        ndvm.calibrate(MM, {"conc": CONC}, RATE, fixed={"Kx": 1.0})
    with pytest.raises(NdvmError, match="must be finite"):
        ndvm.calibrate(MM, {"conc": CONC}, RATE, fixed={"K": float("nan")})
    with pytest.raises(NdvmError, match="must be a number"):
        ndvm.calibrate(MM, {"conc": CONC}, RATE, fixed={"K": "a"})
    src = "(params (Vm 200.0) (K 0.1 positive)) (/ (* Vm conc) (+ K conc))"
    with pytest.raises(NdvmError, match="outside its positive range"):
        ndvm.calibrate(src, {"conc": CONC}, RATE, fixed={"K": -1.0})


def _frame() -> Any:
    import pandas as pd  # the data extra (its marker is on the callers)
    treated = {"conc": CONC, "rate": RATE, "state": ["treated"] * 12}
    return pd.DataFrame(treated)


@pytest.mark.data
def test_a_dataframe_with_a_text_column() -> None:
    df = _frame()
    plain = ndvm.calibrate(MM, {"conc": CONC}, RATE)
    by_source = ndvm.calibrate(MM, df, df.rate)  # source text: the columns it names
    prog = ndvm.compile(MM, inputs=("conc",))
    by_program = ndvm.calibrate(prog, df, df["rate"])
    assert by_source.params == plain.params == by_program.params
    assert by_program.params["Vm"] == pytest.approx(212.68, abs=0.01)  # R's nls


@pytest.mark.data
def test_a_column_named_like_a_free_parameter_is_an_error() -> None:
    df = _frame()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = ndvm.compile("(/ (* Vm conc) (+ K conc))", inputs=())  # conc: a free name
    with pytest.raises(NdvmError, match="column 'conc'.*declare it as an input"):
        ndvm.calibrate(prog, df, df.rate)


@pytest.mark.data
def test_nan_raise_names_the_column_and_row() -> None:
    df = _frame()
    df.loc[3, "rate"] = np.nan
    with pytest.raises(NdvmError, match=r"target 'rate' has NaN at row 3"):
        ndvm.calibrate(MM, df, df.rate)
    df = _frame()
    df.loc[5, "conc"] = np.nan
    with pytest.raises(NdvmError, match=r"input 'conc' has NaN at row 5"):
        ndvm.calibrate(MM, df, df.rate)


def test_nan_omit_fits_the_other_rows() -> None:
    y = RATE.copy()
    y[3] = np.nan
    x = CONC.copy()
    x[7] = np.nan
    cal = ndvm.calibrate(MM, {"conc": x}, y, nan_policy="omit")
    keep = np.ones(12, bool)
    keep[[3, 7]] = False
    ref = ndvm.calibrate(MM, {"conc": CONC[keep]}, RATE[keep])
    assert cal.success and cal.params == ref.params
    with pytest.raises(NdvmError, match="nan_policy must be"):
        ndvm.calibrate(MM, {"conc": x}, y, nan_policy="drop")


def test_predict_by_keyword() -> None:
    cal = ndvm.calibrate(MM, {"conc": CONC}, RATE)
    xs = np.array([0.1, 0.5])
    by_kw = np.asarray(cal.predict(conc=xs))
    by_map = np.asarray(cal.predict({"conc": xs}))
    vm, k = cal.params["Vm"], cal.params["K"]
    np.testing.assert_allclose(by_kw, vm * xs / (k + xs), rtol=1e-12)
    np.testing.assert_array_equal(by_kw, by_map)
    assert np.asarray(cal.predict()).shape == (12,)


def test_no_did_you_mean_for_a_conventional_parameter_name() -> None:
    with pytest.warns(ndvm.FreeNameWarning) as rec:
        ndvm.compile("(* a (sin (+ (* w t) phi)))", inputs=("t",))
    assert "did you mean" not in str(rec[0].message)


def _ndvm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ndvm", *args], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ))  # fmt: skip


@pytest.fixture
def puromycin(tmp_path: Path) -> Path:
    rows = "".join(f"{c!r},{r!r},treated\n" for c, r in zip(CONC.tolist(), RATE.tolist()))
    path = tmp_path / "puromycin.csv"
    path.write_text("conc,rate,state\n" + rows)
    return path


def test_cli_fix(tmp_path: Path, puromycin: Path) -> None:
    prog = tmp_path / "mm.scm"
    prog.write_text(MM + "\n")
    base = ("fit", str(prog), "--data", str(puromycin), "--x", "conc", "--y", "rate")
    res = _ndvm(*base, "--fix", "K=0.06", "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["fixed"] == {"K": 0.06} and set(out["stderr"]) == {"Vm"}
    assert round(out["stderr"]["Vm"], 3) == 4.261
    text = _ndvm(*base, "--fix", "K=0.06")
    assert "K = 0.06  (fixed)" in text.stdout
    bad = _ndvm(*base, "--fix", "K=abc")
    assert bad.returncode == 2 and "NAME=VALUE" in bad.stderr and "Traceback" not in bad.stderr


def test_cli_did_you_mean_for_an_unbound_name(tmp_path: Path, puromycin: Path) -> None:
    prog = tmp_path / "typo.scm"
    prog.write_text("(params (Vm 200.0) (K 0.1)) (/ (* Vm conc) (+ Km conc))\n")
    res = _ndvm("fit", str(prog), "--data", str(puromycin), "--x", "conc", "--y", "rate")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "unbound name 'Km'" in res.stderr and "did you mean 'K'?" in res.stderr


def test_nan_in_lists_is_found_too() -> None:
    y = [float("nan"), *RATE[1:].tolist()]
    with pytest.raises(NdvmError, match="target has NaN at row 0"):
        ndvm.calibrate(MM, {"conc": CONC.tolist()}, y)
    cal = ndvm.calibrate(MM, {"conc": CONC.tolist()}, y, nan_policy="omit")
    ref = ndvm.calibrate(MM, {"conc": CONC[1:]}, RATE[1:])
    assert cal.success and cal.params == ref.params


@pytest.mark.data
def test_source_text_does_not_take_a_declared_parameter_as_a_column() -> None:
    df = _frame()
    df["K"] = 1.0  # a column named like the header's parameter: ignored, K is fitted
    cal = ndvm.calibrate(MM, df, df.rate)
    assert cal.params["K"] == pytest.approx(0.06412, abs=1e-5)
