"""The four ``ndvm bench`` measurements; each returns its rows and writes them via ``report``.

decompose: forward and forward+gradient per program for tagged / reference / native.
amortize: per-lane cost vs B.  crossover: cumulative time vs gradient steps, interpreter vs
staged JAX (compile included).  throughput: Kalman calibrations per CPU-hour per tier.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ndvm.baselines.programs import PROGRAMS, BenchProgram, by_name
from ndvm.bench import report
from ndvm.bench.manifest import manifest
from ndvm.bench.runners import Budget, available_tiers, fmt_seconds, runner, staged, time_call

Log = Callable[[str], None]
QUICK_PROGRAMS = ("scalar", "logistic16")


def _programs(quick: bool, names: tuple[str, ...] | None) -> list[BenchProgram]:
    if names:
        return [by_name(n) for n in names]
    return [by_name(n) for n in QUICK_PROGRAMS] if quick else list(PROGRAMS)


def _div(a: Any, b: Any) -> float:
    return a / b if a is not None and b else float("nan")


def _not_built_note(log: Log) -> None:
    if "native" not in available_tiers():
        log("native: not built (columns for native are omitted)")


# -- decompose ----------------------------------------------------------------------------------
def decompose(out: Path, quick: bool, log: Log, names: tuple[str, ...] | None = None) -> Path:
    budget, tiers = Budget.of(quick), available_tiers()
    rows: list[dict[str, Any]] = []
    for prog in _programs(quick, names):
        row: dict[str, Any] = {"program": prog.name, "what": prog.depth, "B": 1}
        for tier in tiers:
            for mode, grad in (("fwd", False), ("fg", True)):
                row[f"{tier}_{mode}_s"] = time_call(runner(tier, prog, 1, grad), budget)
        for mode in ("fwd", "fg"):
            row[f"tagged/ref_{mode}"] = _div(row[f"tagged_{mode}_s"], row[f"reference_{mode}_s"])
            if "native" in tiers:
                row[f"ref/native_{mode}"] = _div(
                    row[f"reference_{mode}_s"], row[f"native_{mode}_s"]
                )
                row[f"walk/replay_{mode}"] = _div(
                    row[f"native-walk_{mode}_s"], row[f"native_{mode}_s"]
                )
                row[f"vm/walk_{mode}"] = _div(
                    row[f"vm-walk_{mode}_s"], row[f"native-walk_{mode}_s"]
                )
        rows.append(row)
    cols: list[report.Column] = [("program", "program", str)]
    for tier in tiers:
        cols += [(f"{tier}_fwd_s", f"{tier} fwd", fmt_seconds)]
        cols += [(f"{tier}_fg_s", f"{tier} fwd+grad", fmt_seconds)]
    cols += [("tagged/ref_fwd", "tagged/ref fwd", report.ratio)]
    cols += [("tagged/ref_fg", "tagged/ref f+g", report.ratio)]
    if "native" in tiers:
        cols += [("ref/native_fwd", "ref/native fwd", report.ratio)]
        cols += [("ref/native_fg", "ref/native f+g", report.ratio)]
        cols += [("walk/replay_fg", "walk/replay f+g", report.ratio)]
        cols += [("vm/walk_fg", "vm/walk f+g", report.ratio)]
    log(
        "decompose: seconds per evaluation at B=1 (float64), ratios from this run; native "
        "replays its trace; native-walk (the tree walker) and vm-walk (the bytecode VM) walk "
        "every evaluation"
    )
    _not_built_note(log)
    log(report.table(rows, cols))
    folder = report.write(out, "decompose", rows, manifest("decompose", {"quick": quick}))
    fig, ax = report.figure()
    width = 0.8 / len(tiers)
    for i, tier in enumerate(tiers):
        xs = np.arange(len(rows)) + i * width
        ax.bar(xs, [r[f"{tier}_fg_s"] * 1e3 for r in rows], width, label=tier)
    ax.set_xticks(np.arange(len(rows)) + width * (len(tiers) - 1) / 2)
    ax.set_xticklabels([r["program"] for r in rows])
    ax.set_yscale("log")
    ax.set_ylabel("forward+gradient, ms per walk (B=1)")
    ax.legend()
    report.save(fig, folder)
    return folder


# -- amortize -----------------------------------------------------------------------------------
def amortize(out: Path, quick: bool, log: Log, program: str | None = None) -> Path:
    budget = Budget.of(quick)
    prog = by_name(program or ("logistic16" if quick else "kalman80"))
    sizes = (1, 8) if quick else (1, 4, 16, 64, 256)
    tiers = [t for t in ("native", "reference", "tagged") if t in available_tiers()]
    rows: list[dict[str, Any]] = []
    for tier in tiers:
        base = None
        for B in sizes:
            s = time_call(runner(tier, prog, B, True), budget)
            per_lane = s / B
            base = base or per_lane
            rows.append({"tier": tier, "program": prog.name, "B": B, "walk_s": s,
                         "per_lane_s": per_lane, "amortization": base / per_lane})  # fmt: skip
    log(f"amortize: forward+gradient of {prog.name}, cost per lane vs B (ratio to B=1)")
    _not_built_note(log)
    log(report.table(rows, [("tier", "tier", str), ("B", "B", str),
                            ("walk_s", "per walk", fmt_seconds),
                            ("per_lane_s", "per lane", fmt_seconds),
                            ("amortization", "vs B=1", report.ratio)]))  # fmt: skip
    folder = report.write(out, "amortize", rows, manifest("amortize", {"quick": quick}))
    fig, ax = report.figure()
    for tier in tiers:
        pts = [r for r in rows if r["tier"] == tier]
        ax.plot([r["B"] for r in pts], [r["per_lane_s"] * 1e6 for r in pts], "o-", label=tier)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("parameter lanes B")
    ax.set_ylabel(f"{prog.name} forward+gradient, us per lane")
    ax.legend()
    report.save(fig, folder)
    return folder


# -- crossover ----------------------------------------------------------------------------------
def crossover(out: Path, quick: bool, log: Log, names: tuple[str, ...] | None = None) -> Path:
    budget = Budget.of(quick)
    interps = [t for t in ("native", "reference") if t in available_tiers()]
    rows: list[dict[str, Any]] = []
    for prog in _programs(quick, names):
        st = staged(prog, 1)
        step_fn = partial(st, prog.theta(1))
        row: dict[str, Any] = {"program": prog.name, "jax_compile_s": st.compile_seconds,
                               "jax_trace_s": st.trace_seconds,
                               "jax_step_s": time_call(step_fn, budget)}  # fmt: skip
        for tier in interps:
            step = time_call(runner(tier, prog, 1, True), budget)
            gap = step - row["jax_step_s"]
            row[f"{tier}_step_s"] = step
            row[f"crossover_{tier}"] = row["jax_compile_s"] / gap if gap > 0 else math.inf
        rows.append(row)
    cols: list[report.Column] = [("program", "program", str),
                                 ("jax_compile_s", "JAX compile", fmt_seconds),
                                 ("jax_step_s", "JAX step", fmt_seconds)]  # fmt: skip
    for tier in interps:
        cols += [(f"{tier}_step_s", f"{tier} step", fmt_seconds)]
        cols += [(f"crossover_{tier}", f"crossover vs {tier}", _steps)]
    log("crossover: gradient steps (B=1) after which staged JAX, compile included, wins")
    _not_built_note(log)
    log(report.table(rows, cols))
    folder = report.write(out, "crossover", rows, manifest("crossover", {"quick": quick}))
    fig, ax = report.figure()
    steps = np.logspace(0, 6, 200)
    tier = interps[0]
    for i, r in enumerate(rows):
        color = f"C{i}"
        ax.plot(steps, steps * r[f"{tier}_step_s"], "-", color=color, label=f"{r['program']}")
        ax.plot(steps, r["jax_compile_s"] + steps * r["jax_step_s"], "--", color=color)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("gradient steps per candidate")
    ax.set_ylabel("cumulative seconds")
    ax.set_title(f"{tier} (solid) vs staged JAX incl. compile (dashed)")
    ax.legend(fontsize=8)
    report.save(fig, folder)
    return folder


def _steps(x: Any) -> str:
    return "never" if not math.isfinite(x) else f"{x:,.0f}"


# -- throughput ---------------------------------------------------------------------------------
def local_adam(
    value_and_grad: Callable[[np.ndarray], tuple[Any, np.ndarray]],
    theta0: np.ndarray,
    steps: int,
    lr: float = 0.05,
) -> np.ndarray:
    """Plain Adam minimizing the program value, for tiers ``ndvm.calibrate`` cannot drive."""
    th = theta0.copy()
    m = np.zeros_like(th)
    v = np.zeros_like(th)
    for t in range(1, steps + 1):
        g = np.nan_to_num(value_and_grad(th)[1])
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        th = th - lr * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    return th


def _cpu(fn: Callable[[], Any]) -> tuple[float, float]:
    c0, w0 = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - c0, time.perf_counter() - w0


def _calibrate_interp(tier: str, prog: BenchProgram, B: int, steps: int) -> tuple[str, Callable]:
    from ndvm.api import Program

    program = Program(prog.compiled(), tier)
    inputs = prog.inputs()
    try:
        from ndvm.calibrate import calibrate
    except ImportError:
        theta = prog.theta(B)

        def vg(th: np.ndarray) -> Any:
            r = program.evaluate(th, inputs, grad=True)
            return r.value, r.grad

        return "local-adam", lambda: local_adam(vg, theta, steps)
    return "ndvm.calibrate", lambda: calibrate(
        program, inputs, loss="value", starts=B, steps=steps, lr=0.05, seed=0,
        optimizer="adam", diagnostics=False,
    )  # fmt: skip


THROUGHPUT_TIERS = ("reference", "native", "staged-jax")


def throughput(
    out: Path, quick: bool, log: Log, program: str | None = None,
    tiers: tuple[str, ...] = THROUGHPUT_TIERS,
) -> Path:  # fmt: skip
    """Calibrations per CPU-hour of the tagged baseline and of each of ``tiers`` (those of
    THROUGHPUT_TIERS to measure; the tagged one is the baseline, always measured)."""
    prog = by_name(program or ("logistic16" if quick else "kalman80"))
    steps, wide = (3, 4) if quick else (100, 64)
    rows: list[dict[str, Any]] = []

    def add(tier: str, B: int, how: str, cpu: float, wall: float, measured: int) -> None:
        per_cal = cpu / measured * steps / B
        rows.append({"tier": tier, "B": B, "driver": how, "steps": steps,
                     "steps_measured": measured, "cpu_s_per_calibration": per_cal,
                     "wall_s": wall, "per_cpu_hour": 3600.0 / per_cal})  # fmt: skip

    tagged_steps = min(steps, 2 if quick else 5)
    import torch

    from ndvm.baselines.tagged import TaggedBackend

    torch.set_num_threads(1)
    backend, compiled, inputs = TaggedBackend(), prog.compiled(), prog.inputs()

    def tagged_vg(th: np.ndarray) -> Any:
        r = backend.run(compiled, th, inputs, grad=True)
        return r.value, r.grad

    tagged_vg(prog.theta(1))  # warm-up, as for every driver below
    cpu, wall = _cpu(lambda: local_adam(tagged_vg, prog.theta(1), tagged_steps))
    add("tagged", 1, "local-adam", cpu, wall, tagged_steps)
    for tier in [t for t in ("reference", "native") if t in available_tiers() and t in tiers]:
        for B in (1, wide):
            _calibrate_interp(tier, prog, B, 1)[1]()
            how, fn = _calibrate_interp(tier, prog, B, steps)
            add(tier, B, how, *_cpu(fn), steps)
    for B in (1, wide) if "staged-jax" in tiers else ():

        def jax_calibration(B: int = B) -> None:
            st = staged(prog, B)  # each candidate pays its own compile
            local_adam(st, prog.theta(B), steps)

        add("staged-jax", B, "local-adam", *_cpu(jax_calibration), steps)
    tagged_rate = rows[0]["per_cpu_hour"]
    for r in rows:
        r["vs_tagged"] = r["per_cpu_hour"] / tagged_rate
    log(f"throughput: {prog.name} calibrations ({steps} Adam steps) per CPU-hour")
    _not_built_note(log)
    log(report.table(rows, [("tier", "tier", str), ("B", "starts/walk", str),
                            ("driver", "driver", str),
                            ("cpu_s_per_calibration", "CPU per calibration", fmt_seconds),
                            ("per_cpu_hour", "per CPU-hour", lambda x: f"{x:,.0f}"),
                            ("vs_tagged", "vs tagged", report.ratio)]))  # fmt: skip
    if tagged_steps < steps:
        log(f"(tagged: {tagged_steps} steps measured, cost scaled to {steps})")
    folder = report.write(out, "throughput", rows, manifest("throughput", {"quick": quick}))
    fig, ax = report.figure()
    labels = [f"{r['tier']}\nB={r['B']}" for r in rows]
    ax.bar(labels, [r["per_cpu_hour"] for r in rows])
    ax.set_yscale("log")
    ax.set_ylabel(f"{prog.name} calibrations per CPU-hour")
    report.save(fig, folder)
    return folder
