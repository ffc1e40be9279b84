"""``ndvm report`` counts the candidates a stopped search left pending (proposed, never
evaluated) instead of leaving them out of the summary."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from ndvm.cli import main

CORPUS = ['{"src": "(+ a (* b x))"}', '{"src": "(* a (exp (* b x)))"}', '{"src": "(* a x)"}',
          '{"src": "(+ a x)"}']  # fmt: skip


def _search_then_unfinish(tmp_path: Path, n_pending: int) -> Path:
    """A finished replay search whose last ``n_pending`` rows are put back to ``pending``,
    as a search killed before their results leaves them."""
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join(CORPUS) + "\n")
    db = tmp_path / "r.db"
    assert main(["search", "--task", "sr-damped", "--proposer", f"replay:{corpus}",
                 "--db", str(db), "--quiet"]) == 0  # fmt: skip
    con = sqlite3.connect(db)
    idx = [i for (i,) in con.execute("SELECT idx FROM candidates ORDER BY idx DESC")]
    con.executemany("UPDATE candidates SET status = 'pending' WHERE idx = ?",
                    [(i,) for i in idx[:n_pending]])  # fmt: skip
    con.commit()
    con.close()
    return db


@pytest.mark.parametrize("n_pending", [0, 1, 2])
def test_report_counts_pending_candidates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], n_pending: int
) -> None:
    db = _search_then_unfinish(tmp_path, n_pending)
    capsys.readouterr()
    assert main(["report", "--db", str(db), "--json", "--no-export"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["proposed"] == len(CORPUS)
    assert rep["pending"] == n_pending
    assert rep["calibrated"] + rep["rejected"] + rep["pending"] == rep["proposed"]
    assert main(["report", "--db", str(db), "--no-export"]) == 0
    text = capsys.readouterr().out
    assert (f"{n_pending} pending" in text) == (n_pending > 0)
