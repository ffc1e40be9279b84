"""The native reader (``_core.read``) against the Python reader, which defines the syntax.

``check(source)`` is the native reader's answer as a comparable value: ``("ok", data,
symbols)`` with the data flattened (kinds, values by repr, number texts, positions) or
``("err", class, message, line, column)``; ``want(source)`` is the Python reader's. They must
be equal on every example, golden, hostile-corpus program and prelude definition, on
hand-written cases for every error message and limit, and on generated sources.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.hostile.corpus import CASES

from ndvm import _core
from ndvm.errors import NdvmError
from ndvm.eval.limits import Limits
from ndvm.lang.datum import Bool, Datum, Num, SList, Str, Sym
from ndvm.lang.reader import MAX_NESTING, classify_unicode, parse_atom, read_with_symbols
from ndvm.prims import PRIMS, Kind

ROOT = Path(__file__).resolve().parents[2]
BIG = 10**9


def flat(data: tuple[Datum, ...]) -> list[tuple[Any, ...]]:
    """The data in preorder, one row per datum (without recursion: data nest 2000 deep)."""
    out: list[tuple[Any, ...]] = []
    stack: list[Datum | None] = list(reversed(data))
    while stack:
        d = stack.pop()
        if d is None:
            out.append(("no-tail",))
        elif isinstance(d, SList):
            out.append(("list", len(d.items), d.line, d.column))
            stack.append(d.tail)
            stack.extend(reversed(d.items))
        elif isinstance(d, Num):
            out.append(("num", repr(d.value), d.text, d.line, d.column))
        elif isinstance(d, Sym | Str | Bool):
            out.append((type(d).__name__, d.value if not isinstance(d, Sym) else d.name,
                        d.line, d.column))  # fmt: skip
        else:
            raise AssertionError(f"not a datum: {d!r}")
    return out


def _answer(read: Any, text: str) -> tuple[Any, ...]:
    try:
        data, symbols = read(text)
    except NdvmError as e:
        return ("err", type(e).__name__, e.message, e.line, e.column)
    assert type(data) is tuple and type(symbols) is frozenset
    return ("ok", flat(data), sorted(symbols))


def check(text: str, allow_empty: bool = False, chars: int = BIG, forms: int = BIG) -> tuple:
    """The native reader's answer."""
    return _answer(lambda t: _core.read(t, allow_empty, chars, forms), text)


def want(text: str, allow_empty: bool = False, chars: int = BIG, forms: int = BIG) -> tuple:
    """The Python reader's answer."""
    lim = Limits(max_source_chars=chars, max_forms=forms)
    return _answer(lambda t: read_with_symbols(t, allow_empty=allow_empty, limits=lim), text)


def agree(text: str, allow_empty: bool = False, chars: int = BIG, forms: int = BIG) -> tuple:
    got, expected = check(text, allow_empty, chars, forms), want(text, allow_empty, chars, forms)
    assert got == expected, text
    return got


# -- the corpus --------------------------------------------------------------------------------
def corpus() -> list[str]:
    files = [*ROOT.glob("examples/**/*.scm"), *ROOT.glob("tests/golden/programs/*.scm")]
    sources = [f.read_text() for f in sorted(files)] + [c.source for c in CASES if c.source]
    return sources + [p.prelude for p in PRIMS.of_kind(Kind.PRELUDE) if p.prelude]


def test_corpus() -> None:
    sources = corpus()
    answers = [agree(text) for text in sources]
    assert len(sources) > 150 and sum(a[0] == "ok" for a in answers) > 120
    for text in sources[:40]:  # every form past the limit, and positions of every datum
        agree(text, forms=7)
        agree(text, chars=len(text) - 1)


# -- every error message and limit -------------------------------------------------------------
ERRORS = [
    "", "   \n ; only a comment\n", "#| block |#", "#; x", "#;#;a b", ")", "]", "(a]", "[a)",
    "(a (b]", "((a)", "[a", "('", "(' )", "(#; ]", "('#;)", "'", "#;", "' #;", "(a .", "(. a)",
    "(a . )", "(a . b c)", "(a . b . c)", "(a . . b)", "[a . b]", ". a", "'.", "#;.", "(a 'b . c)",
    "(a . 'b 'c)", "(a . #;b c)", "(a . b #;c)", "(a . [b] c)", "`a", ",a", ",@a", "(a `b)",
    '"abc', '"a\\"', '"a\\', '"\\q"', '"ok\\n\\t\\r\\\\\\"\\0\\a"', '"a\nb\\qc"', '"\\\n"',
    '"\\é"', '"\\"', '"é\\x"', '"\\q" "', "(f \"a\\zb\")", "#|", "#| #| |#", "#|#", "#||#x",
    "#| |# #| a", "#|#|#||#|#", "x |# y", "#", "(#)", "#(1 2)", "#[", "#'a", '#"a"', "#`", "#,",
    "##", "# ", "#\n", "#\u00a0", "#\u3000", "(# . x)", "#é", "#tru", "#T", "#x1F", "#void",
    "#true#false", "#t#f", "a#b", "1#", "1.2.3", "1e", "1e+", "1.e5", ".5", "-.5", "+.5e-3",
    "+.", "-.", "..", "...", ".a", "+a", "-", "+", "->x", "+5x", "-1a", ".5x", "+..", "1a",
    "9lives", "a|b", "{a}", "a\\b", "\x00", "a\x01b", "\x7f", "\x1c", "a\x1fb", "\u00a0",
    "(a\u00a0b)", "a\u2028b", "\u0085", "(f \u3000)", "é", "(é)", "λ", "(λ x)", "١٢", "+١.٥",
    "٣e٢", "x١", "1é", "+inf.0", "-inf.0", "+nan.0", "-nan.0", "+inf", "inf", "nan", "-inf.00",
    "0x10", "1_000", "1e999", "-1e999", "1e-400", "4.9e-324", "2.2250738585072011e-308",
    "123456789012345678901234567890", "-0", "-0.0", "0.1", "1E5", "(+ 1 2) ; c", "a;b\nc",
    "a\rb", "a\r\nb", "\ud800", "a\ud800b", "\U0001f600", "(f \U0001f600)", "x\n\n  é ⊗ y",
]  # fmt: skip


@pytest.mark.parametrize("text", ERRORS)
def test_hand_written_cases(text: str) -> None:
    agree(text)
    agree(text, allow_empty=True)


@pytest.mark.parametrize("text", ["(+ 1 2)", '"é" (f \'x) [a]', "  a\n b", "#| é |# x", "x"])
def test_source_length_limit(text: str) -> None:
    n = len(text)
    assert agree(text, chars=n)[0] == "ok"
    assert agree(text, chars=n - 1 if n > 1 else 1)[0] == ("err" if n > 1 else "ok")
    assert agree(text * 3, chars=3 * n - 1)[1:] == (
        "ReadError",
        f"source longer than {3 * n - 1} characters (Limits.max_source_chars)",
        1,
        1,
    )


@pytest.mark.parametrize(
    "text", ["(+ x 1) 2", "'(a . b)", '[a \'b] #;(c d) "s"', "(a #| c |# b) #;x", "(a\u00a0)"]
)
def test_form_limit(text: str) -> None:
    for forms in range(1, 12):
        agree(text, forms=forms)


@pytest.mark.parametrize("opener", [["("], ["["], ["'"], ["#;"], ["(", "#;", "'"], ["'", "["]])
def test_nesting_limit(opener: list[str]) -> None:
    closer = {"(": ")", "[": "]"}
    for depth in (MAX_NESTING - 1, MAX_NESTING, MAX_NESTING + 1):
        frames = (opener * depth)[:depth]
        text = " ".join(frames) + " x" + "".join(closer.get(f, "") for f in reversed(frames))
        text += " y" * frames.count("#;") + " z"  # the data the #; frames drop
        answer = agree(text)
        assert answer[0] == ("ok" if depth <= MAX_NESTING else "err")


def test_nesting_limit_reports_the_frame() -> None:
    deep = "(" * MAX_NESTING + "'" + "x" + ")" * MAX_NESTING
    assert check(deep)[1:] == ("ReadError", f"nesting deeper than {MAX_NESTING} levels", 1,
                               MAX_NESTING + 1)  # fmt: skip
    assert agree(deep) and agree("(" * 100_000)[0] == "err"


# -- generated sources -------------------------------------------------------------------------
TOKENS = [
    "(", ")", "[", "]", " ", "\n", "\t", "  ", "\r\n", "\f", "\v", "; comment\n", ";é\n", "x",
    "foo", "+", "-", "*", "1", "2.5", "-3", "1e-3", ".5", "+.5", "1.", "+inf.0", "-nan.0", "#t",
    "#false", "a#b", "#|", "|#", "#| c |#", "#;", "#", "'", "`", ",", '"s"', '"', '"a\\nb"',
    '"\\q"', '"\\"', '"é\\t"', "\\", ".", "..", "1.2.3", "+5x", "\u00a0", "\u2028", "\u3000",
    "\u0085", "\x1c", "\x1f", "\x00", "\x7f", "é", "λx", "١٢", "#é", "->x", "##", "#(", "(quote",
    "lambda", "let", "vec", "quote", "\U0001f600", "\ud800",
]  # fmt: skip


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=40))
def test_token_soups(tokens: list[str]) -> None:
    text = "".join(tokens)
    agree(text)
    agree(text, allow_empty=True, forms=5)


PLAIN = ["(", ")", "[", "]", " ", "\n", "x", "1.5", "#t", "'", "#;", "#|c|#", '"s\\"t"', "."]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(PLAIN), max_size=80))
def test_mostly_balanced_soups(tokens: list[str]) -> None:
    agree("".join(tokens))


@settings(max_examples=800, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=30))
def test_any_text(text: str) -> None:
    agree(text)
    agree("(f " + text + ")")


# -- tokens with non-ASCII characters --------------------------------------------------------
UNICODE_TOKENS = ["é", "١٢", "+١.٥", "٣e٢", "-.٥", "x١", "1é", "#é", "²", "+²", "é.", "Ⅻ"]


@pytest.mark.parametrize("token", UNICODE_TOKENS)
def test_classify_unicode_is_parse_atom(token: str) -> None:
    try:
        d = parse_atom(token, 1, 1)
    except NdvmError as e:
        expected = (3 if e.message.startswith("bad number") else 2, 0.0)
    else:
        assert isinstance(d, Num | Sym)
        expected = (1, d.value) if isinstance(d, Num) else (0, 0.0)
    assert classify_unicode(token) == expected
    agree(f"(f {token} x)")


WHITESPACE = [chr(c) for c in range(0x110000) if chr(c).isspace()]  # what `\s` matches
NEAR_WHITESPACE = ["\u0084", "\u0086", "\u009f", "\u00a1", "\u1681", "\u200b", "\u2027", "\u202a", "\u2030", "\u205e", "\u2060", "\u3001", "\u2fff"]  # fmt: skip


@pytest.mark.parametrize("ch", WHITESPACE + NEAR_WHITESPACE, ids=lambda c: f"U+{ord(c):04X}")
def test_whitespace_ends_atoms(ch: str) -> None:
    """Unicode whitespace ends an atom, and only " \\t\\n\\v\\f\\r" are skipped."""
    for text in (f"(a{ch}b)", f"#{ch}", f"a{ch}", f"{ch}", f'"{ch}"', f"; {ch}\nx", f"(f 1{ch})"):
        agree(text)
