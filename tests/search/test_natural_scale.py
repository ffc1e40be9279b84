"""Search on data whose constants are far from 1: each candidate is calibrated by
Levenberg–Marquardt with its linear parameters solved first, so the law's own structure
reaches the law's validation R² with the law's constants (an intercept of 150 on x in the
thousands; an amplitude of 8e4 decaying with tau = 37)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ndvm
from ndvm.search import Budget, make_proposer, run_search
from ndvm.search.frontier import hall_of_fame
from ndvm.tasks.base import Task


def _search(task: Task, db: Path, candidates: int) -> list[dict]:
    proposer = make_proposer("evolve", task)
    state = run_search(task, proposer, db, budget=Budget(candidates=candidates))
    return hall_of_fame(list(state.records), task.inputs, export=False)


def _law_r2(task: Task, f) -> float:  # type: ignore[no-untyped-def]
    data = task.data()
    x, y = next(iter(data.valid_inputs.values())), data.valid_target
    return 1.0 - float(((f(x) - y) ** 2).sum() / ((y - y.mean()) ** 2).sum())


def test_linear_law_with_a_large_intercept(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    income = rng.uniform(300.0, 5000.0, 235)
    food = 150.0 + 0.49 * income + rng.normal(0.0, 60.0, income.size)
    task = Task.from_arrays(income, food, names=["income"], name="engel-like")
    hof = _search(task, tmp_path / "s.db", 512)
    const = next(r for r in hof if r["src"] == "a")  # the constant model fits the mean
    assert const["complexity"] == 1 and const["n_params"] == 1
    assert const["validation_r2"] > -0.05
    law = _law_r2(task, lambda x: 150.0 + 0.49 * x)
    lines = [r for r in hof if r["complexity"] <= 7]
    best = max(lines, key=lambda r: r["validation_r2"])
    assert best["validation_r2"] >= law - 0.01, hof
    prog = ndvm.compile(best["src"], params=list(best["params"]), inputs=["income"])
    at = np.asarray(prog.eval(np.array(list(best["params"].values())), income=np.array([0.0, 1e3])))
    assert at[0] == pytest.approx(150.0, abs=40.0)  # the law's intercept and slope
    assert (at[1] - at[0]) / 1e3 == pytest.approx(0.49, abs=0.02)


def test_decay_law_with_a_large_amplitude(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    hours = rng.uniform(0.0, 150.0, 150)
    activity = 8.4e4 * np.exp(-hours / 37.0) + rng.normal(0.0, 800.0, hours.size)
    task = Task.from_arrays(hours, activity, names=["hours"], name="decay",
                            unary_operators=("exp",))  # fmt: skip
    hof = _search(task, tmp_path / "s.db", 1024)
    law = _law_r2(task, lambda x: 8.4e4 * np.exp(-x / 37.0))
    small = [r for r in hof if r["complexity"] <= 9]  # (* a (exp (* b hours))) is 6-9 nodes
    assert max(r["validation_r2"] for r in small) >= law - 0.01, hof


def test_a_law_without_constants_is_scored_as_it_is(tmp_path: Path) -> None:
    """On a data task a parameter-free candidate (``omega / c``) passes the funnel and is
    evaluated in one walk; its training loss is the law's own mse on the training rows. A
    built-in task still rejects candidates without parameters (its protocol calibrates)."""
    from ndvm import tasks
    from ndvm.search import Candidate
    from ndvm.search.evaluate import CalibLimits, Job, run_job

    rng = np.random.default_rng(3)
    X = rng.uniform(1.0, 10.0, (120, 2))
    y = X[:, 0] / X[:, 1] + rng.normal(0.0, 0.01, 120)
    task = Task.from_arrays(X, y, names=["omega", "c"], name="ratio")
    res = run_job(task, Job(0, Candidate("(/ omega c)", ()), 0), CalibLimits(), set())
    assert res.evaluation.status == "ok" and res.n_params == 0
    data = task.data()
    law = data.train_inputs["omega"] / data.train_inputs["c"]
    mse = float(np.mean((law - data.train_target) ** 2))
    assert res.evaluation.train_loss == pytest.approx(mse, rel=1e-12)
    fixed = run_job(tasks.get("sr-damped"), Job(0, Candidate("(* 2 x)", ()), 0), CalibLimits(),
                    set())  # fmt: skip
    assert fixed.evaluation.status == "rejected" and fixed.evaluation.reason.startswith("params")
