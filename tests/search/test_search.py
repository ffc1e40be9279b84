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
from ndvm.search import Budget, Candidate, frontier, run_search
from ndvm.search.calib import CalibLimits, calibrate_candidate
from ndvm.search.evolve import EvolveProposer
from ndvm.search.funnel import check
from ndvm.search.problems import get
from ndvm.search.scheduler import Job, ProcessExecutor
from ndvm.search.store import Store

ROOT = Path(__file__).resolve().parents[2]


def _key(records):
    out = []
    for r in records:
        ev = r.evaluation
        out.append(
            (
                r.idx,
                r.candidate.src,
                r.seed,
                r.status,
                None if ev is None else ev.reason,
                None if ev is None else repr(ev.heldout_r2),
                None if ev is None else ev.params,
            )
        )
    return out


def _evolve(task="sr-damped"):
    p = get(task)
    return EvolveProposer(p.grammar, p.seeds)


def test_calibration_matches_ndvm_calibrate():
    from ndvm import tasks

    src = "(* a (exp (* b x)) (cos (+ (* c x) d)))"
    for seed in (0, 2):
        ev = calibrate_candidate(Candidate(src), get("sr-damped"), seed)
        ref = tasks.get("sr-damped").evaluate(src, seed=seed)
        assert ev.status == "ok" and ev.success == ref.success
        assert ev.heldout_r2 == pytest.approx(ref.metrics["test_r2"], rel=1e-9, abs=1e-12)


def test_funnel_stages():
    p = get("sr-damped")
    cases = {
        "(+ a": "parse",
        "(+ a zz)": None,  # inferred: zz is a parameter too
        "(* 2 x)": "params",
        "(sqrt (- a 5))": "finite",
        "(car a)": "finite",
    }
    for src, stage in cases.items():
        v = check(Candidate(src), p, 0)
        assert (v.stage or None) == stage, (src, v)
    v = check(Candidate("(+ a q)", ("a",)), p, 0)
    assert v.stage == "resolve" and "unbound" in v.reason
    v = check(Candidate("(* a x)", ("a", "b")), p, 0)
    assert v.stage == "params" and "unused" in v.reason
    ok = check(Candidate("(* a x)"), p, 0)
    assert ok.ok and ok.skeleton == "(* P x)"
    from ndvm.search.candidate import skeleton_hash

    dup = check(Candidate("(* b x)"), p, 0, {skeleton_hash(ok.skeleton)})
    assert dup.stage == "duplicate"


def test_pathological_candidate_is_limited():
    p = get("sr-damped")
    slow = "(* a (loop ((s 0) (k 0)) (if (= k 100000000) s (recur (+ s x) (+ k 1)))))"
    t = time.perf_counter()
    ev = calibrate_candidate(Candidate(slow), p, 0, CalibLimits(max_steps=50_000, seconds=2.0))
    assert ev.status in ("timeout", "failed") and time.perf_counter() - t < 5
    ev = calibrate_candidate(Candidate(slow), p, 0, CalibLimits(max_steps=10**9, seconds=1.0))
    assert ev.status == "timeout" and time.perf_counter() - t < 10


def test_process_executor_runs_every_job():
    out = {}
    ex = ProcessExecutor("sr-damped", 2, CalibLimits(seconds=10.0), grace=10.0)
    jobs = [Job(i, Candidate(s), i) for i, s in enumerate(["(* a x)", "(+ a x)", "(* a (sin x))"])]
    try:
        ex.run(jobs, lambda i, ev: out.__setitem__(i, ev), lambda: False)
    finally:
        ex.close()
    assert sorted(out) == [0, 1, 2] and all(e.status == "ok" for e in out.values())


def test_one_and_two_workers_identical(tmp_path):
    runs = []
    for w in (1, 2):
        st = run_search(
            "sr-damped",
            _evolve(),
            tmp_path / f"w{w}.db",
            budget=Budget(batches=3),
            workers=w,
            seed=5,
            batch_size=12,
        )
        runs.append(_key(st.records))
    assert runs[0] == runs[1] and len(runs[0]) == 36


def test_sr_damped_evolve_finds_success(tmp_path):
    st = run_search(
        "sr-damped",
        _evolve(),
        tmp_path / "s.db",
        budget=Budget(seconds=60, candidates=1200, until_success=True),
        seed=0,
        batch_size=16,
    )
    s = frontier.summarize(list(st.records))
    assert s.successes >= 1 and s.best_r2 > 0.9, s
    assert s.time_to_first_success is not None


def test_kill_and_resume(tmp_path):
    db = tmp_path / "k.db"
    cmd = [
        sys.executable,
        "-m",
        "ndvm",
        "search",
        "--task",
        "sr-damped",
        "--db",
        str(db),
        "--budget",
        "600",
        "--max-candidates",
        "160",
        "--seed",
        "11",
        "--quiet",
    ]
    env = dict(os.environ)  # the installed package (the artifact under test)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    n_done = 0
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.3)
        if db.exists():
            try:
                s = Store(db)
                info = s.latest_run()
                n_done = (
                    0
                    if info is None
                    else sum(r.status in ("ok", "failed") for r in s.records(info["run"]))
                )
                s.close()
            except Exception:  # noqa: BLE001 - the db may be mid-creation
                continue
            if n_done >= 40:
                break
    assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = Store(db)
    partial = before.records(before.latest_run()["run"])
    before.close()
    assert 40 <= len([r for r in partial if r.status != "pending"]) < 160
    out = subprocess.run(cmd + ["--resume"], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    s = Store(db)
    resumed = s.records(s.latest_run()["run"])
    assert len(s.db.execute("SELECT run FROM runs").fetchall()) == 1
    s.close()
    assert [r.idx for r in resumed] == list(range(len(resumed)))
    assert not any(r.status == "pending" for r in resumed)
    # every record finished before the kill is unchanged
    done = {r.idx: r for r in partial if r.status != "pending"}
    assert _key([r for r in resumed if r.idx in done]) == _key(list(done.values()))
    # and the whole run equals an uninterrupted one
    ref = run_search(
        "sr-damped", _evolve(), tmp_path / "ref.db", budget=Budget(candidates=160), seed=11
    )
    assert _key(resumed) == _key(ref.records)


@pytest.mark.plot
@pytest.mark.sympy
def test_report_and_exports(tmp_path):
    from ndvm.cli import main

    db = tmp_path / "r.db"
    assert (
        main(
            [
                "search",
                "--task",
                "sr-damped",
                "--proposer",
                f"replay:{ROOT / 'examples/candidates/sr-damped.jsonl'}",
                "--db",
                str(db),
                "--quiet",
            ]
        )
        == 0
    )
    assert main(["report", "--db", str(db), "--out", str(tmp_path / "out")]) == 0
    for name in ("frontier.png", "pareto.png", "best_fit.png", "summary.json", "best.jsonl"):
        assert (tmp_path / "out" / name).stat().st_size > 0
    tex = frontier.to_latex("(* a (exp (* b x)) (cos (+ (* c x) d)))")
    assert "e^{b x}" in tex and "\\cos" in tex
    assert frontier.to_sympy("(loop ((s a) (k 0)) (if (= k 3) s (recur s (+ k 1))))") is None


def test_pareto_front_is_monotone(tmp_path):
    st = run_search("sr-damped", _evolve(), tmp_path / "p.db", budget=Budget(batches=2), seed=2)
    front = frontier.pareto_front(list(st.ok))
    cx = [r.complexity for r in front]
    mse = [r.evaluation.heldout_mse for r in front]
    assert cx == sorted(cx) and all(a > b for a, b in zip(mse, mse[1:]))


def test_battery_problem_lanes():
    from ndvm.tasks import battery_knee

    p = get("battery-knee")
    assert p.y_train.shape == (12, 70) and p.lanes == 12
    ev = calibrate_candidate(Candidate(battery_knee.SMOOTH), p, 0)
    assert ev.status == "ok" and math.isfinite(ev.heldout_mse) and len(ev.extra["theta"]) == 12


@pytest.mark.data
def test_enso_lim_611_params_gradient_matches_fd():
    from ndvm.tasks import enso_lim

    prog = ndvm.compile(enso_lim.program_source(), inputs=("Y",))
    assert len(prog.params) == 611
    data = enso_lim.build(months=24)
    rng = np.random.default_rng(0)
    theta = prog.init_theta() + 0.05 * rng.standard_normal(611)
    val, grad = prog.value_and_grad(theta, **data.train_inputs)
    assert np.isfinite(float(val)) and grad.shape == (611,)
    idx = rng.choice(611, size=6, replace=False)
    h = 1e-5
    for i in idx:
        e = np.zeros(611)
        e[i] = h
        fd = (
            float(prog.eval(theta + e, **data.train_inputs))
            - float(prog.eval(theta - e, **data.train_inputs))
        ) / (2 * h)
        assert grad[i] == pytest.approx(fd, rel=1e-5, abs=1e-6), i
    full = enso_lim.build()
    assert full.meta["n_train"] == 420 and full.meta["Y"].shape == (713, 20)


@pytest.mark.ray
def test_ray_executor(tmp_path):
    runs = []
    for kind in ("serial", "ray"):
        st = run_search(
            "sr-damped",
            _evolve(),
            tmp_path / f"{kind}.db",
            budget=Budget(batches=2),
            workers=2,
            seed=4,
            executor=kind,
        )
        runs.append(_key(st.records))
    assert runs[0] == runs[1]
