"""The selection split (``from_arrays(holdout=...)``): rows the search never reads, chosen on
after it; and selection inside ``time_budget`` (``SymbolicRegressor``)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np
import pytest
from tests.helpers.records import calibrated

from ndvm.errors import NdvmError
from ndvm.search import SymbolicRegressor, driver, frontier, selection
from ndvm.search.evolve import EvolveProposer
from ndvm.search.state import Budget
from ndvm.search.store import Store
from ndvm.tasks.base import Task, constant_data
from ndvm.tasks.columns import HOLDOUT_MIN_ROWS


class Spy(Mapping[str, Any]):
    """Input columns that count every read."""

    def __init__(self, cols: Mapping[str, np.ndarray]) -> None:
        self.cols, self.reads = dict(cols), 0

    def __getitem__(self, key: str) -> np.ndarray:
        self.reads += 1
        return self.cols[key]

    def __iter__(self) -> Iterator[str]:
        self.reads += 1
        return iter(self.cols)

    def __len__(self) -> int:
        self.reads += 1
        return len(self.cols)


def _law(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(1.0, 5.0, (n, 2))
    return X, 1.5 * X[:, 0] * X[:, 1] ** 2 * (1.0 + 0.01 * rng.standard_normal(n))


def test_selection_rows_are_disjoint_from_the_other_splits_and_small_data_gets_none():
    X, y = _law(200)
    d = Task.from_arrays(X, y, holdout=0.2).data()
    parts = [d.train_inputs, d.valid_inputs, d.test_inputs, d.select_inputs]
    assert [len(p["x0"]) for p in parts] == [80, 40, 40, 40]
    rows = np.concatenate([p["x0"] for p in parts])
    assert sorted(rows.tolist()) == sorted(X[:, 0].tolist())  # every row once
    plain = Task.from_arrays(X, y).data()  # test and validation rows do not move
    np.testing.assert_array_equal(plain.test_target, d.test_target)
    np.testing.assert_array_equal(plain.valid_target, d.valid_target)
    assert d.meta["holdout"] == 40 and plain.select_inputs is None
    # 0.2 x 100 = 20 rows < HOLDOUT_MIN_ROWS: no selection split (cross-validation instead)
    assert 0.2 * 100 < HOLDOUT_MIN_ROWS
    assert Task.from_arrays(*_law(100), holdout=0.2).data().select_inputs is None
    with pytest.raises(NdvmError, match="holdout"):
        Task.from_arrays(X, y, holdout=1.5)


def _search(task: Task, tmp_path: Any, name: str) -> list[tuple[str, float, float]]:
    assert task.search is not None
    prop = EvolveProposer(task.search.grammar, task.search.seeds, population=8)
    state = driver.run_search(task, prop, tmp_path / name, budget=Budget(batches=3),
                              batch_size=12, seed=4)  # fmt: skip
    return [(r.candidate.src, r.evaluation.validation_mse, r.evaluation.train_loss)
            for r in state.records if r.evaluation is not None]  # fmt: skip


def test_the_search_never_reads_the_selection_rows(tmp_path, monkeypatch):
    """Instrumented: the selection inputs count their reads (the run's data digest, which
    hashes them once to refuse a resume on other data, is stubbed); the proposer, the
    tournament and every evaluation read none. Poisoned selection targets change nothing."""
    task = Task.from_arrays(*_law(200), holdout=0.2)
    data = task.data()
    spy = Spy(data.select_inputs)
    spied = replace(task, build_data=partial(constant_data, replace(data, select_inputs=spy)))
    monkeypatch.setattr(driver, "data_digest", lambda t: "stub")
    first = _search(spied, tmp_path, "a.db")
    assert len(first) > 12 and spy.reads == 0
    front = frontier.pareto_front([r for r in Store(tmp_path / "a.db").records(1)
                                   if r.status == "ok"])  # fmt: skip
    chosen = selection.for_task(spied, front, 0, None)
    assert chosen.method == "holdout" and chosen.rows == 40 and spy.reads > 0  # it can see
    junk = np.full_like(data.select_target, np.nan)
    poisoned = replace(data, select_target=junk,
                       select_inputs={k: -v for k, v in data.select_inputs.items()})
    again = _search(replace(task, build_data=partial(constant_data, poisoned)), tmp_path, "b.db")
    assert again == first


def test_holdout_losses_are_the_fitted_programs_on_the_selection_rows():
    task = Task.from_arrays(*_law(200), holdout=0.2)
    d = task.data()
    recs = calibrated(task, ["(* a x0)", "(* a x0 x1 x1)"])
    a = selection.holdout(recs, d.select_inputs, d.select_target)
    x0, x1 = d.select_inputs["x0"], d.select_inputs["x1"]
    for r, pred, loss in zip(recs, [x0, x0 * x1**2], a.losses):
        expect = np.mean((d.select_target - r.evaluation.params["a"] * pred) ** 2)
        assert loss == pytest.approx(expect, rel=1e-9)
    assert a.choose("best").idx == 1 and a.losses[1] < 0.01 * a.losses[0]


def test_cross_validation_past_its_deadline_falls_back_to_the_validation_losses():
    task = Task.from_arrays(*_law(24), seed=1)  # small data: cross-validation
    recs = calibrated(task, ["(* a x0)", "(* a x0 x1 x1)", "(* a x0 x1 x1 (+ 1 (* b x0)))"])
    front = frontier.pareto_front(recs)
    past = time.perf_counter() - 1.0
    d = task.data()
    assert selection.assess(front, d.train_inputs, d.train_target, deadline=past) is None
    fallback = selection.for_task(task, front, 0, past)
    assert fallback.method == "validation" and fallback.rows == len(d.valid_target)
    assert fallback.choose("best").idx == frontier.select(recs).idx
    assert selection.for_task(task, front, 0, None).method == "cv"


@pytest.mark.parametrize("n", [24, 200])  # cross-validation; the selection split
def test_a_fit_ends_within_its_time_budget(n):
    budget = 3.0
    t0 = time.perf_counter()
    model = SymbolicRegressor(time_budget=budget, random_state=0).fit(*_law(n))
    wall = time.perf_counter() - t0
    assert wall < budget + 2.0, wall  # generous: a batch in flight may finish after its end
    # small data: cross-validation, or on a loaded machine its fallback past the deadline
    assert model.cv_.method in (("holdout",) if n == 200 else ("cv", "validation"))
    assert model.best_ in model.front_


def test_holdout_option_is_checked():
    from ndvm.errors import ConfigError

    for bad in (-0.1, 0.6, True, "0.2"):
        with pytest.raises(ConfigError, match="holdout"):
            SymbolicRegressor(holdout=bad, batches=1).fit(*_law(40))


@pytest.mark.parametrize("n", [24, 200])
def test_report_marks_the_estimators_choice(tmp_path, n, capsys):
    from ndvm.commands import report

    db = tmp_path / "sr.db"
    model = SymbolicRegressor(time_budget=None, batches=3, batch_size=16, random_state=2,
                              database=str(db)).fit(*_law(n))  # fmt: skip
    rep = report.build(*report.load(str(db), None), export=False)
    assert rep["selected_by"] == model.cv_.method == ("holdout" if n == 200 else "cv")
    assert rep["selected"]["idx"] == model.best_.idx
    assert rep["selected"].get("estimator_src", rep["selected"]["src"]) == model.program()[0]
    marked = [row["idx"] for row in rep["hall_of_fame"] if row["selected"]]
    assert marked in ([model.best_.idx], [])  # [] only when pruning changed the front
    report.print_text(rep)
    assert "selected by an information criterion on" in capsys.readouterr().out
    plain = report.build(report.load(str(db), None)[0] | {"config": {}},
                         report.load(str(db), None)[1], export=False)  # fmt: skip
    assert plain["selected_by"] == "validation"


def _cli(args: list[str]) -> Any:
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "ndvm", *args], capture_output=True, text=True,
                          timeout=300)  # fmt: skip


def test_search_data_chooses_on_its_selection_rows_and_report_agrees(tmp_path):
    import json

    X, y = _law(200)
    csv = tmp_path / "d.csv"
    np.savetxt(csv, np.c_[X, y], delimiter=",", header="x0,x1,y", comments="")
    db = tmp_path / "d.db"
    out = _cli(["search", "--data", str(csv), "--x", "x0,x1", "--y", "y", "--budget", "30",
                "--max-candidates", "48", "--db", str(db), "--quiet"])  # fmt: skip
    assert out.returncode == 0, out.stderr
    rep = json.loads(_cli(["report", "--db", str(db), "--json", "--no-export"]).stdout)
    assert rep["selected_by"] == "holdout"
    star = [line for line in out.stdout.splitlines() if line.startswith("  *")]
    assert len(star) == 1 and star[0].endswith(rep["selected"]["src"])
    bad = _cli(["search", "--data", str(csv), "--x", "x0,x1", "--y", "y", "--holdout", "1.5",
                "--db", str(tmp_path / "e.db")])  # fmt: skip
    assert bad.returncode == 2 and "--holdout" in bad.stderr and "Traceback" not in bad.stderr
