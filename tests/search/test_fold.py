"""The funnel's ``finite`` stage read from the fit (``evaluate``): the same result as the
stages in order, for programs that pass it, fail it, or cannot be proven one number per point."""

import json
from pathlib import Path

import numpy as np
import pytest

from ndvm import tasks
from ndvm.eval.limits import Limits
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


@pytest.mark.parametrize("max_steps", [2, 8, 2_000])
def test_folded_at_the_step_limit(monkeypatch, max_steps):
    """Closed forms (folded) that meet the step limit at the first start or not: the same
    timeouts and results."""
    task = tasks.get("sr-damped").for_search()
    srcs = ["(* a x)", "(+ a (* b (sin (* c x))))", "(* a (exp (* b x)) (cos (+ (* c x) d)))"]
    folded, staged = _both(task, srcs, monkeypatch, CalibLimits(starts=4, max_steps=max_steps))
    assert folded == staged
    timeouts = [r[5] == "timeout" for r in folded]
    assert timeouts == {2: [False, True, True], 8: [False, False, True]}.get(max_steps, [False] * 3)
    assert all("step limit" in r[6] for r in folded if r[5] == "timeout")


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
           "(if a x (if (> x 1) (exp a) (* b x)))", "(sin (if (nan? x) a b))"]  # fmt: skip
    no = ["(vector a)", "(list a x)", "(< a x)", "(vsum (vector a x))", "pi", "(f x)",
          "(if (< a x) x)", "(if (< a x) x (vector x))", "(recur a)", "(* a (recur x))",
          "(loop ((s a) (k 0)) (if (= k 3) s (recur (+ s x) (+ k 1))))",
          "(let ((y x)) y)", "(quote a)", "(* a x) (* b x)", "(a x)", "(x 1)", "(if (a) x b)",
          "(if (< a x) (< a x) a)", "#t", "\"s\"", "(* a . x)", "()"]  # fmt: skip
    for src in yes:
        assert scalar_valued(read(src), names), src
    for src in no:
        assert not scalar_valued(read(src), names), src
    deep = "(sin " * 1500 + "a" + ")" * 1500  # deeper than the interpreter's stack: no proof
    assert not scalar_valued(read(deep, limits=Limits(max_source_chars=10**6)), names)


def test_a_slow_loop_is_checked_before_it_is_calibrated(monkeypatch):
    """A loop is never folded: the funnel's one-lane walk meets the step
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


def test_finite_stage_passes_when_one_start_is_finite(monkeypatch):
    """A start that overflows does not reject the candidate while another start is finite:
    the calibration drops it, and a rate far from 1 is reached from the smaller starts."""
    from ndvm.api import compile as compile_program
    from ndvm.search.funnel import Verdict, check_finite

    w = np.linspace(400.0, 650.0, 60)
    task = Task.from_arrays(w, 3.0 * np.exp(-0.004 * w), names=["w"])
    prog = compile_program("(* a (exp (* b w)))", ("a", "b"), ("w",))
    v = Verdict(True, skeleton="s", n_params=2, complexity=5)
    assert check_finite(prog, task, np.array([[1.0, 2.0], [1.0, -1e-3]]), v).ok
    bad = check_finite(prog, task, np.array([[1.0, 2.0], [1.0, 3.0]]), v)
    assert not bad.ok and bad.reason == "non-finite output at the initial parameters"
    res = run_job(task, Job(0, Candidate("(* a (exp (* b w)))"), derive_seed(3, 0)),
                  CalibLimits(starts=8), set()).evaluation  # fmt: skip
    assert np.isnan(res.extra["lane_losses"][0])  # the first start overflowed
    assert res.success and res.params["b"] == pytest.approx(-0.004, rel=1e-9)
    # folded into the fit and staged alike
    folded, staged = _both(task, ["(* a (exp (* b w)))", "(exp (* w (+ 2 (* a a))))"], monkeypatch,
                           CalibLimits(starts=8))  # fmt: skip
    assert folded == staged
    assert [r[5] for r in folded] == ["ok", "rejected"]


@pytest.mark.parametrize("src", [
    *SR, '(if (< x 0.5) (error "low") (* a x))', "(loop ((s a) (k 0)) (if (= k 3) s "
    "(recur (* s x) (+ k 1))))", "(vector-ref (vector a) 2)",
])  # fmt: skip
def test_finite_stage_on_prepared_training_inputs_is_that_on_the_mapping(src):
    """The ``finite`` stage evaluates the training inputs prepared once (``Program.values``
    when no lane fails): the values and lane errors of evaluating the plain mapping."""
    import ndvm
    from ndvm.backends import lean
    from ndvm.search import funnel

    task = tasks.get("sr-damped")
    prog = ndvm.compile(src, inputs=task.inputs, strict=False, free_params=True)
    theta = np.random.default_rng(1).standard_normal((3, len(prog.params)))
    train = task.data().train_inputs
    prep = funnel._train_inputs(task.data(), prog.inputs)
    got = funnel._values(prog, theta, prep)
    if src in ("(* a x)", "(/ a 0)"):  # the lean evaluation is the one taken
        assert lean.values(prog, theta, prep) is not None
    plain = funnel._values(prog, theta, dict(train))
    a, b = np.asarray(got[0]), np.asarray(plain[0])
    assert a.dtype == b.dtype and a.shape == b.shape
    assert repr(a.tolist()) == repr(b.tolist()) if a.dtype == object else a.tobytes() == b.tobytes()
    def errs(errors):
        return [(m.tolist(), type(e), str(e), e.lanes, e.line, e.column) for m, e in errors]

    assert errs(got[1]) == errs(plain[1])


@pytest.mark.parametrize("src", ['(if (< x 0.5) (error "low") (* a x))',
                                 "(loop ((s a)) (if (> s 0) (recur s) s))"])  # fmt: skip
def test_finite_stage_evaluates_once_when_lanes_fail(monkeypatch, src):
    """A failed lane (an error, or the step limit) does not evaluate the starts a second time
    (``Program.evaluate`` after the lean evaluation): one walk per check, so a candidate at
    its deadline spends the deadline once."""
    import ndvm
    from ndvm.api import Program
    from ndvm.search import funnel
    from ndvm.search.funnel import Verdict

    task = tasks.get("sr-damped")
    prog = ndvm.compile(src, inputs=task.inputs, strict=False, free_params=True,
                        limits=Limits(max_steps=20_000))  # fmt: skip

    def no_second(*a, **k):
        raise AssertionError("evaluated a second time")

    monkeypatch.setattr(Program, "evaluate", no_second)
    theta = np.array([[1.0], [-1.0], [2.0]])
    v = funnel.check_finite(prog, task, theta, Verdict(True, skeleton="s", n_params=1))
    if "recur" in src:  # the first start loops until the step limit
        assert (v.ok, v.stage) == (False, "limit") and "StepLimitExceeded" in v.reason
    else:  # every start fails on the points x < 0.5
        assert (v.ok, v.stage) == (False, "finite") and "low" in v.reason
