"""Searching a user's own data: tasks from arrays and CSV, honest selection, hall of fame, UX."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import ndvm
from ndvm.lang.datum import to_source
from ndvm.lang.reader import read
from ndvm.search import Budget, Task, frontier, make_proposer, run_search
from ndvm.search.evolve import uses_loop_state
from ndvm.search.simplify import simplify
from ndvm.tasks import base, columns


def _mm(n: int = 120, noise: float = 0.01, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Michaelis-Menten rates: a law that is none of the built-in tasks."""
    rng = np.random.default_rng(seed)
    s = rng.uniform(0.1, 5.0, n)
    return s, 2.5 * s / (0.8 + s) + rng.normal(0.0, noise, n)


def _csv(path: Path, cols: dict[str, np.ndarray], delimiter: str = ",") -> Path:
    names = list(cols)
    rows = [delimiter.join(names)]
    for i in range(len(cols[names[0]])):
        rows.append(delimiter.join(f"{cols[c][i]:.10g}" for c in names))
    path.write_text("\n".join(rows) + "\n")
    return path


def test_from_arrays_splits_rows_three_ways_without_overlap():
    X = np.c_[np.arange(50.0), np.arange(50.0) ** 2]
    y = np.arange(50.0)
    task = Task.from_arrays(X, y, names=["t", "u"], split=(0.6, 0.2, 0.2), seed=3)
    d = task.data()
    rows = [set(d.train_target), set(d.valid_target), set(d.test_target)]
    assert [len(r) for r in rows] == [30, 10, 10]
    assert not (rows[0] & rows[1] or rows[0] & rows[2] or rows[1] & rows[2])
    assert set(d.train_inputs) == {"t", "u"} and task.inputs == ("t", "u")
    np.testing.assert_array_equal(d.train_inputs["u"], d.train_inputs["t"] ** 2)
    again = Task.from_arrays(X, y, names=["t", "u"], seed=3).data()
    np.testing.assert_array_equal(again.test_target, d.test_target)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"names": ["a"]}, "distinct input names"),
        ({"binary_operators": ["+", "frob"]}, "unknown operator 'frob'"),
        ({"unary_operators": ["+"]}, None),  # + takes 1 argument too: allowed
        ({"unary_operators": ["atan2"]}, "atan2"),
        ({"binary_operators": "pow"}, "a list of names"),  # not p, o, w
        ({"binary_operators": None}, "a list of names"),
        ({"binary_operators": [["+"]]}, "names"),
        ({"unary_operators": [1]}, "names"),
        ({"split": (0.5, 0.5, 0.5)}, "three fractions"),
    ],
)
def test_from_arrays_rejects_bad_arguments(kw, match):
    X, y = np.ones((20, 2)), np.arange(20.0)
    if match is None:
        Task.from_arrays(X, y, **kw)
        return
    with pytest.raises(ndvm.NdvmError, match=match):
        Task.from_arrays(X, y, **kw)


def test_pysr_operator_spellings_are_the_primitives():
    """PySR's ``"^"`` and ``"neg"`` name ``pow`` and unary ``-``; a program of the grammar
    using them evaluates as NumPy's power and negation."""
    x = np.linspace(1.0, 3.0, 20)
    task = Task.from_arrays(x, 2.0 * x**1.5, binary_operators=["+", "*", "^"],
                            unary_operators=["neg"])  # fmt: skip
    g = task.search.grammar
    assert g.binary == ("+", "*", "pow") and g.unary == ("-",)
    prog = ndvm.compile("(- (* a (pow x b)))", params={"a": 2.0, "b": 1.5}, inputs=["x"])
    np.testing.assert_allclose(np.asarray(prog.eval(None, {"x": x})).ravel(), -2.0 * x**1.5,
                               rtol=1e-14)  # fmt: skip


def test_non_finite_data_is_named_by_row():
    X = np.arange(20.0)
    y = np.arange(20.0)
    y[7] = np.nan
    with pytest.raises(ndvm.NdvmError, match="row 7"):
        Task.from_arrays(X, y)


def test_read_csv_names_file_line_and_column(tmp_path):
    good = _csv(tmp_path / "g.csv", {"S": np.array([1.0, 2.0]), "v": np.array([3.0, 4.0])})
    assert columns.read_csv(good, ["v"])["v"].tolist() == [3.0, 4.0]
    semi = _csv(tmp_path / "s.csv", {"S": np.array([1.0, 2.0]), "v": np.array([3.0, 4.0])}, ";")
    assert columns.read_csv(semi, ["S", "v"])["S"].tolist() == [1.0, 2.0]
    bad = tmp_path / "b.csv"
    bad.write_text("S,v\n1,2\n3,NA\n")
    with pytest.raises(ndvm.NdvmError, match=r"b.csv:3: error: column 'v': not a number"):
        columns.read_csv(bad, ["S", "v"])
    (tmp_path / "h.csv").write_text("S,v\n")
    with pytest.raises(ndvm.NdvmError, match="no data rows"):
        columns.read_csv(tmp_path / "h.csv", ["S"])
    with pytest.raises(ndvm.NdvmError, match="no column 'w'"):
        columns.read_csv(good, ["w"])


def test_simplify_removes_identities_and_folds_literals():
    cases = {
        "(sin (/ x x))": "(sin 1)",
        "(* 1 (/ x x))": "1",
        "(+ (* a x) (- b b))": "(* a x)",
        "(* (+ 1 2) a)": "(* 3 a)",
        "(log (exp (* a x)))": "(* a x)",
        "(/ a 0)": "(/ a 0)",
        "(quote (/ x x))": "(quote (/ x x))",
    }
    for src, want in cases.items():
        assert to_source(simplify(read(src)[0])) == want, src
    loop = "(loop ((s a) (k 0)) (if (= k 8) s (recur (+ s (* b x)) (+ k 1))))"
    dead = "(loop ((s a) (k 0)) (if (= k 8) s (recur (* b x) (+ k 1))))"
    assert uses_loop_state(read(loop)[0]) and not uses_loop_state(read(dead)[0])


def test_evolve_proposes_no_bloat():
    task = Task.from_arrays(*_mm(40), names=["S"])
    prop = make_proposer("evolve", task)
    from ndvm.search.state import SearchState

    srcs = [c.src for c in prop.propose(SearchState(task.name, 5, ()), 200)]
    for src in srcs:
        for d in read(src):
            assert to_source(simplify(d)) == to_source(d), src


def _poisoned(task: Task) -> Task:
    d = task.data()
    junk = np.random.default_rng(9).normal(1e6, 1e5, d.test_target.shape)
    bad = dataclasses.replace(d, test_target=junk)
    return dataclasses.replace(task, build_data=functools.partial(base.constant_data, bad))


def test_selection_never_reads_the_test_split(tmp_path):
    """Poisoning the test targets changes only the reported test scores."""
    task = Task.from_arrays(*_mm(60), names=["S"], steps=40)
    runs = []
    for t, name in ((task, "clean"), (_poisoned(task), "poisoned")):
        st = run_search(t, make_proposer("evolve", t), tmp_path / f"{name}.db",
                        budget=Budget(batches=4), batch_size=24, seed=2)  # fmt: skip
        runs.append(st.records)
    clean, poisoned = runs
    assert len(clean) == len(poisoned) == 96

    def chosen(recs):
        return [
            (r.idx, r.candidate.src, r.status, r.evaluation and r.evaluation.params,
             r.evaluation and repr(r.evaluation.validation_mse))
            for r in recs
        ]  # fmt: skip

    assert chosen(clean) == chosen(poisoned)
    ok = [r for r in poisoned if r.status == "ok"]
    assert ok and all(r.evaluation.heldout_mse > 1e10 for r in ok)
    hof_c = frontier.hall_of_fame(clean, ("S",), export=False)
    hof_p = frontier.hall_of_fame(poisoned, ("S",), export=False)
    assert [r["src"] for r in hof_c] == [r["src"] for r in hof_p]
    assert frontier.summarize(clean).best.idx == frontier.summarize(poisoned).best.idx


def test_hall_of_fame_is_a_front_with_pysr_scores(tmp_path):
    task = Task.from_arrays(*_mm(60), names=["S"], steps=40)
    st = run_search(task, make_proposer("evolve", task), tmp_path / "h.db",
                    budget=Budget(batches=3), batch_size=24)  # fmt: skip
    hof = frontier.hall_of_fame(list(st.records), ("S",), export=False)
    assert len(hof) >= 2
    cost = [r["cost"] for r in hof]  # nodes plus one per fitted parameter
    assert cost == [r["complexity"] + r["n_params"] for r in hof]
    loss = [r["validation_loss"] for r in hof]
    assert cost == sorted(set(cost)) and all(a > b for a, b in zip(loss, loss[1:]))
    assert hof[0]["score"] == 0.0
    for prev, row in zip(hof, hof[1:]):
        want = -(math.log(row["validation_loss"]) - math.log(prev["validation_loss"])) / (
            row["cost"] - prev["cost"]
        )
        assert row["score"] == pytest.approx(want, rel=1e-12)


@pytest.mark.sympy
def test_equation_keeps_every_digit_and_explains_loops():
    out = frontier.equation("(* a (exp (* b x)))", {"a": 1.2345678901234567, "b": -0.3}, ("x",))
    assert "1.2345678901234567" in out["equation"] or "1.23456789012346" in out["equation"]
    loop = frontier.equation("(loop ((s a) (k 0)) (if (= k b) s (recur s (+ k 1))))", {}, ("x",))
    assert "export_error" in loop and loop["export_error"]


def _cli(args: list[str], **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ndvm", *args], capture_output=True, text=True,
                          timeout=kw.pop("timeout", 300), **kw)  # fmt: skip


@pytest.mark.sympy
def test_search_own_csv_finds_the_law_and_reports_it(tmp_path):
    s, v = _mm(120, noise=0.005)
    data = _csv(tmp_path / "mm.csv", {"S": s, "v": v})
    db = tmp_path / "mm.db"
    # bounded by candidates, not time (the law first reaches the front at candidate 2551; a
    # 60 s budget made 26,000 here, fewer on a slower machine): the same on any machine
    out = _cli(["search", "--data", str(data), "--x", "S", "--y", "v", "--budget", "240",
                "--max-candidates", "4000", "--db", str(db), "--workers", "2",
                "--quiet"])  # fmt: skip
    assert out.returncode == 0, out.stderr
    rep = json.loads(_cli(["report", "--db", str(db), "--json"]).stdout)
    best = rep["best"]
    assert best["validation_r2"] > 0.99 and best["test_r2"] is not None
    assert set(best) >= {"src", "train_loss", "validation_loss", "validation_r2", "test_r2"}
    # the law's structure S / (c (S + K)) (any equivalent form) is on the front
    import sympy

    S = sympy.Symbol("S", real=True)
    laws = []
    for row in rep["hall_of_fame"]:
        if "equation_symbolic" not in row:
            continue
        e = sympy.sympify(row["equation_symbolic"], locals={"S": S})
        if not e.is_rational_function(S):
            continue
        num, den = sympy.fraction(sympy.cancel(sympy.together(e)))
        if sympy.degree(num, S) == 1 and sympy.degree(den, S) == 1 and row["validation_r2"] > 0.99:
            laws.append(row)
    assert laws, rep["hall_of_fame"]
    # --resume without --data rebuilds the task from the database
    again = _cli(["search", "--resume", "--db", str(db), "--budget", "2", "--quiet"])
    assert again.returncode == 0, again.stderr


def test_ctrl_c_exits_130_with_a_resume_hint(tmp_path):
    s, v = _mm(60)
    data = _csv(tmp_path / "d.csv", {"S": s, "v": v})
    db = tmp_path / "c.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ndvm", "search", "--data", str(data), "--x", "S", "--y", "v",
         "--budget", "120", "--db", str(db), "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.time() + 60
    while time.time() < deadline and not db.exists():
        time.sleep(0.1)
    time.sleep(1.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "--resume" in err


def test_report_into_a_closed_pipe_is_quiet(tmp_path):
    task = Task.from_arrays(*_mm(40), names=["S"], steps=20)
    db = tmp_path / "p.db"
    run_search(task, make_proposer("evolve", task), db, budget=Budget(batches=1), batch_size=8)
    cmd = f"{sys.executable} -m ndvm report --db {db} --no-export | head -c 10 >/dev/null"
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ))  # fmt: skip
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


def test_data_task_spreads_half_of_each_series_starts_over_decades():
    from ndvm.search.evaluate import spread_starts

    task = Task.from_arrays(np.linspace(0.0, 1.0, 20), np.arange(20.0))
    assert task.calib.start_decades == 3
    K, series = 8, 2
    z = np.arange(1.0, 1.0 + K * series * 2).reshape(K * series, 2)
    out = spread_starts(z.copy(), K, 3)
    # series-major rows: start k of series s is row s * K + k
    expect = np.array([1, 1, 1, 1, 0.1, 0.01, 0.001, 0.1] * series)[:, None] * z
    np.testing.assert_allclose(out, expect, rtol=1e-15)
    np.testing.assert_array_equal(spread_starts(z.copy(), K, 0), z)
    np.testing.assert_array_equal(spread_starts(z[:1].copy(), 1, 3), z[:1])  # one start: as drawn
