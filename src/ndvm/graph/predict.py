"""Cost predictions: every formula of the reactive cost model, from a graph and a site set.

Costs count rule nodes only (leaves are never recomputed). Integer costs are exact; the
ratios are plain floats computed from those integers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from math import comb
from typing import Any

import numpy as np

from ndvm.graph.dag import Graph

Edge = tuple[Any, Any]


# ---------------------------------------------------------------------- forward sweeps
def patch_cost(g: Graph, site: Any, output: Any | None = None) -> int:
    """Rule nodes a patch at ``site`` makes the next demand recompute: |V+(s)| (∩ needed)."""
    cone = g.cone(site)
    if output is not None:
        cone = cone & g.ancestors_closed([g.id(output)])
    return g.count_rules(cone)


def full_cost(g: Graph, output: Any | None = None) -> int:
    """Rule nodes a full forward evaluates (those ``output`` needs, or all)."""
    if output is None:
        return len(g.rule_nodes())
    return g.count_rules(g.ancestors_closed([g.id(output)]))


@dataclass(frozen=True, slots=True)
class SweepPrediction:
    costs: tuple[int, ...]
    full: int
    rho: float

    @property
    def total(self) -> int:
        return sum(self.costs)


def rho_from_cones(cones: Sequence[int], full: int, offset: int = 0) -> float:
    """``S * (full + offset) / sum(c + offset)``; ``offset=1`` is the count convention in which
    the input leaf and the site itself are included (reproduces the published E4 table)."""
    denom = sum(c + offset for c in cones)
    return len(cones) * (full + offset) / denom if denom else float("inf")


def sweep(g: Graph, sites: Iterable[Any], output: Any | None = None) -> SweepPrediction:
    """Exact finite ratio of S full recomputations to one exhaustive copy-restore sweep."""
    costs = tuple(patch_cost(g, s, output) for s in sites)
    full = full_cost(g, output)
    return SweepPrediction(costs, full, rho_from_cones(costs, full))


def rows_sweep(
    g: Graph, sites: Sequence[tuple[Any, int]], positions: int, output: Any | None = None
) -> SweepPrediction:
    """Node-row counts of position-restricted patches ``(site, first changed row)``.

    Each node holds ``positions`` rows; a patch from row t recomputes |V+(s)| x (T - t)
    node-rows; ``full`` is one full forward, N x T.
    """
    cost: dict[int, int] = {}
    rows = []
    for s, t in sites:
        i = g.id(s)
        if i not in cost:
            cost[i] = patch_cost(g, i, output)
        rows.append(cost[i] * (positions - t))
    full = full_cost(g, output) * positions
    return SweepPrediction(tuple(rows), full, rho_from_cones(rows, full))


def layered_rho(weights: Sequence[float]) -> float:
    """rho(L) = L*N / sum_i (N - P(i)) for layer weights w_1..w_L (Def. 2)."""
    n = float(sum(weights))
    prefix, denom = 0.0, 0.0
    for w in weights:
        prefix += w
        denom += n - prefix
    return len(weights) * n / denom


def uniform_rho(L: int) -> float:
    """2L/(L-1): the uniform profile at finite depth."""
    return 2 * L / (L - 1)


def limit(q: float, profile: str = "output") -> float:
    """Karamata limits: (q+2)/(q+1) output-heavy, q+2 input-heavy."""
    if profile == "output":
        return (q + 2) / (q + 1)
    if profile == "input":
        return q + 2
    raise ValueError(f"profile must be 'output' or 'input', got {profile!r}")


def wallclock(a: float, beta: float, L: int) -> float:
    """rho_wc(L) = (a+beta)L / (a(L-1)/2 + beta L): per-node cost a, per-demand walk beta."""
    return (a + beta) * L / (a * (L - 1) / 2 + beta * L)


def wallclock_limit(a: float, beta: float) -> float:
    return (a + beta) / (a / 2 + beta)


@dataclass(frozen=True, slots=True)
class WallclockFit:
    a: float  # seconds per cone node
    intercept: float  # seconds per demand
    beta: float  # intercept / |V|: per-node share of the per-demand overhead


def fit_wallclock(cones: Sequence[int], seconds: Sequence[float], n_nodes: int) -> WallclockFit:
    """Least squares ``seconds = a * cone + intercept``; beta = intercept / |V|."""
    x = np.asarray(cones, dtype=float)
    y = np.asarray(seconds, dtype=float)
    if np.ptp(x) == 0:
        a = float(y.mean() / x.mean()) if x.mean() else 0.0
        return WallclockFit(a, 0.0, 0.0)
    a, b = np.polyfit(x, y, 1)
    return WallclockFit(float(a), float(b), float(b) / n_nodes)


# ---------------------------------------------------------------------- grafts
def edge_cone(g: Graph, edge: Edge) -> frozenset[int]:
    """Nodes a graft on ``(u, w)`` invalidates besides its block: {w} ∪ V+(w).

    Equals V+(u) when ``w`` is the only consumer of ``u`` (as on a chain)."""
    w = g.id(edge[1])
    return g.cone(w) | {w}


@dataclass(frozen=True, slots=True)
class SequentialPrediction:
    costs: tuple[int, ...]  # cost of the k-th graft applied, in application order
    c_iso: int
    delta: int


def sequential(
    g: Graph, edges: Sequence[Edge], h: Sequence[int] | int, order: Sequence[int]
) -> SequentialPrediction:
    """Thm 5: per-graft costs of grafts applied in ``order`` with a demand after each."""
    hs = [h] * len(edges) if isinstance(h, int) else list(h)
    cones = [edge_cone(g, e) for e in edges]
    us = [g.id(e[0]) for e in edges]
    costs, delta = [], 0
    for pos, k in enumerate(order):
        extra = sum(hs[j] for j in order[:pos] if us[j] in cones[k])
        delta += extra
        costs.append(g.count_rules(cones[k]) + hs[k] + extra)
    c_iso = sum(g.count_rules(c) + hk for c, hk in zip(cones, hs))
    return SequentialPrediction(tuple(costs), c_iso, delta)


def batch(g: Graph, edges: Sequence[Edge], h: Sequence[int] | int) -> int:
    """C_batch = |union of edge cones| + sum h (no per-site correction)."""
    hs = [h] * len(edges) if isinstance(h, int) else list(h)
    union: set[int] = set()
    for e in edges:
        union |= edge_cone(g, e)
    return g.count_rules(union) + sum(hs)


def delta_extremes(K: int, h: int) -> tuple[int, int, float]:
    """(min, max, mean over uniform orders) of Delta for K totally ordered sites."""
    return 0, h * comb(K, 2), h * K * (K - 1) / 4


# ---------------------------------------------------------------------- backward cones
def train_touch(g: Graph, site: Any) -> int:
    """Rule nodes in V-(s) ∪ {s} ∪ V+(s): what a training-mode intervention touches."""
    s = g.id(site)
    return g.count_rules(g.upcone(s) | g.cone(s) | {s})


def train_rho(g: Graph, sites: Sequence[Any]) -> float:
    """rho_train = |sites| * N / sum_s |V-(s) ∪ {s} ∪ V+(s)| (rule nodes)."""
    return len(sites) * full_cost(g) / sum(train_touch(g, s) for s in sites)


def layered_train_rho(weights: Sequence[int], local: Sequence[int]) -> float:
    """L*N / sum_i (N - w_i + c_i) for layers of weight w_i and sites of local cost c_i."""
    n = sum(weights)
    return len(weights) * n / sum(n - w + c for w, c in zip(weights, local))
