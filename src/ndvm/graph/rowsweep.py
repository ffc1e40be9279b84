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
from time import perf_counter
from typing import Any

import torch

from ndvm.graph import predict
from ndvm.graph.dag import Graph
from ndvm.graph.errors import GraphError
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


def sweep_hook(
    g: Graph,
    hook: str,
    layers: int,
    clean: Cache,
    metric: Callable[[Any], Any],
    *,
    heads: int | None = None,
    positions: int | None = None,
    chunk: int = 4,
    output: str = "logits",
) -> RowSweep:
    """Patch ``hook`` at each layer [x head] [x position] with its value in ``clean``.

    ``positions=None`` patches all positions at once (start row 0); otherwise one position
    per site, ``chunk`` neighbouring positions per pass. The graph must hold its baseline
    (corrupted) values; it is demanded first and left unchanged.
    """
    if chunk < 1:
        raise GraphError(f"chunk must be >= 1, got {chunk}")
    out = g.id(output)
    g.demand(out)
    seq = g.value(out).shape[-2]
    if positions is not None and not 0 < positions <= seq:
        raise GraphError(f"positions must be in 1..{seq}, got {positions}")
    hs = list(range(heads)) if heads is not None else [None]
    results: dict[tuple[int, int, int], Any] = {}
    node_rows, starts = 0, []
    t0 = perf_counter()
    for layer in range(layers):
        ids = [g.id(site_name(hook, layer, h)) for h in hs]
        g.demand(*ids)
        plan = Plan(g, ids, out)
        groups = [[0]] if positions is None else _chunks(positions, chunk)
        for ts in groups:
            start = 0 if positions is None else ts[0]
            variants, keys = [], []
            for t in ts:
                for hi, i in enumerate(ids):
                    value = patched_rows(g.value(i), clean.values[i], start, t, positions)
                    variants.append((i, value))
                    keys.append((layer, t, hi))
                    starts.append((i, start if positions is None else t))
            run = batched_cone(g, variants, start, out, plan)
            node_rows += run.node_rows
            for key, val in zip(keys, run.outputs):
                results[key] = metric(val)
    seconds = perf_counter() - t0
    pred = predict.rows_sweep(g, starts, seq, out)
    values, axes = _arrange(results, layers, positions, heads)
    return RowSweep(values, axes, len(starts), pred.full, pred.total, node_rows, seconds)


def patched_rows(cur: Any, clean: Any, start: int, t: int, positions: int | None) -> Any:
    """Rows ``start:`` of the site value with position ``t`` (or every row) from clean."""
    if positions is None:
        return clean
    x = cur[..., start:, :].clone()
    x[..., t - start, :] = clean[..., t, :]
    return x


def _arrange(
    results: dict[tuple[int, int, int], Any], layers: int, positions: int | None,
    heads: int | None,
) -> tuple[torch.Tensor, tuple[str, ...]]:  # fmt: skip
    n_pos = 1 if positions is None else positions
    n_head = 1 if heads is None else heads
    flat = [results[(layer, t, h)] for layer in range(layers) for t in range(n_pos)
            for h in range(n_head)]  # fmt: skip
    vals = torch.stack([torch.as_tensor(v) for v in flat])
    vals = vals.reshape(layers, n_pos, n_head, *vals.shape[1:])
    axes = ["layer", "pos", "head"]
    if heads is None:
        vals, axes = vals.squeeze(2), axes[:2]
    if positions is None:
        vals, axes = vals.squeeze(1), [a for a in axes if a != "pos"]
    return vals, tuple(axes)
