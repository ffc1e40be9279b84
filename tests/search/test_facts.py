"""The reader's facts of a source (``search.facts``, ``_core.read_facts``) are those of its data:
node count, symbols, skeleton, one number per point, and its errors are the reader's; and the
worker's results with them are those of reading every candidate."""

import random

import pytest

from ndvm import tasks
from ndvm.errors import NdvmError
from ndvm.eval.limits import Limits
from ndvm.lang.front import skeleton
from ndvm.lang.reader import MAX_NESTING, read_with_symbols
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
    # edge tokens, forms and characters
    "(* a 1e400)", "(* a 1.5.5)", "(* a 0x10)", "(* a +.)", "(* a ..)", "(* a 1e+)", "+inf.0",
    "-nan.0", "(* a -nan.0)", ".", "(. a)", "(a .)", "(a . b c)", "(a . . b)", "(* a #f)",
    "(if #t a x)", "(* a x))", "((* a x)", "(params a) (* a x) (+ a 1)", "(params (a 1.5)) (* a x)",
    "(params) x", "(* a x) ; c\n", "#| c |# (* a x)", "(* a #| (b |# x)", "(* a x) #;(b)",
    "'(a b)", "(quote a)", "(* a `x)", "(* a ,x)", "(+ a \"x\\ny\")", "(+ a \"unterminated)",
    "(* α x)", "(* a x١)", "(* a ١٢)", "(* a\u2003x)", "(* a x\u0085)", "(sym\ud800 x)",
    "(* a #)", "(* a #x)", "#(a)", "(* a [x b])", "(vec a x)", "(* a x]", "[a x)", "(if P C x)",
    "(* {0} x)", "(* a {x})", "(+ " + "a " * 3000 + "x)", "(* a x) " * 200,
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


def _read(src):
    """``read_with_symbols(src)``, or the error it raises."""
    try:
        return read_with_symbols(src)
    except NdvmError as exc:
        return exc


def _facts(src):
    try:
        return read_facts(src)
    except NdvmError as exc:
        return exc


def _same_error(a, b):
    return type(a) is type(b) and (str(a), a.line, a.column) == (str(b), b.line, b.column)


def _check(src, rng, names_pool=("x", "P", "C*", "if", "sin", "<")):
    """``read_facts(src)`` against the reader's data (``fast``: facts given); the number of
    sources whose facts were compared."""
    got, want = _facts(src), _read(src)
    if isinstance(want, NdvmError):  # the same typed error, at the same place
        assert isinstance(got, NdvmError) and _same_error(got, want), (src, got, want)
        return 0
    assert not isinstance(got, NdvmError), (src, got)
    data, symbols = want
    if got is None:  # only data holding a string are not described
        assert '"' in src, src
        return 0
    assert got.complexity == complexity(data), src
    assert got.symbols == symbols, src
    pool = [*sorted(symbols), *names_pool]
    for _ in range(4):
        names = frozenset(n for n in pool if rng.random() < 0.5)
        assert got.skeleton(names) == skeleton(data, names), (src, names)
        assert got.skeleton(names, True) == skeleton(data[1:], names), (src, names)
        assert got.scalar(names) == scalar_valued(data, names), (src, names)
    return 1


@pytest.mark.parametrize("seed", [0, 1])
def test_facts_are_those_of_the_data(seed):
    rng = random.Random(seed)
    fast = sum(_check(src, rng) for src in EDGES + _corpus(seed, 150))
    assert fast > 300  # most proposals are read and described


def test_scalar_facts_of_every_name():
    """Every subset of a program's names and the names of heads: ``scalar`` is
    ``scalar_valued`` (which heads give numbers is ``funnel.head_kind``'s)."""
    import itertools

    for src in ("(if (< a x) (sin x) (* b x))", "(if (sin a) x (if (> x 1) (exp a) 1))",
                "(+ (< a x) 1)", "(if (if a x b) x a)", "(max (abs a) (pow a x))", "(x x)",
                "(if (+ a x) (vector a) 1)", "(* a (quote x))", "(exp (map a x))"):  # fmt: skip
        facts = read_facts(src)
        data, symbols = read_with_symbols(src)
        pool = sorted(symbols)
        for r in range(len(pool) + 1):
            for names in itertools.combinations(pool, r):
                assert facts.scalar(set(names)) == scalar_valued(data, set(names)), (src, names)


def test_random_text_is_read_as_the_reader_reads_it():
    """Random text of the reader's special characters, numbers' and names' characters,
    Unicode digits, spaces and a lone surrogate: the same error or the same facts."""
    rng = random.Random(4)
    alphabet = [*"()[]'`,\"#;|\\.+-eE019ax*<", " ", "\n", "\t", "\u00a0", "é", "١", "\ud800",
                "if ", "(sin ", "(params ", "inf.0", "#t", "#;", "#|", "|#"]  # fmt: skip
    rng_names = random.Random(5)
    srcs = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24))) for _ in range(1500)]
    assert sum(_check(src, rng_names) for src in srcs) > 30  # (most are errors)


def test_errors_and_limits_are_the_readers():
    """Hostile sources: the reader's limits and errors hold (a typed error, never a crash)."""
    too_deep = "(" * (MAX_NESTING + 1) + ")" * (MAX_NESTING + 1)
    long = "(+ " + "a " * (Limits().max_source_chars // 2) + ")"
    forms = "a " * (Limits().max_forms + 1)
    for src in (too_deep, long, forms, "(a\x00)", "\x00", "(a \udc80)", "(a #<x>)"):
        got, want = _facts(src), _read(src)
        if isinstance(want, NdvmError):
            assert _same_error(got, want), src
        else:
            assert got is not None and got.symbols == want[1], src
    assert read_facts(b"(* a x)") is None  # type: ignore[arg-type]  (not a str: read says)


def test_deepest_source_the_reader_takes():
    """Nested as deep as the reader allows: the facts are exact (the data's Python walk,
    ``scalar_valued``, gives up at the interpreter's recursion limit and says False)."""
    depth = MAX_NESTING - 1
    src = "(sin " * depth + "a" + ")" * depth
    facts = read_facts(src)
    data, symbols = read_with_symbols(src)
    assert facts.complexity == complexity(data) == 2 * depth + 1
    assert facts.symbols == symbols == {"sin", "a"}
    assert facts.skeleton({"a"}) == skeleton(data, {"a"})
    assert facts.scalar({"a"}) and not facts.scalar({"a", "sin"}) and not facts.scalar(set())


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
