"""Dust pruning (``ndvm.search.dust``): constants a fit drove to zero or one are removed,
the smaller program refitted, and kept only when its validation loss is no worse."""

from dataclasses import replace

import numpy as np

from ndvm.search.candidate import Candidate, Record
from ndvm.search.dust import prune
from ndvm.search.evaluate import CalibLimits, Job, run_job
from ndvm.tasks.base import Task


def _record(task: Task, src: str, values: dict[str, float]) -> Record:
    """A calibrated record of ``src`` whose parameters are then set to ``values``."""
    res = run_job(task, Job(0, Candidate(src), 0), CalibLimits(starts=4), set())
    assert res.evaluation.status == "ok"
    ev = replace(res.evaluation, params=values)
    return Record(0, 0, Candidate(src), res.skeleton, res.n_params, res.complexity, 0, ev)


def _coulomb(scale: float = 1.0) -> Task:
    rng = np.random.default_rng(0)
    q, e, r = rng.uniform(1, 5, 200), rng.uniform(1, 3, 200), rng.uniform(1, 5, 200)
    y = scale * 0.0795 * q / (e * r) * (1 + 0.001 * rng.standard_normal(200))
    return Task.from_arrays(np.c_[q, e, r], y, names=["q", "eps", "r"], seed=0)


def test_a_constant_fitted_to_zero_is_pruned_and_the_rest_refitted():
    task = _coulomb()
    src = "(* a (/ (+ (* b q) c) (* eps r)))"
    rec = _record(task, src, {"a": 0.1767, "b": 0.4502, "c": 2.1e-19})
    out = prune(task, rec)
    assert out.candidate.src == "(* a (/ (* b q) (* eps r)))"
    assert out.n_params == 2 and out.complexity < rec.complexity and out.idx == rec.idx
    ev = out.evaluation
    assert abs(ev.params["a"] * ev.params["b"] - 0.0795) < 1e-4  # refitted, same law
    assert ev.validation_mse <= rec.evaluation.validation_mse * (1 + 1e-6)
    assert ev.extra["pruned_from"] == src


def test_offsets_near_zero_and_factors_near_one_are_dust():
    rng = np.random.default_rng(1)
    al, th = rng.uniform(0.5, 2, 150), rng.uniform(-3, 3, 150)
    y = 1.3 * (0.7 * al * np.cos(th) + 1) + 1e-3 * rng.standard_normal(150)
    task = Task.from_arrays(np.c_[al, th], y, names=["alpha", "theta"], seed=0)
    src = "(* (+ a b) (+ (* c alpha (cos (- theta d))) 1))"
    rec = _record(task, src, {"a": 1.3, "b": 2.7e-17, "c": 0.7, "d": 1.7e-17})
    out = prune(task, rec)
    assert out.candidate.src == "(* a (+ (* c alpha (cos theta)) 1))"
    assert set(out.evaluation.params) == {"a", "c"}
    src1 = "(* a (* b alpha) (cos theta))"  # a factor fitted to one
    rec1 = _record(task, src1, {"a": 0.91, "b": 1.0 + 1e-13})
    assert prune(task, rec1).candidate.src == "(* a alpha (cos theta))"


def test_a_small_constant_that_matters_at_the_data_scale_is_kept():
    task = _coulomb(scale=1e-18)  # the target is of order 1e-19: 2.1e-19 is not dust
    src = "(+ (* a (/ q (* eps r))) c)"
    rec = _record(task, src, {"a": 0.0795e-18, "c": 2.1e-19})
    assert prune(task, rec) is rec


def test_the_estimators_front_holds_the_pruned_program():
    from ndvm.search.estimator import _pruned_front

    task = _coulomb()
    rec = _record(task, "(* a (/ (+ (* b q) c) (* eps r)))", {"a": 0.1767, "b": 0.4502,
                                                                 "c": 2.1e-19})  # fmt: skip
    front = _pruned_front(task, [rec])
    assert [r.candidate.src for r in front] == ["(* a (/ (* b q) (* eps r)))"]
    # past the fit's deadline (time_budget spent) no entry is pruned: the front as found
    import time

    late = _pruned_front(task, [rec], deadline=time.perf_counter() - 1.0)
    assert [r.candidate.src for r in late] == [rec.candidate.src]
