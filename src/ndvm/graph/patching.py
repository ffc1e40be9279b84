"""Interventions on a Graph: patch / ablate / unpatch, capture and restore, grafts and batches.

A patch pins a node's value: the node stays valid, its rule is suspended, and only its
downstream cone is invalidated (cost = |V+(s)|). A copy-restore puts cached values back
without recomputing; it is refused when it would overwrite or ignore a still-active patch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ndvm.graph import values
from ndvm.graph.errors import (
    GraphError,
    NotAnEdgeError,
    OverlappingPatchError,
    StaleCacheError,
)
from ndvm.graph.ledger import Ledger, Report

BLOCK_INPUT = "$in"  # in a Block step's inputs: the value carried by the grafted edge


@dataclass(frozen=True, slots=True)
class Cache:
    """Captured node values, with the graph revision and the pins active at capture time."""

    values: dict[int, Any]
    revision: int
    pins: dict[int, Any]  # pinned id -> (pinned value, original leaf value or None)


@dataclass(frozen=True, slots=True)
class Step:
    name: str
    fn: Callable[..., Any]
    inputs: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Block:
    """Fresh rule nodes to insert on an edge; the last step is the block's output."""

    steps: tuple[Step, ...]

    @staticmethod
    def chain(prefix: str, fns: Sequence[Callable[..., Any]]) -> Block:
        """A chain ``prefix.0 -> prefix.1 -> ...`` of unary rules fed by the edge's value."""
        steps, prev = [], BLOCK_INPUT
        for k, f in enumerate(fns):
            steps.append(Step(f"{prefix}.{k}", f, (prev,)))
            prev = f"{prefix}.{k}"
        return Block(tuple(steps))

    def __len__(self) -> int:
        return len(self.steps)


@dataclass(slots=True)
class Batch:
    """An open group of mutations; on exit, one demand of ``outputs`` fills ``report``."""

    outputs: tuple[Any, ...]
    report: Report | None = None
    grafts: list[list[int]] = field(default_factory=list)


class Graph(Protocol):
    """What the intervention methods use of ``ndvm.graph.dag.Graph`` (which mixes them in)."""

    names: list[str]
    revision: int
    ledger: Ledger
    _fn: list[Callable[..., Any] | None]
    _inputs: list[tuple[int, ...]]
    _consumers: list[list[int]]
    _value: list[Any]
    _valid: list[bool]
    _pinned: dict[int, Any]
    _batch: Any

    def __len__(self) -> int: ...
    def id(self, ref: Any) -> int: ...
    def get(self, ref: Any) -> Any: ...
    def cone(self, ref: Any) -> frozenset[int]: ...
    def demand(self, *outputs: Any) -> Report: ...
    def rule(self, name: str, fn: Callable[..., Any], inputs: Sequence[Any], **kw: Any) -> int: ...
    def _log(self, kind: str, i: int) -> None: ...
    def _invalidate_consumers(self, seeds: Iterable[int]) -> list[int]: ...
    def _invalidate_self(self, i: int) -> list[int]: ...
    def patch(self, ref: Any, value: Any) -> list[int]: ...
    def unpatch(self, ref: Any) -> list[int]: ...
    def batch(self, *outputs: Any) -> _BatchContext: ...
    def _invalidate_rule(self, i: int) -> list[int]: ...
    def _check_restore(self, cache: Cache, keep: set[int], sites: set[int]) -> None: ...


class _BatchContext:
    def __init__(self, graph: Graph, batch: Batch) -> None:
        self.graph, self.batch = graph, batch

    def __enter__(self) -> Batch:
        if self.graph._batch is not None:
            raise GraphError("batches do not nest")
        self.graph._batch = self.batch
        return self.batch

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.graph._batch = None
        if exc_type is None and self.batch.outputs:
            self.batch.report = self.graph.demand(*self.batch.outputs)


class PatchOps:
    """Mixin of intervention methods for ``Graph`` (which provides the core state)."""

    # ------------------------------------------------------------------ patches
    def patch(self: Graph, ref: Any, value: Any) -> list[int]:
        """Pin ``ref`` to ``value`` (or ``value(current)`` if callable); returns its new cone."""
        i = self.id(ref)
        if callable(value) and not hasattr(value, "shape"):
            value = value(self.get(i))
        if i not in self._pinned:
            self._pinned[i] = self._value[i] if self._fn[i] is None else None
        self._value[i] = value
        self._valid[i] = True  # a pinned node is valid; its rule is suspended
        return self._invalidate_consumers((i,))

    def unpatch(self: Graph, ref: Any) -> list[int]:
        """Release a pin: a rule node becomes invalid, a leaf gets its original value back."""
        i = self.id(ref)
        if i not in self._pinned:
            raise GraphError(f"{self.names[i]!r} is not patched")
        original = self._pinned.pop(i)
        if self._fn[i] is None:
            self._value[i] = original
            return self._invalidate_consumers((i,))
        return self._invalidate_self(i)

    def ablate(
        self: Graph,
        ref: Any,
        mode: str = "zero",
        *,
        axis: int = 0,
        rng: np.random.Generator | None = None,
        source: Cache | None = None,
    ) -> list[int]:
        """Patch ``ref`` with zeros, its mean over ``axis``, or a resample.

        ``resample`` takes the node's value from ``source`` (another run's cache) when given,
        otherwise permutes ``axis`` with ``rng``.
        """
        i = self.id(ref)
        current = self.get(i)
        if mode == "zero":
            new = values.zeros_like(current)
        elif mode == "mean":
            new = values.mean_like(current, axis)
        elif mode == "resample":
            if source is not None:
                new = source.values[i]
            elif rng is not None:
                new = values.permute_axis(
                    current, rng.permutation(values.size_along(current, axis)), axis
                )
            else:
                raise GraphError("resample ablation needs a source cache or an rng")
        else:
            raise GraphError(f"unknown ablation mode {mode!r} (zero, mean, resample)")
        return self.patch(i, new)

    # ------------------------------------------------------------------ capture / restore
    def capture(self: Graph, nodes: Iterable[Any] | None = None, *, copy: bool = True) -> Cache:
        """Snapshot node values (demanding invalid ones first); ``copy`` breaks aliasing."""
        ids = list(range(len(self))) if nodes is None else [self.id(n) for n in nodes]
        stale = [i for i in ids if not self._valid[i]]
        if stale:
            self.demand(*stale)
        take = values.copy_value if copy else (lambda v: v)
        vals = {i: take(self._value[i]) for i in ids}
        pins = {p: (self._value[p], saved) for p, saved in self._pinned.items()}
        return Cache(vals, self.revision, pins)

    def restore(
        self: Graph,
        cache: Cache,
        nodes: Iterable[Any] | None = None,
        *,
        sites: Iterable[Any] = (),
        mode: str = "copy",
    ) -> list[int]:
        """Undo the patches at ``sites`` and put ``nodes`` back to their captured state.

        ``nodes`` defaults to the sites and their current cones. ``mode="copy"`` copies cached
        values (counted in ``ledger.copied``); ``mode="recompute"`` unpins and invalidates, so
        the next demand recomputes. A copy is refused (``OverlappingPatchError``) when it
        would erase a patch not listed in ``sites`` or ignore one whose cone meets ``nodes``.
        Returns the nodes copied, or the nodes invalidated.
        """
        site_ids = {self.id(s) for s in sites}
        if nodes is None:
            ids = list(site_ids)
            for p in site_ids:
                ids += self.cone(p)
            ids = list(dict.fromkeys(ids))
        else:
            ids = [self.id(n) for n in nodes]
        if mode == "recompute":
            out: list[int] = []
            for i in ids:
                out += self.unpatch(i) if i in self._pinned else self._invalidate_rule(i)
            return out
        if mode != "copy":
            raise GraphError(f"unknown restore mode {mode!r} (copy, recompute)")
        if cache.revision != self.revision:
            raise StaleCacheError("the graph changed since this cache was captured")
        missing = [i for i in ids if i not in cache.values]
        if missing:
            raise GraphError(f"cache lacks {self.names[missing[0]]!r}")
        self._check_restore(cache, set(ids), site_ids)
        for i in ids:
            self._value[i] = cache.values[i]
            self._valid[i] = True
            if i in cache.pins:
                self._pinned[i] = cache.pins[i][1]
            else:
                self._pinned.pop(i, None)
        self.ledger.copied += len(ids)
        if self.ledger.events is not None:
            for i in ids:
                self._log("copy", i)
        keep, cons, valid = set(ids), self._consumers, self._valid
        # Consumers outside the restored set were computed from the replaced values.
        outside = {c for i in ids for c in cons[i] if c not in keep and valid[c]}
        for c in outside:
            if c not in self._pinned:
                self._invalidate_self(c)
        return ids

    def _invalidate_rule(self: Graph, i: int) -> list[int]:
        return self._invalidate_self(i) if self._fn[i] is not None else []

    def _check_restore(self: Graph, cache: Cache, keep: set[int], sites: set[int]) -> None:
        """Refuse restores that erase or ignore an active patch, or leave the closure broken."""
        for p in self._pinned:
            if p in keep and p not in sites and p not in cache.pins:
                raise OverlappingPatchError(
                    f"restoring {self.names[p]!r} from cache would erase its active patch; "
                    "list it in sites= to undo it, or restore by recompute"
                )
        after = {p: self._value[p] for p in self._pinned if p not in keep}
        after.update({p: v for p, (v, _) in cache.pins.items() if p in keep})
        captured = {p: v for p, (v, _) in cache.pins.items()}
        differing = [
            p
            for p in after.keys() | captured.keys()
            if p not in after or p not in captured or after[p] is not captured[p]
        ]
        for p in differing:  # the cone once the restore has set the pins to ``after``'s
            if not keep.isdisjoint(self.cone(p, pinned=after.keys())):
                raise OverlappingPatchError(
                    f"restoring from cache would ignore the patch at {self.names[p]!r}; "
                    "restore the union of cones or restore by recompute"
                )
        valid, ins = self._valid, self._inputs
        for i in keep:
            if i in after:
                continue
            for j in ins[i]:
                if j not in keep and not valid[j]:
                    raise GraphError(
                        f"partial restore: {self.names[i]!r} reads invalid "
                        f"{self.names[j]!r}; restore the whole cone"
                    )

    # ------------------------------------------------------------------ grafts
    def graft(self: Graph, u: Any, w: Any, block: Block) -> list[int]:
        """Insert ``block`` on edge ``(u, w)``: only ``w`` is rerouted to read the block output.

        The block's nodes are born invalid and ``w``'s cone is invalidated; returns their ids.
        """
        iu, iw = self.id(u), self.id(w)
        if iu not in self._inputs[iw]:
            raise NotAnEdgeError(f"{self.names[iw]!r} does not read {self.names[iu]!r}")
        if not block.steps:
            raise GraphError("a graft block needs at least one step")
        local = {BLOCK_INPUT: iu}
        fresh = []
        for step in block.steps:
            ins = [local[r] if r in local else self.id(r) for r in step.inputs]
            local[step.name] = self.rule(step.name, step.fn, ins, kind="graft")
            fresh.append(local[step.name])
        out = fresh[-1]
        rewired = [out if j == iu else j for j in self._inputs[iw]]
        self.rule(self.names[iw], self._fn[iw], rewired)  # type: ignore[arg-type]
        if self._batch is not None:
            self._batch.grafts.append(fresh)
        return fresh

    def batch(self: Graph, *outputs: Any) -> _BatchContext:
        """``with g.batch(out) as b:`` groups mutations; one demand of ``out`` at exit."""
        return _BatchContext(self, Batch(tuple(outputs)))
