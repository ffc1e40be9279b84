"""Activation-patching sweeps over layers, heads and positions with row-restricted cones.

``sweep_hook`` patches a TransformerLens hook with its clean value at every (layer, [head,]
[position]) and records a metric of the output. A position site is a slice of a batched node:
its cone is recomputed on the rows from that position on (``rows.batched_cone``), sibling
sites (the heads of a layer, a chunk of neighbouring positions) share one pass along a new
batch axis, and everything outside the cones is read from the baseline cache. Results are in
TransformerLens' axis order: [layer, head], [layer, pos] or [layer, pos, head].
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import product
from time import perf_counter
from typing import Any

import torch

from ndvm.graph import predict
from ndvm.graph.dag import Graph
from ndvm.graph.errors import GraphError, UnknownNodeError
from ndvm.graph.patching import Cache
from ndvm.graph.rows import Plan, batched_cone
from ndvm.graph.sweep import site_name


@dataclass(frozen=True, slots=True)
class RowSweep:
    """Metric values in TL's axis order and the exact node-row counts of the sweep."""

    values: torch.Tensor
    axes: tuple[str, ...]
    sites: int
    full_rows: int  # node-rows of one full forward (rule nodes x positions)
    cone_rows: int  # sum over sites of |cone| x the rows from the site's position on
    node_rows: int  # node-rows evaluated (cone_rows plus the rows a chunk shares)
    seconds: float

    @property
    def rho_counts(self) -> float:
        """Predicted ratio to a full recompute per site: sites x full_rows / cone_rows."""
        return self.sites * self.full_rows / self.cone_rows


def _chunks(positions: int, chunk: int) -> list[list[int]]:
    return [list(range(t, min(t + chunk, positions))) for t in range(0, positions, chunk)]


def head_site(g: Graph, hook: str, layer: int, head: int | None) -> tuple[int, tuple, Any]:
    """(node id, leading index, last-axis index) of site ``blocks.{layer}.{hook}[.{head}]``.

    A head site is its own node (``attn.hook_z.{h}``) or head h of a node batched over
    heads (``attn.hook_q``, ``attn.hook_pattern``, ...: the node's ``heads`` metadata).
    """
    name = site_name(hook, layer, head)
    if head is None or name in g:
        return g.id(name), (), slice(None)
    base = site_name(hook, layer)
    axis = g.meta[g.id(base)].get("heads") if base in g else None
    if axis is None:
        raise UnknownNodeError(f"no node or head slice named {name!r}")
    return g.id(base), *axis.select(head)


def sweep_hook(
    g: Graph,
    hook: str,
    layers: int,
    clean: Cache,
    metric: Callable[[Any], Any],
    *,
    heads: int | None = None,
    positions: int | None = None,
    sources: int | None = None,
    chunk: int = 4,
    output: str = "logits",
) -> RowSweep:
    """Patch ``hook`` at each layer [x head] [x position [x source]] with its value in ``clean``.

    ``positions=None`` patches all positions at once (start row 0); otherwise one position
    per site, ``chunk`` neighbouring positions per pass. ``sources`` (patterns only) patches
    one (query, key) entry of a head's pattern per site. The graph must hold its baseline
    (corrupted) values; it is demanded first and left unchanged.
    """
    if chunk < 1:
        raise GraphError(f"chunk must be >= 1, got {chunk}")
    out = g.id(output)
    g.demand(out)
    seq = g.value(out).shape[-2]
    if positions is not None and not 0 < positions <= seq:
        raise GraphError(f"positions must be in 1..{seq}, got {positions}")
    if sources is not None and (positions is None or heads is None or not 0 < sources <= seq):
        raise GraphError(f"sources needs heads and positions and must be in 1..{seq}")
    hs = list(range(heads)) if heads is not None else [None]
    srcs = list(range(sources)) if sources is not None else [None]
    results: dict[tuple[int, int, int, int], Any] = {}
    node_rows, starts = 0, []
    t0 = perf_counter()
    for layer in range(layers):
        sites = [head_site(g, hook, layer, h) for h in hs]
        ids = [i for i, _, _ in sites]
        g.demand(*ids)
        plan = Plan(g, ids, out)
        groups = [[0]] if positions is None else _chunks(positions, chunk)
        for ts in groups:
            start = 0 if positions is None else ts[0]
            variants, keys = [], []
            for t, (hi, (i, lead, cols)), s in product(ts, enumerate(sites), srcs):
                if s is not None:
                    lead, cols = g.meta[i]["heads"].select(hi, s)
                value = patched_rows(g.value(i), clean.values[i], start, t, positions, lead, cols)
                variants.append((i, value))
                keys.append((layer, t, hi, s or 0))
                starts.append((i, start if positions is None else t))
            run = batched_cone(g, variants, start, out, plan)
            node_rows += run.node_rows
            for key, val in zip(keys, run.outputs):
                results[key] = metric(val)
    seconds = perf_counter() - t0
    pred = predict.rows_sweep(g, starts, seq, out)
    values, axes = _arrange(results, layers, positions, heads, sources)
    return RowSweep(values, axes, len(starts), pred.full, pred.total, node_rows, seconds)


def patched_rows(
    cur: Any, clean: Any, start: int, t: int, positions: int | None,
    lead: tuple = (), cols: Any = slice(None),
) -> Any:  # fmt: skip
    """Rows ``start:`` of the site value with position ``t`` (or every row) from clean.

    ``lead`` and ``cols`` restrict the patch to one head (and key): ``x[..., *lead, row, cols]``.
    """
    whole = not lead and cols == slice(None)
    if positions is None:
        if whole:
            return clean
        x, idx = cur.clone(), (..., *lead, slice(None), cols)
        x[idx] = clean[idx]
        return x
    x = cur[..., start:, :].clone()
    x[(..., *lead, t - start, cols)] = clean[(..., *lead, t, cols)]
    return x


def _arrange(
    results: dict[tuple[int, int, int, int], Any], layers: int, positions: int | None,
    heads: int | None, sources: int | None,
) -> tuple[torch.Tensor, tuple[str, ...]]:  # fmt: skip
    shape = [(a, n) for a, n in (("layer", layers), ("pos", positions), ("head", heads),
                                 ("src", sources))]  # fmt: skip
    sizes = [1 if n is None else n for _, n in shape]
    flat = [results[key] for key in product(*(range(n) for n in sizes))]
    vals = torch.stack([torch.as_tensor(v) for v in flat])
    vals = vals.reshape(*sizes, *vals.shape[1:])
    keep = [k for k, (_, n) in enumerate(shape) if n is not None or k == 0]
    drop = [k for k in range(4) if k not in keep]
    vals = vals.reshape(*[sizes[k] for k in keep], *vals.shape[4:]) if drop else vals
    return vals, tuple(shape[k][0] for k in keep)
