"""Reader: source text -> tuple of data, with line/column on every datum.

Non-recursive (an explicit stack), so adversarial nesting cannot exhaust the Python stack;
nesting deeper than ``MAX_NESTING`` is a ``ReadError``.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from functools import lru_cache

from ndvm.errors import CompileError, ReadError
from ndvm.eval.limits import Limits
from ndvm.lang.datum import Bool, Datum, Num, SList, Str, Sym, symbols_in

MAX_NESTING = 2000
_DEFAULT = Limits()

_DELIMS = set("()[]\";'`,")
_NEWLINE = re.compile("\n")
_BLOCK = re.compile(r"#\||\|#")
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"', re.DOTALL)
# one token after any whitespace and line comments. An atom runs to a delimiter or whitespace;
# '#' may only start it (so "a#b" is "a", "#b"). "end" comes before "atom", which could
# otherwise match the empty string at the end of the text.
_TOKEN = re.compile(
    r"(?:[ \t\r\n\f\v]+|;[^\n]*)*"
    r"(?:(?P<open>[(\[])|(?P<close>[)\]])|(?P<quote>['`,])|(?P<comment>#;)|(?P<block>#\|)"
    r"|(?P<string>\")|(?P<end>\Z)|(?P<atom>#?[^\s()\[\]\";'`,#]*))"
)
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_SPECIAL_NUMBERS = {"+inf.0": math.inf, "-inf.0": -math.inf, "+nan.0": math.nan, "-nan.0": math.nan}
_BOOLEANS = {"#t": True, "#true": True, "#f": False, "#false": False}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "0": "\0", "a": "\a"}
_SYMBOL_CHARS = re.compile(r"^[A-Za-z0-9!$%&*/:<=>?^_~+\-.@]+$")


class _Frame:
    __slots__ = ("close", "items", "tail", "dot_at", "line", "column", "prefix")

    def __init__(self, close: str, line: int, column: int, prefix: str | None = None) -> None:
        self.close = close
        self.items: list[Datum] = []
        self.tail: Datum | None = None
        self.dot_at: tuple[int, int] | None = None
        self.line = line
        self.column = column
        self.prefix = prefix  # "quote" / "datum-comment" frames wrap the next datum


def read(
    text: str, *, allow_empty: bool = False, limits: Limits | None = None
) -> tuple[Datum, ...]:
    """Read every datum of ``text``; an empty program is a ``ReadError`` unless allowed.

    ``limits.max_source_chars`` bounds the text (``ReadError``) and ``limits.max_forms`` the
    forms read (``CompileError`` at the first form past it), so huge input fails fast.
    """
    return read_with_symbols(text, allow_empty=allow_empty, limits=limits)[0]


def read_with_symbols(
    text: str, *, allow_empty: bool = False, limits: Limits | None = None
) -> tuple[tuple[Datum, ...], frozenset[str]]:
    """``read(text)`` and the name of every symbol in it (quoted or not)."""
    if not isinstance(text, str):
        raise ReadError(f"source must be str, not {type(text).__name__}")
    lim = limits or _DEFAULT
    if len(text) > lim.max_source_chars:
        raise ReadError(
            f"source longer than {lim.max_source_chars} characters (Limits.max_source_chars)",
            1,
            1,
        )
    if len(text) <= _CACHED_CHARS:
        out = _read_small(text, lim.max_forms)
    else:
        out = _read_any(text, lim.max_forms)
    if not out[0] and not allow_empty:
        raise ReadError("empty program: expected at least one expression", 1, 1)
    return out


_CACHED_CHARS = 2048  # data are immutable: small sources read once (co-search reads twice)


@lru_cache(maxsize=256)
def _read_small(text: str, max_forms: int) -> tuple[tuple[Datum, ...], frozenset[str]]:
    return _read_any(text, max_forms)


def _read_any(text: str, max_forms: int) -> tuple[tuple[Datum, ...], frozenset[str]]:
    fast = _read_fast(text, max_forms)
    if fast is not None:
        return fast
    data = _Reader(text, max_forms).run()
    return data, frozenset(symbols_in(data))


class _Reader:
    def __init__(self, text: str, max_forms: int) -> None:
        self.text = text
        self.pos = 0
        self.max_forms = max_forms
        self.forms_left = max_forms
        # positions of newlines: line/column of any offset by bisection, computed only
        # where a datum starts or an error is reported
        self._newlines = [m.start() for m in _NEWLINE.finditer(text)]

    def _here(self, pos: int | None = None) -> tuple[int, int]:
        pos = self.pos if pos is None else pos
        line = bisect_left(self._newlines, pos)
        start = self._newlines[line - 1] + 1 if line else 0
        return line + 1, pos - start + 1

    def _advance(self, n: int = 1) -> None:
        self.pos += n

    def run(self) -> tuple[Datum, ...]:
        top: list[Datum] = []
        stack: list[_Frame] = []
        text = self.text
        match = _TOKEN.match
        newlines = self._newlines
        atom = _classify
        pos = 0
        while True:
            m = match(text, pos)
            kind = m.lastgroup  # type: ignore[union-attr]
            if kind == "end":
                break
            start = m.start(kind)  # type: ignore[union-attr]
            if newlines:
                line = bisect_left(newlines, start)
                col = start - (newlines[line - 1] + 1 if line else 0) + 1
                line += 1
            else:
                line, col = 1, start + 1
            if kind == "close":
                self.pos = start
                datum: Datum | None = self._finish(self._close(stack, text[start], line, col))
                pos = self.pos
            elif kind == "block":
                self.pos = start
                self._block_comment()
                pos = self.pos
                continue
            else:
                self.forms_left -= 1
                if self.forms_left < 0:
                    raise CompileError(
                        f"program too large: more than {self.max_forms} forms (Limits.max_forms)",
                        line,
                        col,
                    )
                pos = m.end()  # type: ignore[union-attr]
                if kind == "atom":
                    token = text[start:pos]
                    number = atom(token)
                    if number is None:
                        datum = Sym(token, line, col)
                    elif number is _SPECIAL:
                        self.pos = pos
                        datum = self._special_atom(token, stack, line, col)
                        if datum is None:  # a dot inside a list
                            continue
                    else:
                        datum = Num(number, token, line, col)
                elif kind == "open":
                    _push(stack, _Frame(")" if text[start] == "(" else "]", line, col))
                    continue
                else:
                    self.pos = start
                    datum = self._rare(kind, stack, line, col)  # type: ignore[arg-type]
                    pos = self.pos
                    if datum is None:
                        continue
            _deliver(stack, top, datum)
        if stack:
            _unclosed(stack[-1])
        return tuple(top)

    def _rare(self, kind: str, stack: list[_Frame], line: int, col: int) -> Datum | None:
        """Quote, datum comment, string and unsupported-syntax tokens (the
        reader sits on the token); ``None`` when nothing is delivered yet."""
        text = self.text
        ch = text[self.pos]
        if kind == "quote":
            if ch != "'":
                raise ReadError(f"quasiquote syntax {ch!r} is not supported", line, col)
            self._advance()
            _push(stack, _Frame("", line, col, prefix="quote"))
            return None
        if kind == "comment":
            self._advance(2)
            _push(stack, _Frame("", line, col, prefix="datum-comment"))
            return None
        return self._string(line, col)

    def _close(self, stack: list[_Frame], ch: str, line: int, col: int) -> _Frame:
        if not stack:
            raise ReadError(f"unexpected {ch!r} with no open list", line, col)
        frame = stack[-1]
        if frame.prefix is not None:
            what = "quote '" if frame.prefix == "quote" else "#;"
            raise ReadError(f"{what} with no datum before {ch!r}", line, col)
        if frame.close != ch:
            raise ReadError(
                f"{ch!r} does not match the {'(' if frame.close == ')' else '['!r} "
                f"opened at {frame.line}:{frame.column}",
                line,
                col,
            )
        if frame.dot_at is not None and frame.tail is None:
            raise ReadError("expected a datum after '.'", *frame.dot_at)
        stack.pop()
        self._advance()
        return frame

    @staticmethod
    def _finish(frame: _Frame) -> Datum:
        items = tuple(frame.items)
        if frame.close == "]":
            return SList(
                (Sym("vec", frame.line, frame.column), *items), None, frame.line, frame.column
            )
        return SList(items, frame.tail, frame.line, frame.column)

    def _block_comment(self) -> None:
        line, col = self._here()
        depth = 0
        for m in _BLOCK.finditer(self.text, self.pos):
            depth += 1 if m.group() == "#|" else -1
            if depth == 0:
                self.pos = m.end()
                return
        raise ReadError("unterminated block comment '#|'", line, col)

    def _string(self, line: int, col: int) -> Str:
        text = self.text
        m = _STRING.match(text, self.pos)
        if m is None:
            raise ReadError("unterminated string", line, col)
        body = m.group(1)
        if "\\" not in body:
            self.pos = m.end()
            return Str(body, line, col)
        out: list[str] = []
        i = 0
        while i < len(body):
            ch = body[i]
            if ch == "\\":
                esc = body[i + 1]
                if esc not in _ESCAPES:
                    raise ReadError(
                        f"unknown string escape '\\{esc}'", *self._here(self.pos + 1 + i)
                    )
                out.append(_ESCAPES[esc])
                i += 2
                continue
            out.append(ch)
            i += 1
        self.pos = m.end()
        return Str("".join(out), line, col)

    def _special_atom(self, token: str, stack: list[_Frame], line: int, col: int) -> Datum | None:
        """The atoms that are neither plain numbers nor plain symbols: '#', '.', booleans,
        special numbers and bad tokens."""
        if token == "#":
            # a lone '#' followed by a delimiter, e.g. '#(' vector syntax
            nxt = self.text[self.pos] if self.pos < len(self.text) else "end of input"
            raise ReadError(f"bad token '#' before {nxt!r} (use [a b c] or (vec a b c))", line, col)
        if token == ".":
            if not stack or stack[-1].prefix is not None or stack[-1].close != ")":
                raise ReadError("unexpected '.' outside a list", line, col)
            frame = stack[-1]
            if not frame.items or frame.dot_at is not None:
                raise ReadError("misplaced '.' in list", line, col)
            frame.dot_at = (line, col)
            return None
        return parse_atom(token, line, col)


def _deliver(stack: list[_Frame], top: list[Datum], datum: Datum) -> None:
    """Hand a read datum to its container, through pending prefix frames (a quote wraps it,
    a ``#;`` swallows it)."""
    while stack and stack[-1].prefix is not None:
        frame = stack.pop()
        if frame.prefix != "quote":
            return
        datum = SList(
            (Sym("quote", frame.line, frame.column), datum),
            None,
            frame.line,
            frame.column,
        )
    if not stack:
        top.append(datum)
        return
    frame = stack[-1]
    if frame.dot_at is None:
        frame.items.append(datum)
    elif frame.tail is not None:
        raise ReadError("more than one datum after '.'", datum.line, datum.column)
    else:
        frame.tail = datum


def _unclosed(frame: _Frame) -> None:
    if frame.prefix == "quote":
        raise ReadError("quote ' with nothing after it", frame.line, frame.column)
    if frame.prefix == "datum-comment":
        raise ReadError("#; with no datum after it", frame.line, frame.column)
    opener = "(" if frame.close == ")" else "["
    raise ReadError(f"unbalanced {opener!r}: missing {frame.close!r}", frame.line, frame.column)


def _push(stack: list[_Frame], frame: _Frame) -> None:
    """Open a list or prefix (quote, datum comment) frame, bounding the nesting depth."""
    if len(stack) >= MAX_NESTING:
        raise ReadError(f"nesting deeper than {MAX_NESTING} levels", frame.line, frame.column)
    stack.append(frame)


_SPECIAL = object()  # _classify: an atom parse_atom must look at (or reject)


@lru_cache(maxsize=4096)
def _classify(token: str) -> float | None | object:
    """A plain number's value, ``None`` for a plain symbol, ``_SPECIAL`` for anything else
    (booleans, ``+inf.0``, ``.``, ``#`` tokens, bad tokens). Tokens repeat: cached."""
    if token in _BOOLEANS or token in _SPECIAL_NUMBERS or token == "." or not token:
        return _SPECIAL
    if _NUMBER.match(token):
        return float(token)
    if token[0] == "#" or token[0].isdigit() or not _SYMBOL_CHARS.match(token):
        return _SPECIAL
    if token[0] in "+-." and len(token) > 1 and (token[1].isdigit() or token[1] == "."):
        return _SPECIAL
    return None


def parse_atom(token: str, line: int, col: int) -> Datum:
    if token in _BOOLEANS:
        return Bool(_BOOLEANS[token], line, col)
    if token in _SPECIAL_NUMBERS:
        return Num(_SPECIAL_NUMBERS[token], token, line, col)
    if _NUMBER.match(token):
        return Num(float(token), token, line, col)
    if token.startswith("#"):
        raise ReadError(f"bad token {token!r}", line, col)
    if not _SYMBOL_CHARS.match(token) or token[0].isdigit():
        raise ReadError(f"bad token {token!r}", line, col)
    if token[0] in "+-." and len(token) > 1 and (token[1].isdigit() or token[1] == "."):
        raise ReadError(f"bad number {token!r}", line, col)
    return Sym(token, line, col)


def classify_unicode(token: str) -> tuple[int, float]:
    """What ``parse_atom`` makes of a token with a non-ASCII character, for the native reader
    (which leaves Unicode digits and categories to Python): ``(0, 0.0)`` a symbol, ``(1, v)``
    a number of value ``v``, ``(2, 0.0)`` a bad token, ``(3, 0.0)`` a bad number.
    (No boolean or special number has a non-ASCII character.)"""
    if _NUMBER.match(token):
        return 1, float(token)
    if token.startswith("#") or not _SYMBOL_CHARS.match(token) or token[0].isdigit():
        return 2, 0.0
    if token[0] in "+-." and len(token) > 1 and (token[1].isdigit() or token[1] == "."):
        return 3, 0.0
    return 0, 0.0


# -- the fast path ---------------------------------------------------------------------------
# A source made of lists, plain atoms (symbols, numbers, booleans) and whitespace -- what
# generated programs are -- is split by one regular expression into tokens and the text between
# them, so positions follow by adding lengths. Anything else (comments, strings, quotes, dots,
# '#' syntax, bad tokens, every error) returns ``None`` and the source is read by ``_Reader``,
# the definition of the syntax; ``tests/lang/test_reader.py`` checks that the two agree.
_FAST_SPLIT = re.compile(r"([()\[\]]|#?[^\s()\[\]\";'`,#]+)").split
_WHITESPACE = " \t\r\n\f\v"
_OPENERS = {"(": ")", "[": "]"}


def _read_fast(text: str, max_forms: int) -> tuple[tuple[Datum, ...], frozenset[str]] | None:
    """The data and symbol names of ``text``, or ``None`` where ``_Reader`` must read it."""
    if ";" in text:
        return None
    parts = _FAST_SPLIT(text)
    if parts[-1].strip(_WHITESPACE):
        return None
    top: list[Datum] = []
    items = top
    stack: list[tuple[list[Datum], str, int, int]] = []
    symbols: set[str] = set()
    line, line_start, pos, forms, depth = 1, 0, 0, max_forms, 0
    it = iter(parts)
    for skip, token in zip(it, it):
        if skip:
            if skip != " ":
                if skip.strip(_WHITESPACE):
                    return None  # a character no token starts with: quotes, strings, '#'
                if "\n" in skip:
                    line += skip.count("\n")
                    line_start = pos + skip.rindex("\n") + 1
            pos += len(skip)
        col = pos - line_start + 1
        pos += len(token)
        close = _OPENERS.get(token)
        if close is not None:
            forms -= 1
            depth += 1
            if forms < 0 or depth > MAX_NESTING:
                return None
            stack.append((items, close, line, col))
            items = []
            continue
        if token == ")" or token == "]":
            if not stack:
                return None
            parent, want, at_line, at_col = stack.pop()
            depth -= 1
            if token != want:
                return None
            if token == ")":
                parent.append(SList(tuple(items), None, at_line, at_col))
            else:
                parent.append(SList((Sym("vec", at_line, at_col), *items), None, at_line, at_col))
                symbols.add("vec")
            items = parent
            continue
        forms -= 1
        if forms < 0:
            return None
        value = _classify(token)
        if value is None:
            items.append(Sym(token, line, col))
            symbols.add(token)
        elif value is not _SPECIAL:
            items.append(Num(value, token, line, col))  # type: ignore[arg-type]
        elif token in _BOOLEANS:
            items.append(Bool(_BOOLEANS[token], line, col))
        elif token in _SPECIAL_NUMBERS:
            items.append(Num(_SPECIAL_NUMBERS[token], token, line, col))
        else:
            return None  # '.', '#' syntax, bad tokens
    if stack:
        return None
    return tuple(top), frozenset(symbols)
