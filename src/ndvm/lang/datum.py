"""Source data: what the reader produces. Every datum keeps its 1-based line and column.

Data are values: never mutated after construction (the reader shares the data of a small
source between callers). They are plain slotted records rather than ``frozen`` dataclasses
because a frozen dataclass costs four times as much to construct, and the front end builds
one per token.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

# equality and hashing by value, like a frozen dataclass; construction at slotted-class speed
record = dataclass(slots=True, unsafe_hash=True)


@record
class Sym:
    name: str
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        return self.name


@record
class Num:
    value: float
    text: str
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        return self.text


@record
class Str:
    value: str
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        escaped = self.value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'


@record
class Bool:
    value: bool
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        return "#t" if self.value else "#f"


@record
class SList:
    """A parenthesized list; ``tail`` is the datum after a dot in ``(a b . c)``."""

    items: tuple[Datum, ...]
    tail: Datum | None = None
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        return to_source(self)


Datum = Sym | Num | Str | Bool | SList


def to_source(d: Datum, atom: Callable[[Datum], str] = str) -> str:
    """Print a datum back as source text (``read(to_source(d))`` gives ``d`` back).

    ``atom`` prints each non-list datum (the skeleton printer substitutes names and numbers).
    """
    try:
        return _print(d, atom)
    except RecursionError:  # deeper than the interpreter stack allows: the iterative printer
        return _print_deep(d, atom)


def _print(d: Datum, atom: Callable[[Datum], str]) -> str:
    if isinstance(d, SList):
        inner = " ".join([_print(x, atom) for x in d.items])
        if d.tail is not None:
            inner += " . " + _print(d.tail, atom)
        return "(" + inner + ")"
    return atom(d)


def _print_deep(d: Datum, atom: Callable[[Datum], str]) -> str:
    out: list[str] = []
    stack: list[object] = [d]
    while stack:
        item = stack.pop()
        if isinstance(item, str) and not isinstance(item, Sym):
            out.append(item)
        elif isinstance(item, SList):
            parts: list[object] = ["("]
            for i, x in enumerate(item.items):
                if i:
                    parts.append(" ")
                parts.append(x)
            if item.tail is not None:
                parts.extend([" . ", item.tail])
            parts.append(")")
            stack.extend(reversed(parts))
        else:
            out.append(atom(item))  # type: ignore[arg-type]
    return "".join(out)


def head_name(d: Datum) -> str | None:
    """The name of the symbol heading list ``d``, or ``None``."""
    if isinstance(d, SList) and d.items and isinstance(d.items[0], Sym):
        return d.items[0].name
    return None


def symbols_in(data: Iterable[Datum]) -> set[str]:
    """Every symbol name occurring in ``data`` (quoted or not)."""
    out: set[str] = set()
    stack = list(data)
    while stack:
        d = stack.pop()
        if isinstance(d, Sym):
            out.add(d.name)
        elif isinstance(d, SList):
            stack.extend(d.items)
            if d.tail is not None:
                stack.append(d.tail)
    return out
