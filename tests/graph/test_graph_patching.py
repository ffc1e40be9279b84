"""Patches, ablations, capture/restore, multi-site unions and the refusal rules."""

from __future__ import annotations

import numpy as np
import pytest

from ndvm.graph import (
    Block,
    Graph,
    GraphError,
    NotAnEdgeError,
    OverlappingPatchError,
    StaleCacheError,
    predict,
)
from ndvm.graph.builders import chain, layered_chain, relu


def _two_branch() -> Graph:
    """x -> a -> b -> out and x -> p -> q -> out: two independent branches joined at out."""
    g = Graph()
    g.leaf("x", np.arange(6.0).reshape(3, 2) - 2.0)
    g.rule("a", np.tanh, ["x"])
    g.rule("b", np.exp, ["a"])
    g.rule("p", np.sin, ["x"])
    g.rule("q", np.cos, ["p"])
    g.rule("out", np.add, ["b", "q"])
    g.demand("out")
    return g


def test_patch_keeps_site_valid_and_costs_its_cone():
    g = _two_branch()
    g.ledger.reset()
    cone = g.patch("a", np.zeros((3, 2)))
    assert g.is_valid("a") and sorted(g.names[i] for i in cone) == ["b", "out"]
    assert g.demand("out").count == len(g.cone("a")) == predict.patch_cost(g, "a") == 2
    np.testing.assert_array_equal(g.value("b"), np.ones((3, 2)))


def test_unpatch_recomputes_site_and_cone():
    g = _two_branch()
    ref = g.value("out")
    g.patch("a", np.zeros((3, 2)))
    g.demand("out")
    assert sorted(g.names[i] for i in g.unpatch("a")) == ["a", "b", "out"]
    assert g.demand("out").count == 3
    assert g.value("out").tobytes() == ref.tobytes()


def test_patch_on_leaf_restores_original_on_unpatch():
    g = _two_branch()
    x = g.value("x")
    g.patch("x", np.zeros((3, 2)))
    assert g.demand("out").count == 5
    g.unpatch("x")
    assert g.value("x") is x and g.demand("out").count == 5


def test_ablate_modes():
    g = _two_branch()
    a = g.value("a")
    g.ablate("a", "zero")
    np.testing.assert_array_equal(g.value("a"), np.zeros_like(a))
    g.unpatch("a")
    g.ablate("a", "mean")
    np.testing.assert_array_equal(g.value("a"), np.broadcast_to(a.mean(0), a.shape))
    g.unpatch("a")
    g.ablate("a", "resample", rng=np.random.default_rng(0))
    assert sorted(map(tuple, g.value("a"))) == sorted(map(tuple, a))
    g.unpatch("a")
    with pytest.raises(GraphError):
        g.ablate("a", "resample")
    with pytest.raises(GraphError):
        g.ablate("a", "nope")


def test_copy_restore_equals_recompute_restore_and_counts_copies():
    g = _two_branch()
    cache = g.capture()
    ref = g.value("out")
    cone = g.patch("a", np.zeros((3, 2)))
    g.demand("out")
    g.ledger.reset()
    g.restore(cache, [g.id("a"), *cone], sites=["a"])
    assert g.ledger.copied == 3 and g.ledger.recomputed == 0
    assert not g.is_pinned("a") and g.invalid_nodes() == set()
    assert g.value("out").tobytes() == ref.tobytes()
    g.patch("a", np.zeros((3, 2)))
    g.restore(cache, ["a"], mode="recompute")
    g.demand("out")
    assert g.value("out").tobytes() == ref.tobytes()


def test_restore_refuses_to_erase_an_unlisted_patch():
    bt = chain(6)
    g = bt.graph
    g.demand(bt.output)
    cache = g.capture()
    cone2 = g.patch("c2", 0.0 * g.value("c2"))
    g.patch("c4", 1.0 + g.value("c4"))  # an active patch inside c2's cone
    g.demand(bt.output)
    with pytest.raises(OverlappingPatchError):
        g.restore(cache, [g.id("c2"), *cone2], sites=["c2"])
    g.restore(cache, sites=["c2", "c4"])  # the union of both cones is allowed
    assert not g.is_pinned("c4") and g.invalid_nodes() == set()
    assert g.value(bt.output).tobytes() == cache.values[g.id(bt.output)].tobytes()


def test_restore_refuses_to_ignore_an_overlapping_patch():
    g = _two_branch()
    cache = g.capture()
    g.patch("p", np.ones((3, 2)))
    g.patch("a", np.zeros((3, 2)))
    g.demand("out")
    with pytest.raises(OverlappingPatchError):  # out's cached value ignores the patch at p
        g.restore(cache, ["a", "b", "out"], sites=["a"])
    with pytest.raises(OverlappingPatchError):  # the default node set is a's whole cone
        g.restore(cache, sites=["a"])
    g.restore(cache, ["a", "b"], sites=["a"])  # without the shared node: disjoint, allowed
    assert g.is_pinned("p") and not g.is_pinned("a") and not g.is_valid("out")
    g.demand("out")
    expected = np.exp(np.tanh(g.value("x"))) + np.cos(np.ones((3, 2)))
    assert g.value("out").tobytes() == expected.tobytes()


def test_restore_refuses_a_site_downstream_of_a_patch_it_would_reconnect():
    """Patched x, then patched y = f(x): while y is pinned x's cone is empty, but restoring y
    from a cache captured before x's patch would give y a value that ignores x's patch."""
    g = Graph()
    g.leaf("x", np.zeros(2))
    g.rule("y", np.tanh, ["x"])
    cache = g.capture()
    g.patch("x", np.array([0.25, -1.0]))
    g.patch("y", np.array([0.5, -1.0]))
    with pytest.raises(OverlappingPatchError):
        g.restore(cache, sites=["y"])
    assert g.is_pinned("y")  # refused: nothing changed
    g.restore(cache, sites=["x", "y"])  # both undone: exactly the captured state
    assert g.value("y").tobytes() == np.tanh(np.zeros(2)).tobytes()


def test_restore_refuses_stale_cache_and_partial_cones():
    g = _two_branch()
    cache = g.capture()
    g.invalidate("a")
    with pytest.raises(GraphError, match="partial restore"):
        g.restore(cache, ["out"])  # out reads the still-invalid b
    g.leaf("x", np.zeros((3, 2)))
    with pytest.raises(StaleCacheError):
        g.restore(cache, ["a"])


def test_multi_site_batch_costs_union_without_per_site_subtraction():
    g = _two_branch()
    cache = g.capture()
    g.ledger.reset()
    with g.batch("out") as b:
        g.patch("a", np.zeros((3, 2)))
        g.patch("p", np.zeros((3, 2)))
    union = g.cone("a") | g.cone("p")
    assert b.report.count == len(union) == 3  # b, q, out: the shared out once, nothing less
    g.restore(cache, sites=["a", "p"])
    assert g.invalid_nodes() == set() and g.ledger.copied == 5


def test_multi_site_downstream_pin_masks_upstream_patch():
    w = [3, 2, 4, 1, 5]
    bt = layered_chain(w)
    g = bt.graph
    g.demand(bt.output)
    with g.batch(bt.output) as b:
        for s in (bt.sites[0], bt.sites[2]):
            g.patch(s, 0.0 * g.value(s))
    assert b.report.count == sum(w[3:])  # only what the output still needs is recomputed


def test_graft_requires_an_edge_and_reroutes_one_consumer():
    g = _two_branch()
    with pytest.raises(NotAnEdgeError):
        g.graft("a", "q", Block.chain("blk", [relu]))
    g.rule("c", np.negative, ["a"])  # a second consumer of a: must not be rerouted
    g.demand("c", "out")
    fresh = g.graft("a", "b", Block.chain("blk", [relu, np.negative]))
    assert g.inputs("b") == (fresh[-1],) and g.inputs("c") == (g.id("a"),)
    assert g.demand("out", "c").count == 2 + 2  # block + b, out
