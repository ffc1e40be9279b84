"""What a search stores: results written once into pending rows (``Store.finish_many``), and
stored scores that an independent evaluation of the stored parameters reproduces."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from tests.helpers.records import record_key

import ndvm
from ndvm import tasks
from ndvm.search import Budget, Candidate, run_search
from ndvm.search import store as store_module
from ndvm.search.candidate import Evaluation, Record
from ndvm.search.evaluate import Result
from ndvm.search.replay import ReplayProposer
from ndvm.search.store import Store

ROOT = Path(__file__).resolve().parents[2]


def _result(idx: int, loss: float) -> tuple[Result, float]:
    ev = Evaluation("ok", train_loss=loss, params={"a": loss}, extra={"lane_losses": [loss]})
    return Result(idx, "(* P x)", 1, 3, ev), 1.0


def test_finish_many_writes_pending_rows_once(tmp_path):
    store = Store(tmp_path / "s.db")
    run = store.new_run("sr-damped", "test", 0, {}, "x")
    store.add(run, [Record(i, 0, Candidate(f"(* a{i} x)"), "", 0, 0, i, None) for i in range(4)])
    assert store.finish_many(run, [_result(0, 0.5), _result(1, 0.25)], 1.0) == [True, True]
    # idx 1 is not pending any more and idx 9 has no row: neither is written, the others are
    got = store.finish_many(run, [_result(1, 7.0), _result(2, 2.0), _result(9, 3.0),
                                  _result(3, 4.0)], 2.0)  # fmt: skip
    assert got == [False, True, False, True]
    recs = store.records(run)
    assert [r.evaluation.train_loss for r in recs] == [0.5, 0.25, 2.0, 4.0]
    assert recs[1].evaluation.params == {"a": 0.25}
    assert store.latest_run()["elapsed"] == 2.0
    store.close()


@pytest.mark.parametrize("workers", [1, 2])
def test_stored_scores_equal_an_independent_evaluation(tmp_path, workers):
    """Each calibrated record's stored test and validation MSE and R² equal those of its
    stored parameter values evaluated again on each split alone (a plain ``eval`` on the
    split's own inputs, NumPy sums), and the database reads back as the search returned."""
    task = tasks.get("sr-damped").for_search()
    data = task.data()
    db = tmp_path / "r.db"
    st = run_search(task, ReplayProposer(ROOT / "examples/candidates/sr-damped.jsonl"), db,
                    budget=Budget(), workers=workers, batch_size=6)  # fmt: skip
    ok = [r for r in st.records if r.status == "ok"]
    assert len(ok) >= 8
    for r in ok:
        ev = r.evaluation
        prog = ndvm.compile(r.candidate.src, r.candidate.params, inputs=task.inputs,
                            free_params=True)  # fmt: skip
        theta = prog.unconstrain(np.array([ev.params[n] for n in prog.params]))
        for name, x, y, mse, r2 in (
            ("test", data.test_inputs, data.test_target, ev.heldout_mse, ev.heldout_r2),
            ("validation", data.valid_inputs, data.valid_target, ev.validation_mse,
             ev.validation_r2),
        ):  # fmt: skip
            y = np.asarray(y, dtype=np.float64)
            pred = np.asarray(prog.eval(theta, dict(x)), dtype=np.float64).reshape(-1)
            ss = float(np.sum((pred - y) ** 2))
            assert mse == pytest.approx(ss / y.size, rel=1e-12), (name, r.candidate.src)
            want = 1.0 - ss / float(np.sum((y - y.mean()) ** 2))
            assert math.isclose(r2, want, rel_tol=1e-12, abs_tol=1e-12), (name, r.candidate.src)
    store = Store(db, read_only=True)
    assert record_key(store.records(store.latest_run()["run"])) == record_key(st.records)
    store.close()


@pytest.mark.parametrize("value", [
    {"a": -0.0054925620126152295, "b": 1e300, "é": math.nan, "c": math.inf, "d": -math.inf},
    {"lane_losses": [0.15, math.nan, 1e-320], "n_valid": 12, "theta": [[1.0, 2.5]],
     "s": "x\"\n\u00e9"},
    {}, {"k": None, "t": True, "n": [1, 2.0]},
])  # fmt: skip
def test_result_json_is_json_dumps(value):
    """The text the store writes for a result's values and extras is ``json.dumps``'s."""
    assert store_module._DUMPS(value) == json.dumps(value)
