"""``ndvm report`` never writes and never ranks a hand-edited row first (issue 48)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from ndvm.cli import main

CORPUS = ['{"src": "(+ a (* b x))"}', '{"src": "(* a (exp (* b x)))"}', '{"src": "(* a x)"}']


def _search(tmp_path: Path) -> Path:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join(CORPUS) + "\n")
    db = tmp_path / "r.db"
    assert main(["search", "--task", "sr-damped", "--proposer", f"replay:{corpus}",
                 "--db", str(db), "--quiet"]) == 0  # fmt: skip
    return db


@pytest.mark.parametrize("content", [b"", b"not a database\n", b"SQLite format 3\x00junk"])
def test_report_on_a_foreign_file_is_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    path = tmp_path / "x.db"
    path.write_bytes(content)
    assert main(["report", "--db", str(path), "--no-export"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ndvm report:") and "\n" not in err and "Traceback" not in err
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.db"]  # no -wal/-shm/journal


def test_report_does_not_rank_a_hand_edited_negative_loss_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _search(tmp_path)
    con = sqlite3.connect(db)
    worst = con.execute("SELECT idx FROM candidates WHERE status = 'ok' "
                        "ORDER BY validation_mse DESC LIMIT 1").fetchone()[0]  # fmt: skip
    con.execute("UPDATE candidates SET validation_mse = -5.0, train_loss = -5.0 WHERE idx = ?",
                (worst,))  # fmt: skip
    con.commit()
    con.close()
    before = db.read_bytes()
    capsys.readouterr()
    assert main(["report", "--db", str(db), "--json", "--no-export"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["best"]["idx"] != worst
    assert all(r["validation_loss"] >= 0 for r in rep["hall_of_fame"])
    assert any("invalid stored row" in reason and "validation_mse -5.0 is negative" in reason
               for reason in rep["failures"])  # fmt: skip
    assert db.read_bytes() == before
