"""Reactive sweep vs full recompute per site on the toy transformer, at several sizes.

    python benchmarks/bench_graph.py [--quick] [--out results/graph] [--threads 1]
    python benchmarks/bench_graph.py --tl [--tl-size 4 8 256] --seq-len 32  # vs TransformerLens
        [--tl-configs learned rotary]

Prints one table (exact node counts, predicted count ratio, measured wall-clock ratio, fitted
a and beta) measured in this run, and writes ``bench_graph.json``, ``env.json`` and
``rho_measured_vs_predicted.png`` into ``--out`` (default ``results/graph``, git-ignored).
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

import torch

from ndvm.graph import experiment as ex
from ndvm.graph.transformer import TransformerConfig

# (layers, heads, d_model); every head + MLP output is a site.
SIZES = [
    (4, 4, 64),
    (16, 4, 64),
    (32, 8, 64),
    (8, 4, 128),
    (4, 4, 256),
    (8, 8, 256),
    (4, 8, 512),
]
QUICK = [(4, 4, 64), (8, 4, 128), (4, 4, 256)]
POSITIONS = [(4, 4, 64), (4, 4, 256)]  # layer x position sweeps, position-resolved graph


def _env() -> dict[str, Any]:
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        commit = ""
    return {
        "commit": commit,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def _row(kind: str, r: ex.ToySweep) -> dict[str, Any]:
    c = r.cfg
    return {
        "kind": kind,
        "L": c.layers,
        "H": c.heads,
        "d": c.d_model,
        "T": c.seq_len,
        "sites": r.sites,
        "full": r.full_cost,
        "naive": r.sites * r.full_cost,
        "recomputed": r.recomputed,
        "predicted": r.predicted_cones,
        "rho_pred": r.rho_pred,
        "rho_counts": r.rho_counts,
        "rho_pred_time": r.rho_pred_time,
        "efficiency_time": r.efficiency_time,
        "rho_wall": r.rho_wall,
        "efficiency": r.efficiency,
        "a_us": 1e6 * r.fit.a,
        "beta_us": 1e6 * r.fit.beta,
        "engine_s": r.engine_s,
        "baseline_s": r.baseline_s,
        "bitwise": r.bitwise_equal,
    }


HEADER = (
    "| sweep | L | H | d | sites | full | naive nodes | recomputed (pred = meas) "
    "| rho pred | rho pred (time-wtd) | rho wall | wall/pred | wall/pred-time "
    "| a (us/node) | beta (us/node) | engine s | base s |"
)


def _fmt(row: dict[str, Any]) -> str:
    exact = "=" if row["recomputed"] == row["predicted"] else "!="
    return (
        f"| {row['kind']} | {row['L']} | {row['H']} | {row['d']} | {row['sites']} "
        f"| {row['full']} | {row['naive']} | {row['predicted']} {exact} {row['recomputed']} "
        f"| {row['rho_pred']:.3f} | {row['rho_pred_time']:.3f} | {row['rho_wall']:.3f} "
        f"| {row['efficiency']:.3f} | {row['efficiency_time']:.3f} "
        f"| {row['a_us']:.2f} | {row['beta_us']:.3f} | {row['engine_s']:.3f} "
        f"| {row['baseline_s']:.3f} |"
    )


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    for kind, marker in (("heads+mlp", "o"), ("layer x pos", "s")):
        pts = [r for r in rows if r["kind"] == kind]
        ax.scatter(
            [r["rho_pred"] for r in pts], [r["rho_wall"] for r in pts], marker=marker, label=kind
        )
        for r in pts:
            ax.annotate(f"L{r['L']}H{r['H']}d{r['d']}", (r["rho_pred"], r["rho_wall"]), fontsize=6)
    hi = max(max(r["rho_pred"], r["rho_wall"]) for r in rows) * 1.1
    ax.plot([1, hi], [1, hi], "k-", lw=0.8, label="measured = predicted")
    ax.plot([1, hi], [0.95, 0.95 * hi], "k--", lw=0.8, label="0.95 x predicted")
    ax.set_xlabel("predicted rho (exact node counts)")
    ax.set_ylabel("measured wall-clock rho")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _tl_rows(args: argparse.Namespace) -> int:
    """Heads, heads x positions, resid_pre layer x position: TL patching vs ndvm, same run."""
    from ndvm.extras import require
    from ndvm.graph.tlbench import compare, random_model, random_tokens, table

    require("bench_graph.py --tl", "transformer-lens")
    L, H, d = args.tl_size
    out = []
    for kind in args.tl_configs:
        model = random_model(L, H, d, n_ctx=args.seq_len, kind=kind)
        print(f"\n{kind}: L{L} H{H} d_model {d}, {args.seq_len} positions, batch {args.batch}, "
              f"float64, {args.threads} thread(s)")  # fmt: skip
        rows = compare(model, *random_tokens(model, args.batch, args.seq_len))
        print(table(rows), flush=True)
        out += [{"config": kind, **{k: v for k, v in r.items() if k != "values"}} for r in rows]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_graph_tl.json").write_text(json.dumps(out, indent=1))
    return 0 if all(r["max_rel_diff"] < 1e-6 for r in out) else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="three small sizes, one repeat")
    ap.add_argument("--out", type=Path, default=Path("results/graph"))
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=16)
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float64")
    ap.add_argument("--tl", action="store_true", help="only the rows against TransformerLens")
    ap.add_argument("--tl-size", type=int, nargs=3, default=[4, 8, 256], metavar=("L", "H", "D"))
    ap.add_argument(
        "--tl-configs", nargs="+", default=["learned", "rotary"], choices=["learned", "rotary"]
    )
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.tl:
        return _tl_rows(args)
    dtype = torch.float64 if args.dtype == "float64" else torch.float32
    repeats = args.repeats or (2 if args.quick else 3)
    rows = []
    print(HEADER)
    print("|" + "---|" * 17)
    for L, H, d in QUICK if args.quick else SIZES:
        cfg = TransformerConfig(L, H, d, seq_len=args.seq_len, vocab=64, dtype=dtype)
        rows.append(_row("heads+mlp", ex.run_toy_sweep(cfg, batch=args.batch, repeats=repeats)))
        print(_fmt(rows[-1]), flush=True)
    for L, H, d in POSITIONS[:1] if args.quick else POSITIONS:
        cfg = TransformerConfig(
            L, H, d, seq_len=args.seq_len, vocab=64, dtype=dtype, position_resolved=True
        )
        run = ex.run_toy_sweep(cfg, batch=args.batch, repeats=repeats, sites=ex.position_grid(cfg))
        rows.append(_row("layer x pos", run))
        print(_fmt(rows[-1]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_graph.json").write_text(json.dumps(rows, indent=1))
    (args.out / "env.json").write_text(json.dumps(_env(), indent=1))
    _plot(rows, args.out / "rho_measured_vs_predicted.png")
    print(f"wrote {args.out / 'bench_graph.json'}, {args.out / 'rho_measured_vs_predicted.png'}")
    ok = all(r["bitwise"] and r["recomputed"] == r["predicted"] for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
