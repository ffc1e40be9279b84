"""What the funnel needs of a candidate's source, from the native reader without building its
data: the node count (the ``size`` stage), the symbols (the ``params`` stage), the skeleton and
whether the program provably gives one number per point (``funnel.scalar_valued``).

``read_facts`` reads the source with the reader itself (``_core.read_facts``,
``cpp/src/front_facts.cpp``): it raises what ``reader.read_with_symbols`` raises, at the same
line and column, and each fact is the one the data give (``tests/search/test_facts.py``):
``funnel.complexity``, the reader's symbols, ``front.skeleton_of`` (a template of the printed
forms: each symbol written ``P`` or as ``front.skeleton_name`` gives it, each number ``C``) and
``funnel.scalar_valued`` (the symbols that must be names, those that must not, and the heads
whose kind, ``funnel.head_kind``, must be a number or a truth value). Data holding a string
are not described (``read_facts`` gives None: the worker reads the data).
"""

from __future__ import annotations

from collections.abc import Set

from ndvm.eval.limits import Limits
from ndvm.lang.front import skeleton_name
from ndvm.lang.reader import native_core
from ndvm.search.funnel import NUM, head_kind

_DEFAULT = Limits()  # what ``reader.read_with_symbols`` reads under when given none
_LIMITS = (_DEFAULT.max_source_chars, _DEFAULT.max_forms)


class Facts:
    """A read program's node count and symbols, its skeleton and whether it gives one number
    per point, for any parameter names."""

    __slots__ = ("complexity", "symbols", "_names", "_template", "_first", "_scalar")

    def __init__(self, got: tuple) -> None:  # type: ignore[type-arg]
        (self.complexity, self.symbols, self._names, self._template, self._first,
         self._scalar) = got  # fmt: skip

    def skeleton(self, params: Set[str], header: bool = False) -> str:
        """``front.skeleton_of``: of every form, or (``header``) of every form but the first."""
        texts = ["P" if n in params else skeleton_name(n) for n in self._names]
        t = self._template[self._first + 1 :] if header else self._template
        return t.format(*texts)

    def scalar(self, names: Set[str]) -> bool:
        """``funnel.scalar_valued`` with ``names`` the one-number-per-point names."""
        req = self._scalar
        if req is None:
            return False
        leaves, heads, value_heads, cond_heads = req
        return (
            leaves <= names and heads.isdisjoint(names)
            and all(head_kind(h) == NUM for h in value_heads)
            and all(head_kind(h) is not None for h in cond_heads)
        )  # fmt: skip


def read_facts(src: str) -> Facts | None:
    """The facts of ``src`` read with the reader's default limits (``ReadError`` as
    ``reader.read_with_symbols`` raises it); None for data holding a string, or not a str."""
    if type(src) is not str:
        return None
    got = native_core().read_facts(src, *_LIMITS)
    return None if got is None else Facts(got)
