"""Full-recompute baseline: one hooked eager forward per site (the TransformerLens pattern)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from time import perf_counter
from typing import Any

import torch

from ndvm.graph.sweep import Grid, Site, stack_grid


def _default_setter(current: torch.Tensor, clean: torch.Tensor) -> torch.Tensor:
    return clean


def full_recompute_sweep(
    model: Callable[..., torch.Tensor],
    tokens: torch.Tensor,
    sites: Grid | Sequence[Site | str],
    clean: dict[str, torch.Tensor] | None,
    metric: Callable[[torch.Tensor], Any],
    *,
    setter: Callable[[torch.Tensor, Any], torch.Tensor] = _default_setter,
) -> tuple[Any, list[float]]:
    """Per site, run ``model(tokens, hooks)`` with a hook that applies ``setter(x, clean)``.

    Returns the metric values shaped like the grid and the seconds of each site.
    """
    if isinstance(sites, Grid):
        names, shape = [s.name for s in sites.sites], sites.shape
    else:
        names = [s.name if isinstance(s, Site) else s for s in sites]
        shape = (len(names),)
    vals, seconds = [], []
    with torch.no_grad():
        for name in names:
            t0 = perf_counter()
            value = None if clean is None else clean[name]
            hooks = {name: lambda x, v=value: setter(x, v)}
            vals.append(metric(model(tokens, hooks)))
            seconds.append(perf_counter() - t0)
    return stack_grid(vals, shape), seconds
