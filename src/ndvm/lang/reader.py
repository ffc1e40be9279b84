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
from ndvm.lang.datum import Bool, Datum, Num, SList, Str, Sym

MAX_NESTING = 2000
_DEFAULT = Limits()

_DELIMS = set("()[]\";'`,")
_NEWLINE = re.compile("\n")
_SPACE = re.compile(r"(?:[ \t\r\n\f\v]+|;[^\n]*)*")
_BLOCK = re.compile(r"#\||\|#")
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"', re.DOTALL)
# an atom runs to a delimiter or whitespace; '#' may only start it (so "a#b" is "a", "#b")
_ATOM = re.compile(r"#?[^\s()\[\]\";'`,#]*")
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
        data = _read_small(text, lim.max_forms)
    else:
        data = _Reader(text, lim.max_forms).run()
    if not data and not allow_empty:
        raise ReadError("empty program: expected at least one expression", 1, 1)
    return data


_CACHED_CHARS = 2048  # data are immutable: small sources read once (co-search reads twice)


@lru_cache(maxsize=256)
def _read_small(text: str, max_forms: int) -> tuple[Datum, ...]:
    return _Reader(text, max_forms).run()


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
        while True:
            self._skip_space()
            if self.pos >= len(text):
                break
            ch = text[self.pos]
            line, col = self._here()
            datum: Datum | None = None
            if ch not in ")]":
                self.forms_left -= 1
                if self.forms_left < 0:
                    raise CompileError(
                        f"program too large: more than {self.max_forms} forms (Limits.max_forms)",
                        line,
                        col,
                    )
            if ch in "([":
                _push(stack, _Frame(")" if ch == "(" else "]", line, col))
                self._advance()
                continue
            if ch in ")]":
                frame = self._close(stack, ch, line, col)
                datum = self._finish(frame)
            elif ch in "'`,":
                if ch != "'":
                    raise ReadError(f"quasiquote syntax {ch!r} is not supported", line, col)
                self._advance()
                _push(stack, _Frame("", line, col, prefix="quote"))
                continue
            elif ch == "#" and text.startswith("#;", self.pos):
                self._advance(2)
                _push(stack, _Frame("", line, col, prefix="datum-comment"))
                continue
            elif ch == '"':
                datum = self._string(line, col)
            else:
                datum = self._atom(stack, line, col)
                if datum is None:  # a dot inside a list
                    continue
            # deliver datum through prefix frames
            while True:
                if stack and stack[-1].prefix is not None:
                    frame = stack.pop()
                    if frame.prefix == "quote":
                        datum = SList(
                            (Sym("quote", frame.line, frame.column), datum),
                            None,
                            frame.line,
                            frame.column,
                        )
                        continue
                    datum = None  # datum comment swallows it
                    break
                break
            if datum is None:
                continue
            if not stack:
                top.append(datum)
            else:
                frame = stack[-1]
                if frame.dot_at is not None:
                    if frame.tail is not None:
                        raise ReadError(
                            "more than one datum after '.'", datum_line(datum), datum_col(datum)
                        )
                    frame.tail = datum
                else:
                    frame.items.append(datum)
        if stack:
            frame = stack[-1]
            if frame.prefix == "quote":
                raise ReadError("quote ' with nothing after it", frame.line, frame.column)
            if frame.prefix == "datum-comment":
                raise ReadError("#; with no datum after it", frame.line, frame.column)
            opener = "(" if frame.close == ")" else "["
            raise ReadError(
                f"unbalanced {opener!r}: missing {frame.close!r}", frame.line, frame.column
            )
        return tuple(top)

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

    def _skip_space(self) -> None:
        text = self.text
        while True:
            self.pos = _SPACE.match(text, self.pos).end()  # type: ignore[union-attr]
            if not text.startswith("#|", self.pos):
                return
            self._block_comment()

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

    def _atom(self, stack: list[_Frame], line: int, col: int) -> Datum | None:
        text = self.text
        start = self.pos
        self.pos = _ATOM.match(text, start).end()  # type: ignore[union-attr]
        token = text[start : self.pos]
        if token == "#":
            # a lone '#' followed by a delimiter, e.g. '#(' vector syntax
            nxt = text[self.pos] if self.pos < len(text) else "end of input"
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


def _push(stack: list[_Frame], frame: _Frame) -> None:
    """Open a list or prefix (quote, datum comment) frame, bounding the nesting depth."""
    if len(stack) >= MAX_NESTING:
        raise ReadError(f"nesting deeper than {MAX_NESTING} levels", frame.line, frame.column)
    stack.append(frame)


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


def datum_line(d: Datum) -> int:
    return d.line


def datum_col(d: Datum) -> int:
    return d.column
