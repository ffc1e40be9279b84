"""The funnel's ``finite`` stage read from the fit (``evaluate``): the same result as the
stages in order, for programs that pass it, fail it, or cannot be proven one number per point."""

import json
from pathlib import Path

import numpy as np
import pytest

from ndvm import tasks
from ndvm.lang.reader import read
from ndvm.search import Candidate
from ndvm.search import evaluate as ev_mod
from ndvm.search.evaluate import CalibLimits, Job, run_job
from ndvm.search.funnel import scalar_valued
from ndvm.search.state import derive_seed
from ndvm.tasks.base import Task

SR = [
    "(* a x)",
    "(* a (exp (* b x)) (cos (+ (* c x) d)))",
    "(+ a (* b (sin (* c x))))",
    "(/ a 0)",  # non-finite at every start: rejected at 'finite'
    "(log (- a 100))",  # NaN at the first start's values
    "(exp (* 400 (+ a x)))",  # overflows (inf) at the first start
    "(* a (exp (* b (exp (* 40 x)))))",  # inf on some points only
    "(vector (* a x))",  # N numbers per lane but not one per point: 'finite' stage's reason
    "(vector a a)",
    "(list a x)",  # not one number per point; not numeric at all
    "(if (> a 0) x (vector x x))",  # a vector branch: never folded
    "(* b x)",  # a duplicate skeleton of (* a x)
    "(* a x)",  # a duplicate of a duplicate
    "(exp (exp (exp (* a (* x x)))))",  # a finite start, then overflow during the fit
    "(+ a (* 0 (log (- x 1))))",  # NaN on the points x < 1 only
    "(let ((y (* a x))) y)",  # a binding form: not folded, same result
    "(* a pi x)",  # a named constant: not folded
]
MAPS = [
    "(loop ((s a) (k 0)) (if (= k 8) s (recur (+ s (* b (sin (* c x)))) (+ k 1))))",
    "(loop ((s (* a x)) (k 0)) (if (= k 6) s (recur (+ s (* b x)) (+ k 1))))",
    "(loop ((s a) (k 0)) (if (= k 10) s (recur (* 50 s (exp s)) (+ k 1))))",  # overflows
    "(loop ((s a) (k 0)) (if (= k 3) (vector s) (recur (+ s x) (+ k 1))))",
]


def _key(res):
    e = res.evaluation
    return (res.idx, res.skeleton, res.n_params, res.complexity, res.key, e.status, e.reason,
            repr(e.train_loss), repr(e.validation_mse), repr(e.heldout_r2), e.success, e.params,
            e.steps, repr(e.extra))  # fmt: skip


def _both(task: Task, srcs, monkeypatch, limits=None, **kw):
    """Results of ``srcs`` (one worker, index order) with the stage folded and in order."""
    limits = limits or CalibLimits(starts=kw.get("starts", 1))
    out = []
    for fold in (True, False):
        with monkeypatch.context() as m:
            if not fold:
                m.setattr(ev_mod, "_folds", lambda *a: False)
            seen: set = set()
            jobs = [Job(i, Candidate(s), derive_seed(3, i)) for i, s in enumerate(srcs)]
            out.append([_key(run_job(task, j, limits, seen)) for j in jobs])
    return out


@pytest.mark.parametrize("starts", [1, 4])
def test_folded_finite_stage_gives_the_same_results(monkeypatch, starts):
    task = tasks.get("sr-damped").for_search()
    folded, staged = _both(task, SR, monkeypatch, CalibLimits(starts=starts))
    assert folded == staged
    statuses = {r[5] for r in folded}
    assert {"ok", "rejected"} <= statuses  # both outcomes are exercised
    reasons = " ".join(r[6] for r in folded)
    for word in ("non-finite output", "not one number per point", "duplicate"):
        assert word in reasons


def test_folded_on_iterated_maps(monkeypatch):
    task = tasks.get("iterated-map").for_search()
    folded, staged = _both(task, MAPS, monkeypatch)
    assert folded == staged
    assert folded[0][5] == "ok" and folded[3][5] == "rejected"


@pytest.mark.parametrize("max_steps", [2_000, 20_000])
def test_folded_at_the_step_limit(monkeypatch, max_steps):
    """Counted loops (folded) that meet the step limit or not: the same timeouts and
    results."""
    task = tasks.get("sr-damped").for_search()
    srcs = [
        f"(loop ((s a) (k 0)) (if (= k {n}) s (recur ({op} s (* b x)) (+ k 1))))"
        for n, op in ((5000, "+"), (300, "-"), (30, "max"))
    ]  # distinct skeletons
    folded, staged = _both(task, srcs, monkeypatch, CalibLimits(starts=4, max_steps=max_steps))
    assert folded == staged
    assert folded[0][5] == "timeout" and "step limit" in folded[0][6]
    assert folded[2][5] == "ok"


def test_folded_with_levenberg_marquardt_and_columns(monkeypatch):
    """A task from data (two inputs, optimizer "auto": Levenberg–Marquardt, 4 starts)."""
    rng = np.random.default_rng(0)
    X = rng.uniform(0.5, 3.0, (60, 2))
    task = Task.from_arrays(X, 2.0 * X[:, 0] / (1.0 + X[:, 1]), names=["u", "v"], steps=30)
    srcs = ["(/ (* a u) (+ b v))", "(* a (exp (* b u)))", "(/ a (- v v))", "(* a u)",
            "(+ (* a u) (log (- v 2)))", "u", "(vector u)"]  # fmt: skip
    folded, staged = _both(task, srcs, monkeypatch, CalibLimits(starts=4))
    assert folded == staged
    assert folded[0][5] == "ok"


def test_folded_on_the_benchmark_corpus(monkeypatch, tmp_path):
    """Candidates of the evolutionary proposer (as bench_search's corpus), replayed twice."""
    from ndvm.search.evolve import EvolveProposer
    from ndvm.search.state import SearchState

    task = tasks.get("sr-damped").for_search()
    spec = task.search
    srcs = [c.src for c in EvolveProposer(spec.grammar, spec.seeds).propose(
        SearchState("sr-damped", 5, ()), 60)]  # fmt: skip
    folded, staged = _both(task, srcs + srcs[:10], monkeypatch)
    assert folded == staged


def test_scalar_valued_is_conservative():
    names = {"a", "b", "x"}
    yes = ["(* a x)", "a", "2.5", "(if (< a x) (sin x) 1)", "(+)", "(max a b x)",
           "(loop ((s a) (k 0)) (if (= k 3) s (recur (+ s x) (+ k 1))))",
           "(loop ((k 2) (s a)) (if (>= k 9) (* s x) (recur (+ 1 k) (sin s))))",
           "(loop ((s a) (k 0)) (if (= 10000 k) s (recur (+ s x) (+ k 1))))",
           "(loop ((s a) (k 0)) (if (= k 4) s (recur (loop ((t s) (j 0)) (if (= j 5) t"
           " (recur (* t x) (+ j 1)))) (+ k 1))))",
           "(loop ((s a) (k 0)) (if (= k 4) s (if (> s 9) s"
           " (recur (* 2 s) (+ k 1)))))"]  # fmt: skip
    no = ["(vector a)", "(list a x)", "(< a x)", "(vsum (vector a x))", "pi", "(f x)",
          "(if (< a x) x)", "(if (< a x) x (vector x))", "(recur a)", "(* a (recur x))",
          "(loop ((s a)) (if (> s 1) s (recur s s)))", "(loop ((s (vector a))) s)",
          "(let ((y x)) y)", "(quote a)", "(* a x) (* b x)", "(a x)", "(x 1)",
          "(loop ((exp a)) (exp 1))", "#t", "\"s\"",
          # loops that are not counted within MAX_ITERATIONS
          "(loop ((s a)) (loop ((t s)) (if (> t 1) t (recur (* 2 t)))))",
          "(loop ((s a) (k 0)) (if (= k 100000000) s (recur (+ s x) (+ k 1))))",
          "(loop ((s a) (k 0)) (if (= k 10001) s (recur (+ s x) (+ k 1))))",
          "(loop ((s a) (k 5)) (if (= k 3) s (recur (+ s x) (+ k 1))))",
          "(loop ((s a) (k 0.5)) (if (= k 3) s (recur (+ s x) (+ k 1))))",
          "(loop ((s a) (k 0)) (if (= k 3) s (recur (+ s x) (+ k 2))))",
          "(loop ((s a) (k 0)) (if (= k 3) s (recur (+ s x) k)))",
          "(loop ((s a) (k 0)) (if (= k 3) s (recur (+ s x) (- k 1))))",
          "(loop ((s a) (k 0)) (if (= k 3) (recur s k) (recur (+ s x) (+ k 1))))",
          "(loop ((s a) (k 0)) (if (< k 3) s (recur (+ s x) (+ k 1))))",
          "(loop ((s a) (k 0)) (if (= s 3) s (recur (+ s x) (+ k 1))))",
          "(loop ((s a) (k 0)) (if (= k 200) s (recur (loop ((t s) (j 0)) (if (= j 100) t"
          " (recur (* t x) (+ j 1)))) (+ k 1))))"]  # fmt: skip
    for src in yes:
        assert scalar_valued(read(src), names), src
    for src in no:
        assert not scalar_valued(read(src), names), src


def test_a_slow_loop_is_checked_before_it_is_calibrated(monkeypatch):
    """A loop that is not counted is never folded: the funnel's one-lane walk meets the step
    limit (a timeout), and nothing is calibrated."""
    task = tasks.get("sr-damped").for_search()
    slow = "(* a (loop ((s 0) (k 0)) (if (= k 100000000) s (recur (+ s x) (+ k 1)))))"
    calls = []
    monkeypatch.setattr(ev_mod, "_fit", lambda *a: calls.append(a))
    res = run_job(task, Job(0, Candidate(slow), 1), CalibLimits(max_steps=50_000), set())
    assert res.evaluation.status == "timeout" and "step limit" in res.evaluation.reason
    assert calls == []


def test_replayed_corpus_records_do_not_depend_on_the_fold(monkeypatch, tmp_path):
    """A whole search: the records with and without the fold are the same."""
    from ndvm.search import Budget, run_search
    from ndvm.search.replay import ReplayProposer

    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps({"src": s}) + "\n" for s in SR))
    keys = []
    for fold in (True, False):
        with monkeypatch.context() as m:
            if not fold:
                m.setattr(ev_mod, "_folds", lambda *a: False)
            st = run_search(
                "sr-damped",
                ReplayProposer(path, cycles=2),
                Path(tmp_path / f"{fold}.db"),
                budget=Budget(candidates=2 * len(SR)),
                batch_size=8,
                limits=CalibLimits(starts=2),
            )
        keys.append([(r.idx, r.status, r.evaluation.reason, r.evaluation.params)
                     for r in st.records])  # fmt: skip
    assert keys[0] == keys[1]
    assert len(keys[0]) == 2 * len(SR)
