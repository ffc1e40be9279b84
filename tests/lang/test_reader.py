"""The reader (native, ``cpp/src/front_read.cpp``) through ``ndvm.lang.reader``: positions,
symbol names, the nesting and form limits at their boundaries, errors, and properties over
generated sources (``tests/lang/test_front_recorded.py`` holds the recorded answers).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ndvm.errors import CompileError, NdvmError, ReadError
from ndvm.eval.limits import Limits
from ndvm.lang.datum import Bool, Num, SList, Str, Sym, _print_deep, to_source
from ndvm.lang.reader import MAX_NESTING, read, read_with_symbols

BIG = Limits(max_source_chars=10**8, max_forms=10**8)

TOKENS = [
    "(", ")", "[", "]", " ", "\n", "\t", "  ", "\r\n", "; comment\n", "x", "foo", "+", "-",
    "*", "1", "2.5", "-3", "1e-3", ".5", "+inf.0", "-nan.0", "#t", "#false", "a#b", "#|", "|#",
    "#;", "#", "'", "`", ",", '"s"', '"', ".", "1.2.3", "+5x", "\u00a0", "\x1c", "é", "->x",
    "##", "#(", "(quote", "lambda", "let", '"a\\nb"', '"\\q"', "\x00", "\u2028", "😀",
]  # fmt: skip


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=40))
def test_generated_sources_read_or_raise_and_print_back(tokens: list[str]) -> None:
    """Any source either reads, and its data print back as source that reads to the same data
    (the same printed form), or raises a positioned ReadError / CompileError."""
    text = "".join(tokens)
    try:
        data = read(text, allow_empty=True, limits=BIG)
    except NdvmError as e:
        assert isinstance(e, (ReadError, CompileError))
        assert e.line is not None and e.line >= 1 and e.column >= 1
        return
    printed = " ".join(to_source(d) for d in data)
    again = read(printed, allow_empty=True, limits=BIG)
    assert " ".join(to_source(d) for d in again) == printed
    # the recursive printer and the iterative one (for data deeper than the stack) agree
    shape = lambda d: "N" if isinstance(d, Num) else str(d)  # noqa: E731
    for d in data:
        assert to_source(d) == _print_deep(d, str)
        assert to_source(d, shape) == _print_deep(d, shape)


@pytest.mark.parametrize(
    ("limit", "text", "ok"),
    [(4, "(+ x 1)", True), (3, "(+ x 1)", False), (5, "(+ x 1) 2", True), (4, "(+ x 1) 2", False)],
)
def test_form_limit_counts_lists_and_atoms(limit: int, text: str, ok: bool) -> None:
    lim = Limits(max_forms=limit)
    if ok:
        assert len(read(text, limits=lim)) == text.count(")") + (text.endswith("2"))
        return
    with pytest.raises(CompileError, match=f"more than {limit} forms") as e:
        read(text, limits=lim)
    assert (e.value.line, e.value.column) == (1, 6 if limit == 3 else 9)


def test_source_length_limit_counts_characters() -> None:
    text = '("é" a)'  # 7 characters, 8 bytes
    assert read(text, limits=Limits(max_source_chars=7))
    with pytest.raises(ReadError, match="longer than 6 characters"):
        read(text, limits=Limits(max_source_chars=6))


def test_nesting_limit() -> None:
    deep = "(" * (MAX_NESTING + 1) + ")" * (MAX_NESTING + 1)
    with pytest.raises(ReadError, match=f"nesting deeper than {MAX_NESTING}") as e:
        read(deep, limits=BIG)
    assert (e.value.line, e.value.column) == (1, MAX_NESTING + 1)
    ok = "(" * MAX_NESTING + "x" + ")" * MAX_NESTING
    assert to_source(read(ok, limits=BIG)[0]) == ok  # (== on the data would recurse)
    dotted = SList((Sym("a"),), SList((Sym("b"),), Num(2.0, "2")))
    for _ in range(3 * MAX_NESTING):  # past the interpreter's stack: the iterative printer
        dotted = SList((dotted,), Sym("t"))
    text = to_source(dotted)
    assert text == "(" * 3 * MAX_NESTING + "(a . (b . 2))" + " . t)" * 3 * MAX_NESTING


@pytest.mark.parametrize(
    "text", ["\n(f\tx\n   [1 2]\r\n  #t)", "; head\n(f\tx ; note\n   [1 2]\r\n  #t)"]
)
def test_positions_across_lines(text: str) -> None:
    (form,) = read(text)
    assert (form.line, form.column) == (2, 1)
    x = form.items[1]
    assert isinstance(x, Sym) and (x.line, x.column) == (2, 4)
    vec = form.items[2]
    assert isinstance(vec, SList) and (vec.line, vec.column) == (3, 4)
    assert vec.items[0] == Sym("vec", 3, 4)
    assert isinstance(vec.items[1], Num) and (vec.items[1].line, vec.items[1].column) == (3, 5)
    assert form.items[3] == Bool(True, 4, 3)


def test_columns_count_characters_not_bytes() -> None:
    (form,) = read('("é😀" ab)')
    assert form.items[0] == Str("é😀", 1, 2)
    assert form.items[1] == Sym("ab", 1, 7)


def test_atoms_and_their_values() -> None:
    data = read('x 1 -2.5e3 +inf.0 #t #false "a\\n\\"b" \'q (a . b)')
    assert [type(d).__name__ for d in data] == [
        "Sym", "Num", "Num", "Num", "Bool", "Bool", "Str", "SList", "SList"
    ]  # fmt: skip
    assert data[2] == Num(-2500.0, "-2.5e3", 1, 5)
    assert data[6] == Str('a\n"b', 1, 29)
    assert data[7] == SList((Sym("quote", 1, 38), Sym("q", 1, 39)), None, 1, 38)
    assert data[8].tail == Sym("b", 1, 46)


def test_read_with_symbols_counts_quoted_and_vector_names() -> None:
    _, names = read_with_symbols("(f 'g [h])")
    assert names == {"f", "quote", "g", "vec", "h"}
    _, names = read_with_symbols("(f g [h] #;(hidden) #| k |#) ; m")
    assert names == {"f", "g", "vec", "h"}  # a datum comment's data are not read


@pytest.mark.parametrize(
    ("text", "message", "at"),
    [
        ("(a b]", r"']' does not match the '\(' opened at 1:1", (1, 5)),
        ("(a b", r"unbalanced '\(': missing '\)'", (1, 1)),
        (")", r"unexpected '\)' with no open list", (1, 1)),
        ("(+ 1 #)", r"bad token '#' before '\)'", (1, 6)),
        ("`a", "quasiquote syntax '`' is not supported", (1, 1)),
        ('"ab', "unterminated string", (1, 1)),
        ('(f "a\\qb")', r"unknown string escape '\\q'", (1, 6)),
        ("#| x", r"unterminated block comment '#\|'", (1, 1)),
        ("(1 . 2 3)", r"more than one datum after '.'", (1, 8)),
        ("(. 1)", r"misplaced '.' in list", (1, 2)),
        ("1.2.3", "bad token '1.2.3'", (1, 1)),
        ("+5a", "bad number '\\+5a'", (1, 1)),
        ("", "empty program", (1, 1)),
    ],
)
def test_errors(text: str, message: str, at: tuple[int, int]) -> None:
    with pytest.raises(NdvmError, match=message) as e:
        read(text)
    assert (e.value.line, e.value.column) == at
