"""Core DAG behaviour: demand, invalidation, redefinition, topological repair, event log."""

from __future__ import annotations

import numpy as np
import pytest

from ndvm.errors import NdvmError
from ndvm.graph import CycleError, Event, Graph, GraphError, UnknownNodeError
from ndvm.graph.builders import chain, relu


def _add(a, b):
    return a + b


def _diamond() -> Graph:
    g = Graph()
    g.leaf("x", np.array([1.0, -2.0]))
    g.leaf("w", np.array([3.0, 4.0]), kind="param")
    g.rule("a", _add, ["x", "w"])
    g.rule("b", relu, ["a"])
    g.rule("c", np.negative, ["a"])
    g.rule("d", _add, ["b", "c"])
    return g


def test_demand_recomputes_only_needed_invalid_nodes():
    g = _diamond()
    rep = g.demand("b")
    assert [g.names[i] for i in rep.recomputed] == ["a", "b"]
    assert not g.is_valid("c") and not g.is_valid("d")
    assert g.demand("d").count == 2  # c, d
    assert g.demand("d").count == 0  # a valid graph recomputes nothing


def test_leaf_set_invalidates_cone_and_never_counts_leaves():
    g = _diamond()
    g.demand("d")
    g.ledger.reset()
    g.leaf("x", np.array([0.5, 0.5]))
    assert g.invalid_nodes() == {g.id(n) for n in "abcd"}
    assert g.ledger.invalidated == 4  # x itself is a leaf: never counted
    assert g.demand("d").count == 4
    np.testing.assert_array_equal(g.value("d"), np.array([0.0, 0.0]))


def test_redefinition_invalidates_even_with_same_inputs():
    g = _diamond()
    g.demand("d")
    g.rule("b", np.abs, ["a"])  # same inputs, new function: must not serve the stale value
    assert not g.is_valid("b") and not g.is_valid("d") and g.is_valid("c")
    g.demand("d")
    a = g.value("a")
    np.testing.assert_array_equal(g.value("d"), np.abs(a) - a)


def test_redefinition_rewires_consumers_index():
    g = _diamond()
    g.rule("d", np.negative, ["c"])
    assert g.id("d") not in g.consumers("b")
    assert g.id("d") in g.consumers("c")


def test_redefinition_repairs_topological_order():
    g = Graph()
    g.leaf("x", np.ones(2))
    g.rule("a", relu, ["x"])
    g.rule("b", relu, ["a"])
    g.rule("late", np.negative, ["x"])
    g.rule("a", _add, ["x", "late"])  # edge late -> a with ord[late] > ord[a]
    assert g.order("late") < g.order("a") < g.order("b")
    np.testing.assert_array_equal(g.get("b"), np.zeros(2))


def test_cycle_is_refused_without_changes():
    g = _diamond()
    with pytest.raises(CycleError):
        g.rule("a", _add, ["x", "d"])
    with pytest.raises(CycleError):
        g.rule("a", relu, ["a"])
    assert g.inputs("a") == (g.id("x"), g.id("w"))
    assert issubclass(CycleError, NdvmError)


def test_unknown_and_misused_nodes_raise_typed_errors():
    g = _diamond()
    with pytest.raises(UnknownNodeError):
        g.demand("nope")
    with pytest.raises(GraphError):
        g.leaf("a", np.zeros(2))
    with pytest.raises(GraphError):
        g.rule("x", relu, ["w"])
    with pytest.raises(GraphError):
        g.invalidate("x")


def test_event_log_lists_executed_nodes_exactly():
    g = _diamond()
    g.demand("d")
    g.ledger.enable_events()
    g.leaf("w", np.zeros(2))
    g.demand("b")
    assert g.ledger.events == [
        Event("invalidate", "a"),
        Event("invalidate", "b"),
        Event("invalidate", "c"),
        Event("invalidate", "d"),
        Event("execute", "a"),
        Event("execute", "b"),
    ]


def test_demand_cost_does_not_scale_with_graph_size():
    bt = chain(2000)
    g = bt.graph
    g.demand(bt.output)
    g.ledger.reset()
    g.invalidate("c1999")
    rep = g.demand(bt.output)
    assert rep.count == 2 and g.ledger.recomputed == 2


def test_evaluate_from_scratch_matches_demand():
    g = _diamond()
    fresh = g.evaluate_from_scratch("d")
    assert np.array_equal(fresh[g.id("d")], g.get("d"))


def test_demand_wraps_rule_errors_and_leaves_node_invalid():
    from ndvm.graph import EvaluationError

    g = Graph()
    g.leaf("x", np.ones(2))
    g.rule("bad", lambda v: v @ np.ones((3, 3)), ["x"])
    with pytest.raises(EvaluationError, match="bad"):
        g.demand("bad")
    assert not g.is_valid("bad")
