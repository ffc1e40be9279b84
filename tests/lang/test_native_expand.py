"""The native expander (cpp/src/front_expand*.cpp) against the Python one (ndvm.lang.expand):
the same expanded data (positions and generated names included) or the same error (class,
message, line, column), in both dialects, on every example, golden, hostile-corpus program,
prelude source, hand-written case for each form and error, and generated programs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ndvm import _core
from ndvm.errors import CompileError, NdvmError
from ndvm.lang.datum import Datum, SList
from ndvm.lang.expand import Expander, head_name
from ndvm.lang.forms import MUTATION_FORMS, SPECIAL_FORMS, UNSUPPORTED_FORMS
from ndvm.lang.reader import read
from ndvm.prims import PRIMS, Kind
from tests.helpers import genprog
from tests.hostile.corpus import CASES

pytestmark = pytest.mark.native

ROOT = Path(__file__).resolve().parents[2]
Outcome = tuple[Any, ...]


def canon(d: Datum) -> str:
    """A datum as text with every field (positions, a number's value and text), NaN equal to
    NaN; without recursion, for data nested thousands deep."""
    out: list[str] = []
    stack: list[Datum | str] = [d]
    while stack:
        x = stack.pop()
        if isinstance(x, str):
            out.append(x)
        elif isinstance(x, SList):
            stack.append(f")@{x.line}:{x.column}")
            if x.tail is not None:
                stack.extend((x.tail, " . "))
            stack.extend(reversed([y for item in x.items for y in (" ", item)]))
            out.append("(")
        else:
            out.append(f"{type(x).__name__}{[*(repr(v) for v in vars_of(x))]}")
    return "".join(out)


def vars_of(x: Datum) -> tuple[Any, ...]:
    return tuple(getattr(x, f) for f in x.__slots__)  # type: ignore[union-attr]


def _outcome(fn: Any) -> Outcome:
    try:
        return ("ok", canon(fn()))
    except NdvmError as e:
        return ("err", type(e).__name__, e.message, e.line, e.column)


def _body(source: str) -> tuple[Datum, ...]:
    """The forms the front end expands: a leading params header dropped."""
    data = read(source)
    if head_name(data[0]) == "params" and len(data) > 1:
        data = data[1:]
    return data


def _python(data: tuple[Datum, ...], dmci: bool) -> Datum:
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 20_000))  # as ndvm.lang.front.compile_source
    try:
        top = SList(data, None, data[0].line, data[0].column)
        return Expander(sequential_let=dmci).expand_body(data, top)
    except RecursionError:
        raise CompileError("program nested too deeply to compile") from None
    finally:
        sys.setrecursionlimit(old)


def check(source: str, dmci: bool = False) -> Outcome:
    """The native expansion of `source` (read by Python's reader): ('ok', datum) or
    ('err', class name, message, line, column)."""
    data = _body(source)
    return _outcome(lambda: _core.expand_data(data, dmci))


def reference(source: str, dmci: bool = False) -> Outcome:
    data = _body(source)
    return _outcome(lambda: _python(data, dmci))


def same(source: str) -> None:
    try:
        read(source)
    except NdvmError:
        return  # the reader's cases are test_native_read's
    for dmci in (False, True):
        assert check(source, dmci) == reference(source, dmci), (source, dmci)


def _sources(pattern: str) -> list[Path]:
    return sorted(ROOT.glob(pattern))


# -- every program the project ships --------------------------------------------------
@pytest.mark.parametrize("path", _sources("examples/*.scm"), ids=lambda p: p.name)
def test_examples(path: Path) -> None:
    same(path.read_text())


@pytest.mark.parametrize("path", _sources("tests/golden/programs/*.scm"), ids=lambda p: p.name)
def test_goldens(path: Path) -> None:
    same(path.read_text())


def test_hostile_corpus() -> None:
    sources = [c.source for c in CASES if c.source]
    assert len(sources) > 50
    for source in sources:
        same(source)


def test_prelude_sources() -> None:
    preludes = [p.prelude for p in PRIMS if p.kind is Kind.PRELUDE]
    assert preludes
    for source in preludes:
        assert source is not None
        same(source)
        (form,) = read(source)  # as front._prelude_datum: Expander().expand(form)
        assert canon(_core.expand_data((form,), False)) == canon(Expander().expand(form))


# -- every form, both dialects ---------------------------------------------------------
FORMS = [
    "1",
    "x",
    '"s"',
    "#t",
    "(f 1 2)",
    "(f (g 1) x (h (k)))",
    "((lambda (x) x) 1)",
    "'(a b . c)",
    "'if",
    "(quote (1 2))",
    "(if a b)",
    "(if a b c)",
    "(begin 1)",
    "(begin 1 (f 2) 3)",
    "(lambda x x)",
    "(lambda (x . r) r)",
    "(lambda () 1 2)",
    "(let ((x 1) (y 2)) (+ x y))",
    "(let () 1)",
    "(let ((a 1) (b a)) b)",
    "(let ((x 1) (x 2)) x)",
    "(let loop ((i 0) (s 1)) (if (< i 3) (loop (+ i 1) (* s 2)) s))",
    "(let f () 1)",
    "(let* ((x 1) (y x) (x y)) (list x y))",
    "(let* () 1)",
    "(letrec ((f (lambda (n) (if (= n 0) 1 (* n (f (- n 1))))))) (f 5))",
    "(letrec* ((a 1) (b a)) b)",
    "(and)",
    "(and a)",
    "(and a b (c) d)",
    "(or)",
    "(or a)",
    "(or a (b) c)",
    "(when a b c)",
    "(unless a b c)",
    "(cond (a 1) ((b) 2 3) (c) (d => f) (else 4))",
    "(cond (a => (lambda (t) t)) (b => g))",
    "(cond (x))",
    "(case (f x) ((1 2) 'a) (() 'b) ((c) => g) (else => h))",
    "(case x ((1) a) (else b c))",
    "(case x ((1) a))",
    "(do ((i 0 (+ i 1)) (s 0)) ((= i 3) s) (f i) (g s))",
    "(do ((i 0 (+ i 1))) ((= i 3)))",
    "(do () ((f)) 1)",
    "(loop ((i 0) (s 0)) (if (< i 3) (recur (+ i 1) (+ s i)) s))",
    "(loop () 1)",
    "(loop ((i 0)) (loop ((j i)) (if (< j 2) (recur (+ j 1)) (f i))))",
    "(loop ((i 0)) (let ((j i)) (if (< j 2) (recur (+ j 1)) j)))",
    "(assert (> x 0))",
    '(assert (f "a\\"b" 1.50 #t \'(x . y)))',
    "(define x 1) (define (f y) (+ x y)) (f 2)",
    "(define x 1)",
    "(f 1) (define x 2) (g x) (define y 3) (+ x y)",
    "(begin (define x 1) (define y 2)) (+ x y)",
    "(begin (define a 1) (begin (define b 2) (begin (define c 3) (f)))) (+ a b c)",
    "(begin 1 (define x 1))",
    "(loop ((i 0) (i 1)) i)",
    "(loop ((i 0)) (f (loop () 1) (recur 1)))",
    "(loop ((i 0)) (recur (recur 1)))",
    "(begin 1 2) (begin 3)",
    "(define (f . args) args) (f 1 2)",
    "(define (f x) (define y (* x 2)) (define (g) y) (g)) (f 1)",
    "(lambda (x) (define y x) (begin (define z y)) z)",
    "(let ((x 1)) (define y x) y)",
    "(let loop ((i 0)) (define j (+ i 1)) (if (< j 3) (loop j) j))",
    "(vec 1 2) (eqv? a b)",
]

SHADOWING = [
    "(let ((if 1)) (if 2))",
    "(let ((if 1)) if)",
    "(lambda (loop) (loop 1))",
    "(lambda (recur) recur)",
    "(lambda (when . unless) (when unless))",
    "(define (when x) x) (when 1)",
    "(define cond 5) (+ cond 1)",
    "(let loop ((i 0)) (loop 1))",
    "(let ((begin list)) (begin (define x 1) x))",
    "(let ((begin list)) (begin 1 2))",
    "(define a 'if) (define quote 1)",
    "(define a 'x) (define quote 1)",
    "(f (lambda (if) if) if)",
    "(let* ((and 1) (b and)) (and b))",
    "(let* ((x and) (and 1)) x)",
    "(let* ((x 1) (and 2) (y (and x))) y)",
    "(letrec ((or (lambda x x))) (or 1))",
    "(loop ((case 1)) (case 2))",
    "(do ((if 0 (+ if 1))) ((= if 3) if))",
    "(let ((let 1)) (let 2))",
    "(let ((do 1)) (do ((i 0)) ((f)) 1))",
    "(let ((begin 1)) (when a b))",
    "(let ((lambda 1)) 2)",
    "(define (f assert) (assert 1)) (assert 2)",
    "(define (set! x) x) (set! 1)",
    "(let ((x 1)) x) if",
]


@pytest.mark.parametrize("source", FORMS + SHADOWING)
def test_forms(source: str) -> None:
    same(source)
    assert check(source, True)[0] == "ok" or source in SHADOWING


# -- every error of expand.py ------------------------------------------------------------
ERRORS = [
    # define
    "(define)",
    "(define) 1",
    "(define . 1) 2",
    "(define (1 x) x) 1",
    "(define () 1) 1",
    "(define 1 2) 3",
    "(define x) x",
    "(define x 1 2) x",
    "(define ((f) x) 1) 1",
    "(define (f x)) 1",
    "(define (f quote) 1) 2",
    "(define else 1) 2",
    "(define (lambda) 1) 2",
    "(f (define x 1))",
    "(f (begin (define x 1)))",
    "(begin 1 (define x 1))",
    "(when a (define x 1))",
    "(cond (a (define x 1)))",
    # params, else
    "(f (params a))",
    "(else 1)",
    "(=> 1)",
    # expressions
    "(f . x)",
    "(f (g . x))",
    "()",
    "(f ())",
    "recur",
    "(f recur)",
    "if",
    "(f if)",
    "(list 'a define)",
    "(quasiquote x)",
    "(unquote x)",
    # bad forms
    "(quote)",
    "(quote 1 2)",
    "(if)",
    "(if a)",
    "(if a b c d)",
    "(begin)",
    "(lambda)",
    "(lambda (x))",
    "(let)",
    "(let ((x 1)))",
    "(let x)",
    "(let x ())",
    "(let*)",
    "(let* ((x 1)))",
    "(letrec)",
    "(letrec* ((x 1)))",
    "(when)",
    "(when a)",
    "(unless a)",
    "(case)",
    "(case x)",
    "(do)",
    "(do ())",
    "(loop)",
    "(loop ())",
    "(assert)",
    "(assert a b)",
    # formals and bindings
    "(lambda 1 x)",
    '(lambda "x" x)',
    "(lambda (1) x)",
    "(lambda (x #t) x)",
    "(lambda (x (y)) x)",
    "(lambda (else) 1)",
    "(lambda (x . quote) 1)",
    "(lambda (x . 1) 1)",
    "(lambda (x x) 1)",
    "(lambda (x y . x) 1)",
    "(lambda (a b c d e f g h i j k l m n a) 1)",
    "(let 1 2)",
    "(let ((x 1) . y) 1)",
    "(let (x) 1)",
    "(let ((x)) 1)",
    "(let ((x 1 2)) 1)",
    "(let ((x . 1)) 1)",
    "(let ((1 2)) 3)",
    "(let (((x) 2)) 3)",
    "(let ((params 2)) 3)",
    "(let ((x 1) (x 2)) x)",
    "(let ((a 1) (b 2) (c 3) (d 4) (e 5) (f 6) (g 7) (h 8) (i 9) (c 0)) a)",
    "(let ((x 1) (y (f . 2)) (x 3)) x)",
    "(let loop 1 2)",
    "(let loop ((i)) 1)",
    "(let quote ((i 1)) 1)",
    "(let loop ((i 0) (i 1)) i)",
    "(let* 1 2)",
    "(let* ((x)) 1)",
    "(let* ((x 1) (y (f . 2)) (z (g . 3))) x)",
    "(let* ((x (lambda (x x) 1))) (f . 2))",
    "(letrec 1 2)",
    "(letrec ((f)) 1)",
    "(letrec* ((1 2)) 1)",
    "(loop 1 2)",
    "(loop ((i)) 1)",
    # cond
    "(cond)",
    "(cond 1)",
    "(cond ())",
    "(cond (a . b))",
    "(cond (else 1) (a 2))",
    "(cond (a 1) (else))",
    "(cond (a => f g))",
    "(cond (a =>))",
    "(cond (1 (f . 2)) (3 (g . 4)))",
    "(cond (x => (f . 1)) (y => (g . 2)))",
    "(cond ((f . 1) => g))",
    "(cond (a 1) 2 (else 3))",
    # case
    "(case x 1)",
    "(case x (1))",
    "(case x ((1) . 2))",
    "(case x ((1) => f g))",
    "(case x ((1) =>))",
    "(case x (else 1) ((2) 3))",
    "(case x (1 2))",
    "(case x ((1 . 2) 3))",
    "(case (f . 1) ((1) 2))",
    "(case x ((1) (f . 2)) ((3) (g . 4)))",
    "(case x (else (f . 1)) (1 2))",
    # do
    "(do 1 (a))",
    "(do ((i 0) . j) (a))",
    "(do () 1)",
    "(do () ())",
    "(do () (a . b))",
    "(do (i) (a))",
    "(do ((i)) (a))",
    "(do ((i 0 1 2)) (a))",
    "(do ((1 0)) (a))",
    "(do ((i 0) (i 1)) (a))",
    "(do ((i (f . 0))) ((g . 1)) (h . 2))",
    "(do ((i 0 (f . 1))) (a))",
    # recur
    "(recur 1)",
    "(loop ((i 0)) (recur))",
    "(loop ((i 0)) (recur 1 2))",
    "(loop ((i 0)) (lambda () (recur 1)))",
    "(define (f) (recur 1)) (loop ((i 0)) (f))",
    # order: the first error is the one raised
    "(f (g . 1) (h . 2))",
    "(if (f . 1) (g . 2))",
    "(and (f . 1) (g . 2))",
    "(or (f . 1) (g . 2))",
    "(when (f . 1) (g . 2))",
    "(f 1) (define x (g . 2)) (h . 3)",
    "(define (f x x) 1) (g . 2)",
]


@pytest.mark.parametrize("source", ERRORS)
def test_errors(source: str) -> None:
    same(source)
    assert check(source)[0] == "err" or check(source, True)[0] == "err", source


@pytest.mark.parametrize("name", sorted(MUTATION_FORMS | set(UNSUPPORTED_FORMS)))
def test_unsupported_forms(name: str) -> None:
    same(f"(f 1) ({name} x 1)")
    same(f"(let (({name} 1)) ({name} 2))")  # binding the name does not make it a variable
    assert check(f"({name} x)")[1] == "UnsupportedForm"


@pytest.mark.parametrize("name", sorted(SPECIAL_FORMS))
def test_special_form_names(name: str) -> None:
    for source in (f"({name})", f"(f {name})", f"({name} 1 2)", f"(lambda ({name}) ({name}))"):
        same(source)


def test_generated_names_count_in_python_order() -> None:
    source = (
        "(define (g x) (case x ((1) (cond ((f x) => h) (else (do ((i 0 (+ i 1))) ((= i x)))))))) "
        "(f 1) (loop ((i 0)) (cond ((a) => b) ((c) => d))) (case y ((2) (case z ((3) 4)))) (g 1)"
    )
    same(source)
    out = check(source)[1]
    assert "#loop" in str(out) and "#t" in str(out) and "#_" in str(out)


def test_assert_text_is_the_source() -> None:
    same('(assert (string=? "a\\nb" (f 1.0 -2 #f)))')


# -- deep nesting ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "template",
    [
        "(f {})",
        "(lambda (x) {})",
        "(let ((x 1)) {})",
        "(begin (define x 1) {})",
        "(if a {} b)",
        "(and a {})",
        "(cond (a {}))",
        "(when a {})",
    ],
)
def test_reader_depth_nesting_expands(template: str) -> None:
    before = template[: template.index("{}")]
    levels = before.count("(") - before.count(")")
    text = "x"
    for _ in range(1990 // levels):  # the reader's limit is 2000 levels
        text = template.replace("{}", text)
    assert check(text) == reference(text)
    assert check(text)[0] == "ok"


def test_data_nested_past_the_guard_is_a_compile_error() -> None:
    deep: Datum = read("x")[0]
    for _ in range(30_000):  # no reader: data built directly, deeper than the guard
        deep = SList((read("f")[0], deep), None, 1, 1)
    expected = ("err", "CompileError", "program nested too deeply to compile", None, None)
    assert _outcome(lambda: _core.expand_data((deep,), False)) == expected
    assert _outcome(lambda: _python((deep,), False)) == expected


# -- generated programs ------------------------------------------------------------------
WORDS = sorted(SPECIAL_FORMS - {"."}) + ["x", "y", "f", "set!", "call/cc", "1", "#t", '"s"']


def _tree(leaf: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    def extend(kids: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        items = st.lists(kids, max_size=5)
        return st.one_of(
            items.map(lambda xs: f"({' '.join(xs)})"),
            st.tuples(items, kids).map(lambda p: f"({' '.join(p[0])} . {p[1]})" if p[0] else "()"),
            kids.map(lambda x: f"'{x}"),
        )

    return st.recursive(leaf, extend, max_leaves=25)


@settings(max_examples=400, deadline=None)
@given(st.lists(_tree(st.sampled_from(WORDS)), min_size=1, max_size=4))
def test_random_forms(forms: list[str]) -> None:
    same(" ".join(forms))


@settings(max_examples=150, deadline=None)
@given(genprog.programs(max_leaves=12, hostile=True))
def test_generated_programs(source: str) -> None:
    same(source)
    assert check(source)[0] == "ok"


@settings(max_examples=150, deadline=None)
@given(genprog.token_soup())
def test_token_soup(source: str) -> None:
    same(source)
