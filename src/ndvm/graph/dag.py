"""Persistent reactive DAG: leaves and rule nodes with cached values and validity flags.

Invariants kept after every public operation:
* closure: every unpinned rule consumer of an invalid node is invalid (leaves and pinned
  nodes are always valid; a pinned node's rule is suspended, so it has no effective inputs);
* the consumers index equals the one rebuilt from the rules' input lists;
* ``ord`` is a topological index: every rule's inputs have a smaller index than the rule.
Demand visits only invalid ancestors of the requested outputs (no walk over the whole graph).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Hashable, Iterable, Sequence
from time import perf_counter
from typing import Any

from ndvm.graph.errors import CycleError, EvaluationError, GraphError, UnknownNodeError
from ndvm.graph.ledger import Event, Ledger, Report
from ndvm.graph.patching import PatchOps

NodeRef = str | int
LEAF_KINDS = frozenset({"input", "param"})


class Graph(PatchOps):
    """A persistent DAG of named nodes; see the module docstring for the invariants."""

    def __init__(self) -> None:
        self._ids: dict[Hashable, int] = {}
        self.names: list[str] = []
        self.kinds: list[str] = []
        self.meta: list[dict[str, Any]] = []
        self._fn: list[Callable[..., Any] | None] = []
        self._inputs: list[tuple[int, ...]] = []
        self._consumers: list[list[int]] = []
        self._value: list[Any] = []
        self._valid: list[bool] = []
        self._ord: list[int] = []
        self._next_ord = 0
        self._pinned: dict[int, Any] = {}
        self.revision = 0  # bumped by every non-patch mutation (leaf set, redefinition, graft)
        self.ledger = Ledger()
        self._batch: Any = None  # the open Batch, if any

    # ------------------------------------------------------------------ lookup
    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, ref: object) -> bool:
        return ref in self._ids

    def id(self, ref: NodeRef) -> int:
        """The integer id of a node given by name, alias or id."""
        if isinstance(ref, int) and not isinstance(ref, bool):
            if 0 <= ref < len(self.names):
                return ref
            raise UnknownNodeError(f"no node with id {ref}")
        try:
            return self._ids[ref]
        except KeyError:
            raise UnknownNodeError(f"no node named {ref!r}") from None

    def alias(self, name: str, target: NodeRef) -> None:
        """Make ``name`` a second name of ``target`` (e.g. ``hook_resid_pre`` of a layer)."""
        if name in self._ids:
            raise GraphError(f"name {name!r} already exists")
        self._ids[name] = self.id(target)

    def is_leaf(self, ref: NodeRef) -> bool:
        return self._fn[self.id(ref)] is None

    def is_valid(self, ref: NodeRef) -> bool:
        return self._valid[self.id(ref)]

    def is_pinned(self, ref: NodeRef) -> bool:
        return self.id(ref) in self._pinned

    def inputs(self, ref: NodeRef) -> tuple[int, ...]:
        return self._inputs[self.id(ref)]

    def consumers(self, ref: NodeRef) -> tuple[int, ...]:
        return tuple(self._consumers[self.id(ref)])

    def order(self, ref: NodeRef) -> int:
        """The node's current topological index."""
        return self._ord[self.id(ref)]

    def value(self, ref: NodeRef) -> Any:
        """The cached value (possibly stale if the node is invalid; see ``get``)."""
        return self._value[self.id(ref)]

    def get(self, ref: NodeRef) -> Any:
        """Demand the node and return its value."""
        i = self.id(ref)
        if not self._valid[i]:
            self.demand(i)
        return self._value[i]

    def rule_nodes(self) -> list[int]:
        return [i for i, f in enumerate(self._fn) if f is not None]

    def invalid_nodes(self) -> set[int]:
        return {i for i, ok in enumerate(self._valid) if not ok}

    def effective_inputs(self, i: int) -> tuple[int, ...]:
        """Inputs that the node's value currently depends on (none for leaves and pins)."""
        return () if i in self._pinned else self._inputs[i]

    # ------------------------------------------------------------------ definition
    def _new(self, name: str, kind: str, fn: Callable[..., Any] | None, meta: dict) -> int:
        if not isinstance(name, str):
            raise GraphError(f"node names are strings, got {name!r}")
        i = len(self.names)
        self._ids[name] = i
        self.names.append(name)
        self.kinds.append(kind)
        self.meta.append(meta)
        self._fn.append(fn)
        self._inputs.append(())
        self._consumers.append([])
        self._value.append(None)
        self._valid.append(fn is None)
        self._ord.append(self._next_ord)
        self._next_ord += 1
        return i

    def leaf(self, name: str, value: Any, kind: str = "input", **meta: Any) -> int:
        """Define a leaf, or set an existing leaf's value (invalidating its consumers)."""
        if kind not in LEAF_KINDS:
            raise GraphError(f"leaf kind must be 'input' or 'param', got {kind!r}")
        if name in self._ids:
            i = self._ids[name]
            if self._fn[i] is not None:
                raise GraphError(f"{name!r} is a rule node; use patch() to override its value")
            if i in self._pinned:
                raise GraphError(f"{name!r} is patched; unpatch it before setting it")
            self._value[i] = value
            self.revision += 1
            self._invalidate_consumers((i,))
            return i
        i = self._new(name, kind, None, meta)
        self._value[i] = value
        return i

    def rule(
        self, name: str, fn: Callable[..., Any], inputs: Sequence[NodeRef], **meta: Any
    ) -> int:
        """Define a rule node ``name = fn(*inputs)``; redefining one rewires and invalidates it."""
        ins = tuple(self.id(r) for r in inputs)
        if name not in self._ids:
            i = self._new(name, "rule", fn, meta)
            self._inputs[i] = ins
            for j in dict.fromkeys(ins):
                self._consumers[j].append(i)
            self.ledger.invalidated += 1  # born invalid: counted as part of this mutation
            self._log("invalidate", i)
            return i
        i = self._ids[name]
        if self._fn[i] is None:
            raise GraphError(f"{name!r} is a leaf; leaves cannot be redefined as rules")
        if i in self._pinned:
            raise GraphError(f"{name!r} is patched; unpatch it before redefining it")
        self._check_acyclic(i, ins)
        old = self._inputs[i]
        for j in dict.fromkeys(old):
            if j not in ins:
                self._consumers[j].remove(i)
        for j in dict.fromkeys(ins):
            if j not in old:
                self._consumers[j].append(i)
        self._fn[i] = fn
        self._inputs[i] = ins
        self.meta[i].update(meta)
        for j in ins:
            if self._ord[j] > self._ord[i]:
                self._reorder(j, i)
        self.revision += 1
        self._invalidate_self(i)  # redefinition ALWAYS invalidates, even with equal inputs
        return i

    # ------------------------------------------------------------------ topological index
    def _reach_forward(self, start: int, bound: int) -> list[int]:
        """Nodes reachable from ``start`` via consumers with ``ord <= bound`` (start included)."""
        ord_, cons = self._ord, self._consumers
        seen = {start}
        stack = [start]
        out = [start]
        while stack:
            for c in cons[stack.pop()]:
                if c not in seen and ord_[c] <= bound:
                    seen.add(c)
                    out.append(c)
                    stack.append(c)
        return out

    def _check_acyclic(self, i: int, ins: Iterable[int]) -> None:
        for j in ins:
            if j == i or (
                self._ord[j] > self._ord[i] and j in self._reach_forward(i, self._ord[j])
            ):
                raise CycleError(f"rule {self.names[i]!r} reading {self.names[j]!r} closes a cycle")

    def _reorder(self, src: int, dst: int) -> None:
        """Pearce-Kelly repair after adding edge ``src -> dst`` with ``ord[src] > ord[dst]``."""
        ord_, ins = self._ord, self._inputs
        lb, ub = ord_[dst], ord_[src]
        forward = self._reach_forward(dst, ub)
        seen = {src}
        backward = [src]
        stack = [src]
        while stack:
            for j in ins[stack.pop()]:
                if j not in seen and ord_[j] > lb:
                    seen.add(j)
                    backward.append(j)
                    stack.append(j)
        backward.sort(key=ord_.__getitem__)
        forward.sort(key=ord_.__getitem__)
        moved = backward + forward
        for node, slot in zip(moved, sorted(ord_[n] for n in moved)):
            ord_[node] = slot

    # ------------------------------------------------------------------ invalidation
    def _log(self, kind: str, i: int) -> None:
        if self.ledger.events is not None:
            self.ledger.events.append(Event(kind, self.names[i]))

    def _invalidate_consumers(self, seeds: Iterable[int]) -> list[int]:
        """Valid-gated worklist: mark the unpinned consumers reachable from ``seeds`` invalid.

        Returns the newly invalidated nodes (exactly the cone when the graph was valid).
        """
        valid, cons, pinned = self._valid, self._consumers, self._pinned
        out: list[int] = []
        stack = list(seeds)
        while stack:
            for c in cons[stack.pop()]:
                if valid[c] and c not in pinned:
                    valid[c] = False
                    out.append(c)
                    stack.append(c)
        self.ledger.invalidated += len(out)
        if self.ledger.events is not None:
            for c in out:
                self._log("invalidate", c)
        return out

    def _invalidate_self(self, i: int) -> list[int]:
        if not self._valid[i]:
            return []
        self._valid[i] = False
        self.ledger.invalidated += 1
        self._log("invalidate", i)
        return [i, *self._invalidate_consumers((i,))]

    def invalidate(self, ref: NodeRef) -> list[int]:
        """Mark a rule node and its downstream cone invalid; returns the newly invalid nodes."""
        i = self.id(ref)
        if self._fn[i] is None:
            raise GraphError(f"{self.names[i]!r} is a leaf; leaves are never invalid")
        return self._invalidate_self(i)

    # ------------------------------------------------------------------ demand
    def _collect_invalid(self, outs: Iterable[int]) -> list[int]:
        """Invalid ancestors of ``outs`` (outs included); stops at valid nodes."""
        valid, ins = self._valid, self._inputs
        stack = [i for i in dict.fromkeys(outs) if not valid[i]]
        seen = set(stack)
        found = list(stack)
        while stack:
            for j in ins[stack.pop()]:
                if not valid[j] and j not in seen:
                    seen.add(j)
                    found.append(j)
                    stack.append(j)
        return found

    def demand(self, *outputs: NodeRef) -> Report:
        """Recompute, in topological order, the invalid nodes that ``outputs`` need."""
        todo = self._collect_invalid(self.id(o) for o in outputs)
        todo.sort(key=self._ord.__getitem__)
        fn, ins, value, valid = self._fn, self._inputs, self._value, self._valid
        start = perf_counter()
        i = -1
        try:
            for i in todo:
                value[i] = fn[i](*[value[j] for j in ins[i]])  # type: ignore[misc]
                valid[i] = True
        except Exception as exc:
            raise EvaluationError(f"rule {self.names[i]!r} raised {exc!r}") from exc
        seconds = perf_counter() - start
        self.ledger.recomputed += len(todo)
        self.ledger.demands += 1
        if self.ledger.events is not None:
            for i in todo:
                self._log("execute", i)
        return Report(tuple(todo), seconds)

    def evaluate_from_scratch(self, *outputs: NodeRef) -> dict[int, Any]:
        """Oracle: evaluate every needed node afresh (ignoring caches); pins are honoured."""
        need = self.ancestors_closed([self.id(o) for o in outputs] or range(len(self)))
        out: dict[int, Any] = {}
        for i in sorted(need, key=self._ord.__getitem__):
            if self._fn[i] is None or i in self._pinned:
                out[i] = self._value[i]
            else:
                out[i] = self._fn[i](*[out[j] for j in self._inputs[i]])  # type: ignore[misc]
        return out

    def profile(self, *outputs: NodeRef, repeats: int = 3) -> dict[int, float]:
        """Seconds per rule node (minimum over ``repeats`` fresh evaluations of ``outputs``).

        Cached values and validity are left untouched; pins are honoured.
        """
        need = self.ancestors_closed([self.id(o) for o in outputs] or range(len(self)))
        order = sorted(need, key=self._ord.__getitem__)
        best = {i: float("inf") for i in order if self._fn[i] is not None and i not in self._pinned}
        for _ in range(repeats):
            vals: dict[int, Any] = {}
            for i in order:
                if i not in best:
                    vals[i] = self._value[i]
                    continue
                args = [vals[j] for j in self._inputs[i]]
                t0 = perf_counter()
                vals[i] = self._fn[i](*args)  # type: ignore[misc]
                best[i] = min(best[i], perf_counter() - t0)
        return best

    # ------------------------------------------------------------------ cones
    def cone(self, ref: NodeRef, *, pinned: Container[int] | None = None) -> frozenset[int]:
        """V+(s): nodes reachable from ``s`` by a path of length >= 1 (pinned nodes cut; with
        ``pinned``, those nodes instead of the current pins)."""
        i = self.id(ref)
        cons = self._consumers
        pinned = self._pinned if pinned is None else pinned
        seen: set[int] = set()
        stack = [i]
        while stack:
            for c in cons[stack.pop()]:
                if c not in seen and c not in pinned:
                    seen.add(c)
                    stack.append(c)
        return frozenset(seen)

    def upcone(self, ref: NodeRef) -> frozenset[int]:
        """V-(s): nodes with a path of length >= 1 to ``s`` (through effective inputs)."""
        return frozenset(self.ancestors_closed([self.id(ref)]) - {self.id(ref)})

    def ancestors_closed(self, nodes: Iterable[int]) -> set[int]:
        """``nodes`` together with all their ancestors through effective inputs."""
        seen = set(nodes)
        stack = list(seen)
        while stack:
            for j in self.effective_inputs(stack.pop()):
                if j not in seen:
                    seen.add(j)
                    stack.append(j)
        return seen

    def count_rules(self, nodes: Iterable[int]) -> int:
        """How many of ``nodes`` are rule nodes (leaves are never counted)."""
        fn = self._fn
        return sum(1 for i in nodes if fn[i] is not None)
