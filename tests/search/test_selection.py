"""Selection that picks the law (``ndvm.search.selection``): the issue's cases on generated
data of the same shape. Each front holds the law, simpler programs and an overfit whose
validation loss is lower than the law's (as the tournament-steered split reports it); PySR's
"best" (the top score within 1.5x of the lowest validation loss) picks the overfit, the
information criterion on cross-validated losses (and on the validation rows) picks the law."""

from dataclasses import replace

import numpy as np
import pytest
from tests.helpers.records import calibrated

from ndvm.search import frontier, selection
from ndvm.search.candidate import Candidate, Record
from ndvm.tasks.base import Task


def _records(task: Task, srcs: list[str], overfit_gain: float) -> list[Record]:
    """Calibrated records of ``srcs`` (``srcs[1]`` the law, the last the overfit, whose
    validation loss is set to ``overfit_gain`` times the law's)."""
    out = calibrated(task, srcs, starts=16)
    assert all(r.status == "ok" for r in out), [r.evaluation.reason for r in out]
    law = out[1].evaluation.validation_mse
    out[-1] = replace(out[-1], evaluation=replace(out[-1].evaluation,
                                                  validation_mse=overfit_gain * law))  # fmt: skip
    return out


def _selection_rows(task: Task) -> tuple[dict[str, np.ndarray], np.ndarray]:
    d = task.data()
    cols = {k: np.concatenate([d.train_inputs[k], d.valid_inputs[k]]) for k in d.train_inputs}
    return cols, np.concatenate([d.train_target, d.valid_target])


def _check(task: Task, srcs: list[str], gain: float) -> None:
    recs = _records(task, srcs, gain)
    front = frontier.pareto_front(recs)
    assert [r.idx for r in front][-2:] == [1, len(srcs) - 1]  # the law and the overfit
    pysr = selection.choose(front, [frontier.selection_loss(r) for r in front], "best")
    assert pysr.idx == len(srcs) - 1  # the old rule: the overfit wins
    assert frontier.select(recs).idx == 1  # information criterion on the validation rows
    cv = selection.assess(front, *_selection_rows(task))
    assert np.all(np.isfinite(cv.folds))
    chosen = cv.choose("best")
    assert chosen.idx == 1, [(r.candidate.src, v) for r, v in zip(front, cv.losses)]
    accurate = cv.choose("accuracy")
    assert cv.losses[front.index(accurate)] == min(cv.losses)


@pytest.mark.parametrize("seed", [0, 1])
def test_antoine_law_on_19_rows_beats_a_noise_fitting_program(seed):
    rng = np.random.default_rng(seed)
    T = np.linspace(0.0, 360.0, 19)
    y = (18.0 - 3800.0 / (T + 230.0)) / np.log(10) + 0.02 * rng.standard_normal(19)
    task = Task.from_arrays(T, y, names=["T"], seed=seed)
    overfit = "(+ a (/ (- (* b (sin (- (* T T T) T)) (sin (sin T))) c) (+ T d)))"
    _check(task, ["(+ a (* b T))", "(+ a (/ b (+ c T)))", overfit], 0.5)


@pytest.mark.parametrize("seed", [0, 1])
def test_michaelis_menten_on_12_rows_is_selected_by_leave_one_out(seed):
    rng = np.random.default_rng(seed)
    S = np.repeat([0.02, 0.06, 0.11, 0.22, 0.56, 1.10], 2)
    v = 212.7 * S / (0.0641 + S) + 5.0 * rng.standard_normal(12)
    task = Task.from_arrays(S, v, names=["S"], seed=seed)
    assert len(selection.fold_ids(len(_selection_rows(task)[1]))) <= selection.LOO_ROWS
    _check(task, ["(* a S)", "(/ (* a S) (+ b S))",
                  "(+ (/ (* a S) (+ b S)) (* c (sin (* d S))))"], 0.6)  # fmt: skip


def test_gravity_with_a_distractor_column_on_300_rows():
    rng = np.random.default_rng(3)
    m1, m2, r, z = (rng.uniform(1.0, 5.0, 300) for _ in range(4))
    F = 6.674 * m1 * m2 / r**2 * (1.0 + 0.01 * rng.standard_normal(300))
    task = Task.from_arrays(np.c_[m1, m2, r, z], F, names=["m1", "m2", "r", "z"], seed=0)
    _check(task, ["(/ (* a m1 m2) r)", "(/ (* a m1 m2) (* r r))",
                  "(/ (* a m1 m2 (+ 1 (* b z))) (+ (* r r) (* c z)))"], 0.6)  # fmt: skip


def test_information_criterion_by_hand():
    """n log(loss) + cost log(n): costs 2, 4, 6 (one parameter each)."""
    recs = [Record(i, 0, Candidate(s), "", 1, c, 0, None) for i, (s, c) in
            enumerate([("a", 1), ("(* a x)", 3), ("(* a x x)", 5)])]  # fmt: skip
    n = 40  # a cost unit is worth log(40) = 3.69; a loss factor f is worth 40 log f
    # the larger program gains 5 % (40 log 1.05 = 1.95 < 2 log 40 = 7.4): the smaller one
    assert selection.choose(recs, [9.0, 1.0, 0.95], n=n).idx == 1
    # a 30 % gain is worth 10.5 > 7.4: the larger one
    assert selection.choose(recs, [9.0, 1.0, 0.7], n=n).idx == 2
    assert selection.criterion(0.7, 6, n) == pytest.approx(n * np.log(0.7) + 6 * np.log(n))
    assert selection.choose(recs, [9.0, 1.0, 0.95], "accuracy", n=n).idx == 2
    # exact fits tie at EXACT x the target's variance: the simpler exact program
    assert selection.choose(recs, [9.0, 1e-31, 1e-33], n=n, scale=4.0).idx == 1
    assert selection.choose(recs, [9.0, 1e-31, 1e-33], n=n).idx == 2  # no scale: evidence
    with pytest.raises(Exception, match="model_selection"):
        selection.choose(recs, [1.0, 1.0, 1.0], "bogus")


def test_fold_ids():
    assert sorted(selection.fold_ids(12)) == list(range(12))  # leave-one-out
    ids = selection.fold_ids(301, seed=4)
    assert set(ids) == set(range(selection.K_FOLDS))
    assert max(np.bincount(ids)) - min(np.bincount(ids)) <= 1


def test_programs_without_parameters_are_scored_on_each_fold_without_a_refit():
    """A task that scores fixed programs (``Task.from_arrays``): the law ``k x² / 2`` has no
    parameter; its fold losses are its held-out errors, and it is selected."""
    rng = np.random.default_rng(0)
    k, x = rng.uniform(1, 5, 200), rng.uniform(1, 5, 200)
    task = Task.from_arrays(np.c_[k, x], k * x**2 / 2, names=["k", "x"], seed=0)
    recs = calibrated(task, ["a", "(* k x 2)", "(* k x x 0.5)"], starts=2)
    front = frontier.pareto_front(recs)
    cv = selection.assess(front, *_selection_rows(task))
    assert np.all(np.isfinite(cv.folds)) and cv.losses[-1] < 1e-20
    assert cv.choose("best").idx == 2
