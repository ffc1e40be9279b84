"""Structural runtime values shared by the Python backends.

Only numbers (and the numbers inside vectors/matrices) are lane-batched and differentiable;
everything here is structural: one value for all lanes of a thread, never taped. Numbers are
``float`` (lane-uniform constants) or payload objects owned by each backend.
"""

from __future__ import annotations

from typing import Any


class Symbol:
    """Interned symbol: equal names give the identical object, so ``eq?`` is ``is``."""

    __slots__ = ("name",)
    _table: dict[str, Symbol] = {}

    def __new__(cls, name: str) -> Symbol:
        sym = cls._table.get(name)
        if sym is None:
            sym = object.__new__(cls)
            sym.name = name
            cls._table[name] = sym
        return sym

    def __repr__(self) -> str:
        return self.name


class _Singleton:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


NIL = _Singleton("()")
VOID = _Singleton("#<void>")


class String:
    """An immutable string (structural data only: error messages and ``equal?``)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, String) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return '"' + self.text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Pair:
    """A write-once cons cell."""

    __slots__ = ("car", "cdr")

    def __init__(self, car: Any, cdr: Any) -> None:
        self.car = car
        self.cdr = cdr

    def __repr__(self) -> str:
        return show(self, PRINT_LIMIT)


def iter_list(value: Any, *, strict: bool = True):  # type: ignore[no-untyped-def]
    """Yield the elements of a proper list; ``strict`` raises ValueError on improper lists."""
    while isinstance(value, Pair):
        yield value.car
        value = value.cdr
    if value is not NIL and strict:
        raise ValueError("improper list")


def from_iterable(items: Any, tail: Any = NIL) -> Any:
    out = tail
    for x in reversed(list(items)):
        out = Pair(x, out)
    return out


PRINT_LIMIT = 10_000  # characters of a printed structural value before it is cut with "..."


def show(value: Any, limit: int = PRINT_LIMIT, leaf: Any = repr) -> str:
    """The printed form of a value, cut after ``limit`` characters (then ``...`` is appended).

    Pairs print as Scheme lists ``(a b . c)``, Python lists/tuples (exported results) as
    ``[a, b]``; anything else through ``leaf``. Iterative, and it stops at ``limit``, so a
    deeply nested value or a DAG with exponentially many paths prints in bounded time.
    """
    out: list[str] = []
    size = 0
    stack: list[Any] = [value]
    while stack and size < limit:
        x = stack.pop()
        if type(x) is _Text:
            text = x.text
        elif type(x) is Pair:
            items: list[Any] = [_OPEN_PAREN]
            while type(x) is Pair and len(items) < limit:
                items += [x.car, _SPACE]
                x = x.cdr
            items[-1:] = [_CLOSE_PAREN] if x is NIL else [_DOT, x, _CLOSE_PAREN]
            stack.extend(reversed(items))
            continue
        elif type(x) is list or type(x) is tuple:
            parts: list[Any] = [_OPEN_BRACKET]
            for k, item in enumerate(x[:limit]):
                parts += [_COMMA, item] if k else [item]
            parts.append(_CLOSE_BRACKET)
            stack.extend(reversed(parts))
            continue
        else:
            text = leaf(x)
        out.append(text)
        size += len(text)
    return "".join(out) + ("..." if stack else "")


class _Text:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


_OPEN_PAREN, _CLOSE_PAREN, _SPACE, _DOT = _Text("("), _Text(")"), _Text(" "), _Text(" . ")
_OPEN_BRACKET, _CLOSE_BRACKET, _COMMA = _Text("["), _Text("]"), _Text(", ")
