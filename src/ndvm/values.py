"""Structural runtime values shared by the Python backends.

Only numbers (and the numbers inside vectors/matrices) are lane-batched and differentiable;
everything here is structural: one value for all lanes of a thread, never taped. Numbers are
``float`` (lane-uniform constants) or payload objects owned by each backend.
"""

from __future__ import annotations

from typing import Any

from ndvm.printer import Style, render


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

    def __reduce__(self) -> tuple[Any, ...]:
        return (Symbol, (self.name,))  # unpickled interned: ``eq?`` still holds


class _Singleton:
    """A value of which there is one: unpickled as that one (its global ``name``)."""

    __slots__ = ("text", "name")

    def __init__(self, text: str, name: str) -> None:
        self.text = text
        self.name = name

    def __repr__(self) -> str:
        return self.text

    def __reduce__(self) -> str:
        return self.name


NIL = _Singleton("()", "NIL")
VOID = _Singleton("#<void>", "VOID")


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

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its elements and tail (a long list is not one pickle level per cell)."""
        items = []
        x: Any = self
        while type(x) is Pair:
            items.append(x.car)
            x = x.cdr
        return (from_iterable, (items, x))


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
PRINT_DEPTH = 1_000  # levels of a printed structural value; deeper ones print as (...)


def _pair_chain(x: Any, width: int) -> tuple[list[Any], Any, bool] | None:
    """The printer's view of a pair: up to ``width`` elements, the tail, whether proper."""
    if type(x) is not Pair:
        return None
    items = []
    while type(x) is Pair and len(items) < width:
        items.append(x.car)
        x = x.cdr
    return items, x, x is NIL


def show(value: Any, limit: int = PRINT_LIMIT, leaf: Any = repr) -> str:
    """The printed form of a value (``ndvm.printer``), cut after ``limit`` characters.

    Pairs print as Scheme lists ``(a b . c)``, Python lists/tuples (exported results) as
    ``[a, b]``, anything else through ``leaf``; a list reached twice is labelled (``#0=``,
    then ``#0#``). Iterative and bounded, so a deeply nested value or a DAG with
    exponentially many paths prints in bounded time.
    """
    style = Style("[", "]", ", ", leaf)
    return render(
        value, style, max_chars=limit, max_depth=PRINT_DEPTH, labels=True, chain=_pair_chain
    )
