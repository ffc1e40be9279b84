"""The one reader of numbers written as text: CSV cells (``tasks.columns.read_csv``) and CLI
values (``ndvm eval --param/--input``, ``ndvm search --split``).

It accepts what NumPy's and pandas' CSV parsers read as a float and nothing else: an optional
sign, ASCII digits with an optional decimal point and exponent (``1``, ``-2.5``, ``.5``,
``3.``, ``1e-3``, ``+1E+300``), and ``inf``/``infinity``/``nan`` in any case, with spaces or
tabs around. Python's ``float()`` also takes ``1_0`` (as 10), non-ASCII digits (``١٢``
as 12) and Unicode spaces; those are refused here. Whether a non-finite value is allowed
is the caller's rule (a CSV cell must be finite).
"""

from __future__ import annotations

import re

_NUMBER = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)",
    re.IGNORECASE | re.ASCII,
)


def parse_number(text: str) -> float:
    """``text`` as a float, or ``ValueError`` naming it (see the module docstring)."""
    body = text.strip(" \t")
    if not _NUMBER.fullmatch(body):
        raise ValueError(f"not a number ({body[:20]!r})" if body else "empty")
    return float(body)


def parse_numbers(text: str, sep: str = ",") -> list[float]:
    """``a,b,c`` as floats: every item must be a number (``1,,2`` and ``1,2,`` are errors
    naming the 1-based item, not an item dropped)."""
    out = []
    for i, item in enumerate(text.split(sep), 1):
        try:
            out.append(parse_number(item))
        except ValueError as exc:
            raise ValueError(f"item {i}: {exc}") from None
    return out
