"""Canonical forms keep a program's values; equivalent programs share one skeleton; the
parents come from every complexity; the reported model is chosen by PySR's score."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ndvm
from ndvm.lang.datum import Datum, Sym, symbols_in, to_source
from ndvm.lang.front import skeleton
from ndvm.lang.reader import read
from ndvm.search import frontier
from ndvm.search.candidate import Candidate, Evaluation, Record, skeleton_hash
from ndvm.search.evolve import Builder, EvolveProposer
from ndvm.search.funnel import complexity
from ndvm.search.simplify import canonical, canonical_with_witness, simplify
from ndvm.search.state import SearchState
from ndvm.tasks.grammar import Grammar

PARAMS = ("a", "b", "c", "d")
INPUTS = ("x", "y")
GRAMMAR = Grammar(inputs=INPUTS, unary=("exp", "log", "sqrt", "sin", "cos", "abs"), loop=False)
NAMED = [
    "(exp a)", "(* c d)", "(sin c)", "(exp (exp a))", "(+ (exp a) (* a x))",
    "(* (+ x (exp (exp b))) (exp (+ (* (* x 0.5) (- a 2)) c)))",
    "(/ x (+ (* d x) (exp a)))", "(+ a b c d x (* a x))", "(- (+ x a) (+ a x))",
    "(* 2 3 x)", "(log (exp (* a x)))", "(sin (/ x x))", "(* (* a x) (- b) y)",
    "(+ (* a x) (* a x))", "(/ (* a b) (+ c (* d y)))",
]  # fmt: skip
LIKE_TERMS = [
    "(- (+ a (* b x)) x)", "(- (* a x) (* b x))", "(+ (* a (exp y)) (* (sin b) (exp y)) x)",
    "(- (+ a (* b x) (exp x)) (+ x c))", "(- (+ x (* 2 x)) (* 3 x))", "(- (+ x y) x)",
    "(+ (* a x y) (* x y 2.5) (- (* y x b)))", "(- (+ (* (exp a) x) (sin y)) (* b x))",
    "(- (* a (+ x (* b x))) x)", "(+ (- (* a x) (* x c)) (* 2 x))",
]  # fmt: skip


def _programs(n: int = 250) -> list[Datum]:
    b = Builder(GRAMMAR, np.random.default_rng(11))
    rand = [b.expr(int(b.rng.integers(1, 5))) for _ in range(n)]
    return [read(s)[0] for s in NAMED] + rand + [read(s)[0] for s in LIKE_TERMS]


def _eval(src: str, params: list[str], values: list[float], **inputs: np.ndarray) -> np.ndarray:
    prog = ndvm.compile(src, params, INPUTS, backend="reference", strict=False)
    return np.asarray(prog.eval(np.asarray(values, dtype=np.float64), **inputs), dtype=float)


def test_folded_program_reproduces_the_original() -> None:
    """For random parameters, the witness values of the folded parameters make the canonical
    program equal to the original wherever the original is finite."""
    rng = np.random.default_rng(3)
    x, y = rng.uniform(0.2, 3.0, 40), rng.uniform(-2.0, 2.0, 40)
    folded = 0
    for d in _programs():
        src = to_source(d)
        out, witness = canonical_with_witness(d, PARAMS)
        used = sorted(symbols_in([d]) & set(PARAMS))
        theta = rng.normal(0.0, 1.0, len(used)).tolist()
        want = np.broadcast_to(_eval(src, used, theta, x=x, y=y), x.shape)
        new_params = sorted(symbols_in([out]) & set(PARAMS))
        assert set(witness) == set(new_params), src
        values = []
        for name in new_params:  # each folded parameter's value: its witness at theta
            w = witness[name]
            v = _eval(to_source(w), used, theta, x=x, y=y) if not isinstance(w, Sym) else None
            values.append(float(np.ravel(v)[0]) if v is not None else theta[used.index(w.name)])
        folded += any(not isinstance(w, Sym) for w in witness.values())
        if not all(math.isfinite(v) for v in values):
            continue
        got = np.broadcast_to(_eval(to_source(out), new_params, values, x=x, y=y), x.shape)
        ok = np.isfinite(want)
        # a folded constant is rounded once (1/d, -d, a product): the program's conditioning
        # (exp, cos of large arguments) can amplify that to ~1e-8; a wrong fold is O(1)
        np.testing.assert_allclose(got[ok], want[ok], rtol=1e-6, atol=1e-9, err_msg=src)
    assert folded >= 20  # the corpus exercises folding, not only renaming


def test_named_folds() -> None:
    cases = {
        "(exp a)": "a", "(* c d)": "a", "(sin c)": "a", "(exp (exp a))": "a",
        "(* (* a x) b)": "(* a x)", "(+ (exp a) (* a x))": "(+ a (* b x))",
        "(- (+ x a) (+ a x))": "0", "(* 2 3 x)": "(* x 6)", "(+ x (+ y a))": "(+ a x y)",
        "(/ S (+ (* d S) (exp a)))": "(/ S (+ a (* b S)))", "(- (* a x) b)": "(+ a (* b x))",
        "(/ (+ a (* b x)) c)": "(* a (+ b (* c x)))", "(- x 2)": "(+ x -2)",
        # like terms collected: one term per base, its coefficient folded
        "(- (+ a (* b S)) S)": "(+ a (* b S))", "(- (* a x) (* b x))": "(* a x)",
        "(+ (* a x) (* a x))": "(* a x)", "(+ x x)": "(* x 2)", "(- (+ x y) x)": "y",
        "(- (+ x (* 2 x)) (* 3 x))": "0", "(+ (* 2 x) (* 0.5 x) y)": "(+ y (* x 2.5))",
        "(- (+ a (* b S) (exp S)) (+ S c))": "(+ a (* b S) (exp S))",
        "(- x y)": "(- x y)", "(- (+ x a) (* b y))": "(- (+ a x) (* b y))",
    }  # fmt: skip
    for src, want in cases.items():
        assert to_source(canonical(read(src)[0], PARAMS)) == want, src


def test_canonical_is_idempotent_and_free_of_identities() -> None:
    for d in _programs():
        once = canonical(d, PARAMS)
        assert to_source(canonical(once, PARAMS)) == to_source(once), to_source(d)
        assert to_source(simplify(once)) == to_source(once), to_source(d)


def _hash(src: str) -> str:
    return skeleton_hash(skeleton(read(src), set(PARAMS)))


@pytest.mark.parametrize(
    "group",
    [
        ["(* a x)", "(* x b)", "(* (exp c) x)", "(* (* a b) x)", "(* x (sin (* c d)))", "(/ x a)"],
        ["(+ (* a x) (sin x))", "(+ (sin x) (* x b))", "(+ (sin x) (* (exp a) x))"],
        ["(+ x (+ y a))", "(+ (+ x a) y)", "(+ y x b)", "(+ (+ y c) (+ x d))", "(- (+ x y) a)"],
        ["(/ x (+ a (* b x)))", "(/ x (+ (* d x) (exp a)))", "(/ x (+ (* x c) (* a b)))"],
        ["(+ a (* b x))", "(- (+ a (* b x)) x)", "(- (* b x) (- x a))", "(+ (* a x) (* b x) c)"],
    ],
)
def test_equivalent_programs_share_one_skeleton(group: list[str]) -> None:
    assert len({_hash(s) for s in group}) == 1, group
    assert len({to_source(canonical(read(s)[0], PARAMS)) for s in group}) == 1, group


def test_different_programs_keep_different_skeletons() -> None:
    group = ["(* a x)", "(/ a x)", "(- (* a x) (* b y))", "(+ a x)", "(* a (* x x))", "(* x 2)",
             "(+ (* a (exp (* b x))) (* c (exp (* d x))))", "(- (+ a (* b x)) y)"]  # fmt: skip
    assert len({_hash(s) for s in group}) == len(group)


def _record(idx: int, src: str, loss: float) -> Record:
    d = read(src)
    ev = Evaluation("ok", train_loss=loss, validation_mse=loss)
    return Record(idx, 0, Candidate(src), skeleton(d, set(PARAMS)), 1, complexity(d), idx, ev)


def test_parents_come_from_every_complexity() -> None:
    """With a population of 2, the best program of each complexity is still a parent."""
    recs = [
        _record(0, "(* a x)", 1.0), _record(1, "(* a (exp (* b x)))", 0.5),
        _record(2, "(+ (* a (exp (* b x))) (* c x))", 0.01),
        _record(3, "(+ (* a (exp (* b x))) (* c (sin x)))", 0.02),
    ]  # fmt: skip
    prop = EvolveProposer(GRAMMAR, population=2)
    pool = prop._parents.pool(SearchState("t", 0, tuple(recs)))
    assert [to_source(d) for d in pool.ranked] == [recs[2].candidate.src, recs[3].candidate.src]
    by_cx = {r.complexity: r for r in sorted(recs, key=lambda r: -r.evaluation.selection_loss)}
    assert [to_source(d[0]) for d in pool.niches] == [by_cx[c].candidate.src for c in sorted(by_cx)]
    a = [c.src for c in prop.propose(SearchState("t", 0, tuple(recs)), 40)]
    b = [c.src for c in EvolveProposer(GRAMMAR, population=2).propose(
        SearchState("t", 0, tuple(recs)), 40)]  # fmt: skip
    assert a == b and len(a) == 40  # deterministic for a seed


def test_select_by_score_with_loss_tolerance() -> None:
    recs = [
        _record(0, "a", 1.0),
        _record(1, "(* a x)", 0.5),
        _record(2, "(/ x (+ a (* b x)))", 1e-4),  # the law: a big drop in loss
        _record(3, "(/ x (+ a (* b x) (* c (sin (* d x)))))", 0.9e-4),  # redundant, lower loss
    ]
    front = frontier.pareto_front(recs)
    assert [r.idx for r in front] == [0, 1, 2, 3]
    want = [0.0]
    for p, r in zip(front, front[1:]):  # the score, written out independently
        l0, l1 = p.evaluation.validation_mse, r.evaluation.validation_mse
        want.append(math.log(l0 / l1) / (r.complexity - p.complexity))
    np.testing.assert_allclose(frontier.scores(front), want, rtol=1e-12)
    assert frontier.select(recs).idx == 2
    assert frontier.select(recs, "accuracy").idx == 3  # the lowest loss is still there
    assert frontier.summarize(recs).selected.idx == 2 and frontier.summarize(recs).best.idx == 3
    rows = frontier.hall_of_fame(recs, INPUTS, export=False)
    assert [r["selected"] for r in rows] == [False, False, True, False]
    assert rows[-1]["lowest_loss"] and not rows[2]["lowest_loss"]


def _counted(idx: int, src: str, loss: float) -> Record:
    """A record whose parameter count is the program's own (``a``..``d`` it uses)."""
    d = read(src)
    n = len({s for s in symbols_in(d) if s in PARAMS})
    ev = Evaluation("ok", train_loss=loss, validation_mse=loss)
    return Record(idx, 0, Candidate(src), skeleton(d, set(PARAMS)), n, complexity(d), idx, ev)


def test_a_fitted_constant_costs_more_than_an_input() -> None:
    """Two programs of 10 nodes: the law (2 parameters) and one more constant that fits the
    noise a little better. The law is selected; the other is the next entry of the front, its
    score its small gain per cost unit."""
    recs = [
        _counted(0, "(* a x)", 0.5),
        _counted(1, "(/ (* a x) (+ b x))", 1.02e-4),  # the law, 2 parameters
        _counted(2, "(- a (/ b (+ x c)))", 1.00e-4),  # 3 parameters, as many nodes
    ]
    assert [r.complexity for r in recs[1:]] == [10, 10]
    assert [frontier.cost(r) for r in recs] == [5, 12, 13]
    front = frontier.pareto_front(recs)
    assert [r.idx for r in front] == [0, 1, 2]
    np.testing.assert_allclose(
        frontier.scores(front), [0.0, math.log(0.5 / 1.02e-4) / 7, math.log(1.02)], rtol=1e-12
    )
    assert frontier.select(recs).idx == 1 and frontier.select(recs, "accuracy").idx == 2
    rows = frontier.hall_of_fame(recs, INPUTS, export=False)
    assert [(r["n_params"], r["cost"], r["selected"]) for r in rows] == [
        (1, 5, False), (2, 12, True), (3, 13, False)]  # fmt: skip


def _scored(idx: int, src: str, mse: float, r2: float) -> Record:
    d = read(src)
    ev = Evaluation("ok", train_loss=mse, validation_mse=mse, validation_r2=r2)
    return Record(idx, 0, Candidate(src), skeleton(d, set(PARAMS)), 1, complexity(d), idx, ev)


def test_exact_fits_tie_so_the_simplest_exact_program_is_chosen() -> None:
    """Validation losses at round-off level (below 1e-20 of the target's variance, here 4.0 =
    mse / (1 - R²) of the constant model) are not evidence: a more complex program whose
    round-off loss is 100x lower neither joins the front nor is selected."""
    var = 4.0
    recs = [
        _scored(0, "a", 4.0, 0.0),
        _scored(1, "(* a x)", 1.0, 0.75),
        _scored(2, "(* a x x)", 3e-30, 1.0),  # the law, exact
        _scored(3, "(+ (* a x x) (* b x))", 3e-32, 1.0),  # the law plus a vanishing term
    ]
    assert frontier.exact_floor(recs) == pytest.approx(frontier.EXACT * var, rel=1e-12)
    front = frontier.pareto_front(recs)
    assert [r.idx for r in front] == [0, 1, 2]
    assert frontier.select(recs).idx == 2
    rows = frontier.hall_of_fame(recs, INPUTS, export=False)
    assert [r["idx"] for r in rows] == [0, 1, 2] and rows[-1]["selected"]
    # above the floor a lower loss is still evidence: the same losses scaled up 1e12
    up = [_scored(r.idx, r.candidate.src, r.evaluation.validation_mse * 1e12,
                  1.0 - r.evaluation.validation_mse * 1e12 / var) for r in recs[2:]]  # fmt: skip
    assert [r.idx for r in frontier.pareto_front(recs[:2] + up)] == [0, 1, 2, 3]


def test_square_mutation_multiplies_a_subexpression_by_itself() -> None:
    """``square``: a non-literal subexpression e of the parent becomes ``(* e e)``."""
    prop = EvolveProposer(GRAMMAR)
    parent = read("(+ a (- x y))")[0]
    seen = set()
    for seed in range(40):
        child = prop._m_square(Builder(GRAMMAR, np.random.default_rng(seed)), parent)
        assert child is not None
        seen.add(to_source(child))
    assert "(+ a (* (- x y) (- x y)))" in seen and "(* (+ a (- x y)) (+ a (- x y)))" in seen
    assert all("(* " in s for s in seen)
