"""Engine sweep vs full-recompute baseline on the toy transformer, and the plots (torch needed).

Shared by ``ndvm sweep`` and ``benchmarks/bench_graph.py``: one function runs both arms on the
same weights and inputs and returns exact counts, timings and the fitted wall-clock constants.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ndvm.graph import predict
from ndvm.graph import transformer as tr
from ndvm.graph.baseline import full_recompute_sweep
from ndvm.graph.sweep import Grid, Site, SweepResult, grid, sweep


@dataclass(frozen=True, slots=True)
class ToySweep:
    """One size: exact node counts, predicted and measured ratios, fitted a and beta."""

    cfg: tr.TransformerConfig
    batch: int
    sites: int
    full_cost: int
    recomputed: int
    predicted_cones: int
    rho_pred: float
    rho_counts: float
    rho_pred_time: float  # S * sum_v t_v / sum_s sum_{v in cone(s)} t_v, t_v profiled per node
    engine_s: float
    baseline_s: float
    fit: predict.WallclockFit
    bitwise_equal: bool
    result: SweepResult
    site_list: tuple[Site, ...]
    engine_site_s: tuple[float, ...]
    corrupt_metric: float  # the metric of the unpatched (corrupted) run

    @property
    def rho_wall(self) -> float:
        return self.baseline_s / self.engine_s

    @property
    def efficiency(self) -> float:
        """Measured wall-clock ratio over the predicted count ratio."""
        return self.rho_wall / self.rho_pred

    @property
    def efficiency_time(self) -> float:
        """Measured wall-clock ratio over the cost-weighted prediction (1 = no overhead)."""
        return self.rho_wall / self.rho_pred_time


def head_mlp_sites(cfg: tr.TransformerConfig) -> list[Site]:
    """Every head output (``attn.hook_z``) and every MLP output, layer-major."""
    sites: list[Site] = []
    for layer in range(cfg.layers):
        sites += [Site("attn.hook_z", layer, h) for h in range(cfg.heads)]
        sites.append(Site("hook_mlp_out", layer))
    return sites


def logit_diff(logits: torch.Tensor) -> torch.Tensor:
    """Mean logit difference between tokens 0 and 1 at the last position."""
    return (logits[:, -1, 0] - logits[:, -1, 1]).mean()


def run_toy_sweep(
    cfg: tr.TransformerConfig,
    *,
    batch: int = 4,
    seed: int = 0,
    repeats: int = 3,
    sites: Grid | list[Site] | None = None,
) -> ToySweep:
    """Sweep ``sites`` (default: all heads + MLPs) with the engine and the baseline.

    Each arm's time is the sum over sites of the per-site minimum over ``repeats``
    alternating runs (per-site minima are the least disturbed by other load on the machine).
    """
    model = tr.ToyTransformer(cfg, seed=seed)
    gen = torch.Generator().manual_seed(seed + 1)
    clean = torch.randint(0, cfg.vocab, (batch, cfg.seq_len), generator=gen)
    corrupt = torch.randint(0, cfg.vocab, (batch, cfg.seq_len), generator=gen)
    g = tr.to_graph(model, clean)
    with torch.no_grad():
        cache = g.capture()
        g.leaf("tokens", corrupt)
        g.demand("logits")
        chosen = sites if sites is not None else head_mlp_sites(cfg)
        site_list = tuple(chosen.sites if isinstance(chosen, Grid) else chosen)
        clean_acts = {s.name: cache.values[g.id(s.name)] for s in site_list}
        engine_t: list[list[float]] = []
        base_t: list[list[float]] = []
        for _ in range(repeats):
            res = sweep(g, chosen, cache, logit_diff, "logits")
            engine_t.append([r.seconds for r in res.records])
            base, secs = full_recompute_sweep(model, corrupt, chosen, clean_acts, logit_diff)
            base_t.append(secs)
    engine_site = [min(ts) for ts in zip(*engine_t)]
    cones = [r.cone for r in res.records]
    with torch.no_grad():
        cost = g.profile("logits", repeats=3)
    cone_time = sum(sum(cost[v] for v in g.cone(s.name) if v in cost) for s in site_list)
    predicted = sum(tr.closed_form_cone(cfg, s.hook, s.layer, s.head, s.pos) for s in site_list)
    full = tr.full_cost(cfg)
    return ToySweep(
        cfg=cfg,
        batch=batch,
        sites=len(site_list),
        full_cost=full,
        recomputed=res.recomputed,
        predicted_cones=predicted,
        rho_pred=len(site_list) * full / predicted,
        rho_counts=res.rho_counts,
        rho_pred_time=len(site_list) * sum(cost.values()) / cone_time,
        engine_s=sum(engine_site),
        baseline_s=sum(min(ts) for ts in zip(*base_t)),
        fit=predict.fit_wallclock(cones, engine_site, len(g)),
        bitwise_equal=bool(torch.equal(res.values, base)),
        result=res,
        site_list=site_list,
        engine_site_s=tuple(engine_site),
        corrupt_metric=float(logit_diff(g.value("logits"))),
    )


def position_grid(cfg: tr.TransformerConfig) -> Grid:
    """layer x position grid on ``hook_resid_pre`` (needs a position-resolved config)."""
    return grid("hook_resid_pre", cfg.layers, None, cfg.seq_len)


# ---------------------------------------------------------------------- plots
def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_heatmap(run: ToySweep, path: Path) -> Path:
    """Heat-map of the patching metric: layers x (heads, MLP) or layers x positions."""
    plt = _pyplot()
    cfg = run.cfg
    vals = run.result.values.detach().cpu().double().numpy() - run.corrupt_metric
    if run.result.axes == ("layer", "pos"):
        grid_vals, xlabel = vals, "position"
        xticks = [str(t) for t in range(cfg.seq_len)]
    else:
        grid_vals = vals.reshape(cfg.layers, cfg.heads + 1)
        xlabel, xticks = "site", [f"h{h}" for h in range(cfg.heads)] + ["mlp"]
    fig, ax = plt.subplots(figsize=(1.2 + 0.5 * len(xticks), 1.5 + 0.45 * cfg.layers))
    lim = float(abs(grid_vals).max()) or 1.0
    im = ax.imshow(grid_vals, cmap="RdBu", vmin=-lim, vmax=lim, aspect="auto")
    ax.set_xticks(range(len(xticks)), xticks, fontsize=7)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("layer")
    ax.set_yticks(range(cfg.layers))
    ax.set_title("patched - corrupted logit diff", fontsize=9)
    fig.colorbar(im, ax=ax)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_rho(run: ToySweep, path: Path) -> Path:
    """Per-site engine time vs cone (with the fit), and predicted vs measured ratios."""
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    cones = [r.cone for r in run.result.records]
    ms = [1e3 * t for t in run.engine_site_s]
    left.scatter(cones, ms, s=10)
    xs = [0, max(cones)]
    left.plot(xs, [1e3 * (run.fit.a * x + run.fit.intercept) for x in xs], "k--")
    left.set_xlabel("cone size (rule nodes)")
    left.set_ylabel("engine time per site (ms)")
    left.set_title(f"a={1e6 * run.fit.a:.2f} us/node, intercept={1e3 * run.fit.intercept:.3f} ms")
    labels = [
        "predicted\n(counts)",
        "measured\n(counts)",
        "predicted\n(time-weighted)",
        "measured\n(wall-clock)",
    ]
    bars = [run.rho_pred, run.rho_counts, run.rho_pred_time, run.rho_wall]
    right.bar(labels, bars, color=["#888", "#4a7", "#bbb", "#47a"])
    for k, v in enumerate(bars):
        right.text(k, v, f"{v:.3f}", ha="center", va="bottom")
    right.set_ylabel("rho = full recompute / engine")
    right.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
