"""Position-restricted, variant-batched cone recompute for sweeps over position slices.

Every rule node of a transformer graph holds a tensor whose position axis is -2 (the query
axis for attention patterns). Under causal attention a patch of rows ``start:`` of a site
changes only rows ``start:`` of its downstream cone, so ``batched_cone`` evaluates each cone
node on those rows only, reading the rows before ``start`` from the cached baseline where a
node needs every position (keys and values of attention). Several patches ("variants") run
in one pass along a new leading axis; a node is evaluated only for the variants whose patch
reaches it (a head's output only for that head's variants), so the node-rows evaluated equal
the sum of the individual cones' rows.

Rule nodes evaluate position-wise unless their ``rows`` metadata is a ``RowRule``: ``full``
names the inputs read at every position, ``at(start)`` gives the function for rows
``start:`` of a position-dependent rule (the causal mask, rotary tables).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ndvm.graph.dag import Graph
from ndvm.graph.errors import GraphError


@dataclass(frozen=True, slots=True)
class RowRule:
    """How a rule node evaluates on rows ``start:`` of its position axis (-2)."""

    full: tuple[int, ...] = ()  # input positions read at every row (attention keys/values)
    at: Callable[[int], Callable[..., Any]] | None = None  # the rule for rows start:

    def fn(self, default: Callable[..., Any], start: int) -> Callable[..., Any]:
        return default if self.at is None else self.at(start)


@dataclass(frozen=True, slots=True)
class HeadAxis:
    """Where head h sits in a node batched over ``n`` heads (node metadata ``heads``).

    ``width > 0``: columns ``h * width:(h + 1) * width`` of the last axis (q, k, v as
    [..., pos, head * d_head]); ``width == 0``: index h of axis -3 (patterns [..., head, q, k]).
    """

    n: int
    width: int = 0

    def select(self, h: int, col: Any = None) -> tuple[tuple[int, ...], Any]:
        """(leading index, last-axis index) of head h (``col``: one key of a pattern)."""
        if not 0 <= h < self.n:
            raise GraphError(f"head {h} out of range 0..{self.n - 1}")
        if self.width:
            return (), slice(h * self.width, (h + 1) * self.width)
        return (h,), slice(None) if col is None else col


@dataclass(frozen=True, slots=True)
class RowPass:
    """One batched pass: the output per variant (all rows) and the node-rows evaluated."""

    outputs: tuple[Any, ...]
    node_rows: int


LEAF, OUTSIDE, INSIDE = 0, 1, 2  # where a cone node's input comes from


class Plan:
    """The union cone of a set of sites, restricted to the output's ancestors, in order.

    Each step is (node, default rule, RowRule, inputs as (id, where, read every row)).
    """

    def __init__(self, g: Graph, sites: Sequence[int], out: int) -> None:
        need = g.ancestors_closed([out])
        union: set[int] = set()
        for s in set(sites):
            union |= g.cone(s)
        inside = union & set(sites)
        if inside:
            names = ", ".join(sorted(g.names[i] for i in inside))
            raise GraphError(f"sites {names} lie in another site's cone; patch them separately")
        order = sorted(union & need, key=g.order)
        live = union | set(sites)
        self.steps = []
        for i in order:
            rule = g.meta[i].get("rows") or RowRule()
            ins = tuple(
                (j, INSIDE if j in live else LEAF if g.is_leaf(j) else OUTSIDE, k in rule.full)
                for k, j in enumerate(g.inputs(i))
            )
            self.steps.append((i, g._fn[i], rule, ins))


def _live_input(
    base: Any, view: tuple[tuple[int, ...], Any], live: tuple[int, ...], start: int, full: bool
) -> Any:
    """An input (baseline ``base``, evaluated for variants ``view[0]``) over variants ``live``."""
    have, x = view
    if full and start:
        head = base[..., :start, :]
        x = torch.cat([head.unsqueeze(0).expand(len(have), *head.shape), x], dim=-2)
    if have is live or have == live:
        return x
    rows = base if full else base[..., start:, :]
    out = rows.unsqueeze(0).expand(len(live), *rows.shape).clone()
    pos = {v: k for k, v in enumerate(live)}
    out[torch.tensor([pos[v] for v in have])] = x
    return out


def _union(lives: list[tuple[int, ...]]) -> tuple[int, ...]:
    first = lives[0]
    if all(x is first for x in lives):
        return first
    return tuple(sorted({v for x in lives for v in x}))


def batched_cone(
    g: Graph,
    variants: Sequence[tuple[int, Any]],
    start: int,
    out: int,
    plan: Plan | None = None,
) -> RowPass:
    """Evaluate ``out`` for each variant ``(site id, rows start: of the patched site value)``.

    The graph must be valid (its values are the baseline); it is not modified.
    """
    plan = plan or Plan(g, [s for s, _ in variants], out)
    value = g._value
    views: dict[int, tuple[tuple[int, ...], Any]] = {}
    for s in dict.fromkeys(s for s, _ in variants):
        live = tuple(k for k, (t, _) in enumerate(variants) if t == s)
        views[s] = (live, torch.stack([variants[k][1] for k in live]))
    node_rows = 0
    for i, default, rule, ins in plan.steps:
        lives = [views[j][0] for j, where, _ in ins if where == INSIDE and j in views]
        if not lives:  # a node of a site not in this pass
            continue
        live = _union(lives)
        args = []
        for j, where, full in ins:
            if where == LEAF:
                args.append(value[j])
            elif j in views:
                args.append(_live_input(value[j], views[j], live, start, full))
            else:
                args.append(value[j] if full else value[j][..., start:, :])
        x = rule.fn(default, start)(*args)
        views[i] = (live, x)
        node_rows += len(live) * x.shape[-2]
    return RowPass(_assemble(g, views, out, start, len(variants)), node_rows)


def _assemble(g: Graph, views: dict, out: int, start: int, n: int) -> tuple[Any, ...]:
    base = g.value(out)
    if out not in views:
        return (base,) * n
    live, x = views[out]
    pos = {v: k for k, v in enumerate(live)}
    head = base[..., :start, :]
    return tuple(torch.cat([head, x[pos[v]]], dim=-2) if v in pos else base for v in range(n))
