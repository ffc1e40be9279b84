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
from collections.abc import Callable, Collection, Set

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
        """``funnel.scalar_valued``: the form's kind (``_list``) is one number (a loop or a
        binding is False at its head)."""
        tokens = self.tokens
        if len(tokens) == 1:
            return self.table[tokens[0]][0] == _NUM or tokens[0] in names
        step = iter(tokens).__next__
        step()  # the form's '('
        return _list(step, self.table, names) == NUM


def _list(step: Callable[[], str], table: dict[str, tuple[int, str]],
          names: Collection[str]) -> str | None:  # fmt: skip
    """``funnel._kind`` of the list whose '(' ``step`` gave last (None: no kind, where the
    list's remaining tokens are left unread: the whole form then has no kind either)."""
    head = step()
    if table[head][0] != _SYM or head in names:  # ('(' or ')': a list as a head, or '()')
        return None
    if head == "if":
        for n in range(3):
            t = step()
            kind = _list(step, table, names) if t == "(" else _atom(t, table, names)
            if not (kind == NUM or (n == 0 and kind == BOOL)):
                return None
        return NUM if step() == ")" else None
    out = head_kind(head)
    while True:
        t = step()
        if t == ")":
            return out
        if (_list(step, table, names) if t == "(" else _atom(t, table, names)) != NUM:
            return None


def _atom(t: str, table: dict[str, tuple[int, str]], names: Collection[str]) -> str | None:
    c = table[t][0]
    return NUM if c == _NUM or (c == _SYM and t in names) else None


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
