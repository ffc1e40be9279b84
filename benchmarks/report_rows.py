"""The benchmarks behind the README rows of ``report.py`` that are not fits or discovery: the
native runtime against the reference backend and hand-written C, co-search, calibration
throughput, staged JAX, and the reactive graph engine; and the helpers every row uses.

Each ``run_*`` runs its benchmark (``--quick``: a smoke form of seconds), reads what the
benchmark wrote as JSON and returns the row's ``figure`` and ``data``; timed rows take
``rounds`` and report the median and range of the per-round ratio (each round times both
sides back to back, so the rounds alternate).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def bench(script: str, args: list[str], cwd: Path = HERE) -> None:
    """Run ``benchmarks/<script>`` (``ndvm``: the ``ndvm`` command) with this interpreter; a
    failure raises with its last line."""
    head = ["-m", "ndvm"] if script == "ndvm" else [str(HERE / script)]
    proc = subprocess.run([sys.executable, *head, *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"{script} exited {proc.returncode}: {tail[0]}")


def spread_text(values: list[float], unit: str = "×", digits: int = 2) -> str:
    """The median of one figure per round, with its range (from 100 on: whole numbers)."""
    med = statistics.median(values)
    lo, hi, n = min(values), max(values), len(values)

    def num(x: float) -> str:
        return f"{x:,.0f}" if abs(med) >= 100 else f"{x:.{digits}f}"

    if n == 1:
        return f"{num(med)}{unit} (1 round)"
    return f"{num(med)}{unit} (range {num(lo)}–{num(hi)}, {n} rounds)"


def rounds_of(
    script: str, args: list[str], rounds: int, work: Path, reuse: bool, flag: str = "--json",
    read: str | None = None,
) -> list[Any]:  # fmt: skip
    """``rounds`` runs of a benchmark writing its results where ``flag`` says (a JSON file; with
    ``read``, a folder holding the JSON file ``read``); their parsed results."""
    out = []
    for k in range(rounds):
        path = work / (f"round{k}" if read else f"round{k}.json")
        if not reuse:
            work.mkdir(parents=True, exist_ok=True)
            bench(script, [*args, flag, str(path)])
        out.append(json.loads((path / read if read else path).read_text()))
    return out


# --- the native runtime -----------------------------------------------------------------------


def run_native_ref(quick: bool, work: Path, reuse: bool, rounds: int) -> dict[str, Any]:
    args = ["--reference", *(["--quick"] if quick else [])]
    runs = rounds_of("bench_native.py", args, rounds, work, reuse)
    ratio = {B: [r["reference"]["kalman80"][B]["reference"] / r["reference"]["kalman80"][B]
                 ["native"] for r in runs] for B in ("1", "256")}  # fmt: skip
    figure = (
        f"native {spread_text(ratio['1'])} faster at B=1, {spread_text(ratio['256'])} per "
        f"lane at B=256 (`value_and_grad` on both backends, best of ≥ 3 calls each per round)"
    )
    return {"figure": figure, "data": {"reference_over_native": ratio, "runs": runs}}


NATIVE_LANES = ("1", "64", "256", "1024")


def run_native_c(quick: bool, work: Path, reuse: bool, rounds: int) -> dict[str, Any]:
    lanes = NATIVE_LANES[::2] if quick else NATIVE_LANES
    args = ["--table", "--lanes", ",".join(lanes), "--columns", "f64 core,f32 core",
            *(["--quick"] if quick else [])]  # fmt: skip
    runs = rounds_of("bench_native.py", args, rounds, work, reuse)
    per = [r["kalman"]["seconds_per_lane"] for r in runs]
    ratio = {B: [p[B]["f64 core"] / p[B]["hand C"] for p in per] for B in lanes}
    f32 = {B: [p[B]["f64 core"] / p[B]["f32 core"] for p in per] for B in lanes}
    c_us = [p[lanes[0]]["hand C"] * 1e6 for p in per]
    parts = [f"B={B} {spread_text(ratio[B])}" for B in ("256", "64", "1024", "1") if B in lanes]
    wide = "256" if "256" in lanes else max(lanes, key=int)
    figure = (
        f"ndvm's time / C's time per lane (float64): {'; '.join(parts)}; the C: "
        f"{statistics.median(c_us):.2f} µs per lane (forward-mode duals, `-O3`); float64 time / "
        f"float32 time, the core: B={wide} {spread_text(f32[wide])}"
    )
    return {"figure": figure, "data": {"core_over_c": ratio, "f64_over_f32": f32, "runs": runs}}


# --- co-search and calibration ----------------------------------------------------------------


def run_search(quick: bool, work: Path, reuse: bool, rounds: int) -> dict[str, Any]:
    starts = "16" if quick else "1,16"
    if not reuse:
        bench("bench_search.py", ["--seconds", "0.5" if quick else "4", "--starts", starts,
                                  "--repeats", str(rounds), "--skip-discovery", "--skip-enso",
                                  *(["--corpus", "20"] if quick else []),
                                  "--out", str(work)])  # fmt: skip
    rows = json.loads((work / "search.json").read_text())["throughput"]
    by = {(r["task"], r["starts"]): r for r in rows}
    eff = {f"{t} starts {s}": [w2 / b for b, _, w2 in r["runs"]] for (t, s), r in by.items()}

    def cell(s: int) -> str:
        return ", ".join(f"{spread_text(eff[f'{t} starts {s}'])} ({t})"
                         for t, k in by if k == s)  # fmt: skip

    free = ", ".join(f"{by[t, 16]['cpu_bound_w2']:.2f}× ({t})" for t, k in by if k == 16)
    figure = f"2 workers / bare loop, calibrations per second: {cell(16)}"
    if ("sr-damped", 1) in by:
        figure += f"; with `--starts 1`: {cell(1)}"
    figure += f"; on 2 free cores (from CPU time per calibration, 16 starts): {free}"
    return {"figure": figure, "data": {"efficiency_w2": eff, "throughput": rows}}


def run_calib_hour(quick: bool, work: Path, reuse: bool, rounds: int) -> dict[str, Any]:
    args = ["bench", "throughput", "--tiers", "native", *(["--quick"] if quick else [])]
    runs = rounds_of("ndvm", args, rounds, work, reuse, "--out", "throughput/results.json")
    rows = [{(r["tier"], r["B"]): r for r in run["rows"]} for run in runs]
    wide = max(B for _, B in rows[0])
    ratio = {B: [r["native", B]["vs_tagged"] for r in rows] for B in (1, wide)}
    rate = statistics.median(r["native", wide]["per_cpu_hour"] for r in rows)
    tagged = rows[0]["tagged", 1]
    figure = (
        f"native {wide} starts per walk: {spread_text(ratio[wide])} the tagged baseline's "
        f"calibrations per CPU-hour ({rate:,.0f} per CPU-hour); 1 start: "
        f"{spread_text(ratio[1])} (`ndvm bench throughput`; {tagged['steps']} Adam steps, "
        f"tagged: {tagged['steps_measured']} steps measured and scaled; CPU time, one thread)"
    )
    return {"figure": figure, "data": {"vs_tagged": ratio, "runs": runs}}


def run_calib_one(quick: bool, work: Path, reuse: bool, rounds: int) -> dict[str, Any]:
    args = ["--backends", "native", "--no-jax", "--repeat", "1" if quick else "3"]
    runs = rounds_of("bench_calibrate.py", args, rounds, work, reuse, "--out")
    ms = {k: [1e3 * next(r["seconds"] for r in run["rows"] if r["bench"] == k) for run in runs]
          for k in ("sr1", "srnew")}  # fmt: skip
    figure = (
        f"{spread_text(ms['sr1'], ' ms', 3)}; a never-seen structure, `ndvm.compile` included: "
        f"{spread_text(ms['srnew'], ' ms', 3)} (best of 3 calls per round; "
        f"`bench_calibrate.py`)"
    )
    return {"figure": figure, "data": {"ms": ms, "runs": runs}}


# --- staged JAX ---------------------------------------------------------------------------------


def run_jax_compile(quick: bool, work: Path, reuse: bool, rounds: int) -> dict[str, Any]:
    program = "scalar" if quick else "kalman80"
    args = ["bench", "crossover", "--programs", program, *(["--quick"] if quick else [])]
    runs = rounds_of("ndvm", args, rounds, work, reuse, "--out", "crossover/results.json")
    (row,) = runs[0]["rows"]
    got = {k: [run["rows"][0][k] for run in runs] for k in row if k.endswith("_s")}
    figure = (
        f"{program}: JAX trace + compile {spread_text(got['jax_compile_s'], ' s')}; then a "
        f"JAX step {spread_text([1e3 * s for s in got['jax_step_s']], ' ms', 3)}, a native "
        f"gradient step {spread_text([1e3 * s for s in got['native_step_s']], ' ms', 3)} "
        f"(B=1; `ndvm bench crossover`, XLA on one thread)"
    )
    return {"figure": figure, "data": {"seconds": got, "runs": runs}}


# --- the reactive graph engine ----------------------------------------------------------------


def run_graph_rho(quick: bool, work: Path, reuse: bool) -> dict[str, Any]:
    if not reuse:
        bench("bench_graph.py", ["--repeats", "1", *(["--quick"] if quick else []),
                                 "--out", str(work)])  # fmt: skip
    rows = json.loads((work / "bench_graph.json").read_text())
    exact = all(r["recomputed"] == r["predicted"] for r in rows)

    def rho(kind: str) -> str:
        got = [r["rho_counts"] for r in rows if r["kind"] == kind]
        sizes = ", ".join(f"{r['L']}×{r['H']}×{r['d']}" for r in rows if r["kind"] == kind)
        lo, hi = f"{min(got):.2f}", f"{max(got):.2f}"
        return f"ρ = {lo if lo == hi else f'{lo}–{hi}'} at L×H×d {sizes}"

    figure = (
        f"every head + MLP output: {rho('heads+mlp')}; layer × position: {rho('layer x pos')}; "
        f"nodes recomputed {'=' if exact else '≠'} the predicted cones on every size"
    )
    return {"figure": figure, "data": {"rows": rows}}


def run_graph_tl(quick: bool, work: Path, reuse: bool, rounds: int) -> dict[str, Any]:
    size = ["--tl-size", "2", "2", "32", "--seq-len", "8"] if quick else ["--seq-len", "32"]
    args = ["--tl", *size, "--tl-configs", "learned"]
    runs = rounds_of("bench_graph.py", args, rounds, work, reuse, "--out", "bench_graph_tl.json")
    sweeps = [r["sweep"] for r in runs[0]]
    ratio = {s: [r["ratio"] for run in runs for r in run if r["sweep"] == s] for s in sweeps}
    diff = max(r["max_rel_diff"] for run in runs for r in run)
    parts = [f"{s.replace('resid_pre', '`resid_pre`')} {spread_text(ratio[s])}" for s in sweeps]
    figure = f"TL time / ndvm time: {'; '.join(parts)}; values equal to {diff:.0e} (relative)"
    return {"figure": figure, "data": {"tl_over_ndvm": ratio, "runs": runs}}
