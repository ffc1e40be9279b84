"""The pipelined loop: batch n is proposed while batch n - 1 calibrates, from the same view for
any executor; the one-evaluation regression score against NumPy."""

import math
import os
from pathlib import Path

import numpy as np
import pytest

import ndvm
from ndvm import tasks
from ndvm.search import Budget, run_search
from ndvm.search.evolve import EvolveProposer
from ndvm.tasks.base import regression_score


class Recording:
    """The evolve proposer, remembering what each proposal saw."""

    def __init__(self) -> None:
        spec = tasks.get("sr-damped").search
        self.inner = EvolveProposer(spec.grammar, spec.seeds)
        self.name = "recording"
        self.seen: list[tuple[int, list[tuple[int, int, str]], frozenset[str]]] = []

    def propose(self, state, n):  # type: ignore[no-untyped-def]
        view = [(r.idx, r.batch, r.status) for r in state.records]
        self.seen.append((state.next_batch, view, state.seen))
        return self.inner.propose(state, n)


@pytest.mark.parametrize("workers", [1, 2])
def test_proposal_sees_the_batch_before_as_pending(tmp_path, workers):
    serial = Recording()
    run_search("sr-damped", serial, tmp_path / "a.db", budget=Budget(batches=4), batch_size=16,
               workers=1)  # fmt: skip
    other = Recording()
    run_search("sr-damped", other, tmp_path / "b.db", budget=Budget(batches=4), batch_size=16,
               workers=workers)  # fmt: skip
    assert serial.seen == other.seen  # the same views whatever the timing
    assert [b for b, _, _ in serial.seen] == [0, 1, 2, 3]
    for batch, view, _ in serial.seen:
        for _, b, status in view:
            if b == batch - 1:  # still calibrating when batch was proposed
                assert status == "pending" or status == "rejected"
            else:
                assert b < batch - 1 and status != "pending"
    # batch 3 saw batch 1's results, batch 2 as pending
    assert any(s == "ok" for _, b, s in serial.seen[3][1] if b == 1)


def test_regression_score_equals_numpy():
    task = tasks.get("sr-damped").for_search()
    data = task.data()
    prog = ndvm.compile("(* a (exp (* b x)) (cos (+ (* c x) d)))", inputs=("x",),
                        free_params=True)  # fmt: skip
    cal = task.calibrate(prog, starts=2, seed=3, diagnostics=False)
    got = regression_score(cal, data)
    theta = cal.theta[: len(prog.params)]
    for name, x, y in (("test", data.test_inputs, data.test_target),
                       ("validation", data.valid_inputs, data.valid_target)):  # fmt: skip
        pred = np.asarray(prog.eval(theta, **x), dtype=np.float64)
        mse = np.mean((pred - y) ** 2)
        r2 = 1 - np.sum((y - pred) ** 2) / np.sum((y - np.mean(y)) ** 2)
        assert math.isclose(got[f"{name}_mse"], mse, rel_tol=1e-12)
        assert math.isclose(got[f"{name}_r2"], r2, rel_tol=1e-12, abs_tol=1e-12)
    assert got["train_mse"] == cal.loss


def test_regression_score_of_a_non_finite_prediction():
    task = tasks.get("sr-damped").for_search()
    prog = ndvm.compile("(/ a (- x x))", inputs=("x",), free_params=True)
    cal = task.calibrate(prog, starts=1, steps=1, seed=0, diagnostics=False)
    got = regression_score(cal, task.data())
    assert got["test_r2"] == -math.inf and not math.isfinite(got["test_mse"])


def test_worker_takes_the_proposers_skeleton_hash_only_for_its_skeleton():
    """``evolve`` hands each candidate's skeleton and hash to the worker, which uses the hash
    only when the compiled program has that skeleton (a wrong pair is recomputed)."""
    from ndvm.search.candidate import Candidate, skeleton_hash
    from ndvm.search.evaluate import CalibLimits, Job, run_job
    from ndvm.search.state import SearchState

    task = tasks.get("sr-damped").for_search()
    spec = task.search
    cands = EvolveProposer(spec.grammar, spec.seeds).propose(SearchState("sr-damped", 1, ()), 40)
    assert len(cands) == 40
    for c in cands:  # the proposer's pair is the compiled program's
        skel = ndvm.compile(c.src, c.params, task.inputs, strict=False, free_params=True).skeleton
        assert (c.skeleton, c.key) == (skel, skeleton_hash(skel, c.src))
    lim = CalibLimits(starts=1)
    src = "(* a (sin (* b x)))"
    skel, h = "(* P (sin (* P x)))", skeleton_hash("(* P (sin (* P x)))", src)
    trusted = run_job(task, Job(0, Candidate(src, skeleton=skel, key="f" * 16), 1), lim, set())
    assert trusted.key == "f" * 16  # taken as given: it is not recomputed
    for wrong in ("(* P (cos (* P x)))", ""):
        res = run_job(task, Job(0, Candidate(src, skeleton=wrong, key="f" * 16), 1), lim, set())
        assert res.key == h and res.evaluation.status == "ok"
    assert Candidate.from_json({"src": src, "skeleton": skel, "key": "f" * 16}).key == ""


def test_a_script_without_a_main_guard_runs_with_two_workers(tmp_path: Path) -> None:
    """Worker processes start without running the main module again (forkserver and spawn
    would, and an unguarded script would fit again in every worker and fail there)."""
    import subprocess
    import sys

    script = tmp_path / "fit.py"
    script.write_text(
        "import numpy as np, ndvm\n"
        "x = np.linspace(1.0, 5.0, 40)\n"
        "m = ndvm.SymbolicRegressor(max_candidates=60, workers=2, random_state=0)\n"
        "m.fit(x[:, None], 3.0 * x + 2.0)\n"
        "print('R2', round(m.score(x[:, None], 3.0 * x + 2.0), 6))\n"
    )
    src = str(Path(ndvm.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": src}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=env, timeout=300, cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert "R2 1.0" in out.stdout


def test_a_worker_shortcuts_only_duplicates_of_earlier_jobs():
    """A retried job may reach a worker that ran later jobs: that worker's duplicate shortcut
    counts only jobs of lower index, as the driver's decision does (same skeleton below)."""
    from ndvm.search.candidate import Candidate
    from ndvm.search.evaluate import CalibLimits, Job
    from ndvm.search.scheduler import Worker

    w = Worker(tasks.get("sr-damped"), CalibLimits(starts=2))
    later, retried, next_ = (
        Job(i, Candidate(f"(* {p} x)"), i) for i, p in ((5, "a"), (2, "b"), (7, "c"))
    )
    first = w.run([later, retried])
    assert [r.evaluation.status for r in first] == ["ok", "ok"]  # 5 is later than 2
    assert first[0].skeleton == first[1].skeleton
    (dup,) = w.run([next_])
    assert dup.evaluation.status == "rejected" and "duplicate" in dup.evaluation.reason


def test_chunks_of_a_small_streamed_batch_reach_every_worker() -> None:
    """A batch with another behind it is cut into chunks of at least ``least`` jobs, but never
    into fewer chunks than workers: a 16-job batch with ``least=16`` once went to one worker
    while the other sat idle."""
    from ndvm.search.candidate import Candidate
    from ndvm.search.evaluate import Job
    from ndvm.search.scheduler import chunks

    def jobs(n: int) -> list[Job]:
        return [Job(i, Candidate("(* a x)"), i) for i in range(n)]

    small = chunks(jobs(16), 2, least=16)
    assert [len(c) for c in small] == [8, 8]
    assert [j.idx for c in small for j in c] == list(range(16))
    assert [len(c) for c in chunks(jobs(64), 2, least=16)] == [16, 16, 16, 16]
    assert [len(c) for c in chunks(jobs(5), 4, least=16)] == [2, 2, 1]
    assert [len(c) for c in chunks(jobs(3), 1)] == [1, 1, 1]
