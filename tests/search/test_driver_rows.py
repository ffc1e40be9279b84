"""The database rows a search writes, column by column: what each record says (read back
independently of ``Store``), and the same rows whatever the number of workers or a stop and
resume (every column but the times)."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import pytest

from ndvm import tasks
from ndvm.search import Budget, run_search
from ndvm.search.candidate import Record
from ndvm.search.evaluate import CalibLimits
from ndvm.search.evolve import EvolveProposer
from ndvm.search.replay import ReplayProposer
from ndvm.search.state import derive_seed

TIMES = ("wall", "t_done")  # the columns that differ between two runs of one search


def _corpus(path: Path) -> Path:
    """Lines that reach every kind of row: given and derived parameters, a NumPy skeleton
    (its text stored), a malformed line (rejected at proposal), a skeleton seen before
    (a duplicate), a funnel rejection and candidates that fail or time out."""
    lines = [
        {"src": "(* a (sin (+ (* b x) c)))", "params": ["a", "b", "c"]},
        {"src": "(* a (exp (* b x)))"},
        "not json",
        {"src": "(* b (exp (* a x)))"},
        {"src": "(+ a"},
        {"numpy": "def equation(x, params):\n    return params[0] * np.sin(params[1] * x)\n"},
        {"src": "(/ a (- x x))"},
        {"src": "(* a (exp (- (* b x))) (cos (+ (* c x) d)))"},
        {"src": "(+ a (* b x))", "params": []},
        {"src": "(+ a (* b x))"},
    ]
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def _rows(db: Path) -> list[dict]:
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute("SELECT * FROM candidates ORDER BY run, idx")]
    finally:
        con.close()


def _num(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _expected(r: Record, run: int, seed: int) -> dict:
    """The row of record ``r`` as docs/search.md describes it (NULL: no value)."""
    c, ev = r.candidate, r.evaluation
    row = {
        "run": run, "idx": r.idx, "batch": r.batch, "src": c.src,
        "params": None if c.params is None else json.dumps(list(c.params)),
        "origin": c.origin, "skeleton": r.skeleton, "n_params": r.n_params,
        "complexity": r.complexity, "seed": derive_seed(seed, r.idx), "status": r.status,
        "reason": "" if ev is None else ev.reason, "text": c.text or None,
        "train_loss": None, "heldout_mse": None, "heldout_r2": None, "success": 0,
        "values_json": None, "extra": None, "steps": None, "validation_mse": None,
        "validation_r2": None,
    }  # fmt: skip
    if ev is not None and not ev.reason.startswith("proposal: "):
        row.update(
            train_loss=_num(ev.train_loss), heldout_mse=_num(ev.heldout_mse),
            heldout_r2=_num(ev.heldout_r2), success=int(ev.success),
            values_json=json.dumps(ev.params), extra=json.dumps(ev.extra), steps=ev.steps,
            validation_mse=_num(ev.validation_mse), validation_r2=_num(ev.validation_r2),
        )  # fmt: skip
    return row


def _untimed(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMES} for r in rows]


@pytest.mark.parametrize("workers", [1, 2])
def test_each_row_holds_what_its_record_says(tmp_path, workers):
    db = tmp_path / "r.db"
    st = run_search("sr-damped", ReplayProposer(_corpus(tmp_path / "c.jsonl"), cycles=2), db,
                    budget=Budget(), workers=workers, seed=3, batch_size=4,
                    limits=CalibLimits(starts=2))  # fmt: skip
    rows = _rows(db)
    assert len(rows) == len(st.records) == 20
    assert _untimed(rows) == _untimed([_expected(r, 1, 3) for r in st.records])
    kinds = {(r["status"], r["reason"].split(":")[0]) for r in rows}
    assert {("ok", ""), ("rejected", "proposal"), ("rejected", "duplicate"),
            ("rejected", "parse")} <= kinds, kinds  # fmt: skip
    assert any(r["text"] for r in rows) and any(r["params"] is None for r in rows)
    assert any(r["params"] == "[]" for r in rows)
    assert all(r["t_done"] > 0 for r in rows)


def _evolve() -> EvolveProposer:
    spec = tasks.get("sr-damped").search
    return EvolveProposer(spec.grammar, spec.seeds)


def test_rows_are_the_same_for_any_workers_and_a_stop_and_resume(tmp_path):
    """Evolve reads the records (those of the batch before as proposed): a search stopped
    after two batches and resumed writes the rows of one run through, as do 1 and 2 workers."""
    go = dict(seed=9, batch_size=12, limits=CalibLimits(starts=1))
    run_search("sr-damped", _evolve(), tmp_path / "w1.db", budget=Budget(batches=5), workers=1,
               **go)  # fmt: skip
    run_search("sr-damped", _evolve(), tmp_path / "w2.db", budget=Budget(batches=5), workers=2,
               **go)  # fmt: skip
    for budget in (Budget(batches=2), Budget(batches=5)):
        run_search("sr-damped", _evolve(), tmp_path / "r.db", budget=budget, workers=2,
                   resume=True, **go)  # fmt: skip
    one = _untimed(_rows(tmp_path / "w1.db"))
    assert len(one) == 60 and any(r["status"] == "ok" for r in one)
    assert _untimed(_rows(tmp_path / "w2.db")) == one
    assert _untimed(_rows(tmp_path / "r.db")) == one
