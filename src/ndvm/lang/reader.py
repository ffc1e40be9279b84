"""Reader: source text -> tuple of data, with line/column on every datum.

The reader is native (``cpp/src/front_read.cpp``, one definition of the syntax, described in
docs/language.md); this module hands it the text and the limits and returns the data as the
records of ``ndvm.lang.datum``. Nesting deeper than ``MAX_NESTING`` is a ``ReadError``.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from ndvm.errors import NdvmError, ReadError
from ndvm.eval.limits import Limits
from ndvm.lang.datum import Datum

MAX_NESTING = 2000
_DEFAULT = Limits()
_CACHED_CHARS = 2048  # data are immutable: small sources read once (co-search reads twice)


def native_core() -> Any:
    """``ndvm._core``, which holds the front end (an install always builds it)."""
    if _CORE:
        return _CORE[0]
    try:
        from ndvm import _core
    except ImportError as e:  # pragma: no cover - only a broken install lacks it
        raise NdvmError(
            "ndvm's native core (ndvm._core) is not importable, and the front end is part of "
            f"it: reinstall ndvm (pip builds the extension) ({e})"
        ) from None
    _CORE.append(_core)
    return _core


_CORE: list[Any] = []  # ndvm._core, once imported


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
    if len(text) <= _CACHED_CHARS:
        return _read_small(text, allow_empty, lim.max_source_chars, lim.max_forms)
    return native_core().read(text, allow_empty, lim.max_source_chars, lim.max_forms)


@lru_cache(maxsize=256)
def _read_small(
    text: str, allow_empty: bool, max_chars: int, max_forms: int
) -> tuple[tuple[Datum, ...], frozenset[str]]:
    return native_core().read(text, allow_empty, max_chars, max_forms)


# atoms: the syntax of numbers and symbols (docs/language.md); the native reader classifies
# ASCII tokens itself and asks ``classify_unicode`` about the rest (Unicode digits count)
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_SYMBOL_CHARS = re.compile(r"^[A-Za-z0-9!$%&*/:<=>?^_~+\-.@]+$")


def classify_unicode(token: str) -> tuple[int, float]:
    """What the reader makes of a token with a non-ASCII character: ``(0, 0.0)`` a symbol,
    ``(1, v)`` a number of value ``v``, ``(2, 0.0)`` a bad token, ``(3, 0.0)`` a bad number.
    (No boolean or special number has a non-ASCII character.)"""
    if _NUMBER.match(token):
        return 1, float(token)
    if token.startswith("#") or not _SYMBOL_CHARS.match(token) or token[0].isdigit():
        return 2, 0.0
    if token[0] in "+-." and len(token) > 1 and (token[1].isdigit() or token[1] == "."):
        return 3, 0.0
    return 0, 0.0
