"""``ndvm search``: run or resume a co-search; results go to a SQLite database."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser(
        "search",
        help="search candidate programs for a task",
        description="Propose, validate, calibrate and store candidate programs for a task.",
    )
    p.add_argument("--task", required=True, help="sr-damped, iterated-map, battery-knee, ...")
    p.add_argument("--proposer", default="evolve", help="replay:FILE, evolve or llm")
    p.add_argument("--budget", type=float, default=60.0, help="wall-clock seconds")
    p.add_argument("--max-candidates", type=int, default=None, help="stop after N proposals")
    p.add_argument("--workers", type=int, default=1, help="calibration processes")
    p.add_argument("--executor", default="auto", choices=("auto", "serial", "process", "ray"))
    p.add_argument("--db", default="search.db", help="SQLite database file")
    p.add_argument("--until-success", action="store_true", help="stop after a success")
    p.add_argument("--resume", action="store_true", help="continue the latest run in --db")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=64, help="candidates per proposal batch")
    p.add_argument(
        "--starts", type=int, default=None,
        help="starts per candidate, run as parameter lanes of one walk (default: 16 for a "
        "single series, 1 per series for multi-series tasks; 1 = the TASKS.md protocol)",
    )  # fmt: skip
    p.add_argument(
        "--cycles", type=int, default=1,
        help="replay: passes over the corpus with fresh seeds (0: until the budget is spent)",
    )  # fmt: skip
    p.add_argument("--dialect", default=None, choices=("dmci",), help="language dialect")
    p.add_argument("--candidate-seconds", type=float, default=10.0, help="per-candidate limit")
    p.add_argument("--backend", default=None, help="reference or native (default: auto)")
    p.add_argument("--quiet", action="store_true", help="no live progress line")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ndvm import tasks
    from ndvm.search import Budget, make_proposer, run_search
    from ndvm.search.driver import Progress
    from ndvm.search.evaluate import CalibLimits
    from ndvm.search.frontier import summarize
    from ndvm.search.store import Store

    known = [n for n in tasks.names() if tasks.get(n).search is not None]
    if args.task not in known:
        print(f"ndvm search: unknown task {args.task!r} (known: {', '.join(known)})",
              file=sys.stderr)  # fmt: skip
        return 2
    try:
        proposer = make_proposer(args.proposer, args.task, cycles=args.cycles)
    except (ValueError, OSError) as exc:
        print(f"ndvm search: {exc}", file=sys.stderr)
        return 2
    tty = sys.stderr.isatty()
    last = [-1e9]

    def show(pr: Progress) -> None:
        if args.quiet or pr.elapsed - last[0] < (0.2 if tty else 5.0):
            return
        last[0] = pr.elapsed
        r2 = "-" if math.isnan(pr.best_r2) else f"{pr.best_r2:.4f}"
        line = (
            f"[{pr.elapsed:7.1f}s] proposed {pr.proposed}  calibrated {pr.evaluated}  "
            f"rejected {pr.rejected}  successes {pr.successes}  best R² {r2}  "
            f"{pr.rate:.1f} cal/s  {pr.lanes_rate:.0f} lanes/s"
        )
        print("\r" + line if tty else line, end="" if tty else "\n", file=sys.stderr, flush=True)

    state = run_search(
        args.task,
        proposer,
        args.db,
        budget=Budget(
            seconds=args.budget, candidates=args.max_candidates, until_success=args.until_success
        ),
        workers=args.workers,
        seed=args.seed,
        batch_size=args.batch_size,
        resume=args.resume,
        limits=CalibLimits(
            seconds=args.candidate_seconds, backend=args.backend, dialect=args.dialect,
            starts=args.starts,
        ),  # fmt: skip
        executor=args.executor,
        progress=show,
    )
    if tty and not args.quiet:
        print(file=sys.stderr)
    store = Store(args.db)
    info = store.latest_run()
    store.close()
    s = summarize(list(state.records), info["elapsed"] if info else None)
    first = "-" if s.time_to_first_success is None else f"{s.time_to_first_success:.1f}s"
    print(
        f"{args.task}: {s.evaluated} calibrated, {s.rejected} rejected, {s.successes} successes "
        f"({s.distinct_success_skeletons} skeletons), best held-out R² {s.best_r2:.4f}, "
        f"first success {first}, {s.calibrations_per_s:.1f} calibrations/s, "
        f"{s.lanes_per_s:.0f} start lanes/s -> {args.db}"
    )
    return 0
