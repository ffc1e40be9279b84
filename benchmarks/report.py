"""Regenerate the README's "Measured" table: run the benchmark behind each row, write the
results as JSON, render the table.

    python benchmarks/report.py                    # every row, full budgets; README updated
    python benchmarks/report.py --quick            # CI smoke: seconds; README left alone
    python benchmarks/report.py --rows discovery   # some rows; the others kept from the JSON
    python benchmarks/report.py --render-only      # the README table from the committed JSON

Each row records where and when it was measured (commit, CPU model, cores, load average at its
start, date; ``ndvm.bench.manifest``) next to its figure in ``--json`` (default
``benchmarks/results/readme.json``; with ``--quick``, ``bench-out/readme-quick.json``). A row
is measured either end to end from Python (what a user of the package sees) or by the core
alone, or is an exact count; a row without a benchmark to run (``Row.run`` None) would keep
its earlier figure and say so. The rows' benchmarks and how their figures are read:
``report_rows.py``.
Timed comparisons run ``--rounds`` rounds (each round times both systems, back to back, case by
case: the rounds alternate) and report the median and range of the ratio; discovery counts
report the seeds and the spread across them. Operon and gplearn (``pip install
'ndvm[bench]'``) are optional: without them their part of a row says so.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # report_rows and the benchmarks' modules, however this is loaded
from report_rows import (  # noqa: E402
    bench,
    rounds_of,
    run_calib_hour,
    run_calib_one,
    run_graph_rho,
    run_graph_tl,
    run_jax_compile,
    run_native_c,
    run_native_ref,
    run_search,
    spread_text,
)

README = HERE.parent / "README.md"
BEGIN, END = "<!-- measured:begin -->", "<!-- measured:end -->"
PY, CORE, KEPT = "end to end, Python", "core alone", "earlier single run, not regenerated"
PEERS = {"operon": "pyoperon", "gplearn": "gplearn"}


# --- discovery ------------------------------------------------------------------------------

TWENTY = (
    "II.3.24,I.18.12,I.47.23,II.27.18,I.15.10,I.48.2,I.8.14,I.13.12,I.16.6,III.4.33,"
    "I.12.11,I.37.4,I.44.4,I.24.6,I.11.19,logistic,arrhenius,line-big,mm-big,decay-big"
)

TWENTY_TEXT = " (the last 20 of discovery_laws.py: 4 Feynman, 11 harder Feynman, 5 natural-scale)"


def discovery_args(quick: bool) -> list[str]:
    if quick:
        return ["--quick"]
    return ["--seconds", "30", "--noise", "0", "--laws", TWENTY, "--seeds", "0,1,2",
            "--no-ladder"]  # fmt: skip


def run_discovery(quick: bool, work: Path, reuse: bool) -> dict[str, Any]:
    methods = ["ndvm"] + [m for m, mod in PEERS.items() if importlib.util.find_spec(mod)]
    if not reuse:
        bench("bench_discovery.py", [*discovery_args(quick), "--methods", ",".join(methods),
                                     "--out", str(work)], HERE)  # fmt: skip
    res = json.loads((work / "discovery_summary.json").read_text())
    spread, opts, grammar = res["spread"], res["options"], res["grammar"]
    parts = []
    for m in spread:
        rec, ok = spread[m]["recovered"], spread[m]["success"]
        parts.append(
            f"{m} {rec['median']:g} / {rec['of']} (range {rec['min']}–{rec['max']}), "
            f"R² ≥ {opts['success_r2']} {ok['median']:g} / {ok['of']} ({ok['min']}–{ok['max']})"
        )
    parts += [f"{m}: not run ({PEERS[m]} not installed)" for m in PEERS if m not in spread]
    missing = [f"{p} cannot express {', '.join(grammar[p]['cannot_express'])}"
               for p in PEERS if grammar[p]["cannot_express"]]  # fmt: skip
    laws = len(opts["laws"].split(","))
    what = (
        f"exact law recovery (the default model), {laws} laws"
        f"{TWENTY_TEXT if opts['laws'] == TWENTY else ''}"
        f", noise {opts['noise']}, "
        f"{opts['seconds']:g} s each, one thread, the same operators for every system "
        f"({', '.join(grammar['binary'] + grammar['unary'])}), seeds {opts['seeds']}, "
        f"median over seeds (`bench_discovery.py`)"
    )
    figure = "; ".join(parts) + (f" ({'; '.join(missing)})" if missing else "")
    data = {k: v for k, v in res.items() if k != "summary"}
    data["rows"] = json.loads((work / "discovery.json").read_text())  # per law, seed, system
    return {"what": what, "figure": figure, "data": data}


# --- fits against curve_fit -----------------------------------------------------------------


def _result(head: str, parts: list[str], data: dict[str, Any]) -> dict[str, Any]:
    """A row's result: its figure (``head: part; part; ...``) and the data behind it."""
    return {"figure": f"{head}: " + "; ".join(parts), "data": data}


def run_fit(quick: bool, work: Path, reuse: bool, rounds: int) -> dict[str, Any]:
    runs = rounds_of("bench_fit.py", ["--repeat", "1" if quick else "20"], rounds, work, reuse)
    ratio = {k: [sum(r["ndvm_s"] for r in run[k]) / sum(r["scipy_s"] for r in run[k])
                 for run in runs] for k in ("starts1", "defaults", "starts64")}  # fmt: skip
    good = [sum(r["ndvm_loss"] <= r["scipy_loss"] * (1 + 1e-9) or r["scipy_loss"] != r["scipy_loss"]
                for r in run["defaults"]) for run in runs]  # fmt: skip
    labels = {"starts1": "1 start", "defaults": "defaults (16 starts)", "starts64": "64 starts"}
    parts = [f"{label} {spread_text(ratio[k])}" for k, label in labels.items()]
    parts.append(f"optimum at least as good (defaults) on {min(good)} / "
                 f"{len(runs[0]['defaults'])} in every round")  # fmt: skip
    return _result("time vs curve_fit from its one start", parts,
                   {"ratios": ratio, "at_least_as_good": good})  # fmt: skip


def run_nist(quick: bool, work: Path, reuse: bool, rounds: int) -> dict[str, Any]:
    runs = rounds_of("bench_nist.py", ["--repeat", "1" if quick else "5"], rounds, work, reuse)
    ratio = {k: [sum(r[k]["ms"] for r in run) / sum(r["scipy"]["ms"] for r in run)
                 for run in runs] for k in ("ndvm", "ndvm1")}  # fmt: skip
    # reached certified RSS: the benchmark's own rule, recomputed from its rows by its module
    from bench_nist import problems, reached

    by = {p.name: p for p in problems()}
    hits = {k: [sum(bool(reached(r[k]["rss"], by[r["problem"]])) for r in run) for run in runs]
            for k in ("ndvm", "ndvm1", "scipy")}  # fmt: skip
    n = len(runs[0])
    got = {k: f"{statistics.median(hits[k]):g} / {n}" for k in hits}
    parts = [f"ndvm defaults {got['ndvm']} in {spread_text(ratio['ndvm'])} curve_fit's time",
             f"one start {got['ndvm1']} in {spread_text(ratio['ndvm1'])}",
             f"curve_fit {got['scipy']}"]  # fmt: skip
    return _result("certified RSS reached", parts, {"ratios": ratio, "reached": hits})


def run_scale(quick: bool, work: Path, reuse: bool) -> dict[str, Any]:
    (res,) = rounds_of("bench_scale.py", ["--repeat", "1" if quick else "5"], 1, work, reuse)
    from bench_scale import _reached

    n = len(res)
    nd = sum(_reached(r["ndvm"], r["reference"]) for r in res)
    cf = sum(_reached(r["curve_fit"], r["reference"]) for r in res)
    return {
        "figure": f"ndvm defaults reach the optimum on {nd} / {n}, `curve_fit` from its "
        f"default `p0` on {cf} / {n}",
        "data": {"ndvm": nd, "curve_fit": cf, "of": n},
    }


@dataclass(frozen=True)
class Row:
    id: str
    what: str
    kind: str
    run: Callable[..., dict[str, Any]] | None = None
    figure: str = ""  # a row not regenerated here: its earlier figure
    timed: bool = False
    needs: tuple[str, ...] = ()  # modules (of ndvm's extras) the benchmark imports


ROWS = [
    Row("discovery", "exact law recovery (`bench_discovery.py`)", PY, run_discovery,
        needs=("sympy",)),
    Row("fit", "converged fit of a never-seen program vs scipy `curve_fit`, 12 programs "
        "(`bench_fit.py`)", PY, run_fit, timed=True, needs=("scipy",)),
    Row("nist", "NIST StRD nonlinear regression, 27 problems × 2 starts (`bench_nist.py`)",
        PY, run_nist, timed=True, needs=("scipy",)),
    Row("scale", "natural-scale fits from no initial values (a logistic onset at t = 45, "
        "Arrhenius, a 50-day oscillation over 1,000 days, two Gaussian peaks, ...; "
        "`bench_scale.py`)", PY, run_scale, needs=("scipy",)),
    Row("native-ref", "Kalman-80 forward+gradient, native (replaying its recorded trace, the "
        "API's default) vs reference backend (`bench_native.py --reference`)", PY,
        run_native_ref, timed=True),
    Row("native-c", "Kalman-80 forward+gradient per lane, the core (as the API runs it, replaying "
        "its trace) vs scalar hand-written C (`bench_native.py --table`, see docs/native.md)",
        CORE, run_native_c, timed=True),
    Row("search", "co-search with 2 workers vs the bare one-thread in-runtime loop "
        "(`ndvm.compile` + `Task.calibrate`) on the same candidates, default 16 starts, 4 s per "
        "measurement (`bench_search.py`)", PY, run_search, timed=True),
    Row("calib-hour", "Kalman-80 calibrations per CPU-hour (100 Adam steps), native vs the "
        "tagged-tensor baseline (eager PyTorch, `ndvm bench throughput`)", PY, run_calib_hour,
        timed=True, needs=("torch", "matplotlib")),
    Row("calib-one", "one sr-damped calibration (50 Adam steps, 44 points, 1 start), native "
        "in-runtime Adam", PY, run_calib_one, timed=True),
    Row("jax-compile", "staged JAX compile per new Kalman-80 structure vs a native gradient "
        "step", PY, run_jax_compile, timed=True, needs=("jax", "matplotlib")),
    Row("graph-rho", "reactive sweep on the toy transformer: nodes of a full recompute per site "
        "over nodes recomputed (ρ, `bench_graph.py`)", "exact counts", run_graph_rho,
        needs=("torch", "matplotlib")),
    Row("graph-tl", "TransformerLens patching sweeps vs TL's own (L4 H8 d_model 256, learned "
        "positions, 32 positions, batch 4, float64, one thread; `bench_graph.py --tl`)", PY,
        run_graph_tl, timed=True, needs=("torch", "transformer_lens")),
]  # fmt: skip


def measure(row: Row, args: argparse.Namespace) -> dict[str, Any]:
    from ndvm.bench.manifest import manifest

    where = manifest(f"benchmarks/report.py --rows {row.id}", {"quick": args.quick})
    keep = ("git_commit", "git_dirty", "timestamp", "cpu_model", "cpu_count", "load_average")
    out = {"id": row.id, "what": row.what, "kind": row.kind,
           "measured": {k: where[k] for k in keep}}  # fmt: skip
    work = Path(args.work).resolve() / row.id
    stamp = work / "measured.json"  # where and when the outputs in ``work`` were measured
    if args.reuse and stamp.exists():
        out["measured"] = {**out["measured"], **json.loads(stamp.read_text()), "reused": True}
    elif not args.reuse:
        work.mkdir(parents=True, exist_ok=True)
        stamp.write_text(json.dumps(out["measured"]))
    absent = [m for m in row.needs if importlib.util.find_spec(m) is None]
    if absent:
        from ndvm.extras import EXTRAS

        extras = sorted({e for e, mods in EXTRAS.items() for m in absent if m in mods})
        out["figure"] = f"not measured: needs {', '.join(absent)} (ndvm[{','.join(extras)}])"
        return out
    try:
        extra = {"rounds": args.rounds} if row.timed else {}
        out.update(row.run(args.quick, work, args.reuse, **extra))  # type: ignore[misc]
    except (RuntimeError, OSError, KeyError, ValueError) as exc:
        out["figure"] = f"not measured: {exc}"
    return out


def render(results: list[dict[str, Any]], static: list[Row]) -> str:
    """The README's table (markdown) from the results and the rows not regenerated."""
    lines = ["| what | figure | measured |", "|---|---|---|"]
    for r in results:
        m = r["measured"]
        load = ", ".join(f"{x:.1f}" for x in m["load_average"] or [])
        when = (
            f"{r['kind']}; {m['timestamp'][:10]}, {m['cpu_count']} × {m['cpu_model']}, "
            f"load {load}, commit {(m['git_commit'] or '?')[:8]}"
        )
        lines.append(f"| {r['what']} | {r['figure']} | {when} |")
    lines += [f"| {s.what} | {s.figure} | {s.kind} ({KEPT}) |" for s in static]
    return "\n".join(lines)


def fail(message: str) -> None:
    """A usage error: one line on stderr, exit status 2."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def update_readme(table: str, readme: Path) -> None:
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        fail(f"{readme} has no {BEGIN} ... {END} block")
    head, rest = text.split(BEGIN, 1)
    readme.write_text(f"{head}{BEGIN}\n{table}\n{END}{rest.split(END, 1)[1]}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="CI smoke: seconds; README untouched")
    ap.add_argument("--rows", default=None, help="comma-separated row ids (default: all)")
    ap.add_argument("--rounds", type=int, default=None, help="timed rows (default 10; quick 1)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--work", default="bench-out/report", help="the benchmarks' own outputs")
    ap.add_argument("--reuse", action="store_true", help="read the outputs in --work, no runs")
    ap.add_argument("--render-only", action="store_true")
    ap.add_argument("--readme", default=None, help=f"the file to update (default {README})")
    args = ap.parse_args(argv)
    args.rounds = args.rounds or (1 if args.quick else 10)
    default = "bench-out/readme-quick.json" if args.quick else HERE / "results" / "readme.json"
    path = Path(args.json or default)
    old = json.loads(path.read_text()) if path.exists() else {"rows": []}
    static = [r for r in ROWS if r.run is None]
    wanted = set(args.rows.split(",")) if args.rows else {r.id for r in ROWS if r.run}
    unknown = wanted - {r.id for r in ROWS if r.run}
    if unknown:
        fail(f"no such row(s): {', '.join(sorted(unknown))}")
    results = {r["id"]: r for r in old["rows"]}
    if not args.render_only:
        for row in ROWS:
            if row.id in wanted:
                results[row.id] = measure(row, args)
                print(f"{row.id}: {results[row.id]['figure']}", flush=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        order = [r.id for r in ROWS]
        rows = sorted(results.values(), key=lambda r: order.index(r["id"]))
        path.write_text(json.dumps({"rows": rows}, indent=1, ensure_ascii=False) + "\n")
    rows = [results[r.id] for r in ROWS if r.id in results]
    table = render(rows, static)
    print(table)
    if not args.quick or args.readme:
        update_readme(table, Path(args.readme or README))


if __name__ == "__main__":
    main()
