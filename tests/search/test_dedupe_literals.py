"""Deduplication never loses a program: literals keep their values in the dedupe key
(``skeleton_hash(skeleton, src)``), so programs that differ only in a literal are both
calibrated, while programs equal for some parameter values stay one."""

import numpy as np

from ndvm.lang.front import skeleton
from ndvm.lang.reader import read
from ndvm.search import Budget, run_search
from ndvm.search.candidate import skeleton_hash
from ndvm.search.evaluate import CalibLimits
from ndvm.search.replay import ReplayProposer
from ndvm.tasks.base import Task


def _key(src: str, params=("a", "b")) -> str:
    return skeleton_hash(skeleton(read(src), set(params)), src)


def test_literals_keep_their_values_in_the_key():
    assert _key("(* a (expt x 2))") != _key("(* a (expt x 3))")
    assert _key("(* a (expt x 2))") == _key("(* b (expt x 2))")  # renamed parameter
    assert _key("(* a (expt x 2))") == _key("(* (expt x 2) a)")  # argument order
    assert _key("(* a (expt x (+ 1 2)))") == _key("(* a (expt x 3))")  # folded by value
    assert _key("(+ a (* 2 x))") != _key("(+ a (* 3 x))")
    assert _key("(- x 1)") != _key("(- x 2)")
    assert _key("(+ (* a x) b)") == _key("(+ b (* x a))")
    # without the source the skeleton alone is coarser (literals unknown): as before
    s2, s3 = (skeleton(read(s), {"a"}) for s in ("(* a (expt x 2))", "(* a (expt x 3))"))
    assert skeleton_hash(s2) == skeleton_hash(s3)


def test_replay_of_two_powers_calibrates_both_and_finds_the_law(tmp_path):
    """The issue's corpus: ``(* a (expt x 2))`` then ``(* a (expt x 3))`` on y = 2x^3; the
    second used to be rejected as a duplicate of the first (0 successes)."""
    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 2.0, 120)
    task = Task.from_arrays(x, 2.0 * x**3, names=["x"], seed=0)
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"src": "(* a (expt x 2))"}\n{"src": "(* a (expt x 3))"}\n'
                      '{"src": "(* b (expt x 3))"}\n')  # fmt: skip
    st = run_search(task, ReplayProposer(corpus), tmp_path / "d.db", budget=Budget(),
                    limits=CalibLimits(starts=2))  # fmt: skip
    status = [r.status for r in st.records]
    assert status == ["ok", "ok", "rejected"]  # the third is the second renamed
    law = st.records[1].evaluation
    assert law.success and abs(law.params["a"] - 2.0) < 1e-6
    assert not st.records[0].evaluation.success
