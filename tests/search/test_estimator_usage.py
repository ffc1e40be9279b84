"""SymbolicRegressor as a user meets it: empty operator lists, no leftover temporary files,
progress, JSON-ready equations_, exports called PySR's way, warm starts on other data,
checked options and early stopping."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ndvm
from ndvm.errors import ConfigError
from ndvm.lang.datum import symbols_in
from ndvm.lang.reader import read
from ndvm.search import SymbolicRegressor
from ndvm.search.estimator_exports import used_inputs
from ndvm.tasks.columns import DEFAULT_UNARY

KW: dict[str, Any] = dict(time_budget=None, batch_size=16, random_state=3)


def _law(n: int = 60, seed: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """y = 1.5 x0² + 0.3 with a distractor column x1."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.5, 3.0, (n, 2))
    return X, 1.5 * X[:, 0] ** 2 + 0.3 + rng.normal(0.0, 0.01, n)


@pytest.fixture(scope="module")
def model() -> SymbolicRegressor:
    X, y = _law()
    return SymbolicRegressor(batches=4, **KW).fit(X, y)


def _rows(eq: Any) -> list[dict[str, Any]]:
    return eq.to_dict("records") if hasattr(eq, "to_dict") else list(eq)


@pytest.mark.parametrize(
    ("binary", "unary"), [(("+", "-", "*", "/"), ()), ((), ("exp",)), ((), ())]
)  # fmt: skip
def test_empty_operator_lists_search_without_them(binary: tuple, unary: tuple) -> None:
    X, y = _law(40)
    m = SymbolicRegressor(batches=3, binary_operators=binary, unary_operators=unary, **KW)
    m.fit(X, y)
    used = set().union(*(symbols_in(read(r["equation"])) for r in _rows(m.equations_)))
    assert not used & (set(DEFAULT_UNARY) - set(unary))
    assert len(m.front_) >= 2 and np.isfinite(m.predict(X)).all()


def test_a_temporary_database_is_removed_unless_warm_started(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    X, y = _law(40)
    m = SymbolicRegressor(batches=1, **KW).fit(X, y)
    assert m.database_ is None and list(tmp_path.iterdir()) == []
    w = SymbolicRegressor(batches=1, warm_start=True, **KW).fit(X, y)
    kept = Path(w.database_)
    assert kept.exists() and kept.parent.parent == tmp_path
    first = [r.candidate.src for r in w.records_]
    w.set_params(batches=2).fit(X, y)  # continues the kept database
    assert w.database_ == str(kept)
    assert [r.candidate.src for r in w.records_][: len(first)] == first
    assert len(w.records_) > len(first)


def test_verbosity_prints_progress_and_the_hall_of_fame_with_the_chosen_law(capsys) -> None:
    X, y = _law(40)
    m = SymbolicRegressor(batches=2, verbosity=1, model_selection="accuracy", **KW).fit(X, y)
    err = capsys.readouterr().err
    assert "best val R²" in err and "(" in err.split("best val R²")[1]
    marked = [ln for ln in err.splitlines() if ln.startswith("  * ")]
    assert len(marked) == 1 and marked[0].endswith(m.best_.candidate.src)
    assert f"chosen law: {m.best_.candidate.src}" in err
    SymbolicRegressor(batches=2, verbosity=0, **KW).fit(X, y)
    SymbolicRegressor(batches=2, **KW).fit(X, y)  # default: quiet when stderr is no terminal
    assert capsys.readouterr().err == ""


def test_default_verbosity_follows_terminal_and_notebook(monkeypatch) -> None:
    import sys

    m = SymbolicRegressor()
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    assert m._verbose() is False
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert m._verbose() is True and m.set_params(verbosity=0)._verbose() is False
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    monkeypatch.setitem(sys.modules, "ipykernel", object())
    assert m.set_params(verbosity=None)._verbose() is True


def test_equations_hold_plain_python_values_json_accepts(model: SymbolicRegressor) -> None:
    rows = _rows(model.equations_)
    back = json.loads(json.dumps(rows))
    assert len(back) == len(model.front_)
    for row, again in zip(rows, back):
        assert type(row["complexity"]) is int and type(row["equation"]) is str
        assert type(row["selected"]) is bool
        for key in ("loss", "score", "train_loss", "validation_r2", "test_r2"):
            assert type(row[key]) is float and (again[key] == row[key] or math.isnan(row[key]))
        assert all(type(v) is float for v in row["params"].values())


@pytest.mark.data
def test_every_element_of_the_equations_dataframe_is_json(model: SymbolicRegressor) -> None:
    eq = model.equations_
    for i in range(len(eq)):
        cells = {c: eq[c][i] for c in eq.columns}  # element access, not to_dict's boxing
        assert json.loads(json.dumps(cells))["equation"] == cells["equation"]
        assert type(cells["complexity"]) is int and type(cells["selected"]) is bool
    assert eq["loss"].dtype == np.float64 and eq[eq["selected"]].shape[0] == 1
    assert eq["complexity"].max() == max(r.complexity for r in model.front_)


@pytest.mark.torch
def test_pytorch_module_is_called_on_x_as_pysrs(model: SymbolicRegressor) -> None:
    import torch

    X, _ = _law(25, seed=9)
    for i, (src, _values) in enumerate(model.program(j) for j in range(len(model.front_))):
        module = model.pytorch(i)
        want = model.predict(X, index=i)
        got = module(torch.tensor(X)).detach().numpy()
        assert got.shape == (25,)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(module(X).detach().numpy(), want, rtol=1e-6, atol=1e-9)
        used = used_inputs(src, ("x0", "x1"))
        cols = {n: torch.tensor(X[:, int(n[1])]) for n in used}  # only the equation's inputs
        out = np.broadcast_to(module(**cols).detach().numpy(), (25,))
        np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-9)
    with pytest.raises(ndvm.NdvmError, match=r"\[N, 2\]"):
        model.pytorch()(torch.zeros((4, 3)))


@pytest.mark.jax
def test_jax_function_is_called_on_x_as_pysrs(model: SymbolicRegressor) -> None:
    import jax

    X, _ = _law(25, seed=9)
    for i in range(len(model.front_)):  # float64 whatever jax_enable_x64 says (float32: ~1e-7)
        f = model.jax(i)
        got = np.asarray(f["callable"](X, f["parameters"]))
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, model.predict(X, index=i), rtol=1e-12, atol=1e-12)
    with jax.enable_x64(True):
        for i in range(len(model.front_)):
            exported = model.jax(i)
            fn, params = exported  # the tuple form still unpacks
            assert exported["callable"] is fn and exported["parameters"] is params
            got = np.asarray(exported["callable"](X, exported["parameters"]))
            assert got.shape == (25,)
            np.testing.assert_allclose(got, model.predict(X, index=i), rtol=1e-6, atol=1e-9)
        with pytest.raises(ndvm.NdvmError, match="unknown"):
            fn(params, x0=X[:, 0], x1=X[:, 1], z=X[:, 0])


@pytest.mark.torch
@pytest.mark.jax
@pytest.mark.data
def test_exports_take_a_dataframe_by_column_name(model: SymbolicRegressor) -> None:
    import jax
    import pandas as pd

    X, _ = _law(25, seed=9)
    df = pd.DataFrame(X[:, ::-1], columns=["x1", "x0"])  # another column order
    want = model.predict(X)
    np.testing.assert_allclose(model.pytorch()(df).detach().numpy(), want, rtol=1e-6)
    with jax.enable_x64(True):
        f = model.jax()
        np.testing.assert_allclose(np.asarray(f["callable"](df, f["parameters"])), want, rtol=1e-6)


def test_warm_start_on_other_data_is_refused(tmp_path) -> None:
    X, y = _law(40)
    db = str(tmp_path / "w.db")
    SymbolicRegressor(batches=1, database=db, **KW).fit(X, y)
    again = SymbolicRegressor(batches=2, database=db, warm_start=True, **KW).fit(X, y)
    assert len(again.records_) == 32
    other = SymbolicRegressor(batches=2, database=db, warm_start=True, **KW)
    with pytest.raises(ConfigError, match="other data"):
        other.fit(X, y * 2.0)
    with pytest.raises(ConfigError, match="other data"):  # same rows, another split
        other.set_params(random_state=4).fit(X, y)


@pytest.mark.parametrize(
    ("option", "value", "match"),
    [
        ("time_budget", float("nan"), "time_budget must be a finite number of seconds > 0"),
        ("time_budget", float("inf"), "time_budget"),
        ("time_budget", 0, "time_budget"),
        ("time_budget", -5.0, "time_budget"),
        ("candidate_seconds", 0.0, "candidate_seconds"),
        ("starts", 0, "starts must be a whole number >= 1"),
        ("random_state", -1, "random_state must be a whole number >= 0"),
        ("population", 0, "population"),
        ("batch_size", 0, "batch_size"),
        ("workers", 0, "workers"),
        ("max_complexity", 0, "max_complexity"),
        ("batches", 0, "batches"),
        ("max_candidates", -1, "max_candidates"),
        ("max_candidates", 2.5, "max_candidates"),
        ("verbosity", -1, "verbosity"),
        ("early_stop_condition", float("nan"), "early_stop_condition"),
        ("early_stop_condition", -1.0, "early_stop_condition"),
        ("early_stop_condition", "r2>=high", "early_stop_condition"),
        ("early_stop_condition", "accuracy", "early_stop_condition"),
        ("early_stop_condition", [0.1], "early_stop_condition"),
        ("split", "abc", "split must be three fractions"),
        ("split", (0.6, 0.2, float("nan")), "split"),
        ("split", (0.6, 0.3, 0.3), "split must sum to 1"),
    ],
)  # fmt: skip
def test_numeric_options_are_checked_before_the_search(option: str, value: Any, match: str):
    X, y = _law(20)
    m = SymbolicRegressor(max_candidates=8).set_params(**{option: value})
    with pytest.raises(ConfigError, match=match) as info:
        m.fit(X, y)
    assert isinstance(info.value, ValueError) and "\n" not in str(info.value)
    assert not hasattr(m, "best_")


def test_a_search_without_any_budget_is_refused() -> None:
    X, y = _law(20)
    with pytest.raises(ConfigError, match="never end"):
        SymbolicRegressor(time_budget=None).fit(X, y)


def test_early_stop_condition_stops_when_a_program_reaches_it() -> None:
    X, y = _law(60)
    full = SymbolicRegressor(batches=8, **KW).fit(X, y)
    assert len(full.records_) == 8 * 16

    def first(pred: Any) -> int:
        return min(r.idx for r in full.records_ if r.status == "ok" and pred(r))

    def check(m: SymbolicRegressor, hit: int) -> None:
        # the search ends at the first record that reaches the condition (index order):
        # every record before it decided as in the full run, none after it
        decided = [r for r in m.records_ if r.status != "pending"]
        assert [r.idx for r in decided] == list(range(hit + 1))
        same = [(r.candidate.src, r.status, r.evaluation.validation_mse) for r in decided]
        assert same == [(r.candidate.src, r.status, r.evaluation.validation_mse)
                        for r in full.records_[: hit + 1]]  # fmt: skip
        assert len(m.records_) < len(full.records_)

    loose = SymbolicRegressor(batches=8, early_stop_condition=1e12, **KW).fit(X, y)
    check(loose, first(lambda r: True))  # any loss: the first calibrated program
    early = [r.evaluation for r in full.records_ if r.status == "ok" and r.batch <= 2]
    loss = min(ev.validation_mse for ev in early)  # first reached in batch 0, 1 or 2
    r2 = math.floor(max(ev.validation_r2 for ev in early) * 1e6) / 1e6
    for cond, pred in [
        (loss, lambda r: r.evaluation.validation_mse <= loss),
        (f"r2>={r2}", lambda r: r.evaluation.validation_r2 >= r2),
        (lambda ls, cx: ls <= loss and cx < 100, lambda r: r.evaluation.validation_mse <= loss),
    ]:  # fmt: skip
        m = SymbolicRegressor(batches=8, early_stop_condition=cond, **KW).fit(X, y)
        check(m, first(pred))  # the same seed: the same records up to the stop
        assert pred(m.records_[first(pred)])


@pytest.mark.torch
def test_pytorch_module_on_float32_x_equals_predict_on_the_same_numbers(
    model: SymbolicRegressor,
) -> None:
    import torch

    X, _ = _law(25, seed=9)
    x32 = torch.tensor(X, dtype=torch.float32)
    want = model.predict(x32.numpy().astype(np.float64))
    got = model.pytorch()(x32)
    assert got.dtype == torch.float64
    np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-12)


def test_early_stop_condition_is_asked_once_per_calibrated_program() -> None:
    X, y = _law(40)
    calls: list[tuple[float, int]] = []
    m = SymbolicRegressor(batches=8, early_stop_condition=lambda loss, cx: bool(
        calls.append((loss, cx))), **KW).fit(X, y)  # fmt: skip
    ok = [r for r in m.records_ if r.status == "ok"]
    assert len(m.records_) == 8 * 16  # never reached: the whole budget
    # asked as each program is decided, each once
    assert len(calls) == len(ok) > 0
    assert sorted(calls) == sorted((r.evaluation.validation_mse, r.complexity) for r in ok)
