"""Synthetic graph builders: plain chains, layered chains (weight profiles), parallel layers.

Values are small float64 numpy arrays by default; any value type with ``*`` and ``>`` works.
Every builder returns a ``Built``: the graph, its intervention sites and its output node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ndvm.graph.dag import Graph


@dataclass(frozen=True, slots=True)
class Built:
    graph: Graph
    sites: tuple[str, ...]
    output: str


def relu(v: Any) -> Any:
    """ReLU written with operators only, so numpy arrays and torch tensors both work."""
    return v * (v > 0)


def _default_input(value: Any | None) -> Any:
    return np.linspace(-1.0, 1.0, 4) if value is None else value


def chain(n: int, *, value: Any | None = None) -> Built:
    """Input leaf ``x`` followed by rule nodes ``c1 .. cn``, each ``relu`` of the previous."""
    g = Graph()
    g.leaf("x", _default_input(value))
    prev = "x"
    for k in range(1, n + 1):
        g.rule(f"c{k}", relu, [prev], layer=k)
        prev = f"c{k}"
    return Built(g, tuple(f"c{k}" for k in range(1, n + 1)), prev)


def layered_chain(weights: Sequence[int], *, value: Any | None = None) -> Built:
    """Layer ``j`` (1-based) is a chain of ``weights[j-1]`` relu nodes; its site is its last."""
    g = Graph()
    g.leaf("x", _default_input(value))
    prev, sites = "x", []
    for j, w in enumerate(weights, start=1):
        for k in range(w):
            g.rule(f"L{j}.{k}", relu, [prev], layer=j)
            prev = f"L{j}.{k}"
        sites.append(prev)
    return Built(g, tuple(sites), prev)


def _add(a: Any, b: Any) -> Any:
    return a + b


def parallel_layers(weights: Sequence[int], *, value: Any | None = None) -> Built:
    """Layer ``j`` has ``w_j`` parallel relu branches of the previous aggregate, left-folded.

    The fold adds ``w_j - 1`` nodes; the layer's aggregate is the last fold (or the single
    branch). Sites are the first branch of each layer.
    """
    g = Graph()
    g.leaf("x", _default_input(value))
    prev, sites = "x", []
    for j, w in enumerate(weights, start=1):
        branches = [f"L{j}.b{k}" for k in range(w)]
        for b in branches:
            g.rule(b, relu, [prev], layer=j)
        acc = branches[0]
        for k in range(1, w):
            g.rule(f"L{j}.f{k}", _add, [acc, branches[k]], layer=j)
            acc = f"L{j}.f{k}"
        sites.append(branches[0])
        prev = acc
    return Built(g, tuple(sites), prev)


def profile_weights(L: int, q: float, profile: str = "output", total: int = 4000) -> list[int]:
    """Layer weights ``max(1, round(total * r_j / sum r))`` with ``r_j = j^q`` or ``(L+1-j)^q``.

    ``profile`` is ``"output"`` (output-heavy) or ``"input"`` (input-heavy).
    """
    if profile not in ("output", "input"):
        raise ValueError(f"profile must be 'output' or 'input', got {profile!r}")
    js = range(1, L + 1)
    r = [float(j if profile == "output" else L + 1 - j) ** q for j in js]
    s = sum(r)
    return [max(1, round(total * x / s)) for x in r]


def even_sites(n: int, k: int) -> list[int]:
    """``k`` chain positions at roughly even depth: ``round(n * i / (k + 1))``, i = 1..k."""
    return [round(n * i / (k + 1)) for i in range(1, k + 1)]
