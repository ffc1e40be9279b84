"""``ndvm sweep``: patch every head and MLP of a toy transformer; engine vs full recompute.

Prints exact predicted vs measured node counts and ratios and writes the result tensors into
``--out``: ``sweep.npz`` (or ``sweep.pt`` with ``--format pt``) with one array per sweep and
``sweep.json`` with each array's axis names, shape and the run's settings. With the plot extra
(and without ``--no-plots``) it also saves heat maps (a diverging map centred at 0):
``heatmap.png`` and ``rho.png`` (plus ``heatmap_positions.png`` with ``--positions``), or
``tl_*.png`` for ``--tl-config``. Sizes are checked before anything is allocated.
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
    p.add_argument("--format", choices=["npz", "pt"], default="npz", help="tensor file format")
    p.add_argument("--no-plots", action="store_true", help="write the tensors only")
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


LIMITS = {"layers": 64, "heads": 64, "d_model": 4096, "seq_len": 512, "batch": 256,
          "vocab": 100_000, "repeats": 100, "threads": 256}  # fmt: skip
MAX_PARAMS = 200_000_000  # parameters of the model (float64: 1.6 GB)
MAX_GFLOP = 500.0  # a full recompute per site, all repeats (about a minute on one core)


TL_FIELDS = {"layers": "n_layers", "heads": "n_heads", "d_model": "d_model", "seq_len": "the "
             "prompt length", "batch": "the prompt count", "vocab": "d_vocab"}  # fmt: skip


def check_sizes(tl: bool = False, **sizes: int) -> None:
    """Raise ``ValueError`` (one line) for a size out of range or a sweep too large to run.

    Bounds each size, the parameter count and the floating-point work of the baseline's full
    recompute per site (the larger arm) before anything is allocated.
    """
    for name, value in sizes.items():
        hi = LIMITS.get(name)
        if hi is not None and not 1 <= value <= hi:
            label = f"--tl-config {TL_FIELDS[name]}" if tl else f"--{name.replace('_', '-')}"
            raise ValueError(f"{label} must be in 1..{hi}, got {value}")
    L, H, d = sizes["layers"], sizes["heads"], sizes["d_model"]
    if d % H and not tl:
        raise ValueError(f"--d-model ({d}) must be a multiple of --heads ({H})")
    params = L * 12 * d * d + 2 * sizes.get("vocab", 1) * d
    if params > MAX_PARAMS:
        raise ValueError(f"the model would have {params:.3g} parameters (limit {MAX_PARAMS:.0e}):"
                         " use fewer --layers or a smaller --d-model")  # fmt: skip
    T, B = sizes["seq_len"], sizes["batch"]
    forward = 2 * B * T * L * (12 * d * d + 2 * T * d) + 2 * B * T * d * sizes.get("vocab", 1)
    sites = L * (H + 1) + (L * T if sizes.get("positions") else 0)
    gflop = forward * sites * 2 * sizes.get("repeats", 1) / 1e9
    if gflop > MAX_GFLOP:
        raise ValueError(f"the sweep would take about {gflop:.3g} GFLOP (limit {MAX_GFLOP:g}): "
                         "reduce --layers, --d-model, --seq-len, --batch or --repeats")  # fmt: skip


def check_tl_config(fields: dict[str, Any], clean: Any) -> None:
    """The sizes of a TransformerLens config (and the prompts) before the model is built."""
    need = ("n_layers", "d_model", "n_ctx", "d_head")
    missing = [k for k in need if k not in fields]
    if missing:
        raise ValueError(f"--tl-config needs the fields {', '.join(missing)}")
    for k in ("n_layers", "d_model", "n_ctx", "d_head", "n_heads", "d_mlp", "d_vocab"):
        if k in fields and (not isinstance(fields[k], int) or fields[k] < 1) and \
                not (k in ("n_heads", "d_mlp", "d_vocab") and fields[k] == -1):  # fmt: skip
            raise ValueError(f"--tl-config field {k} must be a positive integer, got {fields[k]!r}")
    heads = fields.get("n_heads", -1)
    heads = heads if heads > 0 else fields["d_model"] // fields["d_head"]
    T = clean.shape[1]
    if T > fields["n_ctx"]:
        raise ValueError(f"prompts have {T} tokens but n_ctx is {fields['n_ctx']}")
    check_sizes(True, layers=fields["n_layers"], heads=max(heads, 1),
                d_model=fields["d_model"], seq_len=T, batch=clean.shape[0],
                vocab=max(fields.get("d_vocab", 1), 1), positions=1)  # fmt: skip


def save(out: Path, fmt: str, arrays: dict[str, Any], axes: dict[str, tuple[str, ...]],
         meta: dict[str, Any]) -> list[Path]:  # fmt: skip
    """``sweep.npz`` / ``sweep.pt`` (one array per sweep) and ``sweep.json`` (axes, settings)."""
    import json

    import numpy as np

    out.mkdir(parents=True, exist_ok=True)
    data = {k: v.detach().cpu() for k, v in arrays.items()}
    path = out / f"sweep.{fmt}"
    if fmt == "pt":
        import torch

        torch.save(data, path)
    else:
        np.savez(path, **{k: v.numpy() for k, v in data.items()})
    info = {"file": path.name, "format": fmt, **meta,
            "arrays": {k: {"axes": list(axes[k]), "shape": list(v.shape), "dtype": str(v.dtype)}
                       for k, v in data.items()}}  # fmt: skip
    (out / "sweep.json").write_text(json.dumps(info, indent=2, default=str) + "\n")
    return [path, out / "sweep.json"]


def _plots_wanted(args: argparse.Namespace) -> bool:
    from ndvm.extras import missing

    if args.no_plots:
        return False
    if missing("plot"):
        print("ndvm: note: no plots (the 'plot' extra is not installed); tensors written",
              file=sys.stderr)  # fmt: skip
        return False
    return True


def _ids(text: str | None, flag: str) -> list[list[int]]:
    try:
        return [[int(t) for t in row.split(",")] for row in (text or "").split(";")]
    except ValueError:
        raise ValueError(f"{flag} takes token ids like '1,2,3;4,5,6', got {text!r}") from None


def _run_tl(args: argparse.Namespace) -> int:
    import json

    import torch
    from transformer_lens import HookedTransformerConfig

    from ndvm.errors import NdvmError
    from ndvm.graph import metrics, tlbench

    torch.set_num_threads(args.threads)
    try:  # the user's inputs: a bad one is one line on stderr and exit status 2
        fields = json.loads(args.tl_config.read_text())
        if not isinstance(fields, dict):
            raise ValueError("--tl-config must hold a JSON object of config fields")
        clean = torch.tensor(_ids(args.clean_tokens, "--clean-tokens"))
        corrupt = torch.tensor(_ids(args.corrupt_tokens, "--corrupt-tokens"))
        if clean.shape != corrupt.shape:
            raise ValueError(
                f"clean {tuple(clean.shape)} and corrupt {tuple(corrupt.shape)} differ"
            )
        check_tl_config(fields, clean)
        vocab = fields.get("d_vocab", -1)
        if vocab > 0 and int(max(clean.max(), corrupt.max())) >= vocab:
            raise ValueError(f"token ids must be in 0..{vocab - 1}")
        if int(min(clean.min(), corrupt.min())) < 0:
            raise ValueError("token ids must be >= 0")
        model = tlbench.build(HookedTransformerConfig(**{"dtype": torch.float64, "seed": args.seed,
                                                         **fields}))  # fmt: skip
        metric = None
        if args.answer or args.wrong:
            answer, wrong = _ids(args.answer, "--answer")[0], _ids(args.wrong, "--wrong")[0]
            metric = metrics.logit_diff(answer, wrong)
        rows = tlbench.compare(model, clean, corrupt, metric)
    except (ValueError, TypeError, OSError, AssertionError, NdvmError) as exc:
        print(f"ndvm: error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
              file=sys.stderr)  # fmt: skip
        return 2
    print(tlbench.table(rows))
    names = {r["sweep"]: r["sweep"].split(" layer")[0].replace(" ", "_") for r in rows}
    meta = {"tl_config": fields, "clean_tokens": clean.tolist(),
            "corrupt_tokens": corrupt.tolist(), "seed": args.seed,
            "metric": "logit_diff(answer, wrong)" if metric else "logits[:, -1, 1] - [:, -1, 2]",
            "timings": {names[r["sweep"]]: {k: r[k] for k in ("tl_s", "ndvm_s", "ratio",
                        "max_rel_diff")} for r in rows}}  # fmt: skip
    files = save(args.out, args.format, {names[r["sweep"]]: r["values"] for r in rows},
                 {names[r["sweep"]]: r["axes"] for r in rows}, meta)  # fmt: skip
    if _plots_wanted(args):
        files += tlbench.plot_heatmaps(rows, args.out)
    for f in files:
        print(f"wrote {f}")
    return 0 if all(r["max_abs_diff"] <= 1e-9 for r in rows) else 1


def run(args: argparse.Namespace) -> int:
    from ndvm.extras import require

    if args.tl_config is not None:
        require("ndvm sweep --tl-config", "torch", "transformer-lens")
        return _run_tl(args)

    try:  # sizes first: a bad size is reported the same with or without torch
        check_sizes(
            layers=args.layers,
            heads=args.heads,
            d_model=args.d_model,
            seq_len=args.seq_len,
            batch=args.batch,
            vocab=args.vocab,
            repeats=args.repeats,
            threads=args.threads,
            positions=int(args.positions),
        )
    except ValueError as exc:
        print(f"ndvm: error: {exc}", file=sys.stderr)
        return 2
    require("ndvm sweep", "torch")
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
    r = ex.run_toy_sweep(
        TransformerConfig(**size), batch=args.batch, seed=args.seed, repeats=args.repeats
    )
    _print_run(f"heads + MLP sweep, L={args.layers} H={args.heads} d={args.d_model}", r)
    arrays = {"heads_mlp": r.result.values.reshape(args.layers, args.heads + 1)}
    axes = {"heads_mlp": ("layer", "head (0..heads-1), then mlp")}
    plots = _plots_wanted(args)
    files = [ex.plot_heatmap(r, out / "heatmap.png"), ex.plot_rho(r, out / "rho.png")] if plots \
        else []  # fmt: skip
    ok = r.bitwise_equal and r.recomputed == r.predicted_cones
    if args.positions:
        cfg = TransformerConfig(position_resolved=True, **size)
        rp = ex.run_toy_sweep(
            cfg, batch=args.batch, seed=args.seed, repeats=args.repeats, sites=ex.position_grid(cfg)
        )
        _print_run("layer x position sweep (hook_resid_pre)", rp)
        arrays["resid_pre_positions"] = rp.result.values
        axes["resid_pre_positions"] = rp.result.axes
        if plots:
            files.append(ex.plot_heatmap(rp, out / "heatmap_positions.png"))
        ok = ok and rp.bitwise_equal and rp.recomputed == rp.predicted_cones
    meta = {"settings": {k: v for k, v in vars(args).items() if k not in ("func", "out")},
            "corrupt_metric": r.corrupt_metric}  # fmt: skip
    files = save(out, args.format, arrays, axes, meta) + files
    for f in files:
        print(f"wrote {f}")
    return 0 if ok else 1
