"""Source data: what the reader produces. Every datum keeps its 1-based line and column."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Sym:
    name: str
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Num:
    value: float
    text: str
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class Str:
    value: str
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        escaped = self.value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'


@dataclass(frozen=True, slots=True)
class Bool:
    value: bool
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        return "#t" if self.value else "#f"


@dataclass(frozen=True, slots=True)
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
