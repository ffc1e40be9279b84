"""The co-search loop: propose a batch, validate it, persist it, calibrate it, repeat.

Every batch is proposed from the state after the previous batch was fully evaluated, and
every candidate's calibration seed is derived from (search seed, index): given the same
proposer, seed and budget in candidates or batches, the records are identical for any
number of workers and across a kill-and-resume.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ndvm.search import funnel
from ndvm.search.calib import CalibLimits
from ndvm.search.candidate import Evaluation, Record, skeleton_hash
from ndvm.search.problems import get as get_problem
from ndvm.search.scheduler import Job, make_executor
from ndvm.search.state import Budget, Proposer, SearchState, derive_seed
from ndvm.search.store import Store

DEFAULT_LIMITS = CalibLimits()


@dataclass(frozen=True)
class Progress:
    """What a progress display shows after each result."""

    elapsed: float
    proposed: int
    evaluated: int
    rejected: int
    successes: int
    best_r2: float
    rate: float


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).parent,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def run_search(
    task: str,
    proposer: Proposer,
    db: str | Path,
    *,
    budget: Budget,
    workers: int = 1,
    seed: int = 0,
    batch_size: int = 16,
    resume: bool = False,
    limits: CalibLimits = DEFAULT_LIMITS,
    executor: str = "auto",
    progress: Callable[[Progress], None] | None = None,
) -> SearchState:
    """Run (or resume) a search; returns the final state. Results are in ``db``."""
    problem = get_problem(task)
    store = Store(db)
    info = store.latest_run() if resume else None
    if info is not None:
        if info["task"] != task:
            raise ValueError(f"{db}: latest run is task {info['task']!r}, not {task!r}")
        run, seed, base = info["run"], info["seed"], float(info["elapsed"])
        records = store.records(run)
    else:
        config = {"batch_size": batch_size, "limits": limits.__dict__, "workers": workers}
        run = store.new_run(task, proposer.name, seed, config, git_commit())
        base, records = 0.0, []
    by_idx: dict[int, Record] = {r.idx: r for r in records}
    t0 = time.perf_counter()

    def elapsed() -> float:
        return base + time.perf_counter() - t0

    def stop() -> bool:
        return budget.seconds is not None and elapsed() >= budget.seconds

    stats = {"done": 0}

    def on_result(idx: int, ev: Evaluation) -> None:
        now = elapsed()
        if store.finish(run, idx, ev, now, now):
            r = by_idx[idx]
            by_idx[idx] = Record(
                r.idx, r.batch, r.candidate, r.skeleton, r.n_params, r.complexity, r.seed, ev, now
            )
            stats["done"] += 1
            if progress is not None:
                progress(_progress(by_idx, now, stats["done"], time.perf_counter() - t0))

    sched = make_executor(task, workers, limits, executor)
    try:
        pending = [Job(r.idx, r.candidate, r.seed) for r in records if r.status == "pending"]
        if pending:
            sched.run(pending, on_result, stop)
        while True:
            state = SearchState.of(task, seed, [by_idx[i] for i in sorted(by_idx)])
            if any(r.status == "pending" for r in state.records):
                break  # budget ran out mid-batch; resume finishes it
            if budget.exhausted(state, elapsed()):
                break
            cands = proposer.propose(state, batch_size)
            if not cands:
                break
            batch, start = state.next_batch, len(state.records)
            seen = set(state.seen)
            new: list[Record] = []
            for i, cand in enumerate(cands):
                idx = start + i
                cseed = derive_seed(seed, idx)
                if cand.error:
                    v = funnel.Verdict(False, "proposal", cand.error)
                else:
                    v = funnel.check(cand, problem, cseed, seen, limits.backend)
                ev = None if v.ok else Evaluation("rejected", reason=v.message)
                if v.ok:
                    seen.add(skeleton_hash(v.skeleton))
                rec = Record(
                    idx, batch, cand, v.skeleton, v.n_params, v.complexity, cseed, ev, elapsed()
                )
                new.append(rec)
                by_idx[idx] = rec
            store.add(run, new)
            jobs = [Job(r.idx, r.candidate, r.seed) for r in new if r.status == "pending"]
            sched.run(jobs, on_result, stop)
            store.set_elapsed(run, elapsed())
    finally:
        sched.close()
        store.set_elapsed(run, elapsed())
        store.close()
    return SearchState.of(task, seed, [by_idx[i] for i in sorted(by_idx)])


def _progress(by_idx: dict[int, Record], now: float, done: int, active: float) -> Progress:
    recs = by_idx.values()
    ev = [r for r in recs if r.status in ("ok", "failed", "timeout")]
    ok = [r.evaluation.heldout_r2 for r in ev if r.evaluation and r.status == "ok"]
    finite = [x for x in ok if x == x]
    return Progress(
        elapsed=now,
        proposed=len(by_idx),
        evaluated=len(ev),
        rejected=sum(1 for r in recs if r.status == "rejected"),
        successes=sum(1 for r in ev if r.evaluation and r.evaluation.success),
        best_r2=max(finite) if finite else float("nan"),
        rate=done / active if active > 0 else 0.0,
    )
