"""The native resolver and driver against the Python front end: the same tables, or the same
error.

``check(source, inputs, dmci)`` compiles ``source`` natively (``_core.front_tables``, params
inferred or declared by the header) and returns a comparable answer: the node table, child
lists, Letrec names, the constant pool, the string table, the tail flags, the parameter specs,
the header flag, the prelude bound and the inputs' first positions -- or (class, message,
line, column). ``python_check`` answers the same from ``compile_source`` lowered by
``_core.lower``. The constant pool is compared decoded (each entry's value, a pair by the
values of its car and cdr): Python shares some number objects between the occurrences of a
token (its reader caches them), so a quoted pair may refer to an earlier equal entry.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ndvm import _core
from ndvm.backends.native_lower import NODE_TYPES, VALUE_TYPES
from ndvm.errors import NdvmError
from ndvm.lang import ir
from ndvm.lang.front import compile_source

ROOT = Path(__file__).resolve().parents[2]
NUM, BOOL, NIL, VOID, SYMBOL, STRING, PAIR = range(7)


def _consts(consts: list[int], nums: list[float], strings: list[str]) -> list[Any]:
    """Each pool entry as (kind, value number): equal values get equal numbers."""
    ids: dict[Any, int] = {}
    vid: list[int] = []
    out = []
    for i in range(len(nums)):
        kind, a, b = consts[3 * i : 3 * i + 3]
        if kind == NUM:
            key: Any = (kind, nums[i].hex() if nums[i] == nums[i] else "nan")
        elif kind in (SYMBOL, STRING):
            key = (kind, a, strings[a])
        elif kind == PAIR:
            key = (kind, vid[a], vid[b])
        else:
            key = (kind, a)
        vid.append(ids.setdefault(key, len(ids)))
        out.append((kind, vid[-1]))
    return out


def _answer(tables: tuple[Any, ...], tail: list[int], rest: tuple[Any, ...]) -> tuple[Any, ...]:
    nodes, kids, aux, consts, nums, strings = tables
    return ("ok", list(nodes), list(kids), list(aux), _consts(consts, nums, strings),
            list(strings), list(tail), *rest)  # fmt: skip


def _err(e: NdvmError) -> tuple[Any, ...]:
    return ("err", type(e).__name__, e.message, e.line, e.column)


def check(source: str, inputs: tuple[str, ...] = (), dmci: bool = False) -> tuple[Any, ...]:
    """The native front end's answer for ``source``."""
    try:
        got = _core.front_tables(source, list(inputs), dmci)
    except NdvmError as e:
        return _err(e)
    nodes, kids, aux, consts, nums, strings, tail, params, header, prelude, positions = got
    specs = [(n, repr(i), c, line, col) for n, i, c, line, col in params]
    rest = (specs, header, list(prelude), [tuple(p) for p in positions])
    return _answer((nodes, kids, aux, consts, nums, strings), tail, rest)


def _tails(body: ir.Node) -> list[int]:
    """Call.tail per node, in the preorder bindings/lower_ir.cpp numbers the nodes in."""
    out: list[int] = []
    stack = [body]
    while stack:
        n = stack.pop()
        out.append(1 if type(n) is ir.Call and n.tail else 0)
        kids: list[ir.Node]
        if type(n) is ir.If:
            kids = [n.test, n.then, n.orelse]
        elif type(n) in (ir.Seq, ir.Or):
            kids = list(n.exprs)
        elif type(n) is ir.Lambda:
            kids = [n.body]
        elif type(n) in (ir.Let, ir.Letrec):
            kids = [*n.inits, n.body]
        elif type(n) is ir.Call:
            kids = [n.fn, *n.args]
        elif type(n) is ir.PrimCall:
            kids = list(n.args)
        elif type(n) is ir.Assert:
            kids = [n.expr]
        else:
            kids = []
        stack.extend(reversed(kids))
    return out


def python_check(source: str, inputs: tuple[str, ...] = (), dmci: bool = False) -> tuple[Any, ...]:
    """The Python front end's answer for ``source`` (lowered by ``_core.lower``)."""
    try:
        c = compile_source(source, None, inputs, None, "dmci" if dmci else None)
    except NdvmError as e:
        return _err(e)
    low = _core.lower(c.body, len(c.params), len(c.inputs), NODE_TYPES, VALUE_TYPES)
    assert not isinstance(low, str), low
    specs = [(s.name, repr(s.init), s.constraint, s.line, s.column) for s in c.params]
    rest = (specs, c.has_header, list(c.prelude), [tuple(p) for p in c.input_positions])
    return _answer(_core.program_tables(low[0]), _tails(c.body), rest)


def same(source: str, inputs: tuple[str, ...] = (), dmci: bool = False) -> None:
    want = python_check(source, inputs, dmci)
    got = check(source, inputs, dmci)
    assert got == want, (source, inputs, dmci)


# -- sources ----------------------------------------------------------------------------------
def _files(*globs: str) -> list[Path]:
    return sorted(p for g in globs for p in ROOT.glob(g))


PROGRAMS = _files("examples/**/*.scm", "tests/golden/programs/*.scm")


def _golden_inputs(path: Path) -> tuple[str, ...]:
    expected = path.with_name(path.stem + ".expected.json")
    if not expected.exists():
        return ()
    return tuple(json.loads(expected.read_text(encoding="utf-8")).get("inputs") or ())


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.name)
def test_programs(path: Path) -> None:
    src = path.read_text(encoding="utf-8")
    for inputs in ((), _golden_inputs(path), ("x", "y")):
        for dmci in (False, True):
            same(src, inputs, dmci)


def test_hostile_corpus() -> None:
    from tests.hostile.corpus import CASES

    cases = [c for c in CASES if c.source]
    assert len(cases) > 20
    for case in cases:
        same(case.source, tuple(case.inputs))


RECORDED = [
    json.loads(line)
    for line in gzip.open(ROOT / "tests" / "lang" / "data" / "front_cases.jsonl.gz", "rt")
]


@pytest.mark.parametrize("chunk", range(4))
def test_recorded_sources(chunk: int) -> None:
    for case in RECORDED[chunk::4]:
        for dmci in (False, True):
            same(case["source"], tuple(case["inputs"]), dmci)


# -- every message of resolve.py and front.py ---------------------------------------------------
ERRORS = [
    # front.py
    ("(+ 1 2)", ("",)),  # input names must be non-empty strings
    ("(params a)", ()),  # a params header but no expression
    ("(params a) (+ a 1) (params b)", ()),  # only allowed as the first form
    ("(params a) (params b) a", ()),  # the form after the header: the expander's message
    ("(+ 1 (params b))", ()),
    ("(params x) x", ("x",)),  # both a parameter and an input
    ("(params (a 0 positive)) a", ()),  # initial value outside its constraint
    ("(params (u 1.5 unit)) u", ()),
    ("(params (s -1 signed-unit)) s", ()),
    ("(params (s +nan.0 signed-unit)) s", ()),
    ("(params (p 2 positive) (u 0.5 unit) (s -0.5 signed-unit) (f -3)) (+ p u s f)", ()),
    ("(params a a) a", ()),  # declared twice
    ("(params a (a 1)) a", ()),
    ("(params (a 1) (a 2)) a", ()),
    ("(params 5) 1", ()),  # each entry must be (name [init] [constraint])
    ("(params ()) 1", ()),
    ("(params (a 1 free 2)) a", ()),
    ("(params (a . b)) a", ()),
    ("(params (1 a)) a", ()),
    ("(params (a 1 positiv)) a", ()),  # constraint must be one of ... (did you mean)
    ("(params (a 1 zzzz)) a", ()),
    ('(params (a 1 "free")) a', ()),
    ("(params (a free 1)) a", ()),  # too many fields
    ("(params (a positive 1)) a", ()),
    ("(let* (" + " ".join(f"(v{i} {i})" for i in range(12_000)) + ") v0)", ()),  # too deeply
    # resolve.py
    ("(params alpha) alpah", ()),  # unbound variable, with and without a hint
    ("(params a) zzzzqq", ()),
    ("(params a) (+ a b)", ("bb",)),
    ("(params a) (a 1)", ()),  # cannot call parameter
    ("(+ a (a 1))", ()),
    ("(x 1)", ("x",)),  # cannot call input
    ("(sqrtt 2)", ()),  # unknown procedure, with and without a hint
    ("(zzzqqq 1)", ()),
    ("(let ((fo 1)) (foo 2))", ()),
    ("(map f '(1 2))", ()),  # the procedure argument of a higher-order primitive
    ("(params g) (map g '(1))", ()),
    ("(apply x '(1))", ("x",)),
    ("(let ((map 1)) (+ map 1))", ()),
    ("(sqrt 1 2)", ()),  # arity: exactly, at least, a to b
    ("(-)", ()),
    ("(log 1 2 3)", ()),
    ("(cons 1)", ()),
    ("(map car)", ()),
    ("(apply +)", ()),
    ("(1 2)", ()),  # cannot call a constant
    ('("s" 1)', ()),
    ("('a 1)", ()),
    ("(#t 1)", ()),
    ("((quote (1 . 2)) 3)", ()),
    ("(loop ((i 0)) (+ 1 (recur (+ i 1))))", ()),  # recur not in tail position
    ("(loop ((i 0)) (if (< i 3) (recur (+ i 1)) i))", ()),
]


@pytest.mark.parametrize(("source", "inputs"), ERRORS)
def test_errors(source: str, inputs: tuple[str, ...]) -> None:
    same(source, inputs)


OK = [
    "(let loop ((i 0) (acc '())) (if (= i 3) (reverse acc) (loop (+ i 1) (cons i acc))))",
    "(define (f x) (* x a)) (define y 2) (f y)",
    "(define x 1) (define x 2) x",
    "(define (a i) (let a ((i a)) a)) (define (b i) a) a",  # nested letrec names
    "(let ((if +)) (if 1 2))",
    "(letrec ((ev? (lambda (n) (if (= n 0) #t (od? (- n 1)))))"
    " (od? (lambda (n) (ev? n)))) (ev? 4))",
    '(quote (1 1 1.0 () () #t #t #f a a "s" "s" (a . b) +inf.0 +inf.0 +nan.0 -nan.0))',
    "'(1 (2 (3 ())) . 4)",
    "(cond ((assv 2 '((1 . a) (2 . b))) => cdr) (else 'none))",
    "(case (* 2 3) ((2 3 5 7) 'prime) ((1 4 6 8 9) 'composite) (else 'x))",
    "(do ((i 0 (+ i 1)) (s 0 (+ s i))) ((= i 4) s))",
    "(vector-map (lambda (x) (* x x)) (vector 1 2 3))",
    "(fold-left + 0 '(1 2 3))",
    "(fold-right cons '() '(1 2 3))",
    "(for-each (lambda (x) x) '(1 2))",
    "(params (a 1 positive)) (map (lambda (v) (* v a)) (filter positive? '(1 -2 3)))",
    "(params map) map",
    "(assert (> 1 0)) (assert (< a 2))",
    "((lambda args (length args)) 1 2 3)",
    "((lambda (a . rest) rest) 1 2 3)",
    "(and 1 2 (or #f 3) (when #t 4) (unless #f 5))",
    "(let* ((x 1) (y (+ x 1))) (begin x y))",
    '(string-append "a" "b")',
    "(if (> x 0) (sqrt x) (- x))",
    "(apply max (list a b 3))",
    "(reduce + 0 (map * '(1 2) '(3 4)))",
    "(member 2 '(1 2 3))",
]


@pytest.mark.parametrize("source", OK)
def test_forms(source: str) -> None:
    for inputs in ((), ("x", "b")):
        for dmci in (False, True):
            same(source, inputs, dmci)


# -- generated programs --------------------------------------------------------------------------
NAMES = ["a", "b", "x", "y", "v", "f", "g", "lst", "loop"]
PRIMS = ["+", "-", "*", "/", "sqrt", "exp", "car", "cdr", "cons", "list", "null?", "map",
         "apply", "max", "vsum", "length", "filter", "fold-left", "square", "sqr"]  # fmt: skip


def _expr(depth: int) -> st.SearchStrategy[str]:
    atom = st.one_of(
        st.sampled_from(NAMES + PRIMS + ["#t", "#f", "'()", "'a", '"s"', "1.5", "2", "+inf.0"]),
        st.integers(-3, 9).map(str),
    )
    if depth == 0:
        return atom
    sub = _expr(depth - 1)
    lists = st.lists(sub, min_size=0, max_size=3).map(" ".join)
    name = st.sampled_from(NAMES)
    forms = st.one_of(
        st.tuples(st.sampled_from(PRIMS), lists).map(lambda t: f"({t[0]} {t[1]})"),
        st.tuples(sub, sub, sub).map(lambda t: f"(if {t[0]} {t[1]} {t[2]})"),
        st.tuples(name, sub, sub).map(lambda t: f"(let (({t[0]} {t[1]})) {t[2]})"),
        st.tuples(name, sub).map(lambda t: f"(lambda ({t[0]}) {t[1]})"),
        st.tuples(name, sub, sub).map(lambda t: f"(let {t[0]} ((i {t[1]})) {t[2]})"),
        st.tuples(name, sub, sub).map(lambda t: f"(define ({t[0]} i) {t[1]}) {t[2]}"),
        st.tuples(sub, lists).map(lambda t: f"({t[0]} {t[1]})"),
        st.tuples(sub, sub).map(lambda t: f"(loop ((i {t[0]})) (if i (recur {t[1]}) i))"),
        lists.map(lambda s: f"'({s})"),
        lists.map(lambda s: f"(begin 0 {s})"),
        st.tuples(sub, sub).map(lambda t: f"(cond ({t[0]} {t[1]}) (else 0))"),
    )
    return st.one_of(atom, forms)


HEADERS = st.sampled_from(["", "(params a b) ", "(params (a 1 positive) x) ", "(params) "])


@settings(max_examples=400, deadline=None)
@given(HEADERS, _expr(3), st.sampled_from([(), ("x",), ("y", "lst")]), st.booleans())
def test_generated(header: str, body: str, inputs: tuple[str, ...], dmci: bool) -> None:
    same(header + body, inputs, dmci)
