"""Attribution patching: a first-order estimate of a whole sweep, then exact cones for the top k.

One forward and one backward on the baseline (corrupted) graph give the gradient of the metric
with respect to every site at once; the estimated effect of patching a site is
``sum((clean - baseline) * grad)`` over the site's slice (one position, or all of them; one
head of a node batched over heads, such as ``attn.hook_q``). The
``top_k`` sites by |estimate| are then recomputed exactly with row-restricted cones
(``rows.batched_cone``), so a user gets the ranking of every site for the price of about two
forwards and exact values where they matter. ``agreement`` reports how well the estimate ranks
the sites against an exact sweep.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter
from typing import Any

import torch

from ndvm.graph.dag import Graph
from ndvm.graph.errors import GraphError
from ndvm.graph.patching import Cache
from ndvm.graph.rows import batched_cone
from ndvm.graph.rowsweep import head_site, patched_rows


@dataclass(frozen=True, slots=True)
class Attribution:
    """Estimated effects on the grid (TL's axis order) and exact effects of the top k.

    Effects are ``metric(patched) - metric(baseline)``.
    """

    estimate: torch.Tensor
    axes: tuple[str, ...]
    baseline: float
    top: tuple[tuple[int, ...], ...]  # grid indices of the top k by |estimate|, largest first
    exact: torch.Tensor  # exact effects at ``top``, same order
    seconds_gradient: float
    seconds_exact: float


def site_gradients(
    g: Graph, sites: list[int], out: int, metric: Callable[[Any], Any]
) -> tuple[float, list[torch.Tensor]]:
    """metric(out) on the graph's current values and d metric / d site for every site.

    One forward from the leaves with autograd on, one backward. A site downstream of another
    gets its total derivative (the paths through later sites are kept).
    """
    if g._pinned:
        raise GraphError("attribution needs an unpatched graph; unpatch every site first")
    wanted = set(sites)
    order = sorted(g.ancestors_closed([out]), key=g.order)
    vals: dict[int, Any] = {}
    with torch.enable_grad():
        for i in order:
            fn = g._fn[i]
            if fn is None:
                vals[i] = g._value[i]
                continue
            v = fn(*[vals[j] for j in g.inputs(i)])
            if i in wanted and not v.requires_grad:
                v = v.detach().requires_grad_()
            vals[i] = v
        m = metric(vals[out])
        if m.numel() != 1:
            raise GraphError(f"the metric must be a scalar, got shape {tuple(m.shape)}")
        grads = torch.autograd.grad(m, [vals[s] for s in sites], allow_unused=True)
    out_grads = [torch.zeros_like(vals[s]) if d is None else d for s, d in zip(sites, grads)]
    return float(m.detach()), out_grads


def attribution_sweep(
    g: Graph,
    hook: str,
    layers: int,
    clean: Cache,
    metric: Callable[[Any], Any],
    top_k: int = 10,
    *,
    heads: int | None = None,
    positions: int | None = None,
    output: str = "logits",
) -> Attribution:
    """Estimate every (layer, [head,] [position]) patch of ``hook`` and recompute the top k."""
    out = g.id(output)
    g.demand(out)
    hs = list(range(heads)) if heads is not None else [None]
    sites = [[head_site(g, hook, layer, h) for h in hs] for layer in range(layers)]
    flat = [site for row in sites for site in row]
    nodes = list(dict.fromkeys(i for i, _, _ in flat))  # the heads of q share one node
    t0 = perf_counter()
    base, grads = site_gradients(g, nodes, out, metric)
    grad = dict(zip(nodes, grads))
    est = []
    for i, lead, cols in flat:  # the head's slice (everything for a node site)
        contrib = ((clean.values[i] - g.value(i)) * grad[i])[(..., *lead, slice(None), cols)]
        per_pos = contrib.transpose(-2, 0).reshape(contrib.shape[-2], -1).sum(-1)
        est.append(per_pos[:positions] if positions is not None else per_pos.sum().reshape(1))
    n_pos = 1 if positions is None else positions
    grid = torch.stack(est).reshape(layers, len(hs), n_pos).transpose(1, 2)  # layer, pos, head
    t1 = perf_counter()
    order = torch.argsort(grid.abs().flatten(), descending=True)[: max(0, top_k)]
    top = [tuple(int(x) for x in torch.unravel_index(k, grid.shape)) for k in order]
    exact = _exact(g, sites, top, clean, metric, out, positions)
    t2 = perf_counter()
    axes, keep = _axes(heads, positions)
    shape = tuple(n for n, k in zip(grid.shape, keep) if k)
    top_idx = tuple(tuple(x for x, k in zip(t, keep) if k) for t in top)
    exact_t = torch.tensor([exact[t] - base for t in top], dtype=grid.dtype)
    return Attribution(grid.reshape(shape), axes, base, top_idx, exact_t, t1 - t0, t2 - t1)


def _axes(heads: int | None, positions: int | None) -> tuple[tuple[str, ...], tuple[bool, ...]]:
    keep = (True, positions is not None, heads is not None)
    return tuple(a for a, k in zip(("layer", "pos", "head"), keep) if k), keep


def _exact(
    g: Graph, sites: list[list[tuple]], top: list[tuple[int, int, int]], clean: Cache,
    metric: Callable[[Any], Any], out: int, positions: int | None,
) -> dict[tuple[int, int, int], float]:  # fmt: skip
    """Exact metric at each top site; the heads of one (layer, position) share a pass."""
    groups: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    for key in top:
        groups.setdefault(key[:2], []).append(key)
    found = {}
    for (layer, t), keys in groups.items():
        start = 0 if positions is None else t
        variants = []
        for key in keys:
            i, lead, cols = sites[layer][key[2]]
            value = patched_rows(g.value(i), clean.values[i], start, t, positions, lead, cols)
            variants.append((i, value))
        run = batched_cone(g, variants, start, out)
        for key, val in zip(keys, run.outputs):
            found[key] = float(metric(val))
    return found


def _ranks(x: torch.Tensor) -> torch.Tensor:
    return torch.argsort(torch.argsort(x)).to(torch.float64)


def agreement(estimate: torch.Tensor, exact: torch.Tensor, k: int = 10) -> dict[str, float]:
    """Spearman rank correlation of two effect grids and the overlap of their top k by |.|."""
    a, b = estimate.flatten().double(), exact.flatten().double()
    if a.shape != b.shape or a.numel() < 2:
        raise GraphError(f"agreement needs two grids of one shape, got {estimate.shape}, "
                         f"{exact.shape}")  # fmt: skip
    ra, rb = _ranks(a), _ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    rho = float((ra * rb).sum() / (ra.norm() * rb.norm()))
    k = min(k, a.numel())
    ta = set(torch.argsort(a.abs(), descending=True)[:k].tolist())
    tb = set(torch.argsort(b.abs(), descending=True)[:k].tolist())
    return {"spearman": rho, "top_k_overlap": len(ta & tb) / k, "k": float(k)}
