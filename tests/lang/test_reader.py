"""The reader's fast path (one ``findall``) against the general reader, which defines the syntax.

Where the fast path answers, its data (positions included) and symbol names must be exactly the
general reader's; where the general reader raises, the fast path must decline (``None``), so
every error keeps the general reader's message and position.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.hostile.corpus import CASES

from ndvm.errors import CompileError, ReadError
from ndvm.eval.limits import Limits
from ndvm.lang.datum import Num, SList, Sym, symbols_in, to_source
from ndvm.lang.reader import MAX_NESTING, _read_fast, _Reader, read, read_with_symbols

ROOT = Path(__file__).resolve().parents[2]
BIG = 10**9


def general(text: str, max_forms: int = BIG) -> tuple[tuple, frozenset[str]] | Exception:
    try:
        data = _Reader(text, max_forms).run()
    except (ReadError, CompileError) as e:
        return e
    return data, frozenset(symbols_in(data))


def agree(text: str, max_forms: int = BIG) -> bool:
    """True when the fast path answered (and agreed); an assertion error when it disagreed."""
    want = general(text, max_forms)
    got = _read_fast(text, max_forms)
    if isinstance(want, Exception):
        assert got is None, f"fast path read {text!r}, the reader raises {want!r}"
        return False
    if got is not None:
        assert got == want, text
        for a, b in zip(got[0], want[0]):
            assert repr(a) == repr(b)  # positions included
    return got is not None


# tokens: the fast path's own (lists, plain atoms, booleans, special numbers, line comments,
# newlines) and every one it must hand over (strings, quotes, dots, #-syntax, odd whitespace)
TOKENS = [
    "(", ")", "[", "]", " ", "\n", "\t", "  ", "\r\n", "; comment\n", "x", "foo", "+", "-",
    "*", "1", "2.5", "-3", "1e-3", ".5", "+inf.0", "-nan.0", "#t", "#false", "a#b", "#|", "|#",
    "#;", "#", "'", "`", ",", '"s"', '"', ".", "1.2.3", "+5x", "\u00a0", "\x1c", "é", "->x",
    "##", "#(", "(quote", "lambda", "let",
]  # fmt: skip


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=40))
def test_fast_path_agrees_on_generated_sources(tokens: list[str]) -> None:
    agree("".join(tokens))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["(", ")", "[", "]", " ", "\n", "x", "1.5", "#t"]), max_size=60))
def test_fast_path_answers_plain_sources(tokens: list[str]) -> None:
    """Balanced plain sources are the fast path's: it must answer them, not only decline."""
    text = "".join(tokens)
    if isinstance(general(text), Exception):
        return
    assert agree(text)


def corpus() -> list[str]:
    files = [*ROOT.glob("examples/**/*.scm"), *ROOT.glob("tests/golden/programs/*.scm")]
    return [f.read_text() for f in sorted(files)] + [c.source for c in CASES if c.source]


def test_fast_path_agrees_on_the_corpus() -> None:
    answered = sum(agree(text) for text in corpus())
    assert answered > 50  # most programs are plain: the fast path is what reads them


@pytest.mark.parametrize("forms", [0, 1, 3, 4, 5])
def test_form_limit_is_the_general_readers(forms: int) -> None:
    agree("(+ x 1)", forms)
    agree("(+ x 1) 2", forms)


def test_nesting_limit_is_the_general_readers() -> None:
    deep = "(" * (MAX_NESTING + 1) + ")" * (MAX_NESTING + 1)
    assert isinstance(general(deep), ReadError) and _read_fast(deep, BIG) is None
    ok = "(" * MAX_NESTING + "x" + ")" * MAX_NESTING
    got = _read_fast(ok, BIG)
    assert got is not None and to_source(got[0][0]) == ok  # (== on the data would recurse)


@pytest.mark.parametrize(
    "text", ["\n(f\tx\n   [1 2]\r\n  #t)", "; head\n(f\tx ; note\n   [1 2]\r\n  #t)"]
)
def test_positions_across_lines(text: str) -> None:
    assert agree(text) == (";" not in text)  # comments are the general reader's
    (form,) = read(text)
    assert (form.line, form.column) == (2, 1)
    x = form.items[1]
    assert isinstance(x, Sym) and (x.line, x.column) == (2, 4)
    vec = form.items[2]
    assert isinstance(vec, SList) and (vec.line, vec.column) == (3, 4)
    assert isinstance(vec.items[1], Num) and (vec.items[1].line, vec.items[1].column) == (3, 5)
    assert (form.items[3].line, form.items[3].column) == (4, 3)


def test_read_with_symbols_counts_quoted_and_vector_names() -> None:
    _, names = read_with_symbols("(f 'g [h])")
    assert names == {"f", "quote", "g", "vec", "h"}
    _, names = read_with_symbols("(f g [h])")
    assert names == {"f", "g", "vec", "h"}


def test_errors_come_from_the_general_reader() -> None:
    with pytest.raises(ReadError, match=r"does not match the '\(' opened at 1:1") as e:
        read("(a b]")
    assert (e.value.line, e.value.column) == (1, 5)
    with pytest.raises(CompileError, match="more than 2 forms"):
        read("(a b)", limits=Limits(max_forms=2))
