"""A plain source's facts from its tokens (``search.facts``) are those of the reader's data:
node count, symbols, skeleton, one number per point; and the worker's results with them are
those of reading every candidate."""

import random

import pytest

from ndvm import tasks
from ndvm.errors import NdvmError
from ndvm.lang.front import skeleton
from ndvm.lang.reader import read_with_symbols
from ndvm.search import Candidate
from ndvm.search import evaluate as ev_mod
from ndvm.search.evaluate import CalibLimits, Job, run_job
from ndvm.search.evolve import EvolveProposer
from ndvm.search.facts import read_facts
from ndvm.search.funnel import complexity, scalar_valued
from ndvm.search.state import SearchState, derive_seed

EDGES = [
    "(* a x)", "a", "x", "2.5", "-3", "(if (< a x) (sin x) 1)", "(+)", "(max a b x)",
    "(if a x (if (> x 1) (exp a) (* b x)))", "(sin (if (nan? x) a b))", "(vector a)",
    "(list a x)", "(< a x)", "pi", "(f x)", "(if (< a x) x)", "(recur a)", "(* a x) (* b x)",
    "(a x)", "(x 1)", "(if (a) x b)", "(if (< a x) (< a x) a)", "(if (< a x) 1 2 3)", "(if)",
    "(if 1 2)", "((f) x)", "(1 x)", "#t", "()", "(())", "(* a . x)", "+inf.0", "(+ a -inf.0)",
    "(+ a +nan.0)", "(+ .5 -.5 +.5 1. 1e5 1E-3 -1e+2 007)", ". a", "(...)", "(+ 1/2 a)",
    "(+ a1 1a)", "(+ a 1e)", "(+ a 1.2.3)", "(- -a x)", "(+ .a a. +a -.a)", "(P C P* C** x)",
    "(params a b) (* a x)", "(params a)", ")", "(", "((", "(a))", ")(", "(a) (b", "", "   ",
    "(- a)", "(+ a x)\n; note", "(+ a\tx\r\n\v\f)", "(+ a x)\u00a0", "(+ a 'x)", '(+ a "x")',
    "(+ a [x])", "(+ a #;x b)", "(+ a x\x1c)", "(+ a (loop ((s a) (k 0)) (if (= k 3) s "
    "(recur (+ s x) (+ k 1)))))", "(sin " * 99 + "a" + ")" * 99, "(sin " * 150 + "a" + ")" * 150,
    "(@ a ~x !y $z %w &v :u ^t _s)", "(+ x (* a x))", "(+ P x)", "(* a (if (> x 0) x (- x)))",
]  # fmt: skip


def _corpus(seed: int, n: int) -> list[str]:
    """Evolve proposals of every built-in search task, and those with a few characters
    inserted or deleted (most then are not plain, or not programs)."""
    out = []
    for name in tasks.names():
        task = tasks.get(name)
        if task.search is not None:
            prop = EvolveProposer(task.search.grammar, task.search.seeds)
            out += [c.src for c in prop.propose(SearchState(name, seed, ()), n)]
    rng = random.Random(seed)
    chars = [*"() ax+-.*/019eE#'\";[]\t\n@?<=>", "if", "inf.0", " . ", "(if ", "(< ", "#t"]
    mutated = []
    for src in out:
        s = list(src)
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(s) + 1)
            if rng.random() < 0.5:
                s.insert(i, rng.choice(chars))
            elif s:
                del s[min(i, len(s) - 1)]
        mutated.append("".join(s))
    return out + mutated


@pytest.mark.parametrize("seed", [0, 1])
def test_facts_are_those_of_the_data(seed):
    rng = random.Random(seed)
    fast = 0
    for src in EDGES + _corpus(seed, 150):
        facts = read_facts(src)
        try:
            data, symbols = read_with_symbols(src)
        except NdvmError:
            assert facts is None, src  # a source the reader rejects is never plain
            continue
        if facts is None:
            continue
        fast += 1
        assert len(data) == 1, src
        assert facts.complexity == complexity(data), src
        assert facts.symbols == symbols, src
        pool = [*sorted(symbols), "x", "P", "C*"]
        for _ in range(4):
            names = frozenset(n for n in pool if rng.random() < 0.5)
            assert facts.skeleton(names) == skeleton(data, names), (src, names)
            assert facts.scalar(names) == scalar_valued(data, names), (src, names)
    assert fast > 300  # most proposals are plain


def test_plain_sources_of_the_edges():
    plain = {s for s in EDGES if read_facts(s) is not None}
    assert {"(* a x)", "a", "(+ .5 -.5 +.5 1. 1e5 1E-3 -1e+2 007)", "(+ a\tx\r\n\v\f)"} <= plain
    deep = "(sin " * 150 + "a" + ")" * 150
    for src in ("(* a x) (* b x)", "(params a b) (* a x)", "+inf.0", "(* a . x)", "(+ a 1e)",
                "(+ a 'x)", "(+ a x\x1c)", "(+ a x)\u00a0", deep):  # fmt: skip
        assert src not in plain, src


def _key(res):
    e = res.evaluation
    return (res.idx, res.skeleton, res.n_params, res.complexity, res.key, e.status, e.reason,
            repr(e.train_loss), repr(e.validation_mse), repr(e.heldout_r2), e.success, e.params,
            e.steps, repr(e.extra))  # fmt: skip


@pytest.mark.parametrize(("name", "starts"), [("sr-damped", 1), ("sr-damped", 4),
                                              ("iterated-map", 1)])  # fmt: skip
def test_results_with_facts_are_those_of_the_reader(monkeypatch, name, starts):
    """Every verdict, reason, skeleton, size and score with the facts is that of reading each
    candidate (``read_facts`` giving None), for proposals and their mutations, twice over (the
    second time duplicates)."""
    task = tasks.get(name).for_search()
    spec = task.search
    srcs = [c.src for c in EvolveProposer(spec.grammar, spec.seeds).propose(
        SearchState(name, 7, ()), 40)]  # fmt: skip
    srcs += _corpus(3, 10)[-20:] + EDGES + ["(params a) (* a x)", "(params a)"] + srcs[:10]
    out = []
    for plain in (True, False):
        with monkeypatch.context() as m:
            if not plain:
                m.setattr(ev_mod, "read_facts", lambda src: None)
            seen: set = set()
            jobs = [Job(i, Candidate(s), derive_seed(5, i)) for i, s in enumerate(srcs)]
            out.append([_key(run_job(task, j, CalibLimits(starts=starts), seen)) for j in jobs])
    assert out[0] == out[1]
    statuses = {r[5] for r in out[0]}
    assert {"ok", "rejected"} <= statuses


def test_scored_evaluation_is_the_constructors():
    """``Evaluation.scored`` (the worker's record of a calibrated candidate) is the frozen
    dataclass its constructor makes: equal, the same fields in the same order, the same
    pickle, still frozen."""
    import dataclasses
    import pickle

    from ndvm.search.candidate import Evaluation

    args = (0.5, 0.25, 0.75, True, {"a": 1.5}, 0.01, 40, {"lane_losses": [0.5]}, 0.3, 0.6)
    names = ("train_loss", "heldout_mse", "heldout_r2", "success", "params", "wall", "steps",
             "extra", "validation_mse", "validation_r2")  # fmt: skip
    fast, slow = Evaluation.scored(*args), Evaluation("ok", "", **dict(zip(names, args)))
    assert fast == slow and hash(repr(fast)) == hash(repr(slow))
    assert list(fast.__dict__) == [f.name for f in dataclasses.fields(Evaluation)]
    assert list(fast.__dict__.items()) == list(slow.__dict__.items())
    assert pickle.dumps(fast) == pickle.dumps(slow)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.status = "failed"  # type: ignore[misc]


def test_chunks_cross_the_pipe_as_equal_objects():
    """``scheduler.pack_*`` / ``unpack_*`` (a process worker's messages) give back jobs and
    results equal to those sent, with their fields in declaration order and the same pickle."""
    import dataclasses
    import pickle

    from ndvm.search.candidate import Evaluation
    from ndvm.search.evaluate import Result
    from ndvm.search.scheduler import pack_jobs, pack_results, unpack_jobs, unpack_results

    jobs = [Job(3, Candidate("(* a x)", ("a",), "c.jsonl:4", "(* P x)", "", "k" * 16, "t"), 9, 2),
            Job(4, Candidate("(+ a x)"), 10)]  # fmt: skip
    extra = {"lane_losses": [0.5, float("nan")], "n_valid": 40}
    ok = Evaluation.scored(0.5, 0.25, 0.75, True, {"a": 1.5}, 0.01, 40, extra, 0.3, 0.6)
    results = [Result(3, "(* P x)", 1, 3, ok, "k" * 16),
               Result(4, "", 0, 0, Evaluation("rejected", reason="parse: x", wall=0.1)),
               Result(5, "(+ P x)", 1, 3, Evaluation("failed", "internal error: E"))]  # fmt: skip
    for objs, pack, unpack in ((jobs, pack_jobs, unpack_jobs),
                               (results, pack_results, unpack_results)):  # fmt: skip
        back = unpack(pickle.loads(pickle.dumps(pack(objs))))
        assert repr(back) == repr(objs)
        assert pickle.dumps(back) == pickle.dumps(objs)
        for a, b in zip(back, objs):
            assert list(a.__dict__) == [f.name for f in dataclasses.fields(type(b))]
