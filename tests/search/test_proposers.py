from pathlib import Path

import numpy as np
import pytest

from ndvm.lang.reader import read
from ndvm.search import Budget, CalibLimits, Candidate, run_search
from ndvm.search.candidate import read_jsonl, write_jsonl
from ndvm.search.evolve import EvolveProposer, loop_parts
from ndvm.search.replay import ReplayProposer
from ndvm.search.state import SearchState
from ndvm.search.store import Store
from ndvm.tasks import get

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "candidates"


def test_jsonl_roundtrip(tmp_path):
    cands = [Candidate("(* a x)", ("a",)), Candidate("(+ a (* b x))")]
    write_jsonl(tmp_path / "c.jsonl", cands)
    back = [c for _, c in read_jsonl(tmp_path / "c.jsonl")]
    assert [(c.src, c.params) for c in back] == [(c.src, c.params) for c in cands]


def test_replay_records_every_line(tmp_path):
    path = EXAMPLES / "sr-damped.jsonl"
    n_lines = sum(1 for line in path.read_text().splitlines() if line.strip())
    st = run_search(
        "sr-damped", ReplayProposer(path), tmp_path / "r.db", budget=Budget(), batch_size=5
    )
    assert len(st.records) == n_lines
    by_status = {r.candidate.src: r for r in st.records}
    assert by_status["(* a (exp (- (* b x))) (cos (+ (* c x) d)))"].status == "ok"
    reasons = [r.evaluation.reason for r in st.records if r.status == "rejected"]
    assert any(x.startswith("parse:") for x in reasons)
    assert any(x.startswith("resolve:") and "unbound" in x for x in reasons)
    assert any(x.startswith("duplicate:") for x in reasons)
    assert any(x.startswith("proposal:") for x in reasons)  # the non-JSON line
    assert any(x.startswith("finite:") for x in reasons) or any(
        r.status == "failed" for r in st.records
    )
    assert any(r.evaluation.success for r in st.records if r.evaluation)


def test_evolve_is_deterministic_and_valid():
    p = get("sr-damped")
    ev = EvolveProposer(p.search.grammar, p.search.seeds)
    st = SearchState.of("sr-damped", 7, [])
    a = ev.propose(st, 30)
    b = EvolveProposer(p.search.grammar, p.search.seeds).propose(st, 30)
    assert [c.src for c in a] == [c.src for c in b]
    assert len({c.src for c in a}) == 30
    for c in a:
        read(c.src)


def test_evolve_iterated_map_requires_loop():
    p = get("iterated-map")
    ev = EvolveProposer(p.search.grammar, p.search.seeds)
    for c in ev.propose(SearchState.of("iterated-map", 1, []), 20):
        (form,) = read(c.src)
        lp = loop_parts(form)
        assert lp is not None and 6 <= lp[3] <= 16, c.src


def test_evolve_mutations_cover_grammar(tmp_path):
    st = run_search(
        "sr-damped",
        EvolveProposer(get("sr-damped").search.grammar, get("sr-damped").search.seeds),
        tmp_path / "e.db",
        budget=Budget(batches=4),
        batch_size=16,
        seed=1,
    )
    origins = {r.candidate.origin.split(":")[1] for r in st.records}
    assert {"seed", "random"} <= origins
    assert len(origins & {"swap", "insert", "delete", "replace", "wrap", "param", "leaf"}) >= 4
    assert all(r.status != "pending" for r in st.records)


def test_store_reads_back(tmp_path):
    path = EXAMPLES / "sr-damped.jsonl"
    st = run_search("sr-damped", ReplayProposer(path), tmp_path / "s.db", budget=Budget(batches=1))
    store = Store(tmp_path / "s.db")
    recs = store.records(store.latest_run()["run"])
    assert [r.candidate.src for r in recs] == [r.candidate.src for r in st.records]
    ok = [r for r in recs if r.status == "ok"]
    assert ok and all(np.isfinite(r.evaluation.train_loss) for r in ok)


@pytest.mark.parametrize("kind", ["text", "garbage", "other-schema", "directory", "read-only"])
def test_bad_database_is_a_one_line_error(tmp_path, kind):
    """``ndvm report`` / ``ndvm search`` on an unusable --db: one line, exit status 1."""
    import os
    import sqlite3
    import subprocess
    import sys

    db = tmp_path / "x.db"
    if kind == "text":
        db.write_text("not a database at all\n")
    elif kind == "garbage":
        db.write_bytes(b"SQLite format 3\x00" + os.urandom(4096))
    elif kind == "other-schema":
        con = sqlite3.connect(db)
        con.execute("CREATE TABLE candidates (run INTEGER, idx INTEGER)")
        con.commit()
        con.close()
    elif kind == "directory":
        db.mkdir()
    else:
        st = run_search("sr-damped", ReplayProposer(EXAMPLES / "sr-damped.jsonl"), db,
                        budget=Budget(batches=1))  # fmt: skip
        assert st.records
        db.chmod(0o444)
        tmp_path.chmod(0o555)
    try:
        search = ["search", "--task", "sr-damped", "--db", str(db), "--budget", "1"]
        for args in (["report", "--db", str(db)], search):
            proc = subprocess.run([sys.executable, "-m", "ndvm", *args], capture_output=True,
                                  text=True, timeout=120)  # fmt: skip
            if kind == "read-only" and args[0] == "report" and os.geteuid() != 0:
                assert proc.returncode == 0, proc.stderr  # reading a read-only db works
                continue
            if kind == "read-only" and os.geteuid() == 0:
                continue  # root writes through file modes: nothing to check
            assert proc.returncode in (1, 2), (args, proc.stderr)
            assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
            assert str(db) in proc.stderr
    finally:
        tmp_path.chmod(0o755)


@pytest.mark.parametrize("task", ["sr-damped", "iterated-map"])
def test_evolve_children_are_proposed_as_their_printed_source(task, monkeypatch, tmp_path):
    """A child is canonicalized as built, not printed and read back: the same program as from
    its printed source, with literals (even ones that print inexactly) valued as printed."""
    import dataclasses

    from ndvm.lang.datum import to_source
    from ndvm.search.simplify import canonical

    the_task = get(task)
    spec = the_task.search
    g = dataclasses.replace(spec.grammar, literals=(0.5, 3.14159265358979, 1e-7, 2.0))
    accept, checked = EvolveProposer._accept, []

    def check(self, data, seen, out, how, src=None):  # type: ignore[no-untyped-def]
        again = read(" ".join(to_source(d) for d in data))
        built = [to_source(canonical(d, g.params)) for d in data]
        assert built == [to_source(canonical(d, g.params)) for d in again]
        checked.append(how)
        return accept(self, data, seen, out, how, src)

    monkeypatch.setattr(EvolveProposer, "_accept", check)
    search = dataclasses.replace(spec, grammar=g)
    run_search(dataclasses.replace(the_task, search=search), EvolveProposer(g, spec.seeds),
               tmp_path / "e.db", budget=Budget(batches=4), batch_size=32,
               limits=CalibLimits(starts=1))  # fmt: skip
    assert len(checked) >= 100 and len({c.split(":")[0] for c in checked} - {"seed"}) >= 3
