"""``ndvm.fit_skeleton``: LLM-SR's evaluate (params in the skeleton's layout, MSE, success)
on ndvm.calibrate, with data as an array, a mapping or a DataFrame."""

from __future__ import annotations

import numpy as np
import pytest

import ndvm
from ndvm.errors import CompileError, ShapeError

SRC = """
def equation(t, x, params):
    a = params[0] * x + params[1] * x**3
    return a + params[3] * np.sin(params[4] * t)
"""
TRUE = np.array([0.5, -0.3, 1.0, 0.8, 1.7])  # params[2] unused: it keeps its initial 1.0


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    t = np.linspace(0.0, 6.0, 120)
    x = rng.uniform(-1.5, 1.5, t.size)
    y = TRUE[0] * x + TRUE[1] * x**3 + TRUE[3] * np.sin(TRUE[4] * t)
    return np.column_stack([t, x]), y


def test_recovers_parameters_in_llmsr_layout() -> None:
    X, y = _data()
    fit = ndvm.fit_skeleton(SRC, X, y)
    assert isinstance(fit, ndvm.SkeletonFit)
    assert fit.params.shape == (10,)  # LLM-SR's MAX_NPARAMS
    np.testing.assert_allclose(fit.params[[0, 1, 3, 4]], TRUE[[0, 1, 3, 4]], rtol=1e-6)
    assert np.all(fit.params[[2, 5, 6, 7, 8, 9]] == 1.0)
    assert fit.success and fit.loss < 1e-12 and fit.score == -fit.loss
    # the loss is the MSE of the skeleton at the returned params
    pred = fit.params[0] * X[:, 1] + fit.params[1] * X[:, 1] ** 3 + fit.params[3] * np.sin(
        fit.params[4] * X[:, 0])
    assert fit.loss == pytest.approx(np.mean((pred - y) ** 2), rel=1e-9, abs=1e-20)


def test_data_by_name_mapping_and_dataframe() -> None:
    X, y = _data()
    by_name = ndvm.fit_skeleton(SRC, {"x": X[:, 1], "t": X[:, 0]}, y)
    reordered = ndvm.fit_skeleton(SRC, X[:, ::-1], y, inputs=["x", "t"])
    for fit in (by_name, reordered):
        np.testing.assert_allclose(fit.params[[0, 1, 3, 4]], TRUE[[0, 1, 3, 4]], rtol=1e-6)


@pytest.mark.data
def test_dataframe_columns_by_name() -> None:
    import pandas as pd

    X, y = _data()
    frame = pd.DataFrame({"x": X[:, 1], "t": X[:, 0], "other": 0.0})
    fit = ndvm.fit_skeleton(SRC, frame, pd.Series(y))
    np.testing.assert_allclose(fit.params[[0, 1, 3, 4]], TRUE[[0, 1, 3, 4]], rtol=1e-6)


def test_init_and_options_pass_through() -> None:
    X, y = _data()
    init = np.full(12, 2.0)
    fit = ndvm.fit_skeleton(SRC, X, y, init=init, n_params=12, starts=2, steps=3)
    assert fit.params.shape == (12,) and fit.params[2] == 2.0 and fit.params[11] == 2.0
    assert fit.calibration.all_losses.shape == (2,)


def test_non_finite_fit_is_not_a_success() -> None:
    X, y = _data()
    fit = ndvm.fit_skeleton("def f(t, x, params):\n    return np.log(-t - 1.0) * params[0]\n",
                            X, y)
    assert not fit.success and not np.isfinite(fit.loss) and np.isnan(fit.score)


def test_bad_data_and_bad_skeletons_are_typed_errors() -> None:
    X, y = _data()
    with pytest.raises(ShapeError, match="one column per input"):
        ndvm.fit_skeleton(SRC, X[:, :1], y)
    with pytest.raises(ShapeError, match="no column 'x'"):
        ndvm.fit_skeleton(SRC, {"t": X[:, 0]}, y)
    with pytest.raises(CompileError, match="import"):
        ndvm.fit_skeleton("import os\n" + SRC, X, y)


def test_short_init_is_padded_with_ones_and_bad_arguments_are_typed() -> None:
    X, y = _data()
    fit = ndvm.fit_skeleton(SRC, X, y, init=[0.4, -0.2, 1.0, 0.7, 1.6], steps=0, starts=1,
                            polish=0)
    assert fit.params.shape == (10,) and np.all(fit.params[5:] == 1.0)
    assert fit.params[0] == pytest.approx(0.4) and fit.params[4] == pytest.approx(1.6)
    with pytest.raises(ShapeError, match=r"reads params\[4\]"):
        ndvm.fit_skeleton(SRC, X, y, init=[1.0, 2.0])
    with pytest.raises(CompileError, match="init must be numbers"):
        ndvm.fit_skeleton(SRC, X, y, init="ones")
    with pytest.raises(ShapeError, match="y must be numbers"):
        ndvm.fit_skeleton(SRC, X, "y")
    with pytest.raises(ndvm.NdvmError, match="n_params"):
        ndvm.fit_skeleton(SRC, X, y, n_params=-1)


def test_docs_worked_example_recovers_the_generating_law() -> None:
    """docs/search.md, "Fitting": the driven oscillator, exactly as the docs generate it."""
    rng = np.random.default_rng(0)
    t = np.linspace(0.0, 20.0, 400)
    x = np.sin(0.9 * t) + 0.1 * rng.normal(size=t.size)
    v = np.cos(0.9 * t) + 0.1 * rng.normal(size=t.size)
    a = 0.7 * np.sin(1.3 * t) - 0.5 * x - 0.8 * x**3 - 0.3 * v**3 - 0.1 * x * v
    skeleton = (
        "def equation(t, x, v, params):\n"
        "    a = -params[0] * x - params[1] * x**3 - params[2] * v**3 - params[3] * x * v\n"
        "    a += params[4] * np.sin(params[5] * t + params[6])\n"
        "    return a\n"
    )
    fit = ndvm.fit_skeleton(skeleton, np.column_stack([t, x, v]), a)
    assert fit.success and fit.loss < 1e-20
    np.testing.assert_allclose(fit.params[:4], [0.5, 0.8, 0.3, 0.1], rtol=1e-8)
    # 0.7 sin(1.3 t) in the skeleton's form: amplitude and phase up to the sign of sin
    amp, freq, phase = fit.params[4:7]
    assert abs(freq) == pytest.approx(1.3, rel=1e-8)
    np.testing.assert_allclose(amp * np.sin(freq * t + phase), 0.7 * np.sin(1.3 * t), atol=1e-8)


def test_columns_named_otherwise_by_inputs() -> None:
    X, y = _data()
    fit = ndvm.fit_skeleton(SRC, {"time": X[:, 0], "pos": X[:, 1]}, y, inputs=["time", "pos"])
    np.testing.assert_allclose(fit.params[[0, 1, 3, 4]], TRUE[[0, 1, 3, 4]], rtol=1e-6)
