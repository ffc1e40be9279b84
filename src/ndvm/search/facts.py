"""What the funnel needs of a candidate's source, from its tokens: the node count (the ``size``
stage), the symbols (the ``params`` stage), the skeleton and whether the program provably
gives one number per point (``funnel.scalar_valued``), without building its data.

Most candidates are plain: one form of ASCII numbers, symbols, parentheses and whitespace,
nothing the reader reads specially (no quote, string, comment, bracket, ``#`` or ``.`` token).
For such a source the tokens say what the reader's data would (``cpp/src/front_read.cpp``: a
token led by a digit, or by a sign or a point and then a digit or a point, is a number or a bad
token; any other plain token is a symbol), and each fact is a pass over the tokens or over the
distinct tokens; the worker reads the data (``reader.read_with_symbols``) only for the other
sources (``read_facts`` gives None), which the reader may also reject. Every fact is the one
the data give: ``funnel.complexity``, ``reader.read_with_symbols``'s symbols,
``front.skeleton_of`` and ``funnel.scalar_valued`` (``tests/search/test_facts.py``).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Set

from ndvm.lang.front import skeleton_name
from ndvm.search.funnel import BOOL, NUM, head_kind

_OPEN, _CLOSE, _SYM, _NUM = 0, 1, 2, 3
MAX_CHARS = 2048  # longer sources are read (the reader's limits are far above this)
MAX_DEPTH = 100  # deeper sources are read (``scalar_valued`` recurses, the reader bounds it)
# anything but the characters of plain symbols and numbers, parentheses and ASCII whitespace
_UNPLAIN = re.compile(r"[^A-Za-z0-9!$%&*/:<=>?^_~+\-.@() \t\n\v\f\r]")
_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_PARENS = str.maketrans("", "", "".join(chr(c) for c in range(128) if chr(c) not in "()"))
# token -> (class, skeleton text unless a parameter); parentheses, then tokens as they come
_TOKENS: dict[str, tuple[int, str]] = {"(": (_OPEN, "("), ")": (_CLOSE, ")")}
_KEPT = 4096


class Facts:
    """A plain source of one form: its tokens, each distinct token's class and skeleton text,
    its node count and its symbols."""

    __slots__ = ("tokens", "table", "complexity", "symbols")

    def __init__(self, tokens: list[str], table: dict[str, tuple[int, str]]) -> None:
        self.tokens, self.table = tokens, table
        self.complexity = len(tokens) - tokens.count(")")  # atoms and lists
        self.symbols = frozenset([t for t, k in table.items() if k[0] == _SYM])

    def skeleton(self, params: Set[str]) -> str:
        """``front.skeleton_of`` (of a program without a header: its one form)."""
        text = {t: "P" if t in params else k[1] for t, k in self.table.items()}
        return " ".join(map(text.__getitem__, self.tokens)).replace("( ", "(").replace(" )", ")")

    def scalar(self, names: Collection[str]) -> bool:
        """``funnel.scalar_valued``: a kind no rule allows anywhere (``funnel._kind``) makes
        the whole form's kind None, so the first one ends the pass."""
        stack: list[list[object]] = []  # per open list: [items so far, "if" or what it gives]
        top = None
        table = self.table
        for t in self.tokens:
            c = table[t][0]
            if c == _OPEN:
                stack.append([0, None])
                continue
            if c == _CLOSE:
                n, out = stack.pop()
                if n == 0 or (out == "if" and n != 4):
                    return False
                kind = NUM if out == "if" else out
            elif stack and stack[-1][0] == 0:  # a list's head: an operator, not a name
                if c != _SYM or t in names:
                    return False
                frame = stack[-1]
                frame[0], frame[1] = 1, "if" if t == "if" else head_kind(t)
                if frame[1] is None:
                    return False
                continue
            elif c == _NUM or t in names:
                kind = NUM
            else:
                return False
            if not stack:
                top = kind
                continue
            frame = stack[-1]
            n = frame[0]
            if n == 0:  # a list as a head
                return False
            if frame[1] == "if":
                if n >= 4 or not (kind == NUM or (n == 1 and kind == BOOL)):
                    return False
            elif kind != NUM:
                return False
            frame[0] = n + 1
        return top == NUM


def read_facts(src: str) -> Facts | None:
    """The facts of a plain source of one form; None for any other (the reader's data then
    give them: several forms, a header, unbalanced parentheses, other syntax)."""
    if len(src) > MAX_CHARS or not src.isascii() or _UNPLAIN.search(src):
        return None
    tokens = src.replace("(", " ( ").replace(")", " ) ").split()
    if len(tokens) != 1 or tokens[0] in ("(", ")"):  # one list: the first '(' closes at
        if not tokens or tokens[0] != "(" or tokens[-1] != ")":
            return None
        # the last ')', so what it holds is balanced (each round of removals takes one level)
        inner = src.translate(_PARENS)[1:-1]
        for _ in range(MAX_DEPTH):
            if not inner:
                break
            fewer = inner.replace("()", "")
            if len(fewer) == len(inner):
                return None
            inner = fewer
        else:
            return None
    table = {}
    get = _TOKENS.get
    for t in set(tokens):
        k = get(t)
        if k is None:
            k = _classify(t)
            if k is None:
                return None  # a '.', a special number or a bad token: the reader says
        table[t] = k
    return Facts(tokens, table)


def _classify(t: str) -> tuple[int, str] | None:
    """The class of a plain token (as ``cpp/src/front_read.cpp`` reads it) with its skeleton
    text, remembered; None for one read otherwise ('.', the special numbers, bad tokens)."""
    c0 = t[0]
    sign = c0 in "+-."
    if not c0.isdigit() and not (sign and len(t) > 1 and (t[1].isdigit() or t[1] == ".")):
        k = None if t in (".", "+inf.0", "-inf.0", "+nan.0", "-nan.0") else (_SYM, skeleton_name(t))
    else:
        k = (_NUM, "C") if _NUMBER.fullmatch(t) else None
    if k is not None:
        if len(_TOKENS) >= _KEPT:
            for name in list(_TOKENS)[2:]:
                del _TOKENS[name]
        _TOKENS[t] = k
    return k
