"""The search driver's own CPU per candidate, without workers: results recorded once, replayed.

    PYTHONPATH=src python benchmarks/driver_cpu.py [--task sr-damped] [--starts 1]
        [--candidates 6400] [--rounds 3] [--out bench-out]

A 2-worker ``run_search`` of the replay corpus of ``bench_search.py`` (``cycles=0``) whose pool
runs no worker: each chunk's results were computed once by a real worker (``--out``/
``driver-<task>-<starts>-<n>.pkl``, made on the first run) and are handed back as the process
pool does (the jobs packed and pickled as sent, the results unpickled and unpacked as
received), so everything the driver does per candidate runs — proposal, the database, the
messages' Python side, decisions, commits — and nothing else shares its cores. The CPU per
candidate is that of a search of ``--candidates`` minus one of a quarter of them, divided by
the difference (start-up cancels); the least of ``--rounds``. Under ``valgrind
--tool=callgrind`` (``--once K``: one search of K candidates after the results are recorded)
the instruction counts of two K give the same difference without the machine's noise.
``profile_search.py``'s driver line is the same quantity beside two live workers (their load
slows the driver's code too).
"""

from __future__ import annotations

import argparse
import pickle
import resource
from pathlib import Path
from typing import Any

from bench_search import corpus

from ndvm.search import Budget, make_proposer, run_search
from ndvm.search import driver as drv
from ndvm.search import scheduler as sch
from ndvm.search.evaluate import CalibLimits


def _dumps(rows: list) -> bytes:
    return pickle.dumps(rows, pickle.HIGHEST_PROTOCOL)


class Replayed(sch.Pool):
    """A pool whose results come from ``memo`` (chunk's job indices -> pickled result rows);
    a chunk it has not seen is run by a worker in this process and recorded."""

    def __init__(self, task: Any, workers: int, limits: CalibLimits, memo: dict) -> None:
        self.workers, self.limits, self.grace = workers, limits, 5.0
        self.worker, self.memo, self.out, self.n = sch.Worker(task, limits), memo, {}, 0

    def submit(self, chunk: list) -> int:
        sent = _dumps(sch.pack_jobs(chunk))  # what the driver sends
        key = tuple(j.idx for j in chunk)
        if key not in self.memo:
            jobs = sch.unpack_jobs(pickle.loads(sent))
            self.memo[key] = _dumps(sch.pack_results(self.worker.run(jobs)))
        self.n += 1
        self.out[self.n] = self.memo[key]
        return self.n

    def wait(self, handles: list, timeout: float) -> list:
        return list(handles)

    def result(self, handle: Any) -> list:
        return sch.unpack_results(pickle.loads(self.out.pop(handle)))

    def close(self) -> None:
        pass


def search(task: str, path: Path, starts: int, n: int, memo: dict, out: Path) -> None:
    db = out / f"driver-{task}.db"
    for p in out.glob(f"{db.name}*"):
        p.unlink()
    limits = CalibLimits(starts=starts)
    make = drv.make_executor
    drv.make_executor = lambda t, w, lim, kind="auto": Replayed(t, w, lim, memo)
    try:
        run_search(task, make_proposer(f"replay:{path}", task, cycles=0), db,
                   budget=Budget(candidates=n), workers=2, limits=limits)  # fmt: skip
    finally:
        drv.make_executor = make


def cpu(fn: Any) -> float:
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    fn()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    return r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--task", default="sr-damped")
    ap.add_argument("--starts", type=int, default=1)
    ap.add_argument("--candidates", type=int, default=6400)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--once", type=int, default=0, help="one search of this many (callgrind)")
    ap.add_argument("--out", default="bench-out")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{args.task}.jsonl"
    if not path.exists():
        corpus(args.task, 400, out)
    n, small = args.candidates, args.candidates // 4
    saved = out / f"driver-{args.task}-{args.starts}-{n}.pkl"
    memo = pickle.loads(saved.read_bytes()) if saved.exists() else {}
    if not saved.exists():
        for k in (n, small):
            search(args.task, path, args.starts, k, memo, out)
        saved.write_bytes(pickle.dumps(memo))
    if args.once:
        search(args.task, path, args.starts, args.once, memo, out)
        return
    per = min(
        (cpu(lambda: search(args.task, path, args.starts, n, memo, out))
         - cpu(lambda: search(args.task, path, args.starts, small, memo, out))) / (n - small)
        for _ in range(args.rounds)
    )  # fmt: skip
    print(f"{args.task} starts={args.starts}: driver {per * 1e6:.1f} us CPU per candidate "
          f"(least of {args.rounds}; {n} - {small} candidates)")  # fmt: skip


if __name__ == "__main__":
    main()
