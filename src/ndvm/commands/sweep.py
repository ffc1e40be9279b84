"""``ndvm sweep``: patch every head and MLP of a toy transformer; engine vs full recompute.

Prints exact predicted vs measured node counts and ratios, and saves ``heatmap.png`` and
``rho.png`` (plus ``heatmap_positions.png`` with ``--positions``) into ``--out``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "sweep",
        help="activation-patching sweep on a toy transformer (needs the torch extra)",
        description=__doc__.splitlines()[0],
    )
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--seq-len", type=int, default=16)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--vocab", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3, help="timing repeats (minimum)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--dtype", choices=["float32", "float64"], default="float64")
    p.add_argument("--positions", action="store_true", help="also run a layer x position sweep")
    p.add_argument("--out", type=Path, default=Path("results/graph/sweep"))
    tl = p.add_argument_group("a TransformerLens model (the transformer-lens extra)")
    tl.add_argument("--tl-config", type=Path, help="JSON of HookedTransformerConfig fields")
    tl.add_argument("--clean-tokens", help="prompts as token ids: '1,2,3;4,5,6'")
    tl.add_argument("--corrupt-tokens", help="corrupted prompts, same shape")
    tl.add_argument("--answer", help="one answer token per prompt: '3,4' (logit difference)")
    tl.add_argument("--wrong", help="one wrong token per prompt: '5,6'")
    p.set_defaults(func=run)


def _print_run(title: str, r: Any) -> None:
    print(f"== {title}")
    print(f"  sites                 {r.sites}")
    print(f"  full forward (nodes)  {r.full_cost}")
    print(f"  recomputed: predicted {r.predicted_cones}  measured {r.recomputed}")
    print(f"  naive (S x full)      {r.sites * r.full_cost}")
    print(f"  rho predicted         {r.rho_pred:.4f}")
    print(f"  rho measured (counts) {r.rho_counts:.4f}")
    print(f"  rho predicted (time-weighted by profiled node costs) {r.rho_pred_time:.4f}")
    print(
        f"  rho measured (time)   {r.rho_wall:.4f}  "
        f"(engine {r.engine_s:.3f} s, baseline {r.baseline_s:.3f} s)"
    )
    print(f"  fit: a = {1e6 * r.fit.a:.3f} us/node, beta = {1e6 * r.fit.beta:.4f} us/node")
    print(f"  metric == baseline bitwise: {r.bitwise_equal}")


def _ids(text: str | None, flag: str) -> list[list[int]]:
    try:
        return [[int(t) for t in row.split(",")] for row in (text or "").split(";")]
    except ValueError:
        raise ValueError(f"{flag} takes token ids like '1,2,3;4,5,6', got {text!r}") from None


def _run_tl(args: argparse.Namespace) -> int:
    import json

    import torch
    from transformer_lens import HookedTransformerConfig

    from ndvm.graph import metrics, tlbench

    torch.set_num_threads(args.threads)
    try:  # the user's inputs: a bad one is one line on stderr and exit status 2
        fields = {
            "dtype": torch.float64,
            "seed": args.seed,
            **json.loads(args.tl_config.read_text()),
        }
        clean = torch.tensor(_ids(args.clean_tokens, "--clean-tokens"))
        corrupt = torch.tensor(_ids(args.corrupt_tokens, "--corrupt-tokens"))
        if clean.shape != corrupt.shape:
            raise ValueError(
                f"clean {tuple(clean.shape)} and corrupt {tuple(corrupt.shape)} differ"
            )
        model = tlbench.build(HookedTransformerConfig(**fields))
        metric = None
        if args.answer or args.wrong:
            answer, wrong = _ids(args.answer, "--answer")[0], _ids(args.wrong, "--wrong")[0]
            metric = metrics.logit_diff(answer, wrong)
    except (ValueError, TypeError, OSError) as exc:
        print(f"ndvm: error: {exc}", file=sys.stderr)
        return 2
    rows = tlbench.compare(model, clean, corrupt, metric)
    print(tlbench.table(rows))
    args.out.mkdir(parents=True, exist_ok=True)
    for f in tlbench.plot_heatmaps(rows, args.out):
        print(f"wrote {f}")
    return 0 if all(r["max_abs_diff"] <= 1e-9 for r in rows) else 1


def run(args: argparse.Namespace) -> int:
    from ndvm.extras import require

    if args.tl_config is not None:
        require("ndvm sweep --tl-config", "torch", "plot", "transformer-lens")
        return _run_tl(args)

    require("ndvm sweep", "torch", "plot")
    import torch

    from ndvm.graph import experiment as ex
    from ndvm.graph.transformer import TransformerConfig

    torch.set_num_threads(args.threads)
    dtype = torch.float64 if args.dtype == "float64" else torch.float32
    size = dict(
        layers=args.layers,
        heads=args.heads,
        d_model=args.d_model,
        seq_len=args.seq_len,
        vocab=args.vocab,
        dtype=dtype,
    )
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    r = ex.run_toy_sweep(
        TransformerConfig(**size), batch=args.batch, seed=args.seed, repeats=args.repeats
    )
    _print_run(f"heads + MLP sweep, L={args.layers} H={args.heads} d={args.d_model}", r)
    files = [ex.plot_heatmap(r, out / "heatmap.png"), ex.plot_rho(r, out / "rho.png")]
    ok = r.bitwise_equal and r.recomputed == r.predicted_cones
    if args.positions:
        cfg = TransformerConfig(position_resolved=True, **size)
        rp = ex.run_toy_sweep(
            cfg, batch=args.batch, seed=args.seed, repeats=args.repeats, sites=ex.position_grid(cfg)
        )
        _print_run("layer x position sweep (hook_resid_pre)", rp)
        files.append(ex.plot_heatmap(rp, out / "heatmap_positions.png"))
        ok = ok and rp.bitwise_equal and rp.recomputed == rp.predicted_cones
    for f in files:
        print(f"wrote {f}")
    return 0 if ok else 1
