"""Property tests on random DAGs: invalidation == networkx descendants, values == from scratch."""

from __future__ import annotations

import networkx as nx
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ndvm.graph import Block, CycleError, Graph, GraphError
from ndvm.graph.sweep import sweep


def _mix(c: float):
    def f(*xs):
        acc = xs[0] * c
        for x in xs[1:]:
            acc = acc + x
        return np.tanh(acc)

    return f


@st.composite
def dags(draw):
    g = Graph()
    n_leaves = draw(st.integers(1, 3))
    for k in range(n_leaves):
        g.leaf(f"x{k}", np.array([draw(st.floats(-2, 2)), 0.5 * k]))
    n_rules = draw(st.integers(1, 14))
    for k in range(n_rules):
        ins = draw(st.lists(st.integers(0, len(g) - 1), min_size=1, max_size=3))
        g.rule(f"r{k}", _mix(draw(st.sampled_from([0.5, -1.0, 2.0]))), ins)
    return g


def _effective(g: Graph) -> nx.DiGraph:
    d = nx.DiGraph()
    d.add_nodes_from(range(len(g)))
    for i in range(len(g)):
        d.add_edges_from((j, i) for j in g.effective_inputs(i))
    return d


def check_invariants(g: Graph) -> None:
    rebuilt: dict[int, set[int]] = {i: set() for i in range(len(g))}
    for i in range(len(g)):
        for j in g.inputs(i):
            rebuilt[j].add(i)
            assert g.order(j) < g.order(i)
    for i in range(len(g)):
        assert set(g.consumers(i)) == rebuilt[i]
        assert len(g.consumers(i)) == len(rebuilt[i])
        if g.is_leaf(i) or g.is_pinned(i):
            assert g.is_valid(i)
        if not g.is_valid(i):
            for c in g.consumers(i):
                assert not g.is_valid(c) or g.is_pinned(c)
    assert sorted(g.order(i) for i in range(len(g))) == list(range(len(g)))


def _mutate(g: Graph, data, step: int) -> set[int] | None:
    """Apply one random mutation; return the set it must newly invalidate (None: refused)."""
    rules = g.rule_nodes()
    leaves = [i for i in range(len(g)) if g.is_leaf(i)]
    pinned = [i for i in range(len(g)) if g.is_pinned(i)]
    kinds = ["set", "redefine", "patch", "graft"] + (["unpatch"] if pinned else [])
    kind = data.draw(st.sampled_from(kinds))
    if kind == "set":
        x = data.draw(st.sampled_from([i for i in leaves if not g.is_pinned(i)] or leaves))
        if g.is_pinned(x):
            return None
        g.leaf(g.names[x], np.array([data.draw(st.floats(-2, 2)), 1.0]))
        return set(nx.descendants(_effective(g), x))
    if kind == "redefine":
        r = data.draw(st.sampled_from(rules))
        ins = data.draw(st.lists(st.integers(0, len(g) - 1), min_size=1, max_size=3))
        if g.is_pinned(r):
            return None
        try:
            g.rule(g.names[r], _mix(1.5), ins)
        except CycleError:
            return None
        return {r} | set(nx.descendants(_effective(g), r))
    if kind == "patch":
        s = data.draw(st.integers(0, len(g) - 1))
        g.patch(s, np.array([0.25 * step, -1.0]))
        return set(nx.descendants(_effective(g), s))
    if kind == "unpatch":
        s = data.draw(st.sampled_from(pinned))
        g.unpatch(s)
        own = set() if g.is_leaf(s) else {s}
        return own | set(nx.descendants(_effective(g), s))
    w = data.draw(st.sampled_from(rules))
    if g.is_pinned(w):
        return None
    u = data.draw(st.sampled_from(list(g.inputs(w))))
    h = data.draw(st.integers(1, 2))
    fresh = g.graft(u, w, Block.chain(f"b{step}", [_mix(0.7)] * h))
    return set(fresh) | {w} | set(nx.descendants(_effective(g), w))


@settings(max_examples=60, deadline=None)
@given(dags(), st.data())
def test_invalidation_equals_networkx_descendants(g, data):
    for step in range(6):
        g.demand(*range(len(g)))
        before = {i: g.value(i) for i in range(len(g))}
        counted = g.ledger.invalidated
        expected = _mutate(g, data, step)
        check_invariants(g)
        if expected is None:
            continue
        invalid = g.invalid_nodes()
        assert invalid == expected
        eff = _effective(g)
        for i in range(len(g)):
            assert g.cone(i) == nx.descendants(eff, i)
            assert g.upcone(i) == nx.ancestors(eff, i)
        assert g.ledger.invalidated - counted == len(expected)  # rule nodes only
        for i in range(len(g)):
            if i not in invalid and i in before and not g.is_pinned(i) and not g.is_leaf(i):
                assert g.value(i) is before[i]  # outside the cone: same cached object


@settings(max_examples=60, deadline=None)
@given(dags(), st.data())
def test_values_equal_from_scratch_after_random_sequences(g, data):
    cache = g.capture()
    for step in range(8):
        pinned = [i for i in range(len(g)) if g.is_pinned(i)]
        if pinned and data.draw(st.booleans()):
            sites = data.draw(st.lists(st.sampled_from(pinned), min_size=1, unique=True))
            try:  # copy-restore is either refused (state unchanged) or exact
                g.restore(cache, sites=sites)
            except GraphError:
                pass
        elif data.draw(st.booleans()):
            target = data.draw(st.integers(0, len(g) - 1))
            rep = g.demand(target)
            assert rep.count == len(rep.recomputed)
            assert g.demand(target).count == 0
        else:
            _mutate(g, data, step)
        check_invariants(g)
    g.demand(*range(len(g)))
    fresh = g.evaluate_from_scratch()
    for i in range(len(g)):
        assert g.value(i).tobytes() == fresh[i].tobytes()


@settings(max_examples=40, deadline=None)
@given(dags(), st.data())
def test_sweep_equals_naive_rerun_per_site(g, data):
    """Differential: the copy-restore sweep == re-evaluating everything per patched site."""
    out = len(g) - 1
    g.demand(*range(len(g)))
    clean = g.capture()
    for name in [n for n in g.names if n.startswith("x")]:
        g.leaf(name, g.value(name) * -0.5 + 0.25)
    g.demand(out)
    before = {i: g.value(i) for i in range(len(g))}
    sites = data.draw(st.lists(st.integers(0, len(g) - 1), min_size=1, max_size=5, unique=True))
    res = sweep(g, sites, clean, lambda v: v.sum(), out)
    for k, s in enumerate(sites):
        g.patch(s, clean.values[s])
        naive = g.evaluate_from_scratch(out)[out].sum()
        g.unpatch(s)
        assert res.values[k].tobytes() == naive.tobytes()
        assert res.records[k].recomputed == len(g.cone(s) & g.ancestors_closed([out]))
    g.demand(out)
    assert g.invalid_nodes() <= {i for i in range(len(g)) if i not in g.ancestors_closed([out])}
    for i in g.ancestors_closed([out]):
        assert g.value(i).tobytes() == before[i].tobytes()
