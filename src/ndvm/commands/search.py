"""``ndvm search``: run or resume a co-search on a built-in task or your own CSV data.

    ndvm search --task sr-damped [--proposer evolve|replay:FILE|llm] [--budget 60] ...
    ndvm search --data mm.csv --x S --y v [--binary-operators +,-,*,/] [--unary-operators exp]
                [--success-r2 0.999 | --success-rmse 0.01] [--until-success]
    ndvm search --resume --db search.db [--budget 30]     # the task comes from the database

Results go to a SQLite database (kill-safe); at the end the command prints a summary, the hall
of fame and the chosen law (``ndvm report --db FILE`` shows them again, with equations).
With ``--resume``, ``--budget`` is the extra search time of this session; a resume whose data
(the CSV's rows, or the split) differ from the recorded run's is refused (exit status 2).
A --data search chooses its reported model as ``SymbolicRegressor`` does (``--holdout`` rows
the search never reads, else cross-validation within ``--budget``) and stores the choice in
the run for ``ndvm report``. Every numeric option is checked first: a bad value is one line
on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from typing import Any

_FMT = argparse.ArgumentDefaultsHelpFormatter


def register(sub: Any) -> None:
    p = sub.add_parser(
        "search", help="search candidate programs for a task or your own data",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    what = p.add_argument_group("what to search")
    what.add_argument("--task", default=None, help="a built-in task: sr-damped, iterated-map, "
                      "battery-knee, battery-knee-early")  # fmt: skip
    what.add_argument("--data", default=None, metavar="FILE.csv", help="your own data (CSV)")
    what.add_argument("--x", default=None, help="input column(s), comma-separated")
    what.add_argument("--y", default=None, help="target column")
    what.add_argument("--binary-operators", default="+,-,*,/", help="(with --data)")
    what.add_argument("--unary-operators", default="exp,log,sqrt,sin,cos", help="(with --data)")
    what.add_argument("--split", default="0.6,0.2,0.2", help="train,validation,test fractions")
    what.add_argument("--split-seed", type=int, default=0, help="seed of the row split")
    what.add_argument("--optimizer", default="auto", choices=("auto", "lm", "adam"),
                      help="(with --data) how each candidate is calibrated: auto is "
                      "Levenberg-Marquardt on the mse (default auto)")  # fmt: skip
    what.add_argument("--steps", type=int, default=100, help="(with --data) LM iterations or "
                      "Adam steps per candidate (default 100)")  # fmt: skip
    what.add_argument("--success-r2", type=float, default=None, metavar="R",
                      help="(with --data) a success is a validation R² >= R (default: 0.99 "
                      "unless --success-rmse is given)")  # fmt: skip
    what.add_argument("--success-rmse", type=float, default=None, metavar="E",
                      help="(with --data) a success is a validation RMSE <= E (with "
                      "--success-r2: both)")  # fmt: skip
    what.add_argument("--holdout", type=float, default=0.2, metavar="F",
                      help="(with --data) fraction of the rows the search never reads, kept to "
                      "choose the reported model (used from 30 rows; fewer: cross-validation; "
                      "0: none; default 0.2)")  # fmt: skip
    how = p.add_argument_group("how")
    how.add_argument("--proposer", default="evolve", help="evolve, replay:FILE or llm")
    how.add_argument("--budget", type=float, default=60.0, help="wall-clock seconds (default 60)")
    how.add_argument("--max-candidates", type=int, default=None, help="stop after N proposals")
    how.add_argument("--workers", type=int, default=1, help="calibration processes (default 1)")
    how.add_argument("--executor", default="auto", choices=("auto", "serial", "process", "ray"))
    how.add_argument("--db", default="search.db", help="SQLite database (default search.db)")
    how.add_argument("--until-success", action="store_true", help="stop at the first success")
    how.add_argument("--resume", action="store_true", help="continue the latest run in --db")
    how.add_argument("--seed", type=int, default=0)
    how.add_argument("--batch-size", type=int, default=None,
                     help="proposals per batch (default 64; 8 with --proposer llm)")  # fmt: skip
    how.add_argument("--starts", type=int, default=None, help="starts per candidate, run as "
                     "parameter lanes of one walk (default 16; 1 per series for multi-series "
                     "tasks; 1 = the docs/tasks.md protocol)")  # fmt: skip
    how.add_argument("--cycles", type=int, default=1, help="replay: passes over the corpus "
                     "with fresh seeds (0: until the budget is spent)")  # fmt: skip
    how.add_argument("--dialect", default=None, choices=("dmci",), help="language dialect")
    how.add_argument("--candidate-seconds", type=float, default=10.0, help="per-candidate limit")
    how.add_argument("--backend", default=None, help="reference or native (default: auto)")
    how.add_argument("--quiet", action="store_true", help="no live progress line")
    from ndvm.search.llm import add_llm_arguments

    add_llm_arguments(p)
    p.set_defaults(func=run)


def _fail(msg: str) -> int:
    print(f"ndvm search: {msg}", file=sys.stderr)
    return 2


def _task(args: argparse.Namespace) -> Any:
    """The task to search: --task, --data, or (--resume) the one recorded in --db."""
    from ndvm import tasks
    from ndvm.errors import NdvmError
    from ndvm.search import options

    if args.task and args.data:
        raise NdvmError("give --task or --data, not both")
    if args.data:
        if not args.x or not args.y:
            raise NdvmError("--data needs --x COL[,COL...] and --y COL")
        split = options.fractions("--split", args.split)
        return tasks.Task.from_csv(
            args.data, args.x.split(","), args.y,
            binary_operators=tuple(o for o in args.binary_operators.split(",") if o),
            unary_operators=tuple(o for o in args.unary_operators.split(",") if o),
            split=split, seed=args.split_seed, optimizer=args.optimizer, steps=args.steps,
            holdout=args.holdout, **_thresholds(args),
        )  # fmt: skip
    if args.success_r2 is not None or args.success_rmse is not None:
        raise NdvmError(
            "--success-r2 / --success-rmse apply to --data searches (a built-in "
            "task has its own success rule; --resume keeps the recorded one)"
        )
    if args.task is None:
        if not args.resume:
            raise NdvmError("give --task NAME or --data FILE.csv (or --resume --db FILE)")
        return recorded_task(args.db)
    known = [n for n in tasks.names() if tasks.get(n).search is not None]
    if args.task not in known:
        raise NdvmError(f"unknown task {args.task!r} (known: {', '.join(known)})")
    return tasks.get(args.task)


def recorded_task(db: str) -> Any:
    """The task of the latest run in ``db`` (a built-in name, or CSV data by its origin)."""
    from pathlib import Path

    from ndvm import tasks
    from ndvm.errors import NdvmError
    from ndvm.search.store import Store
    from ndvm.tasks.base import rebuild

    if not Path(db).exists():
        raise NdvmError(f"no such database {db}")
    store = Store(db)
    try:
        info = store.latest_run()
    finally:
        store.close()
    if info is None:
        raise NdvmError(f"{db} holds no run to resume")
    origin = info["config"].get("origin")
    if origin:
        return rebuild(origin)
    return tasks.get(info["task"])


def _elapsed(db: str) -> float:
    from pathlib import Path

    from ndvm.search.store import Store

    if not Path(db).exists():
        return 0.0
    store = Store(db)
    try:
        info = store.latest_run()
    finally:
        store.close()
    return float(info["elapsed"]) if info else 0.0


def run(args: argparse.Namespace) -> int:
    from ndvm.errors import ConfigError, NdvmError
    from ndvm.search import Budget, make_proposer, run_search, selection
    from ndvm.search.evaluate import CalibLimits
    from ndvm.search.progress import ProgressLine
    from ndvm.search.store import StoreError

    try:
        check_numbers(args)
        task = _task(args)
        llm = None
        if args.proposer == "llm":  # from_args raises when no URL or model is configured
            from ndvm.search.llm import LLMConfig

            llm = LLMConfig.from_args(args)
        proposer = make_proposer(args.proposer, task, cycles=args.cycles, llm=llm)
    except (NdvmError, ValueError, OSError) as exc:
        return _fail(str(exc))
    show = ProgressLine(args.quiet)
    limits = CalibLimits(
        seconds=args.candidate_seconds, backend=args.backend, dialect=args.dialect,
        starts=args.starts,
    )  # fmt: skip
    start, data_task = time.perf_counter(), task.data().meta.get("origin") is not None
    extra = selection.search_seconds(task, args.budget) if data_task else args.budget
    seconds = extra + (_elapsed(args.db) if args.resume else 0.0)  # --budget is extra time
    budget = Budget(seconds=seconds, candidates=args.max_candidates,
                    until_success=args.until_success)  # fmt: skip
    try:
        state = run_search(
            task, proposer, args.db, budget=budget, workers=args.workers, seed=args.seed,
            batch_size=args.batch_size or (8 if args.proposer == "llm" else 64),
            resume=args.resume, limits=limits,
            executor=args.executor, progress=show,
        )  # fmt: skip
    except ConfigError as exc:  # e.g. --resume on other data
        show.end()
        return _fail(str(exc))
    except StoreError as exc:
        show.end()
        print(f"ndvm search: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        show.end()
        print(f"ndvm search: interrupted; every finished result is in {args.db} "
              f"(continue with: ndvm search --resume --db {args.db})", file=sys.stderr)  # fmt: skip
        return 130
    except NdvmError as exc:
        show.end()
        print(f"ndvm search: stopped: {exc} (results so far are in {args.db}; continue with "
              f"--resume)", file=sys.stderr)  # fmt: skip
        _print_usage(proposer)
        return 1
    show.end()
    if getattr(proposer, "stop_reason", ""):
        print(f"ndvm search: {proposer.stop_reason}", file=sys.stderr)
    _print_usage(proposer)
    _print_summary(task.name, state, args.db)
    from ndvm.search.progress import front_lines

    chosen = _choose(task, state, args, start + args.budget) if data_task else None
    print("\n".join(front_lines(list(state.records), task.inputs, chosen)))
    _warn_internal(state)
    return 0


def _choose(task: Any, state: Any, args: argparse.Namespace, deadline: float) -> int | None:
    """A data task's reported model, chosen as ``SymbolicRegressor`` chooses (its selection
    split, else cross-validation until ``deadline``, else the validation losses) and stored
    in the run for ``ndvm report``; its record idx."""
    from ndvm.search import frontier, selection

    front = frontier.pareto_front([r for r in state.records if r.status == "ok"])
    if not front:
        return None
    assessment = selection.for_task(task, front, args.seed, deadline)
    selection.save(args.db, assessment, "best")
    picked = assessment.choose("best")
    return None if picked is None else picked.idx


def _print_usage(proposer: Any) -> None:
    """The llm proposer's line: how busy the endpoint and the calibrator were."""
    usage = getattr(proposer, "usage", None)
    if callable(usage):
        print(f"ndvm search: {usage().line(proposer.config.ahead)}", file=sys.stderr)


def _warn_internal(state: Any) -> None:
    """Internal errors that did not repeat enough to stop the search are still bugs: say so."""
    from ndvm.search.driver import INTERNAL

    evs = [r.evaluation for r in state.records if r.evaluation is not None]
    reasons = [ev.reason for ev in evs if ev.reason.startswith(INTERNAL)]
    if reasons:
        print(f"ndvm search: warning: {len(reasons)} calibration(s) failed with an internal "
              f"error, a bug in ndvm (first: {reasons[0][len(INTERNAL):]}); please report it "
              "to ndvm's issue tracker", file=sys.stderr)  # fmt: skip


def _print_summary(name: str, state: Any, db: str) -> None:
    from ndvm.search.frontier import summarize
    from ndvm.search.store import Store

    store = Store(db)
    info = store.latest_run()
    store.close()
    s = summarize(list(state.records), info["elapsed"] if info else None)
    first = "-" if s.time_to_first_success is None else f"{s.time_to_first_success:.1f}s"
    r2 = "-" if math.isnan(s.best_r2) else f"{s.best_r2:.4f}"
    print(
        f"{name}: {s.evaluated} calibrated, {s.rejected} rejected, {s.successes} successes "
        f"({s.distinct_success_skeletons} skeletons), best validation R² {r2}, "
        f"first success {first}, {s.calibrations_per_s:.1f} calibrations/s, "
        f"{s.lanes_per_s:.0f} start lanes/s -> {db}"
    )


def _thresholds(args: argparse.Namespace) -> dict[str, float]:
    out = {"success_r2": args.success_r2, "success_rmse": args.success_rmse}
    return {k: v for k, v in out.items() if v is not None}  # recorded for --resume if given


def check_numbers(args: argparse.Namespace) -> None:
    """Every numeric option in range (a one-line ``ConfigError``, exit status 2)."""
    from ndvm.errors import ConfigError
    from ndvm.search import options
    from ndvm.tasks.columns import success_rule

    options.seconds("--budget", args.budget)
    options.seconds("--candidate-seconds", args.candidate_seconds)
    options.count("--max-candidates", args.max_candidates, optional=True)
    options.count("--workers", args.workers)
    options.count("--seed", args.seed, minimum=0)
    options.count("--split-seed", args.split_seed, minimum=0)
    options.count("--batch-size", args.batch_size, optional=True)
    options.count("--starts", args.starts, optional=True)
    options.count("--cycles", args.cycles, minimum=0)
    options.count("--steps", args.steps)
    if not 0 <= args.holdout < 1:  # NaN fails too
        raise ConfigError(f"--holdout must be a fraction in [0, 1), got {args.holdout!r}")
    success_rule(args.success_r2, args.success_rmse, ("--success-r2", "--success-rmse"))
