"""The worker's fit through its setup's calibration plan (``Task.plan``, made once) gives every
field of every record bitwise as the full path (``Task.calibrate`` per candidate: a plan made
for each), on evolve-proposed corpora of the built-in tasks, a ``from_arrays`` task and a task
of several series (pooled refit)."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest

from ndvm import tasks
from ndvm.search import Candidate
from ndvm.search import evaluate as ev
from ndvm.search.evaluate import CalibLimits, Job, run_job
from ndvm.search.evolve import EvolveProposer
from ndvm.search.state import SearchState, derive_seed
from ndvm.tasks.base import Task


def _full_fit(task, prog, K, init, rng, limits, t0, setup):  # type: ignore[no-untyped-def]
    """The worker's fit as ``task.calibrate`` per candidate (no plan kept between them)."""
    left = max(limits.seconds - (time.perf_counter() - t0), 1e-9)
    try:
        cal = task.calibrate(prog, starts=K, init=init, seed=rng, time_limit=left,
                             diagnostics=False)  # fmt: skip
        return ev._Fit(cal, task.score(cal, task.data()))
    except Exception as exc:  # noqa: BLE001 - as the worker keeps it
        return ev._Fit(error=exc)


def _corpus(task: Task, n: int) -> list[str]:
    """``n`` evolve proposals for ``task`` (whatever the funnel then says of them), distinct."""
    assert task.search is not None
    prop = EvolveProposer(task.search.grammar, task.search.seeds)
    out: list[str] = list(task.search.seeds)
    for batch in range(20):
        for c in prop.propose(SearchState(task.name, 1000 + batch, ()), n):
            if c.src not in out:
                out.append(c.src)
        if len(out) >= n:
            break
    return out[:n]


def _record(res) -> tuple:  # type: ignore[no-untyped-def]
    """Every field of a worker's result but the wall time, floats by their exact repr."""
    e = dataclasses.replace(res.evaluation, wall=0.0)
    return (res.idx, res.skeleton, res.n_params, res.complexity, res.key, repr(e))


def _runs(task: Task, srcs: list[str], starts: int | None, monkeypatch) -> list[list[tuple]]:
    """Records of ``srcs`` (one worker, index order) through the plan and the full path."""
    limits = CalibLimits(starts=starts)
    out = []
    for full in (False, True):
        with monkeypatch.context() as m:
            m.setattr(ev, "_SETUPS", type(ev._SETUPS)(8))  # a fresh worker
            if full:
                m.setattr(ev, "_fit", _full_fit)
            seen: set = set()
            jobs = [Job(i, Candidate(s), derive_seed(7, i)) for i, s in enumerate(srcs)]
            out.append([_record(run_job(task, j, limits, seen)) for j in jobs])
    return out


@pytest.mark.parametrize("name", ["sr-damped", "iterated-map"])
@pytest.mark.parametrize("starts", [1, 16])
def test_plan_records_are_the_full_paths(name, starts, monkeypatch):
    task = tasks.get(name).for_search()
    srcs = _corpus(task, 60)
    planned, full = _runs(task, srcs, starts, monkeypatch)
    assert planned == full
    assert sum("'ok'" in r[5] for r in planned) >= 10  # calibrated candidates are compared


def _arrays_task() -> Task:
    rng = np.random.default_rng(3)
    X = rng.uniform(0.5, 3.0, size=(80, 2))
    y = 1.5 * X[:, 0] * np.exp(-0.4 * X[:, 1]) + rng.normal(0, 0.01, 80)
    return Task.from_arrays(X, y, names=["u", "v"]).for_search()


@pytest.mark.parametrize(
    "make, n, n_ok",
    [(_arrays_task, 40, 5), (lambda: tasks.get("battery-knee").for_search(), 12, 3)],
    ids=["from_arrays", "battery-knee"],
)
def test_plan_records_on_own_data_and_pooled_series(make, n, n_ok, monkeypatch):
    task = make()
    if task.name == "battery-knee":  # several series, each refitted from all series' bests
        assert task.series > 1 and task.calib.pooled
    planned, full = _runs(task, _corpus(task, n), None, monkeypatch)
    assert planned == full
    assert sum("'ok'" in r[5] for r in planned) >= n_ok


def test_a_setup_makes_its_plan_once(monkeypatch):
    task = tasks.get("sr-damped").for_search()
    made = []
    real = Task.plan

    def counting(self, **kw):  # type: ignore[no-untyped-def]
        made.append(kw)
        return real(self, **kw)

    monkeypatch.setattr(Task, "plan", counting)
    monkeypatch.setattr(ev, "_SETUPS", type(ev._SETUPS)(8))  # a fresh worker
    limits = CalibLimits(starts=4)
    seen: set = set()
    srcs = ["(* a x)", "(+ a (* b x))", "(* a (cos (* b x)))", "(* a (exp (* b x)))"]
    for i, s in enumerate(srcs):
        assert run_job(task, Job(i, Candidate(s), i), limits, seen).evaluation.status == "ok"
    assert made == [{"starts": 4, "diagnostics": False}]
