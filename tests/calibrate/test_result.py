"""The user's walk: defaults that converge and say so, uncertainty vs scipy/statsmodels, box
bounds next to constrained parameters, every documented ``ndvm.calibrate`` name, the result's
repr and summary table."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import numpy as np
import pytest

import ndvm
from ndvm import tasks
from ndvm.calibrate.result import ConvergenceWarning

MM = "(params (vmax 1.0 positive) (km 1.0 positive))\n(/ (* vmax s) (+ km s))"
S = np.array([0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0])
LOGISTIC = (
    "(params (K 10.0 positive) (r 0.5 positive) (N0 1.0 positive))\n"
    "(/ K (+ 1 (* (/ (- K N0) N0) (exp (- (* r t))))))"
)
T = np.linspace(0.0, 30.0, 31)


def _mm_data() -> np.ndarray:
    return 2.0 * S / (2.595 + S) + 0.01 * np.random.default_rng(1).standard_normal(S.size)


def _logistic_data() -> np.ndarray:
    return 50.0 / (1.0 + 49.0 * np.exp(-0.3 * T)) + np.random.default_rng(2).standard_normal(31)


def _lsq(f, x: np.ndarray, y: np.ndarray, p0: np.ndarray) -> np.ndarray:
    """Plain Gauss-Newton least squares (reference optimum, independent of ndvm)."""
    p = p0.astype(float)
    for _ in range(200):
        r = f(x, p) - y
        J = np.stack([(f(x, p + h) - f(x, p - h)) / (2e-7) for h in np.eye(p.size) * 1e-7], 1)
        step = np.linalg.lstsq(J, -r, rcond=None)[0]
        p = p + step
        if np.abs(step).max() < 1e-13 * (1 + np.abs(p).max()):
            break
    return p


def test_defaults_converge_on_michaelis_menten_and_say_so() -> None:
    y = _mm_data()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        cal = ndvm.calibrate(ndvm.compile(MM, inputs=("s",)), {"s": S}, y)
    ref = _lsq(lambda s, p: p[0] * s / (p[1] + s), S, y, np.array([1.0, 1.0]))
    np.testing.assert_allclose([cal.params["vmax"], cal.params["km"]], ref, rtol=1e-6)
    assert cal.success and cal.message.startswith("converged")
    assert cal.grad_norm <= 1e-5 and cal.nit > 0 and cal.nfev >= cal.nit
    sse = ((cal.predict() - y) ** 2).sum()
    assert cal.r2 == pytest.approx(1 - sse / ((y - y.mean()) ** 2).sum(), rel=1e-12)


def test_defaults_converge_on_logistic_growth() -> None:
    y = _logistic_data()
    cal = ndvm.calibrate(ndvm.compile(LOGISTIC, inputs=("t",)), {"t": T}, y)
    f = lambda t, p: p[0] / (1 + (p[0] - p[2]) / p[2] * np.exp(-p[1] * t))  # noqa: E731
    ref = _lsq(f, T, y, np.array([45.0, 0.3, 1.0]))
    np.testing.assert_allclose([cal.params[n] for n in ("K", "r", "N0")], ref, rtol=1e-5)
    assert cal.success


def test_not_converged_warns_with_a_message() -> None:
    p = ndvm.compile(LOGISTIC, inputs=("t",))
    with pytest.warns(ConvergenceWarning, match="not converged"):
        cal = ndvm.calibrate(p, {"t": T}, _logistic_data(), starts=1, steps=5, optimizer="adam")
    assert not cal.success and "raise steps or starts" in cal.message


def test_warn_false_keeps_the_verdict_without_the_warning() -> None:
    p = ndvm.compile(LOGISTIC, inputs=("t",))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        cal = ndvm.calibrate(
            p, {"t": T}, _logistic_data(), starts=1, steps=5, optimizer="adam", warn=False
        )
        task = tasks.get("sr-damped").calibrate(steps=3)  # a task's fixed protocol
    assert not cal.success and cal.message.startswith("not converged")
    assert not task.success and task.message.startswith("not converged")


def test_box_bounds_beside_a_positive_parameter() -> None:
    p = ndvm.compile(LOGISTIC, inputs=("t",))
    cal = ndvm.calibrate(p, {"t": T}, _logistic_data(), constraints={"r": (0.1, 0.25)})
    assert 0.1 - 1e-12 <= cal.all_params[:, 1].min() and cal.all_params[:, 1].max() <= 0.25 + 1e-12
    assert cal.params["r"] == pytest.approx(0.25, rel=1e-9)  # truth 0.3 is outside: on the bound
    with pytest.raises(ndvm.NdvmError, match="'r'.*lower bound"):
        ndvm.calibrate(p, {"t": T}, _logistic_data(), constraints={"r": (0.4, 0.1)})
    with pytest.raises(ndvm.NdvmError, match="unknown parameter 'q'"):
        ndvm.calibrate(p, {"t": T}, _logistic_data(), constraints={"q": (0.4, None)})


@pytest.mark.parametrize("kw", [{"starts": 16}, {"optimizer": "lbfgs"}])
def test_fit_on_an_active_bound_converges_to_the_conditional_optimum(kw: dict) -> None:
    """r held at its upper bound: the other parameters reach the optimum of the program with
    r fixed there (L-BFGS keeps the held coordinate out of its direction: an active set)."""
    p = ndvm.compile(LOGISTIC, inputs=("t",))
    y = _logistic_data()
    cal = ndvm.calibrate(p, {"t": T}, y, constraints={"r": (0.1, 0.25)}, **kw)
    fixed_src = LOGISTIC.replace("(r 0.5 positive) ", "").replace("(* r t)", "(* 0.25 t)")
    fixed = ndvm.calibrate(ndvm.compile(fixed_src, inputs=("t",)), {"t": T}, y, starts=16)
    assert cal.success and fixed.success, (cal.message, fixed.message)
    assert cal.params["r"] == pytest.approx(0.25, rel=1e-12)
    assert cal.loss == pytest.approx(fixed.loss, rel=1e-9)
    for name in ("K", "N0"):
        assert cal.params[name] == pytest.approx(fixed.params[name], rel=1e-5)


@pytest.mark.data  # scipy comes with the data extra (statsmodels)
def test_stderr_and_cov_match_curve_fit() -> None:
    from scipy import optimize

    y = _mm_data()
    cal = ndvm.calibrate(ndvm.compile(MM, inputs=("s",)), {"s": S}, y)
    popt, pcov = optimize.curve_fit(lambda s, v, k: v * s / (k + s), S, y, p0=[1.0, 1.0])
    np.testing.assert_allclose([cal.params["vmax"], cal.params["km"]], popt, rtol=1e-6)
    # full Hessian vs curve_fit's Gauss-Newton J^T J: equal up to the residual curvature term
    np.testing.assert_allclose(cal.cov, pcov, rtol=2e-2)
    assert cal.stderr["km"] == pytest.approx(np.sqrt(pcov[1, 1]), rel=1e-2)


def test_gaussian_nll_stderr_of_a_mean() -> None:
    """A constant model under a learned Gaussian noise: se(mu) = sigma_mle / sqrt(N)."""
    y = np.random.default_rng(3).normal(2.0, 0.5, 40)
    prog = ndvm.compile("(params (mu 0.0))\n(+ mu (* 0 x))", inputs=("x",))
    cal = ndvm.calibrate(prog, {"x": np.zeros(40)}, y, loss="gaussian_nll")
    assert cal.params["mu"] == pytest.approx(y.mean(), rel=1e-7)
    assert cal.params["sigma"] == pytest.approx(y.std(), rel=1e-6)
    assert cal.stderr["mu"] == pytest.approx(y.std() / np.sqrt(40), rel=1e-4)
    assert cal.stderr["sigma"] == pytest.approx(y.std() / np.sqrt(80), rel=1e-4)


@pytest.mark.data
def test_nile_stderr_matches_statsmodels_bse() -> None:
    sm = pytest.importorskip("statsmodels.api")
    from ndvm import tasks
    from ndvm.tasks.nile import load_nile, statsmodels_mle

    task = tasks.get("nile")
    cal = task.calibrate(backend="reference")
    ref = statsmodels_mle()
    model = sm.tsa.UnobservedComponents(load_nile(), level="local level")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # the Hessian-based estimator; statsmodels' default "opg" (outer product of the
        # per-observation gradients) is a different estimator and differs by 20-50 % here
        res = model.smooth([ref["sigma2_irregular"], ref["sigma2_level"]], cov_type="approx")
    # program parameters are log-variances: se(s2) = s2 * se(log s2) (delta method)
    se = [np.exp(cal.params[n]) * cal.stderr[n] for n in ("le", "ll")]
    np.testing.assert_allclose(se, res.bse, rtol=1e-3)


def test_repr_is_compact_and_summary_is_a_table() -> None:
    cal = ndvm.calibrate(ndvm.compile(MM, inputs=("s",)), {"s": S}, _mm_data())
    text = repr(cal)
    assert text.startswith("Calibration(success=True") and "vmax=" in text
    assert len(text) < 200 and "\n" not in text and str(cal) == text
    table = cal.summary().splitlines()
    assert table[0].startswith("converged")
    assert table[2].split() == ["parameter", "value", "std", "err"]
    assert [row.split()[0] for row in table[3:]] == ["vmax", "km"]
    assert float(table[4].split()[2]) == pytest.approx(cal.stderr["km"], rel=1e-3)


DOCUMENTED = (
    "Calibration",
    "calibrate",
    "GaussianNLL",
    "MSE",
    "Value",
    "Adam",
    "LBFGS",
    "Chain",
    "EarlyStop",
    "optim",
    "losses",
    "native",
    "objective",
    "uncertainty",
    "api",
    "plot",
)


@pytest.mark.parametrize("name", DOCUMENTED)
def test_documented_names_through_the_function(name: str) -> None:
    package = importlib.import_module("ndvm.calibrate")
    assert getattr(ndvm.calibrate, name) is getattr(package, name)


def test_documented_imports_in_a_fresh_interpreter() -> None:
    code = (
        "import ndvm.calibrate.optim, ndvm.calibrate.native\n"
        "import ndvm\n"
        "from ndvm.calibrate import GaussianNLL, calibrate\n"
        "from ndvm.calibrate.optim import Adam, LBFGS, Chain\n"
        "assert ndvm.calibrate.GaussianNLL is GaussianNLL and calibrate is ndvm.calibrate\n"
        "assert ndvm.calibrate.optim.Adam is Adam\n"
        "assert ndvm.calibrate.native.NativeOptimizer\n"
        "assert callable(ndvm.calibrate)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
