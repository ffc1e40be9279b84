"""Side-by-side timing of ndvm's cone-recompute sweeps and TransformerLens' patching functions.

Both arms run on the same random-weight ``HookedTransformer`` in the same process; TL's
``patching.get_act_patch_*`` re-runs the full forward per site. Each row also reports the
largest |difference| of the two result tensors.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from time import perf_counter
from typing import Any

import torch

from ndvm.graph.attribution import agreement, attribution_sweep
from ndvm.graph.rowsweep import sweep_hook
from ndvm.graph.tlens import from_transformer_lens

CONFIGS = ("learned", "rotary")  # the two benchmark models; see random_model


def random_model(
    layers: int, heads: int, d_model: int, n_ctx: int, seed: int = 0, kind: str = "learned"
) -> Any:
    """A float64 HookedTransformer with random weights.

    ``learned``: learned positions, LN, GELU (TL's initialisation: zero biases).
    ``rotary``: rotary positions on every head dimension, LN, SiLU, and random nonzero biases
    and LN gains (TL initialises those to 0 and 1), so every bias enters the results.
    """
    from transformer_lens import HookedTransformerConfig

    if kind not in CONFIGS:
        raise ValueError(f"kind must be one of {CONFIGS}, got {kind!r}")
    extra: dict[str, Any] = {"act_fn": "gelu_new"}
    if kind == "rotary":
        extra = {"act_fn": "silu", "positional_embedding_type": "rotary",
                 "rotary_dim": d_model // heads}  # fmt: skip
    cfg = HookedTransformerConfig(
        n_layers=layers, n_heads=heads, d_model=d_model, d_head=d_model // heads,
        d_mlp=4 * d_model, n_ctx=n_ctx, d_vocab=512, normalization_type="LN",
        dtype=torch.float64, seed=seed, **extra,
    )  # fmt: skip
    model = build(cfg)
    if kind == "rotary":
        randomize_biases(model, seed)
    return model


def randomize_biases(model: Any, seed: int) -> None:
    """Biases ~ N(0, 0.1^2) and LN gains ~ 1 + N(0, 0.1^2), in place."""
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.split(".")[-1]
            if leaf.startswith("b") or leaf == "w":
                noise = torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.1
                p.copy_(noise + (1.0 if leaf == "w" else 0.0))


def build(cfg: Any) -> Any:
    """A HookedTransformer of ``cfg`` with its random initial weights (TL 3.9 warns on it)."""
    from transformer_lens import HookedTransformer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return HookedTransformer(cfg)


def _metric(logits: torch.Tensor) -> torch.Tensor:
    return (logits[:, -1, 1] - logits[:, -1, 2]).mean()


def random_tokens(model: Any, batch: int, seq_len: int, seed: int = 0) -> tuple[Any, Any]:
    gen = torch.Generator().manual_seed(seed)
    return tuple(
        torch.randint(0, model.cfg.d_vocab, (batch, seq_len), generator=gen) for _ in range(2)
    )


def compare(
    model: Any, clean_tok: torch.Tensor, corr_tok: torch.Tensor, metric: Any = None,
    top_k: int = 10,
) -> list[dict[str, Any]]:  # fmt: skip
    """Rows for heads, heads x positions and resid_pre layer x position sweeps.

    Each row holds the sweep's name, site count, both times, their ratio (``ratio``, TL /
    ndvm), the ratio the node-row counts predict (``rho_pred``) and ``of_pred`` = ratio /
    rho_pred, the largest absolute difference and the largest difference relative to the
    largest |TL value|, attribution patching's time (one backward plus the exact ``top_k``),
    its Spearman correlation and top-k overlap with the exact sweep, and ndvm's result tensor
    (``values``, TL's axis order).
    """
    from transformer_lens import patching

    metric = metric or _metric
    seq_len = clean_tok.shape[1]
    _, cache = model.run_with_cache(clean_tok)
    clean = from_transformer_lens(model, clean_tok).capture()
    g = from_transformer_lens(model, clean_tok)
    g.leaf("tokens", corr_tok)
    g.demand("logits")
    L, H = model.cfg.n_layers, model.cfg.n_heads
    arms = {
        "heads": (patching.get_act_patch_attn_head_out_all_pos, "attn.hook_z", H, None),
        "heads x positions": (patching.get_act_patch_attn_head_out_by_pos, "attn.hook_z", H,
                              seq_len),
        "resid_pre layer x position": (patching.get_act_patch_resid_pre, "hook_resid_pre", None,
                                       seq_len),
    }  # fmt: skip
    rows = []
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # TL's patching stores results in the default dtype
    try:
        for name, (tl_fn, hook, heads, positions) in arms.items():
            t0 = perf_counter()
            with contextlib.redirect_stderr(io.StringIO()):  # TL's patching draws a tqdm bar
                ref = tl_fn(model, corr_tok, cache, metric)
            t1 = perf_counter()
            got = sweep_hook(g, hook, L, clean, metric, heads=heads, positions=positions)
            t2 = perf_counter()
            tl_s, ndvm_s = t1 - t0, t2 - t1
            rel = float((got.values - ref).abs().max() / ref.abs().max().clamp_min(1e-300))
            atp = attribution_sweep(g, hook, L, clean, metric, heads=heads, positions=positions,
                                    top_k=top_k)  # fmt: skip
            agree = agreement(atp.estimate, got.values - atp.baseline, k=top_k)
            rows.append(
                {"sweep": name, "sites": got.sites, "tl_s": tl_s, "ndvm_s": ndvm_s,
                 "ratio": tl_s / ndvm_s, "rho_pred": got.rho_counts,
                 "of_pred": tl_s / ndvm_s / got.rho_counts,
                 "max_abs_diff": float((got.values - ref).abs().max()), "max_rel_diff": rel,
                 "atp_s": atp.seconds_gradient + atp.seconds_exact, "atp_k": top_k,
                 "atp_spearman": agree["spearman"], "atp_overlap": agree["top_k_overlap"],
                 "values": got.values, "axes": got.axes}
            )  # fmt: skip
    finally:
        torch.set_default_dtype(old)
    return rows


HEADER = (
    "| sweep | sites | TL (full recompute per site) | ndvm (cone recompute) | TL / ndvm "
    "| predicted (node-row counts) | measured / predicted | max rel diff |\n"
    "|---|---|---|---|---|---|---|---|"
)


def table(rows: list[dict[str, Any]]) -> str:
    """The rows of ``compare`` as a Markdown table."""
    lines = [HEADER]
    for r in rows:
        lines.append(
            f"| {r['sweep']} | {r['sites']} | {r['tl_s']:.2f} s | {r['ndvm_s']:.2f} s "
            f"| {r['ratio']:.2f}x | {r['rho_pred']:.2f}x | {r['of_pred']:.2f} "
            f"| {r['max_rel_diff']:.1e} |"
        )
    lines += ["", "| sweep | attribution patching (backward + exact top k) | exact sweep "
              "| Spearman vs exact | top-k overlap |", "|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        lines.append(
            f"| {r['sweep']} | {r['atp_s']:.2f} s (k = {r['atp_k']}) | {r['ndvm_s']:.2f} s "
            f"| {r['atp_spearman']:.3f} | {r['atp_overlap']:.2f} |"
        )
    return "\n".join(lines)


def plot_heatmaps(rows: list[dict[str, Any]], out: Any) -> list[Any]:
    """One heat map per 2-D sweep result (heads: layer x head; resid_pre: layer x pos), on a
    diverging map centred at 0 (symmetric limits)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    for r in rows:
        vals = r["values"]
        if vals.ndim != 2:
            continue
        fig, ax = plt.subplots(figsize=(6, 3.5))
        grid = vals.detach().cpu().double().numpy()
        lim = float(abs(grid).max()) or 1.0  # symmetric limits: white is 0
        im = ax.imshow(grid, cmap="RdBu", vmin=-lim, vmax=lim, aspect="auto")
        ax.set_ylabel("layer")
        ax.set_xlabel("head" if r["sweep"] == "heads" else "position")
        ax.set_title(f"patching: {r['sweep']}")
        fig.colorbar(im, ax=ax)
        path = out / f"tl_{r['sweep'].split()[0]}.png"
        fig.savefig(path, dpi=100, bbox_inches="tight")
        plt.close(fig)
        files.append(path)
    return files
