"""``ndvm bench meta``: the interpretive tower measured.

Each program is run forward+gradient at B=1 directly, through one metacircular evaluator
(``ndvm.meta``, level 1) and through the evaluator running itself (level 2), on the reference
and native backends, next to the tagged-tensor baseline running the program directly. A
measurement whose first call takes longer than the budget's cap is reported from that one call.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ndvm.baselines.programs import BenchProgram, by_name
from ndvm.bench import report
from ndvm.bench.manifest import manifest
from ndvm.bench.runners import Budget, available_tiers, fmt_seconds, runner, time_call
from ndvm.eval.limits import Limits

Log = Callable[[str], None]
LEVELS = (0, 1, 2)
QUICK = ("scalar", "logistic16")
FULL = ("scalar", "mm", "damped", "logistic16", "kalman80")
TOWER_LIMITS = Limits(max_steps=2_000_000_000, max_heap=2_000_000_000, max_depth=10_000_000)


def tower_runner(tier: str, prog: BenchProgram, level: int) -> Callable[[], Any]:
    """One forward+gradient walk of ``prog`` under ``level`` evaluators on ``tier``."""
    if level == 0:
        return runner(tier, prog, 1, True)
    import ndvm.meta

    program = ndvm.meta.compile(prog.source, inputs=prog.input_names, levels=level,
                                backend=tier, limits=TOWER_LIMITS)  # fmt: skip
    theta, inputs = prog.theta(1), prog.inputs()
    return lambda: program.evaluate(theta, inputs, grad=True)


def _measure(fn: Callable[[], Any], budget: Budget, cap: float) -> float:
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    return first if first > cap else time_call(fn, budget)


def _ratio(a: Any, b: Any) -> float:
    return a / b if a is not None and b else float("nan")


def meta(out: Path, quick: bool, log: Log, names: tuple[str, ...] | None = None) -> Path:
    budget = Budget.of(quick)
    cap = 2.0 if quick else 20.0
    tiers = [t for t in ("reference", "native") if t in available_tiers()]
    rows: list[dict[str, Any]] = []
    for name in names or (QUICK if quick else FULL):
        prog = by_name(name)
        row: dict[str, Any] = {"program": prog.name, "what": prog.depth}
        row["tagged_s"] = _measure(runner("tagged", prog, 1, True), budget, cap)
        for tier in tiers:
            for level in LEVELS:
                key = f"{tier}_L{level}_s"
                previous = row.get(f"{tier}_L{level - 1}_s")
                if level == 2 and previous is not None and previous > cap / 20:
                    row[key] = None  # level 2 costs ~100x level 1: beyond the budget
                    continue
                row[key] = _measure(tower_runner(tier, prog, level), budget, cap)
            row[f"{tier}_L1/L0"] = _ratio(row[f"{tier}_L1_s"], row[f"{tier}_L0_s"])
            row[f"{tier}_L2/L1"] = _ratio(row[f"{tier}_L2_s"], row[f"{tier}_L1_s"])
            row[f"tagged/{tier}_L1"] = _ratio(row["tagged_s"], row[f"{tier}_L1_s"])
        rows.append(row)
    cols: list[report.Column] = [("program", "program", str), ("tagged_s", "tagged", fmt_seconds)]
    for tier in tiers:
        cols += [(f"{tier}_L{k}_s", f"{tier} L{k}", fmt_seconds) for k in LEVELS]
    for tier in tiers:
        cols += [(f"{tier}_L1/L0", f"{tier} L1/L0", report.ratio),
                 (f"{tier}_L2/L1", f"{tier} L2/L1", report.ratio),
                 (f"tagged/{tier}_L1", f"tagged/{tier} L1", report.ratio)]  # fmt: skip
    log("meta: forward+gradient seconds per walk at B=1; L0 direct, L1 one evaluator, "
        "L2 the evaluator running itself; tagged runs the program directly")  # fmt: skip
    if "native" not in tiers:
        log("native: not built (columns for native are omitted)")
    log(report.table(rows, cols))
    folder = report.write(out, "meta", rows, manifest("meta", {"quick": quick}))
    fig, ax = report.figure()
    width = 0.8 / (1 + len(tiers) * len(LEVELS))
    xs = np.arange(len(rows))
    ax.bar(xs, [r["tagged_s"] for r in rows], width, label="tagged (direct)")
    i = 1
    for tier in tiers:
        for level in LEVELS:
            vals = [r[f"{tier}_L{level}_s"] or np.nan for r in rows]
            ax.bar(xs + i * width, vals, width, label=f"{tier} L{level}")
            i += 1
    ax.set_xticks(xs + width * (i - 1) / 2)
    ax.set_xticklabels([r["program"] for r in rows])
    ax.set_yscale("log")
    ax.set_ylabel("forward+gradient, s per walk (B=1)")
    ax.legend(fontsize=7)
    report.save(fig, folder)
    return folder
