"""Exhaustive intervention sweeps with TransformerLens-style site names and index axes.

Per site: patch (invalidates exactly the cone), demand the output, read the metric, then
restore the cone by copying the values it held before the patch (no recompute). Sites are
named ``blocks.{layer}.{hook}[.{head}][@{pos}]``, e.g. ``blocks.3.attn.hook_z.5``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import product
from time import perf_counter
from typing import Any

import numpy as np

from ndvm.graph.dag import Graph
from ndvm.graph.errors import GraphError
from ndvm.graph.ledger import SiteRecord
from ndvm.graph.patching import Cache


def site_name(hook: str, layer: int, head: int | None = None, pos: int | None = None) -> str:
    name = f"blocks.{layer}.{hook}"
    if head is not None:
        name += f".{head}"
    if pos is not None:
        name += f"@{pos}"
    return name


@dataclass(frozen=True, slots=True)
class Site:
    """One intervention site: a hook name with layer, optional head and position indices."""

    hook: str
    layer: int
    head: int | None = None
    pos: int | None = None

    @property
    def name(self) -> str:
        return site_name(self.hook, self.layer, self.head, self.pos)


@dataclass(frozen=True, slots=True)
class Grid:
    """Sites in row-major order over named axes (``layer``, ``head``, ``pos``)."""

    axes: tuple[str, ...]
    shape: tuple[int, ...]
    sites: tuple[Site, ...]


def grid(
    hook: str,
    layers: int | Sequence[int],
    heads: int | Sequence[int] | None = None,
    positions: int | Sequence[int] | None = None,
) -> Grid:
    """The layer x [head] x [pos] grid of ``hook`` sites (ints mean ``range(n)``)."""

    def rng(x: int | Sequence[int]) -> list[int]:
        return list(range(x)) if isinstance(x, int) else list(x)

    axes: list[tuple[str, list[Any]]] = [("layer", rng(layers))]
    if heads is not None:
        axes.append(("head", rng(heads)))
    if positions is not None:
        axes.append(("pos", rng(positions)))
    sites = []
    for idx in product(*(vals for _, vals in axes)):
        kw = dict(zip((a for a, _ in axes), idx))
        sites.append(Site(hook, kw["layer"], kw.get("head"), kw.get("pos")))
    return Grid(tuple(a for a, _ in axes), tuple(len(v) for _, v in axes), tuple(sites))


def stack_grid(vals: list[Any], shape: tuple[int, ...]) -> Any:
    """Values of a sweep's grid points stacked into one array of the grid's ``shape``."""
    if vals and type(vals[0]).__module__.startswith("torch"):
        import torch

        return torch.stack(vals).reshape(*shape, *vals[0].shape)
    arr = np.asarray(vals)
    return arr.reshape(*shape, *arr.shape[1:])


@dataclass(frozen=True, slots=True)
class SweepResult:
    """Metric values over the grid, per-site records and exact counts."""

    values: Any
    axes: tuple[str, ...]
    records: tuple[SiteRecord, ...]
    full_cost: int  # rule nodes of one full forward of the output
    seconds: float

    @property
    def recomputed(self) -> int:
        return sum(r.recomputed for r in self.records)

    @property
    def rho_counts(self) -> float:
        """S full forwards over the nodes this sweep recomputed."""
        done = self.recomputed
        return len(self.records) * self.full_cost / done if done else float("inf")


def _default_setter(current: Any, clean: Any) -> Any:
    return clean


def sweep(
    graph: Graph,
    sites: Grid | Sequence[Any],
    clean_cache: Cache | None,
    metric: Callable[[Any], Any],
    output: Any,
    *,
    setter: Callable[[Any, Any], Any] = _default_setter,
    restore: str = "copy",
) -> SweepResult:
    """Patch each site with ``setter(current, clean)``, demand ``output``, record ``metric``.

    Args:
        graph: the graph in its baseline (e.g. corrupted) state.
        sites: a ``Grid`` or a sequence of node names/ids (result shape ``(len(sites),)``).
        clean_cache: values to patch in (``None`` when ``setter`` ignores ``clean``).
        metric: maps the output value to the recorded value.
        output: the node whose value the metric reads.
        setter: the patched value from the current and clean values (default: clean).
        restore: ``"copy"`` restores each cone from the values before the patch;
            ``"recompute"`` unpatches and recomputes (about half as fast).
    Returns:
        a ``SweepResult``; the graph is left in its baseline state.
    """
    if restore not in ("copy", "recompute"):
        raise GraphError(f"unknown restore mode {restore!r} (copy, recompute)")
    if isinstance(sites, Grid):
        refs: list[Any] = [s.name for s in sites.sites]
        axes, shape = sites.axes, sites.shape
    else:
        refs = [s.name if isinstance(s, Site) else s for s in sites]
        axes, shape = ("site",), (len(refs),)
    out = graph.id(output)
    ids = [graph.id(r) for r in refs]
    graph.demand(out, *ids)  # every site valid, so a restore returns it to a valid state
    full = graph.count_rules(graph.ancestors_closed([out]))
    vals, records = [], []
    start = perf_counter()
    for i in ids:
        if graph.is_pinned(i):
            raise GraphError(f"site {graph.names[i]!r} is already patched")
        t0 = perf_counter()
        before = graph.value(i)
        clean = None if clean_cache is None else clean_cache.values[i]
        cone = graph.patch(i, setter(before, clean))
        saved = {c: graph.value(c) for c in cone}
        saved[i] = before
        report = graph.demand(out)
        vals.append(metric(graph.value(out)))
        if restore == "copy":
            copied = len(graph.restore(Cache(saved, graph.revision, {}), saved, sites=(i,)))
            recomputed = report.count
        else:
            graph.unpatch(i)
            recomputed = report.count + graph.demand(out).count
            copied = 0
        rec = SiteRecord(graph.names[i], len(cone), recomputed, copied, perf_counter() - t0)
        records.append(rec)
    seconds = perf_counter() - start
    graph.ledger.sites.extend(records)
    return SweepResult(stack_grid(vals, shape), axes, tuple(records), full, seconds)
