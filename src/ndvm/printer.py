"""The one printer of values: ``repr``/``str`` of structural results in Python, ``ndvm eval``
(the language's written form and JSON) and the irritants of ``(error ...)`` messages.

Iterative (a result nested 10^5 deep prints) and bounded three ways: ``max_chars`` cuts the
text with ``...``, ``max_depth`` prints a container below that depth as ``[...]``, and
``max_cells`` (elements visited) raises ``ResultTooLarge``. With ``labels`` a container
reached twice is printed once, labelled ``#0=[...]``, and referred to as ``#0#`` afterwards
(SRFI-38's notation), so a DAG of 60 shared pairs (2^60 paths) prints in time linear in its
60 nodes; without labels (JSON) every path counts against ``max_cells``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ndvm.errors import ResultTooLarge

Chain = Callable[[Any, int], "tuple[list[Any], Any, bool] | None"]


def python_leaf(x: Any) -> str:
    return repr(x)


def write_leaf(x: Any) -> str:
    """A leaf as the language writes it: ``#t``, ``2.5``, ``3``, ``+nan.0``, ``a``."""
    if isinstance(x, (bool, np.bool_)):
        return "#t" if x else "#f"
    if isinstance(x, (float, int, np.floating, np.integer)):
        v = float(x)
        if math.isnan(v):
            return "+nan.0"
        if math.isinf(v):
            return "+inf.0" if v > 0 else "-inf.0"
        text = repr(v)
        return text[:-2] if text.endswith(".0") else text
    return str(x)


def json_leaf(x: Any) -> str:
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return "null"
    return json.dumps(x)


@dataclass(frozen=True)
class Style:
    """Brackets and separator of sequences, and how a leaf is written; ``arrays``: NumPy
    arrays print as nested sequences (else as leaves)."""

    open: str
    close: str
    sep: str
    leaf: Callable[[Any], str]
    arrays: bool = False


PYTHON = Style("[", "]", ", ", python_leaf)
SCHEME = Style("(", ")", " ", write_leaf, arrays=True)
JSON = Style("[", "]", ", ", json_leaf, arrays=True)


class _Tok:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


_DOT = _Tok(" . ")


def _node(x: Any, style: Style, chain: Chain | None, width: int) -> Any:
    """``(items, tail, open, sep, close)`` of a container (``tail`` None for proper
    sequences), or None for a leaf; at most ``width`` items are taken."""
    if isinstance(x, (list, tuple)):
        return x[:width], None, style.open, style.sep, style.close
    if style.arrays and isinstance(x, np.ndarray) and x.ndim:
        return list(x[:width]), None, style.open, style.sep, style.close
    if chain is not None:
        got = chain(x, width)
        if got is not None:
            items, tail, proper = got
            return items, (None if proper else tail), "(", " ", ")"
    return None


def render(
    value: Any,
    style: Style = PYTHON,
    *,
    max_chars: int | None = None,
    max_cells: int | None = None,
    max_depth: int | None = None,
    labels: bool = True,
    chain: Chain | None = None,
) -> str:
    """``value`` printed in ``style`` (see the module doc for the bounds)."""
    width = max_chars if max_chars is not None else (max_cells or 1 << 62)
    shared = _shared(value, style, chain, width, max_depth) if labels else set()
    names: dict[int, int] = {}
    out: list[str] = []
    size = cells = 0
    stack: list[Any] = [(value, 0)]
    while stack:
        if max_chars is not None and size >= max_chars:
            return "".join(out) + "..."
        top = stack.pop()
        if type(top) is _Tok:
            text = top.text
        else:
            x, depth = top
            cells += 1
            if max_cells is not None and cells > max_cells:
                raise ResultTooLarge(f"the value has more than {max_cells} elements to print")
            node = _node(x, style, chain, width)
            if node is None:
                text = style.leaf(x.item() if isinstance(x, np.ndarray) and style.arrays else x)
            else:
                text = ""
                if id(x) in shared:
                    if id(x) in names:
                        text = f"#{names[id(x)]}#"
                        out.append(text)
                        size += len(text)
                        continue
                    names[id(x)] = len(names)
                    text = f"#{names[id(x)]}="
                _push(stack, node, depth, max_depth)
        out.append(text)
        size += len(text)
    return "".join(out)


def _push(stack: list[Any], node: Any, depth: int, max_depth: int | None) -> None:
    items, tail, open_, sep, close = node
    if max_depth is not None and depth >= max_depth:
        stack.append(_Tok(f"{open_}...{close}" if len(items) or tail is not None else "[]"))
        return
    stack.append(_Tok(close))
    if tail is not None:
        stack += [(tail, depth + 1), _DOT]
    seps = _Tok(sep)
    for k in range(len(items) - 1, -1, -1):
        stack.append((items[k], depth + 1))
        if k:
            stack.append(seps)
    stack.append(_Tok(open_))


def _shared(
    value: Any, style: Style, chain: Chain | None, width: int, max_depth: int | None
) -> set[int]:
    """The containers the printing walk reaches more than once (the walk stops after
    ``width`` visits: nothing past them can be printed)."""
    seen: set[int] = set()
    shared: set[int] = set()
    stack = [(value, 0)]
    visits = 0
    while stack and visits < width:
        x, depth = stack.pop()
        visits += 1
        node = _node(x, style, chain, width)
        if node is None:
            continue
        if id(x) in seen:
            shared.add(id(x))
            continue
        seen.add(id(x))
        items, tail, *_ = node
        if max_depth is not None and depth >= max_depth:
            continue
        if tail is not None:
            stack.append((tail, depth + 1))
        stack += [(item, depth + 1) for item in reversed(items)]
    return shared
