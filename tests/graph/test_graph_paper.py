"""The published validation experiments (E4, E5, E7), reproduced from measured cones."""

from __future__ import annotations

import itertools
import random

import pytest

from ndvm.graph import Block, predict
from ndvm.graph.builders import (
    chain,
    even_sites,
    layered_chain,
    parallel_layers,
    profile_weights,
    relu,
)

E4_L320 = {
    0.0: (2.0057, 2.0057),
    0.5: (1.6722, 2.5057),
    1.0: (1.5064, 3.0004),
    2.0: (1.3471, 3.9247),
}


def _measured_e4(L: int, q: float, profile: str) -> tuple[float, list[int], list[int]]:
    w = profile_weights(L, q, profile)
    built = layered_chain(w)
    g = built.graph
    g.demand(built.output)
    cones = [len(g.cone(s)) for s in built.sites]
    # Published convention: the input leaf is in the whole-graph count, the site in its cone.
    return predict.rho_from_cones(cones, sum(w), offset=1), cones, w


@pytest.mark.parametrize("q", sorted(E4_L320))
def test_e4_table_at_l320_from_measured_cones(q):
    out_rho, _, _ = _measured_e4(320, q, "output")
    in_rho, _, _ = _measured_e4(320, q, "input")
    assert (round(out_rho, 4), round(in_rho, 4)) == E4_L320[q]


def test_e4_input_heavy_q1_at_l20():
    assert round(_measured_e4(20, 1.0, "input")[0], 4) == 3.1585


@pytest.mark.parametrize("L", [20, 40, 80, 160])
@pytest.mark.parametrize("q", [0.0, 1.0, 2.0])
def test_e4_measured_cones_equal_suffix_sums(L, q):
    for profile in ("output", "input"):
        _, cones, w = _measured_e4(L, q, profile)
        assert cones == [sum(w[i + 1 :]) for i in range(L)]
        exact = predict.rho_from_cones(cones, sum(w))
        assert exact == pytest.approx(predict.layered_rho(w), rel=1e-12)


@pytest.mark.parametrize("q", [0.5, 1.0, 2.0])
def test_e4_growing_budget_approaches_limits(q):
    for profile in ("output", "input"):
        errs = []
        for L in (20, 80, 320):
            rho, _, _ = _measured_e4_budget(L, q, profile, 20 * L)
            errs.append(abs(rho - predict.limit(q, profile)))
        assert errs[0] > errs[1] > errs[2]


def _measured_e4_budget(L, q, profile, total):
    w = profile_weights(L, q, profile, total=total)
    built = layered_chain(w)
    cones = [len(built.graph.cone(s)) for s in built.sites]
    return predict.rho_from_cones(cones, sum(w)), cones, w


E5 = {10: 1.0526, 20: 1.0256, 40: 1.0126, 80: 1.0062, 160: 1.0031}


@pytest.mark.parametrize("L", sorted(E5))
def test_e5_train_rho_matches_layered_formula_and_paper(L):
    for profile, q in (("output", 1.0), ("input", 2.0), ("output", 0.0)):
        w = profile_weights(L, q, profile)
        built = parallel_layers(w)
        g = built.graph
        measured = predict.train_rho(g, built.sites)
        layer_nodes = [2 * wj - 1 for wj in w]  # w_j branches + (w_j - 1) folds
        local = [wj for wj in w]  # the site's branch + the fold chain it feeds
        assert measured == predict.layered_train_rho(layer_nodes, local)
        assert abs(measured - E5[L]) < 1e-4
        assert 1.0 < measured < L / (L - 0.5)


@pytest.mark.parametrize("n", [1, 7, 50, 400])
def test_e5_train_rho_is_exactly_one_on_a_pure_chain(n):
    built = chain(n)
    assert predict.train_rho(built.graph, built.sites) == 1.0


# ---------------------------------------------------------------------- E7
E7_H = 20
E7_SITES = even_sites(400, 6)


def _e7(order, batched: bool):
    built = chain(400, value=0.5)  # scalar values: the counts do not depend on them
    g = built.graph
    g.demand(built.output)
    g.ledger.reset()
    edges = [(f"c{u}", f"c{u + 1}") for u in E7_SITES]
    blocks = [Block.chain(f"g{k}", [relu] * E7_H) for k in range(6)]
    if batched:
        with g.batch(built.output) as b:
            for k in order:
                g.graft(*edges[k], blocks[k])
        return b.report.count
    costs = []
    for k in order:
        g.graft(*edges[k], blocks[k])
        costs.append(g.demand(built.output).count)
    return costs


def test_e7_sites_and_cones():
    assert E7_SITES == [57, 114, 171, 229, 286, 343]
    g = chain(400).graph
    assert [len(g.cone(f"c{u}")) for u in E7_SITES] == [343, 286, 229, 171, 114, 57]


def test_e7_shallowest_first_costs():
    assert _e7(range(6), False) == [363, 306, 249, 191, 134, 77]


def test_e7_deepest_first_costs():
    assert _e7(range(5, -1, -1), False) == [77, 154, 231, 309, 386, 463]


def test_e7_batched_is_463_for_every_order():
    orders = [list(range(6)), list(range(5, -1, -1))]
    rng = random.Random(7)
    orders += [rng.sample(range(6), 6) for _ in range(10)]
    assert {_e7(o, True) for o in orders} == {463}
    g = chain(400).graph
    edges = [(f"c{u}", f"c{u + 1}") for u in E7_SITES]
    assert predict.batch(g, edges, E7_H) == 463  # 343 + 6*20, no per-site subtraction


def test_e7_delta_measured_equals_formula_for_all_permutations():
    """All 720 orders on one graph copy each: measured per-graft costs == Thm 5."""
    g0 = chain(400).graph
    edges = [(f"c{u}", f"c{u + 1}") for u in E7_SITES]
    c_iso = 1320
    for order in itertools.permutations(range(6)):
        pred = predict.sequential(g0, edges, E7_H, order)
        costs = _e7(order, False)
        assert tuple(costs) == pred.costs
        assert sum(costs) - c_iso == pred.delta
        assert pred.c_iso == c_iso
        upstream_first = list(order) == sorted(order)
        assert (pred.delta == 0) == upstream_first
