"""Side-by-side timing of ndvm's cone-recompute sweeps and TransformerLens' patching functions.

Both arms run on the same random-weight ``HookedTransformer`` in the same process; TL's
``patching.get_act_patch_*`` re-runs the full forward per site. Each row also reports the
largest |difference| of the two result tensors.
"""

from __future__ import annotations

import warnings
from time import perf_counter
from typing import Any

import torch

from ndvm.graph.sweep import grid, sweep
from ndvm.graph.tlens import from_transformer_lens, sweep_positions


def random_model(layers: int, heads: int, d_model: int, n_ctx: int, seed: int = 0) -> Any:
    """A float64 HookedTransformer (LN with biases, attention biases, GELU) with random weights."""
    from transformer_lens import HookedTransformerConfig

    cfg = HookedTransformerConfig(
        n_layers=layers, n_heads=heads, d_model=d_model, d_head=d_model // heads,
        d_mlp=4 * d_model, n_ctx=n_ctx, d_vocab=512, act_fn="gelu_new",
        normalization_type="LN", dtype=torch.float64, seed=seed,
    )  # fmt: skip
    return build(cfg)


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
    model: Any, clean_tok: torch.Tensor, corr_tok: torch.Tensor, metric: Any = None
) -> list[dict[str, Any]]:
    """Rows for heads, heads x positions and resid_pre layer x position sweeps.

    Each row holds the sweep's name, site count, both times, their ratio, the largest
    |difference| and ndvm's result tensor (``values``, TL's axis order).
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
        "heads": (
            patching.get_act_patch_attn_head_out_all_pos,
            lambda: sweep(g, grid("attn.hook_z", L, H), clean, metric, "logits").values,
            L * H,
        ),
        "heads x positions": (
            patching.get_act_patch_attn_head_out_by_pos,
            lambda: sweep_positions(g, "attn.hook_z", L, seq_len, clean, metric, H),
            L * H * seq_len,
        ),
        "resid_pre layer x position": (
            patching.get_act_patch_resid_pre,
            lambda: sweep_positions(g, "hook_resid_pre", L, seq_len, clean, metric),
            L * seq_len,
        ),
    }
    rows = []
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # TL's patching stores results in the default dtype
    try:
        for name, (tl_fn, ours, sites) in arms.items():
            t0 = perf_counter()
            ref = tl_fn(model, corr_tok, cache, metric)
            t1 = perf_counter()
            got = ours()
            t2 = perf_counter()
            diff = float((got - ref).abs().max())
            tl_s, ndvm_s = t1 - t0, t2 - t1
            rows.append(
                {"sweep": name, "sites": sites, "tl_s": tl_s, "ndvm_s": ndvm_s,
                 "ratio": tl_s / ndvm_s, "max_abs_diff": diff, "values": got}
            )  # fmt: skip
    finally:
        torch.set_default_dtype(old)
    return rows


def plot_heatmaps(rows: list[dict[str, Any]], out: Any) -> list[Any]:
    """One heat map per 2-D sweep result (heads: layer x head; resid_pre: layer x pos)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    for r in rows:
        vals = r["values"]
        if vals.ndim != 2:
            continue
        fig, ax = plt.subplots(figsize=(6, 3.5))
        im = ax.imshow(vals.detach().cpu().numpy(), cmap="RdBu", aspect="auto")
        ax.set_ylabel("layer")
        ax.set_xlabel("head" if r["sweep"] == "heads" else "position")
        ax.set_title(f"patching: {r['sweep']}")
        fig.colorbar(im, ax=ax)
        path = out / f"tl_{r['sweep'].split()[0]}.png"
        fig.savefig(path, dpi=100, bbox_inches="tight")
        plt.close(fig)
        files.append(path)
    return files
