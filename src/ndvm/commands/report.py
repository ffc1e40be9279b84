"""``ndvm report``: what a search found — summary, hall of fame, exports and plots.

    ndvm report --db search.db [--json] [--out DIR] [--run N]

The hall of fame lists, per complexity, the best program by validation loss that beats every
simpler one (PySR's definition, with score = -Δ log loss / Δ complexity), its test scores
(never used to choose it) and its equation with the full-precision parameters. The reported
model (``frontier.select``: an information criterion on the validation rows) is marked ``*``;
the JSON has it as ``selected``, the lowest-validation-loss entry as ``lowest_loss`` (and,
as before, ``best``: the lowest loss, not the selection).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser(
        "report", help="hall of fame, summary, exports and plots of a search database",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    p.add_argument("--db", required=True, help="SQLite database written by ndvm search")
    p.add_argument("--run", type=int, default=None, help="run id (default: the latest)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--out", default=None, help="folder for plots, hall_of_fame.jsonl, summary")
    p.add_argument("--no-export", action="store_true", help="skip the sympy equations")
    p.set_defaults(func=run)


def _num(x: Any) -> Any:
    """JSON-safe (RFC 8259): NaN and infinities become null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _num(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_num(v) for v in x]
    return x


def load(db: str, run: int | None) -> tuple[dict[str, Any], list[Any]]:
    from ndvm.errors import NdvmError
    from ndvm.search.store import Store

    if not Path(db).exists():
        raise NdvmError(f"no such database {db}")
    store = Store(db, read_only=True)  # a report never writes (mode=ro)
    try:
        info = store.latest_run() if run is None else store.run_info(run)
        if info is None:
            raise NdvmError(f"{db} holds no run")
        return info, store.records(info["run"])
    except KeyError as exc:
        raise NdvmError(str(exc).strip("'\"")) from None
    finally:
        store.close()


def build(info: dict[str, Any], recs: list[Any], export: bool = True) -> dict[str, Any]:
    from ndvm.search import frontier

    s = frontier.summarize(recs, info["elapsed"])
    inputs = tuple(info["config"].get("inputs") or ("x",))
    hof = frontier.hall_of_fame(recs, inputs, export=export)
    best = min(hof, key=_selection, default=None)
    chosen, by = _choice(info, hof)
    return {
        "run": info["run"], "task": info["task"], "proposer": info["proposer"],
        "seed": info["seed"], "commit": info["commit"], "elapsed": s.elapsed,
        "proposed": s.proposed, "calibrated": s.evaluated, "failed": s.failed,
        "rejected": s.rejected, "pending": s.pending, "rejections": s.rejections,
        "successes": s.successes,
        "distinct_success_skeletons": s.distinct_success_skeletons,
        "calibrations_per_s": s.calibrations_per_s, "start_lanes_per_s": s.lanes_per_s,
        "time_to_first_success": s.time_to_first_success,
        "failures": failure_reasons(recs),
        "selected": chosen, "selected_by": by, "lowest_loss": best, "best": best,
        "hall_of_fame": hof, "trajectory": s.trajectory,
    }  # fmt: skip


def _choice(info: dict[str, Any], hof: list[dict[str, Any]]) -> tuple[Any, str]:
    """The selected row and what selected it: the choice ``SymbolicRegressor`` stored in the
    run (``selection.save``: its selection split or CV losses; the rows re-marked), else
    ``frontier.select``'s on the validation rows. A stored choice that dust pruning changed
    names its pruned program as ``estimator_src``."""
    from ndvm.search.selection import stored

    got = stored(info["config"])
    if got is None:
        return next((row for row in hof if row["selected"]), None), "validation"
    idx, src, method = got
    for row in hof:
        row["selected"] = row["idx"] == idx
    row = next((row for row in hof if row["selected"]), None)
    if row is None:  # the estimator's front (after dust pruning) differs from the stored one
        return {"idx": idx, "src": src, "estimator_src": src}, method
    return (row if src == row["src"] else {**row, "estimator_src": src}), method


def failure_reasons(recs: list[Any], most: int = 20) -> dict[str, int]:
    """Failed calibrations by reason (the ``most`` commonest, most frequent first)."""
    counts: dict[str, int] = {}
    for r in recs:
        ev = r.evaluation
        if ev is not None and ev.status == "failed":
            reason = (ev.reason or "no reason recorded")[:300]
            counts[reason] = counts.get(reason, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return dict(ranked[:most])


def _selection(row: dict[str, Any]) -> float:
    v = row["validation_loss"]
    return v if v == v else row["train_loss"]


def _fmt(x: Any, spec: str = ".4g") -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


def print_text(rep: dict[str, Any]) -> None:
    first = rep["time_to_first_success"]
    print(f"run {rep['run']}: task {rep['task']}, proposer {rep['proposer']}, seed {rep['seed']}"
          f", commit {rep['commit'][:12]}, search time {rep['elapsed']:.1f} s")  # fmt: skip
    stages = ", ".join(f"{k} {v}" for k, v in sorted(rep["rejections"].items())) or "none"
    print(f"  proposed {rep['proposed']}, calibrated {rep['calibrated']} ({rep['failed']} failed)"
          f", rejected {rep['rejected']} ({stages})"
          + (f", {rep['pending']} pending (proposed, not evaluated before the search stopped)"
             if rep.get("pending") else ""))  # fmt: skip
    print(f"  {rep['calibrations_per_s']:.1f} calibrations/s, {rep['start_lanes_per_s']:.0f} "
          f"start lanes/s, successes {rep['successes']}, first success "
          f"{'-' if first is None else f'{first:.1f} s'}")  # fmt: skip
    if rep["failures"]:
        print("  failed calibrations by reason:")
        for reason, n in rep["failures"].items():
            print(f"  {n:8d}  {reason}")
    print("\nhall of fame (selected on validation; test scores only reported):")
    print(f"  {'cx':>4} {'train':>10} {'valid':>10} {'val R²':>8} {'score':>7} "
          f"{'test R²':>8}  program / equation")  # fmt: skip
    for r in rep["hall_of_fame"]:
        cells = (_fmt(r["train_loss"]), _fmt(r["validation_loss"]),
                 _fmt(r["validation_r2"], ".4f"), _fmt(r["score"], ".3f"),
                 _fmt(r["test_r2"], ".4f"))  # fmt: skip
        print(
            f" {'*' if r['selected'] else ' '}{r['complexity']:4d} {cells[0]:>10} {cells[1]:>10} "
            f"{cells[2]:>8} {cells[3]:>7} {cells[4]:>8}  {r['src']}"
        )
        if r.get("equation_symbolic"):
            print(f"{'':59}= {r['equation_symbolic']}")
        elif r.get("export_error"):
            print(f"{'':59}(no equation: {r['export_error'][:100]})")
    why = {"validation": "an information criterion on the validation rows",
           "holdout": "an information criterion on the selection rows the search never read",
           "cv": "an information criterion on cross-validated losses"}  # fmt: skip
    print(f"  * the reported model (selected by {why.get(rep['selected_by'], rep['selected_by'])})")
    chosen = rep["selected"]
    if chosen is not None and chosen.get("estimator_src"):
        print(f"    after dust pruning: {chosen['estimator_src']}")


def run(args: argparse.Namespace) -> int:
    from ndvm.errors import NdvmError

    try:
        info, recs = load(args.db, args.run)
        rep = build(info, recs, export=not args.no_export)
        if args.json:
            print(json.dumps(_num({k: v for k, v in rep.items() if k != "trajectory"})))
        else:
            print_text(rep)
        if args.out:
            write_out(Path(args.out), info, recs, rep)
    except NdvmError as exc:  # a missing or unreadable database, an unknown run: input
        print(f"ndvm report: {exc}", file=sys.stderr)
        return 2
    return 0


def write_out(out: Path, info: dict[str, Any], recs: list[Any], rep: dict[str, Any]) -> None:
    from ndvm.extras import require
    from ndvm.search import frontier, plots

    require("ndvm report --out", "plot")
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(_num(rep), indent=1))
    with open(out / "hall_of_fame.jsonl", "w", encoding="utf-8") as fh:
        for row in rep["hall_of_fame"]:
            fh.write(json.dumps(_num(row)) + "\n")
    s = frontier.summarize(recs, info["elapsed"])
    plots.plot_frontier(s, out / "frontier.png")
    plots.plot_pareto(recs, s, out / "pareto.png")
    task = _task_of(info)
    if s.best is not None and task is not None:
        plots.plot_best_fit(task, s.best, out / "best_fit.png")
    print(f"wrote {out}/summary.json, hall_of_fame.jsonl and plots", file=sys.stderr)


def _task_of(info: dict[str, Any]) -> Any:
    """The run's task with the split the search used (None when it cannot be rebuilt)."""
    from ndvm import tasks
    from ndvm.errors import NdvmError
    from ndvm.tasks.base import rebuild

    try:
        origin = info["config"].get("origin")
        task = rebuild(origin) if origin else tasks.get(info["task"])
    except (NdvmError, OSError, KeyError):
        return None
    return task.for_search()
