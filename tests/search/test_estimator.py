"""SymbolicRegressor: DataFrame names, predict equal to ndvm's evaluation and to the search's
scores, exports with the fitted values, scikit-learn conventions, seeds and warm starts."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ndvm
from ndvm.lang.datum import symbols_in
from ndvm.lang.reader import read
from ndvm.search import SymbolicRegressor
from ndvm.tasks.base import check_input_names

NAMES = ["substrate", "temp_C"]


def _arrays(n: int = 90) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    X = np.stack([rng.uniform(0.1, 5.0, n), rng.uniform(0, 1, n)], axis=1)
    return X, 2.5 * X[:, 0] / (0.8 + X[:, 0]) + rng.normal(0.0, 0.01, n)


def _data(n: int = 90) -> tuple[Any, np.ndarray]:
    """A DataFrame (pandas comes with the ``data`` extra: tests using it carry its marker)."""
    import pandas as pd

    X, y = _arrays(n)
    return pd.DataFrame(X, columns=NAMES), y


@pytest.fixture(scope="module")
def fitted() -> SymbolicRegressor:
    df, y = _data()
    return SymbolicRegressor(time_budget=None, batches=4, random_state=3).fit(df, y)


@pytest.mark.data
def test_dataframe_columns_are_the_variables(fitted: SymbolicRegressor) -> None:
    df, y = _data()
    assert list(fitted.feature_names_in_) == ["substrate", "temp_C"]
    used = set().union(*(symbols_in(read(src)) for src in fitted.equations_["equation"]))
    assert "substrate" in used and not used & {"x", "x0", "x1"}
    shuffled = df[["temp_C", "substrate"]]  # columns are taken by name, not position
    np.testing.assert_array_equal(fitted.predict(shuffled), fitted.predict(df))
    with pytest.raises(ndvm.NdvmError, match="no column"):
        fitted.predict(df.rename(columns={"substrate": "S"}))


@pytest.mark.data
def test_predict_is_ndvm_evaluation_and_reproduces_the_search_scores(
    fitted: SymbolicRegressor,
) -> None:
    df, y = _data()
    for i in range(len(fitted.front_)):
        src, values = fitted.program(i)
        prog = ndvm.compile(src, list(values), ["substrate", "temp_C"])
        cols = {c: df[c].to_numpy() for c in df.columns}
        want = np.broadcast_to(prog.eval(prog.unconstrain(list(values.values())), **cols), len(y))
        np.testing.assert_array_equal(fitted.predict(df, index=i), want)
        np.testing.assert_array_equal(fitted.predict(df, index=fitted.front_[i]), want)
        data = fitted.task_.data()  # the record's validation MSE, from the search's own scoring
        va = np.stack([data.valid_inputs[n] for n in NAMES], axis=1)
        mse = np.mean((fitted.predict(va, index=i) - data.valid_target) ** 2)
        assert mse == pytest.approx(fitted.front_[i].evaluation.validation_mse, rel=1e-9)
    r2 = 1 - np.sum((fitted.predict(df) - y) ** 2) / np.sum((y - y.mean()) ** 2)
    assert fitted.score(df, y) == pytest.approx(r2, rel=1e-12)
    assert fitted.equations_["selected"].sum() == 1


def test_arrays_get_x_names_or_variable_names() -> None:
    X, y = _arrays(40)
    m = SymbolicRegressor(time_budget=None, batches=1).fit(X, y)
    assert list(m.feature_names_in_) == ["x0", "x1"]
    m2 = SymbolicRegressor(time_budget=None, batches=1, variable_names=["S", "T"]).fit(X, y)
    assert list(m2.feature_names_in_) == ["S", "T"]
    src, values = m2.program()
    prog = ndvm.compile(src, list(values), ["S", "T"])
    want = prog.eval(prog.unconstrain(list(values.values())), S=X[:, 0], T=X[:, 1])
    np.testing.assert_array_equal(m2.predict(X), np.broadcast_to(want, len(y)))
    with pytest.raises(ndvm.NdvmError, match="3 columns"):
        m2.predict(np.zeros((4, 3)))


@pytest.mark.parametrize(
    ("name", "why"),
    [("income k", "one symbol"), ("if", "cannot be used"), ("3x", "not a symbol")],
)  # fmt: skip
def test_names_the_language_cannot_take_are_a_clear_error(name: str, why: str) -> None:
    with pytest.raises(ndvm.NdvmError, match=why):
        check_input_names([name])
    X, y = _arrays(30)
    with pytest.raises(ndvm.NdvmError, match="rename"):
        SymbolicRegressor(batches=1, variable_names=["substrate", name]).fit(X, y)


@pytest.mark.data
def test_inputs_may_take_the_default_parameter_names() -> None:
    rng = np.random.default_rng(2)
    X = rng.uniform(1.0, 10.0, (120, 2))
    m = SymbolicRegressor(time_budget=None, batches=6, variable_names=["omega", "c"])
    m.fit(X, X[:, 0] / X[:, 1])
    assert m.task_.search.grammar.params == ("a", "b", "d", "f")
    src, values = m.program()
    assert set(values) <= {"a", "b", "d", "f"} and "c" in symbols_in(read(src))
    assert m.score(X, X[:, 0] / X[:, 1]) > 0.999


@pytest.mark.data
def test_deterministic_for_a_seed_and_warm_start_resumes_exactly(tmp_path) -> None:
    df, y = _data(60)
    kw = dict(time_budget=None, random_state=7, batch_size=16)
    a = SymbolicRegressor(batches=3, **kw).fit(df, y)
    b = SymbolicRegressor(batches=3, **kw).fit(df, y)
    assert a.equations_.drop(columns="params").equals(b.equations_.drop(columns="params"))
    assert list(a.equations_["params"]) == list(b.equations_["params"])
    db = str(tmp_path / "sr.db")
    SymbolicRegressor(batches=1, database=db, **kw).fit(df, y)
    c = SymbolicRegressor(batches=3, database=db, warm_start=True, **kw).fit(df, y)
    assert [r.candidate.src for r in c.records_] == [r.candidate.src for r in a.records_]
    assert [r.evaluation.params for r in c.records_ if r.evaluation] == [
        r.evaluation.params for r in a.records_ if r.evaluation
    ]


def test_sklearn_parameter_conventions() -> None:
    m = SymbolicRegressor(batches=2, unary_operators=("exp",))
    params = m.get_params()
    assert params["batches"] == 2 and params["unary_operators"] == ("exp",)
    clone = SymbolicRegressor(**params)  # what sklearn.base.clone does
    assert clone.get_params() == params
    assert m.set_params(batches=5, random_state=1) is m and m.batches == 5
    with pytest.raises(ValueError, match="invalid parameter"):
        m.set_params(niterations=3)
    assert repr(m) == "SymbolicRegressor(batches=5, unary_operators=('exp',), random_state=1)"
    with pytest.raises(ndvm.NdvmError, match="not fitted"):
        m.predict(np.zeros((3, 1)))
    with pytest.raises(ndvm.NdvmError, match="model_selection"):
        SymbolicRegressor(model_selection="fastest").fit(np.arange(10.0), np.arange(10.0))


@pytest.mark.sympy
@pytest.mark.data
def test_sympy_with_fitted_constants_equals_predict(fitted: SymbolicRegressor) -> None:
    import warnings

    import sympy

    df, _ = _data()
    for i in range(len(fitted.front_)):
        with warnings.catch_warnings():  # the fitted constants are declared: no free names
            warnings.simplefilter("error", ndvm.FreeNameWarning)
            expr = fitted.sympy(i)
        syms = [sympy.Symbol(n, real=True) for n in fitted.feature_names_in_]
        f = sympy.lambdify(syms, expr, "numpy")
        got = np.broadcast_to(f(*(df[c].to_numpy() for c in fitted.feature_names_in_)), len(df))
        np.testing.assert_allclose(got, fitted.predict(df, index=i), rtol=1e-10, atol=1e-12)
    assert "substrate" in fitted.latex()


@pytest.mark.torch
@pytest.mark.data
def test_pytorch_with_fitted_constants_equals_predict(fitted: SymbolicRegressor) -> None:
    import torch

    df, _ = _data()
    for i in range(len(fitted.front_)):
        module = fitted.pytorch(i)
        out = module(**{c: torch.tensor(df[c].to_numpy()) for c in fitted.feature_names_in_})
        got = np.broadcast_to(out.detach().numpy(), len(df))
        np.testing.assert_allclose(got, fitted.predict(df, index=i), rtol=1e-12, atol=1e-14)


@pytest.mark.jax
@pytest.mark.data
def test_jax_with_fitted_constants_equals_predict(fitted: SymbolicRegressor) -> None:
    import jax

    df, _ = _data()
    with jax.enable_x64(True):
        for i in range(len(fitted.front_)):
            fn, params = fitted.jax(i)
            out = fn(params, **{c: df[c].to_numpy() for c in fitted.feature_names_in_})
            got = np.broadcast_to(np.asarray(out), len(df))
            np.testing.assert_allclose(got, fitted.predict(df, index=i), rtol=1e-12, atol=1e-14)


def test_the_estimator_is_ndvm_symbolic_regressor_and_import_ndvm_stays_light() -> None:
    import subprocess
    import sys

    assert ndvm.SymbolicRegressor is SymbolicRegressor
    with pytest.raises(AttributeError, match="no attribute 'SymbolicRegresor'"):
        ndvm.SymbolicRegresor  # noqa: B018 - the misspelling is the point
    code = "import sys, ndvm; print('ndvm.search' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("X", "y", "match"),
    [
        (np.ones((8, 1)) + 1j, np.arange(8.0), "X must be real"),
        (np.ones((8, 1)), np.arange(8.0) + 0j, "y must be real"),
        (np.array([["a"]] * 8), np.arange(8.0), "X must be numeric"),
        (np.ones((8, 1)), np.arange(4.0), "y has 4 rows, X has 8"),
    ],
)  # fmt: skip
def test_data_that_is_not_real_numbers_is_a_clear_error(X: Any, y: Any, match: str) -> None:
    with pytest.raises(ndvm.NdvmError, match=match):
        SymbolicRegressor(max_candidates=10, workers=1).fit(X, y)
