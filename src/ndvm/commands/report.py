"""``ndvm report``: summary of a search database, best programs, plots."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser(
        "report",
        help="summarize a search database and write plots",
        description="Print the discovery frontier of a search and write plots and exports.",
    )
    p.add_argument("--db", required=True, help="SQLite database written by ndvm search")
    p.add_argument("--run", type=int, default=None, help="run id (default: the latest)")
    p.add_argument("--out", default=None, help="folder for plots, best.jsonl and summary.json")
    p.add_argument("--top", type=int, default=5, help="how many best programs to list")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ndvm.extras import require
    from ndvm.search import frontier
    from ndvm.search.store import Store

    if args.out:
        require("ndvm report --out", "plot")
    if not Path(args.db).exists():
        print(f"ndvm report: no such database {args.db}", file=sys.stderr)
        return 1
    store = Store(args.db)
    info = store.latest_run() if args.run is None else store.run_info(args.run)
    if info is None:
        print(f"ndvm report: {args.db} holds no run", file=sys.stderr)
        return 1
    recs = store.records(info["run"])
    store.close()
    s = frontier.summarize(recs, info["elapsed"])
    first = "-" if s.time_to_first_success is None else f"{s.time_to_first_success:.1f} s"
    print(
        f"run {info['run']}: task {info['task']}, proposer {info['proposer']}, seed {info['seed']}"
    )
    print(f"  commit {info['commit']}, search time {s.elapsed:.1f} s")
    print(
        f"  proposed {s.proposed}, calibrated {s.evaluated} ({s.failed} failed), "
        f"rejected {s.rejected} {s.rejections}"
    )
    print(f"  calibrations/s {s.calibrations_per_s:.2f}, time to first success {first}")
    print(
        f"  successes {s.successes}, distinct successful skeletons "
        f"{s.distinct_success_skeletons}, best held-out R² {s.best_r2:.4f}"
    )
    ok = sorted(
        (r for r in recs if r.status == "ok" and r.evaluation),
        key=lambda r: (
            -(
                r.evaluation.heldout_r2
                if r.evaluation.heldout_r2 == r.evaluation.heldout_r2
                else -1e300
            )
        ),  # type: ignore[union-attr]
    )[: args.top]
    print("  best programs (held-out R², complexity):")
    best_rows = []
    for r in ok:
        ev = r.evaluation
        assert ev is not None
        tex = frontier.to_latex(r.candidate.src, ev.params)
        print(f"    {ev.heldout_r2:.4f}  {r.complexity:3d}  {r.candidate.src}")
        if tex:
            print(f"        = {tex}")
        best_rows.append(
            {
                **r.candidate.to_json(),
                "skeleton": r.skeleton,
                "heldout_r2": ev.heldout_r2,
                "values": ev.params,
                "latex": tex,
            }
        )
    print("  Pareto front (complexity, held-out MSE):")
    for r in s.pareto:
        assert r.evaluation is not None
        print(f"    {r.complexity:3d}  {r.evaluation.heldout_mse:.3g}  {r.candidate.src}")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "best.jsonl", "w", encoding="utf-8") as fh:
            for row in best_rows:
                fh.write(json.dumps(row) + "\n")
        summary = {
            "task": info["task"],
            "proposer": info["proposer"],
            "seed": info["seed"],
            "commit": info["commit"],
            "elapsed": s.elapsed,
            "proposed": s.proposed,
            "calibrated": s.evaluated,
            "rejected": s.rejected,
            "successes": s.successes,
            "distinct_success_skeletons": s.distinct_success_skeletons,
            "calibrations_per_s": s.calibrations_per_s,
            "time_to_first_success": s.time_to_first_success,
            "best_r2": s.best_r2,
            "trajectory": s.trajectory,
        }
        (out / "summary.json").write_text(json.dumps(summary, indent=1))
        try:
            frontier.plot_frontier(s, out / "frontier.png")
            frontier.plot_pareto(recs, s, out / "pareto.png")
            if s.best is not None:
                frontier.plot_best_fit(info["task"], s.best, out / "best_fit.png")
        except ImportError:
            print("  (matplotlib not installed: no plots)", file=sys.stderr)
        print(f"  wrote {out}/summary.json, best.jsonl and plots")
    return 0
