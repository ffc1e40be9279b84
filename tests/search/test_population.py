"""The evolutionary proposer's parents: islands, migrants and complexity niches."""

from __future__ import annotations

import pytest

from ndvm.lang.datum import to_source
from ndvm.lang.front import skeleton
from ndvm.lang.reader import read
from ndvm.search.candidate import Candidate, Evaluation, Record
from ndvm.search.evolve import EvolveProposer
from ndvm.search.funnel import complexity
from ndvm.search.population import Population
from ndvm.search.state import SearchState
from ndvm.tasks.grammar import Grammar

PARAMS = ("a", "b", "c", "d")
GRAMMAR = Grammar(inputs=("x", "y"), unary=("exp", "sin"), loop=False)


def _record(idx: int, batch: int, src: str, loss: float, pending: bool = False) -> Record:
    d = read(src)
    ev = None if pending else Evaluation("ok", train_loss=loss, validation_mse=loss)
    return Record(idx, batch, Candidate(src), skeleton(d, set(PARAMS)), 1, complexity(d), idx, ev)


RECS = [
    _record(0, 0, "(* a x)", 1.0),
    _record(1, 1, "(* a y)", 0.9),
    _record(2, 0, "(* a (exp (* b x)))", 0.5),
    _record(3, 1, "(* a (sin (* b x)))", 0.4),
    _record(4, 2, "(+ (* a x) (* b y))", 0.3),
    _record(5, 3, "(+ (* a x) (* b (sin y)))", 0.05),
]


def _state(recs: list[Record], next_batch: int | None = None) -> SearchState:
    """The state of ``recs``, with a rejected record of batch ``next_batch - 1`` appended."""
    if next_batch is not None:
        rej = Record(len(recs), next_batch - 1, Candidate("x"), "", 0, 1, 0, Evaluation("rejected"))
        recs = [*recs, rej]
    return SearchState("t", 0, tuple(recs))


def _srcs(data) -> list[str]:
    return [to_source(d) for d in data]


def test_each_island_keeps_its_own_fittest_and_shares_niches_and_migrants() -> None:
    pop = Population(size=2, parsimony=0.0, islands=2)
    even = pop.pool(_state(RECS, 4))  # island 0: batches 0, 2
    odd = pop.pool(_state(RECS, 5))  # island 1: batches 1, 3
    assert _srcs(even.ranked) == [RECS[4].candidate.src, RECS[2].candidate.src]
    assert _srcs(odd.ranked) == [RECS[5].candidate.src, RECS[3].candidate.src]
    assert _srcs(even.migrants) == _srcs(odd.migrants) == [RECS[5].candidate.src,
                                                           RECS[4].candidate.src]  # fmt: skip
    # the best of each complexity, over both islands
    best: dict[int, Record] = {}
    for r in sorted(RECS, key=lambda r: -r.evaluation.validation_mse):
        best[r.complexity] = r
    assert [_srcs(n) for n in even.niches] == [[best[c].candidate.src] for c in sorted(best)]
    assert even.niches == odd.niches


def test_one_island_is_the_fittest_of_all() -> None:
    pool = Population(size=3, parsimony=0.0).pool(_state(RECS))
    assert _srcs(pool.ranked) == _srcs(pool.migrants) == [RECS[i].candidate.src for i in (5, 4, 3)]


def test_niches_keep_the_best_few_of_each_complexity() -> None:
    pool = Population(size=1, parsimony=0.0, per_niche=2).pool(_state(RECS))
    by_cx: dict[int, list[Record]] = {}
    for r in sorted(RECS, key=lambda r: r.evaluation.validation_mse):
        by_cx.setdefault(r.complexity, []).append(r)
    want = [[r.candidate.src for r in by_cx[c][:2]] for c in sorted(by_cx)]
    assert [_srcs(n) for n in pool.niches] == want
    assert any(len(n) == 2 for n in want)  # the case is exercised


def test_pending_records_join_when_scored() -> None:
    pop = Population(size=4, parsimony=0.0)
    pending = [*RECS[:5], _record(5, 3, RECS[5].candidate.src, 0.0, pending=True)]
    first = pop.pool(_state(pending))
    assert RECS[5].candidate.src not in _srcs(first.ranked)
    again = pop.pool(_state(RECS))
    assert _srcs(again.ranked)[0] == RECS[5].candidate.src
    assert len(again.ranked) == 4  # read twice, kept once


def test_bad_sizes_are_value_errors() -> None:
    for kw in ({"size": 0}, {"size": 2, "islands": 0}, {"size": 2, "per_niche": 0}):
        with pytest.raises(ValueError, match="must be >= 1"):
            Population(parsimony=0.0, **kw)  # type: ignore[arg-type]


def test_islands_proposals_are_deterministic_and_differ_by_island() -> None:
    def run(batch: int) -> list[str]:
        prop = EvolveProposer(GRAMMAR, population=2, islands=2)
        return [c.src for c in prop.propose(_state(RECS, batch), 30)]

    assert run(6) == run(6) and len(run(6)) == 30
    assert run(6) != run(7)


def test_term_mutation_adds_a_scaled_product_to_a_sum() -> None:
    """``term``: a sum gains ``(* q v [w])`` with a parameter q not in the parent; another site
    ``e`` becomes ``(+ e (* q v [w]))``."""
    import numpy as np

    from ndvm.lang.datum import SList, Sym, symbols_in
    from ndvm.search.evolve import Builder

    prop = EvolveProposer(GRAMMAR, terms=True)
    parent = read("(+ (* a x) (sin y))")[0]
    appended, elsewhere = [], []
    for seed in range(60):
        child = prop._m_term(Builder(GRAMMAR, np.random.default_rng(seed)), parent)
        assert child is not None
        new_params = (symbols_in([child]) & set(PARAMS)) - {"a"}
        assert len(new_params) == 1  # one fresh parameter
        if isinstance(child, SList) and len(child.items) == 4:
            assert child.items[:3] == parent.items
            term = child.items[3]
            assert isinstance(term, SList) and term.items[0] == Sym("*")
            assert term.items[1] == Sym(next(iter(new_params)))
            assert 1 <= len(term.items[2:]) <= 2
            assert all(f in (Sym("x"), Sym("y")) for f in term.items[2:])
            appended.append(child)
        else:
            elsewhere.append(child)
    assert len(appended) > 20 and elsewhere
