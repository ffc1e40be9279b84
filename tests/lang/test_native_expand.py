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
from tests.helpers import genprog
from tests.hostile.corpus import CASES
from tests.lang.expand_cases import ERRORS, FORMS, ORDERED, SHADOWING

from ndvm import _core
from ndvm.errors import CompileError, NdvmError
from ndvm.lang.datum import Datum, SList
from ndvm.lang.expand import Expander, head_name
from ndvm.lang.forms import MUTATION_FORMS, SPECIAL_FORMS, UNSUPPORTED_FORMS
from ndvm.lang.reader import read
from ndvm.prims import PRIMS, Kind

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


def check_source(source: str, dmci: bool = False) -> Outcome:
    """The native expansion of `source` read by the native reader (no params header)."""
    return _outcome(lambda: _core.expand(source, dmci))


def reference(source: str, dmci: bool = False) -> Outcome:
    data = _body(source)
    return _outcome(lambda: _python(data, dmci))


def same(source: str) -> None:
    try:
        read(source)
    except NdvmError:
        return  # the reader's cases are test_native_read's
    header = head_name(read(source)[0]) == "params"
    for dmci in (False, True):
        expected = reference(source, dmci)
        assert check(source, dmci) == expected, (source, dmci)
        if not header:
            assert check_source(source, dmci) == expected, (source, dmci)


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
@pytest.mark.parametrize("source", ORDERED)
def test_order_of_expansion(source: str) -> None:
    same(source)


@pytest.mark.parametrize("source", FORMS + SHADOWING)
def test_forms(source: str) -> None:
    same(source)
    assert check(source, True)[0] == "ok" or source in SHADOWING


# -- every error of expand.py ------------------------------------------------------------
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


def _nest(template: str, depth: int) -> Datum:
    """`template` (one datum, `_` where the next level goes) nested `depth` deep, built as
    data: past the reader's 2000 levels."""
    d: Datum = read("x")[0]
    (outer,) = read(template)
    for _ in range(depth):
        d = _substitute(outer, d)
    return d


def _substitute(t: Datum, d: Datum) -> Datum:
    if isinstance(t, SList):
        return SList(tuple(_substitute(x, d) for x in t.items), t.tail, t.line, t.column)
    return d if getattr(t, "name", None) == "_" else t


TOO_DEEP = ("err", "CompileError", "program nested too deeply to compile", None, None)


def test_data_nested_past_both_limits_is_a_compile_error() -> None:
    deep = _nest("(lambda (x) _)", 6000)  # Python: 5 frames a level; native: 2 guard levels
    assert _outcome(lambda: _python((deep,), False)) == TOO_DEEP
    assert _outcome(lambda: _core.expand_data((deep,), False)) == TOO_DEEP


def test_data_nested_past_the_native_guard_is_a_compile_error() -> None:
    # 12000 nested applications: past the native guard (10000 levels), within Python's
    # 20000 frames (one a level); only data built in Python nest this deep
    deep = _nest("(f _)", 12_000)
    assert _outcome(lambda: _core.expand_data((deep,), False)) == TOO_DEEP


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


def _surface(kids: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Every surface form, mostly well formed, over expressions `kids`."""
    k = st.tuples(kids, kids, kids)
    name = st.sampled_from(["x", "y", "if", "loop", "and", "begin", "1", "quote"])
    forms = [
        "(if {0} {1} {2})",
        "(if {0} {1})",
        "(cond ({0} {1}) ({2}))",
        "(cond ({0} => {1}) (else {2}))",
        "(case {0} ((1 x) {1}) ((2) => {2}) (else {0}))",
        "(case {0} (() {1}) ((y) {2}))",
        "(when {0} {1} {2})",
        "(unless {0} {1})",
        "(and {0} {1} {2})",
        "(or {0} {1})",
        "(let ((x {0}) (y {1})) {2})",
        "(let* ((x {0}) (x {1})) {2})",
        "(letrec* ((x {0})) {1} {2})",
        "(let loop ((x {0})) (loop {1}) {2})",
        "(loop ((x {0}) (y {1})) (recur {2} x))",
        "(recur {0})",
        "(do ((x {0} {1}) (y 0)) ({2} y) {0})",
        "(lambda (x . y) {0} {1})",
        "((lambda x {0}) {1} {2})",
        "(begin {0} {1})",
        "(begin (define x {0}) {1})",
        "(assert {0})",
        "(f '{0} {1})",
        "({0} {1} . {2})",
    ]
    built = st.one_of(*(k.map(lambda e, f=f: f.format(*e)) for f in forms))
    binder = st.tuples(name, kids, kids).map(lambda e: f"(let (({e[0]} {e[1]})) {e[2]})")
    define = st.tuples(name, kids, kids).map(
        lambda e: f"(lambda () (define ({e[0]} z) {e[1]}) {e[2]})"
    )
    return st.one_of(built, binder, define)


SURFACE_LEAVES = st.sampled_from(["x", "y", "z", "1", "#t", '"s"', "(f)", "()", "if", "recur"])


@settings(max_examples=500, deadline=None)
@given(st.lists(st.recursive(SURFACE_LEAVES, _surface, max_leaves=12), min_size=1, max_size=3))
def test_generated_surface_forms(forms: list[str]) -> None:
    same(" ".join(forms))


@settings(max_examples=300, deadline=None)
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
