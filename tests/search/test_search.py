"""Co-search: one candidate end to end, the funnel, executors, determinism, kill-and-resume."""

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from tests.helpers.records import record_key as _key

import ndvm
from ndvm import tasks
from ndvm.calibrate.starts import place_roles, program_roles
from ndvm.search import Budget, Candidate, frontier, run_search
from ndvm.search.evaluate import CalibLimits, Job, run_job
from ndvm.search.evolve import EvolveProposer
from ndvm.search.replay import ReplayProposer
from ndvm.search.scheduler import ProcessExecutor
from ndvm.search.store import Store

ROOT = Path(__file__).resolve().parents[2]
TRUE_SR = "(* a (exp (* b x)) (cos (+ (* c x) d)))"


def _evolve(task="sr-damped"):
    spec = tasks.get(task).search
    return EvolveProposer(spec.grammar, spec.seeds)


def _run(src, seed=0, task="sr-damped", **kw):
    return run_job(tasks.get(task), Job(0, Candidate(src), seed), CalibLimits(**kw), set())


def test_one_start_is_the_tasks_protocol():
    """--starts 1: the docs/tasks.md single-start protocol, i.e. Task.evaluate with that seed."""
    for seed in (0, 2):
        ev = _run(TRUE_SR, seed, starts=1).evaluation
        ref = tasks.get("sr-damped").evaluate(TRUE_SR, seed=seed)
        assert ev.status == "ok" and ev.success == ref.success
        assert ev.heldout_r2 == pytest.approx(ref.metrics["test_r2"], rel=1e-9, abs=1e-12)
        assert len(ev.extra["lane_losses"]) == 1 and ev.steps == 50


def test_starts_as_lanes_equal_single_start_runs_lane_by_lane():
    """K starts in one walk: lane k is exactly the single-start fit from lane k's init (the
    worker's: N(0, 0.3²), then the frequency c from the periodogram in the odd starts)."""
    task = tasks.get("sr-damped")
    K = 6
    res = _run(TRUE_SR, 9, starts=K).evaluation
    prog = ndvm.compile(TRUE_SR, inputs=("x",))
    rng = np.random.default_rng(9)
    init = 0.3 * rng.standard_normal((K, 4))
    split = task.data()
    assert program_roles(prog) == ((2, "x", "freq"),)
    place_roles(init, K, program_roles(prog), split.train_inputs, rng, split.train_target)
    for k in range(K):
        one = task.calibrate(prog, starts=1, init=init[k : k + 1], seed=9)
        assert res.extra["lane_losses"][k] == pytest.approx(one.loss, rel=1e-12)
    best = int(np.nanargmin(res.extra["lane_losses"]))
    assert res.train_loss == pytest.approx(min(res.extra["lane_losses"]), rel=1e-12)
    one = task.calibrate(prog, starts=1, init=init[best : best + 1], seed=9)
    assert res.params == pytest.approx(one.params, rel=1e-10)


def test_best_lane_is_chosen_by_training_loss_not_heldout():
    ev = _run(TRUE_SR, 4, starts=8).evaluation
    assert ev.train_loss == min(x for x in ev.extra["lane_losses"] if math.isfinite(x))


def test_funnel_stages():
    cases = {
        "(+ a": "parse",
        "(+ a zz)": None,  # inferred: zz is a parameter too
        "(* 2 x)": "params",
        "(sqrt (- a 5))": "finite",
        "(car a)": "finite",
    }
    for src, stage in cases.items():
        ev = _run(src).evaluation
        got = ev.reason.split(":")[0] if ev.status == "rejected" else None
        assert got == stage, (src, ev)
    ev = run_job(tasks.get("sr-damped"), Job(0, Candidate("(+ a q)", ("a",)), 0),
                 CalibLimits(), set()).evaluation  # fmt: skip
    assert ev.reason.startswith("resolve:") and "unbound" in ev.reason
    ev = run_job(tasks.get("sr-damped"), Job(0, Candidate("(* a x)", ("a", "b")), 0),
                 CalibLimits(), set()).evaluation  # fmt: skip
    assert ev.reason.startswith("params:") and "unused" in ev.reason
    seen: set = set()
    ok = run_job(tasks.get("sr-damped"), Job(0, Candidate("(* a x)"), 0), CalibLimits(), seen)
    assert ok.evaluation.status == "ok" and ok.skeleton == "(* P x)"
    dup = run_job(tasks.get("sr-damped"), Job(1, Candidate("(* b x)"), 0), CalibLimits(), seen)
    assert dup.evaluation.reason.startswith("duplicate:")
    other = run_job(tasks.get("sr-damped"), Job(2, Candidate("(* b x)"), 0, scope=1),
                    CalibLimits(), seen)  # fmt: skip
    assert other.evaluation.status == "ok"  # another replay cycle: calibrated again


def test_pathological_candidate_is_limited():
    slow = "(* a (loop ((s 0) (k 0)) (if (= k 100000000) s (recur (+ s x) (+ k 1)))))"
    t = time.perf_counter()
    ev = _run(slow, max_steps=50_000, seconds=30.0).evaluation  # only the step limit can fire
    assert ev.status == "timeout" and "step limit" in ev.reason and time.perf_counter() - t < 5
    # a loop whose payload stays small (slow's grows 44 numbers a turn: on a fast machine it
    # reaches the 2 GiB payload cap, a HeapLimitExceeded, before the deadline); each turn still
    # allocates a frame, and the 20M-cell heap limit takes over a second here (3 s on a loaded
    # machine): a deadline of 0.1 s is what fires first on a machine ten times faster
    slower = "(* a (loop ((k 0)) (if (= k 1000000000000) k (recur (+ k 1)))))"
    t = time.perf_counter()
    ev = _run(slower, max_steps=10**13, seconds=0.1).evaluation
    assert ev.status == "timeout" and "deadline" in ev.reason, ev.reason
    assert time.perf_counter() - t < 5


def test_a_run_over_the_payload_cap_is_a_timeout():
    """The 2 GiB payload cap raised for the whole run at the ``finite`` stage: a limit (the
    candidate too big), reported as a timeout, not a rejected program."""
    big = "(+ (* a x) (vsum (outer (ones 65536) (ones 65536))))"
    ev = _run(big, task="iterated-map").evaluation
    assert ev.status == "timeout" and "HeapLimitExceeded" in ev.reason, ev.reason


def test_time_limit_of_a_candidate_is_a_timeout():
    # each walk is fast; 200,000 steps x 16 starts cannot fit in 0.05 s (a second here)
    task = tasks.get("sr-damped").with_calib(steps=200_000)
    ev = run_job(task, Job(0, Candidate(TRUE_SR), 1), CalibLimits(seconds=0.05), set())
    assert ev.evaluation.status == "timeout" and "time limit" in ev.evaluation.reason


def test_a_candidate_whose_setup_spent_its_seconds_is_a_timeout():
    """The fit gets what is left of the candidate's seconds: with none left (1 us, less than
    any setup takes) it stops before its first step, a time limit; never an unlimited fit (a
    ``time_limit`` of 0 or less is none), nor an internal error on its empty history."""
    for task, src in (("sr-damped", TRUE_SR), ("iterated-map", "(* a x)")):
        ev = _run(src, task=task, seconds=1e-6).evaluation
        assert ev.status == "timeout" and "time limit" in ev.reason and ev.steps == 0, ev


def test_process_executor_runs_every_job():
    out = {}
    task = tasks.get("sr-damped")
    ex = ProcessExecutor(task, 2, CalibLimits(seconds=10.0), grace=10.0)
    srcs = ["(* a x)", "(+ a x)", "(* a (sin x))", "(+ a"]
    jobs = [Job(i, Candidate(s), i) for i, s in enumerate(srcs)]
    try:
        ex.run(jobs, lambda rs: out.update({r.idx: r for r in rs}), lambda: False)
    finally:
        ex.close()
    assert sorted(out) == [0, 1, 2, 3]
    assert [out[i].evaluation.status for i in range(4)] == ["ok", "ok", "ok", "rejected"]


@pytest.mark.parametrize("starts", [1, 4])
def test_one_and_two_workers_identical(tmp_path, starts):
    runs = []
    for w in (1, 2):
        st = run_search(
            "sr-damped",
            _evolve(),
            tmp_path / f"w{w}.db",
            budget=Budget(batches=3),
            workers=w,
            seed=5,
            batch_size=24,
            limits=CalibLimits(starts=starts),
        )
        runs.append(_key(st.records))
    assert runs[0] == runs[1] and len(runs[0]) == 72


def test_replay_duplicates_decided_in_index_order_for_any_workers(tmp_path):
    """Same skeleton three times in one chunk-spread batch: the first is calibrated."""
    corpus = tmp_path / "c.jsonl"
    lines = ['{"src": "(* a (sin x))"}', '{"src": "(* b (sin x))"}', '{"src": "(+ a x)"}',
             '{"src": "(* c (sin x))"}'] * 3  # fmt: skip
    corpus.write_text("\n".join(lines) + "\n")
    runs = []
    for w in (1, 2):
        st = run_search("sr-damped", ReplayProposer(corpus), tmp_path / f"d{w}.db",
                        budget=Budget(), workers=w, batch_size=12)  # fmt: skip
        runs.append(_key(st.records))
    assert runs[0] == runs[1]
    status = [r[3] for r in runs[0]]
    assert status[:3] == ["ok", "rejected", "ok"] and status.count("ok") == 2


def test_replay_cycles_recalibrate_with_fresh_seeds(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"src": "(* a (sin x))"}\n{"src": "(* b (sin x))"}\n')
    st = run_search("sr-damped", ReplayProposer(corpus, cycles=3), tmp_path / "c.db",
                    budget=Budget(), limits=CalibLimits(starts=1))  # fmt: skip
    status = [r.status for r in st.records]
    assert status == ["ok", "rejected"] * 3
    seeds = [r.seed for r in st.records if r.status == "ok"]
    assert len(set(seeds)) == 3
    losses = [r.evaluation.train_loss for r in st.records if r.status == "ok"]
    assert len(set(losses)) == 3  # fresh starts, different fits
    again = run_search("sr-damped", ReplayProposer(corpus, cycles=3), tmp_path / "c2.db",
                       budget=Budget(), limits=CalibLimits(starts=1))  # fmt: skip
    assert _key(again.records) == _key(st.records)
    endless = run_search("sr-damped", ReplayProposer(corpus, cycles=0), tmp_path / "c3.db",
                         budget=Budget(candidates=9), batch_size=3)  # fmt: skip
    assert len(endless.records) == 9


def test_until_ends_at_the_first_record_that_reaches_it_for_any_workers(tmp_path):
    """``Budget.until`` ends the search at the first decided record (index order) that
    reaches it: nothing after it is decided, with one worker or a pool (whose calibrations
    still in flight are dropped), so both runs hold the same records."""
    corpus = tmp_path / "c.jsonl"
    lines = ['{"src": "(+ a x)"}', '{"src": "(* a (sin x))"}', '{"src": "(* a (cos x))"}',
             '{"src": "(* a (exp (* b x)))"}', '{"src": "(- a x)"}'] * 4  # fmt: skip
    corpus.write_text("\n".join(lines) + "\n")

    def good(r):  # the third distinct program
        return r.status == "ok" and "cos" in r.candidate.src

    runs = []
    for w in (1, 2):
        st = run_search("sr-damped", ReplayProposer(corpus), tmp_path / f"u{w}.db",
                        budget=Budget(until=good), workers=w, batch_size=5)  # fmt: skip
        decided = [r for r in st.records if r.status != "pending"]
        assert [r.idx for r in decided] == [0, 1, 2] and good(decided[-1])
        runs.append(_key(decided))
    assert runs[0] == runs[1]


def test_sr_damped_evolve_finds_success(tmp_path):
    st = run_search(
        "sr-damped",
        _evolve(),
        tmp_path / "s.db",
        budget=Budget(candidates=1200, until_success=True),  # no time: the same on any machine
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
        "1600",
        "--starts",
        "1",
        "--seed",
        "11",
        "--quiet",
    ]
    env = dict(os.environ)  # the installed package (the artifact under test)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    n_done = 0
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
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
            if n_done >= 100:
                break
    assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = Store(db)
    partial = before.records(before.latest_run()["run"])
    before.close()
    assert 100 <= len([r for r in partial if r.status != "pending"]) < 1600
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
        "sr-damped",
        _evolve(),
        tmp_path / "ref.db",
        budget=Budget(candidates=1600),
        seed=11,
        limits=CalibLimits(starts=1),
    )
    assert _key(resumed) == _key(ref.records)


@pytest.mark.plot
@pytest.mark.sympy
def test_report_and_exports(tmp_path, capsys):
    import json

    from ndvm.cli import main

    db = tmp_path / "r.db"
    corpus = f"replay:{ROOT / 'examples/candidates/sr-damped.jsonl'}"
    assert main(["search", "--task", "sr-damped", "--proposer", corpus, "--db", str(db),
                 "--quiet"]) == 0  # fmt: skip
    import warnings

    with warnings.catch_warnings():  # stored candidates' free names are their parameters
        warnings.simplefilter("error", ndvm.FreeNameWarning)
        assert main(["report", "--db", str(db), "--out", str(tmp_path / "out")]) == 0
    for name in ("frontier.png", "pareto.png", "best_fit.png", "summary.json",
                 "hall_of_fame.jsonl"):  # fmt: skip
        assert (tmp_path / "out" / name).stat().st_size > 0
    capsys.readouterr()
    assert main(["report", "--db", str(db), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["best"]["src"] and rep["best"]["test_r2"] is not None
    assert rep["rejections"]["parse"] == 1 and rep["hall_of_fame"]
    assert rep["best"] == min(rep["hall_of_fame"], key=lambda r: r["validation_loss"])
    assert rep["lowest_loss"] == rep["best"]  # ``best`` keeps its meaning: the lowest loss
    marked = [r for r in rep["hall_of_fame"] if r["selected"]]
    assert len(marked) == 1 and rep["selected"] == marked[0]
    recs = Store(db).records(1)
    assert rep["selected"]["idx"] == frontier.select(recs).idx
    assert main(["report", "--db", str(db), "--no-export"]) == 0
    starred = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(" *")]
    assert len(starred) == 1 and rep["selected"]["src"] in starred[0]
    tex = frontier.to_latex("(* a (exp (* b x)) (cos (+ (* c x) d)))")
    assert "e^{b x}" in tex and "\\cos" in tex
    loop = frontier.equation("(loop ((s a) (k 0)) (if (= k b) s (recur s (+ k 1))))", {}, ("x",))
    assert "export_error" in loop


def test_pareto_front_is_monotone(tmp_path):
    st = run_search("sr-damped", _evolve(), tmp_path / "p.db", budget=Budget(batches=2), seed=2)
    front = frontier.pareto_front(list(st.ok))
    cx = [r.complexity + r.n_params for r in front]  # frontier.cost
    mse = [r.evaluation.validation_mse for r in front]
    assert cx == sorted(cx) and all(a > b for a, b in zip(mse, mse[1:]))


def test_battery_cells_are_series_with_their_own_lanes():
    from ndvm.tasks import battery_knee

    t = tasks.get("battery-knee")
    assert t.data().train_target.shape == (12, 70 - battery_knee.VALID_CYCLES) and t.series == 12
    for starts in (1, 3):
        ev = _run(battery_knee.SMOOTH, 0, task="battery-knee", starts=starts).evaluation
        assert ev.status == "ok" and math.isfinite(ev.heldout_mse)
        assert len(ev.extra["theta"]) == 12 and len(ev.extra["lane_losses"]) == 12 * starts
    knee = _run(battery_knee.KNEE, 0, task="battery-knee", starts=1).evaluation
    smooth = _run(battery_knee.SMOOTH, 0, task="battery-knee", starts=1).evaluation
    assert knee.heldout_mse < smooth.heldout_mse


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
def test_ray_executor_records_equal_serial(tmp_path):
    """ray.init(num_cpus=2) here; on a cluster set RAY_ADDRESS (docs/search.md)."""
    import ray

    runs = []
    try:
        for kind in ("serial", "ray"):
            st = run_search(
                "sr-damped",
                _evolve(),
                tmp_path / f"{kind}.db",
                budget=Budget(batches=2),
                workers=2,
                seed=4,
                batch_size=24,
                executor=kind,
            )
            runs.append(_key(st.records))
    finally:
        ray.shutdown()
    assert runs[0] == runs[1] and len(runs[0]) == 48


def _crash_jobs():
    from tests.search import crashy

    srcs = ["(* a x)", crashy.CRASH_ONCE, "(+ a x)", crashy.CRASH_ALWAYS, "(* a (exp x))"]
    return [Job(i, Candidate(s), 100 + i) for i, s in enumerate(srcs)]


def _check_crash_recovery(out):
    assert sorted(out) == [0, 1, 2, 3, 4]
    status = [out[i].evaluation.status for i in range(5)]
    assert status == ["ok", "ok", "ok", "failed", "ok"], [out[i].evaluation for i in range(5)]
    assert "worker process died" in out[3].evaluation.reason
    # the survivors equal an in-process run of the same jobs
    plain = tasks.get("sr-damped")  # crashy scores as sr-damped where it does not crash
    for i in (0, 1, 2, 4):
        ref = run_job(plain, _crash_jobs()[i], CalibLimits(), set()).evaluation
        assert out[i].evaluation.params == ref.params and out[i].skeleton


def test_process_pool_survives_a_worker_killed_mid_job(tmp_path):
    from tests.search import crashy

    out = {}
    ex = ProcessExecutor(crashy.task(tmp_path / "marker"), 2, CalibLimits(), grace=30.0)
    try:
        ex.run(_crash_jobs(), lambda rs: out.update({r.idx: r for r in rs}), lambda: False)
    finally:
        ex.close()
    _check_crash_recovery(out)


@pytest.mark.ray
def test_ray_actor_killed_mid_job_is_recovered(tmp_path):
    import ray
    from tests.search import crashy

    from ndvm.search.ray_executor import RayExecutor

    out = {}
    ex = RayExecutor(crashy.task(tmp_path / "marker"), 2, CalibLimits(), grace=60.0)
    try:
        assert len(set(ex.pids())) == 2  # two worker processes
        ex.run(_crash_jobs(), lambda rs: out.update({r.idx: r for r in rs}), lambda: False)
    finally:
        ex.close()
        ray.shutdown()
    _check_crash_recovery(out)


def test_dmci_dialect_in_search_clamps_sqrt_and_log():
    """The reference system's corpora assume its clamped sqrt/log (--dialect dmci)."""
    src = "(* a (sqrt (- x 3)))"  # negative under the root for x < 3
    plain = _run(src, 0, starts=1).evaluation
    dmci = _run(src, 0, starts=1, dialect="dmci").evaluation
    assert plain.status == "rejected" and plain.reason.startswith("finite:")
    assert dmci.status == "ok" and math.isfinite(dmci.train_loss)


@pytest.mark.parametrize("every", [1, 1000])
def test_commit_grouping_does_not_change_records(tmp_path, monkeypatch, every):
    """Results committed one per transaction, or held until a batch completes (the driver's
    grouping), give the same records and database rows as the default grouping."""
    import ndvm.search.driver as driver

    def go(name):
        st = run_search("sr-damped", _evolve(), tmp_path / name, budget=Budget(batches=3),
                        workers=2, seed=7, batch_size=24)  # fmt: skip
        return _key(st.records), _key(Store(tmp_path / name).records(1))

    default = go("default.db")
    monkeypatch.setattr(driver, "COMMIT_EVERY", every)
    monkeypatch.setattr(driver, "COMMIT_SECONDS", 0.0 if every == 1 else 1e9)
    grouped = go(f"g{every}.db")
    assert grouped == default and len(default[0]) == 72 and default[0] == default[1]
