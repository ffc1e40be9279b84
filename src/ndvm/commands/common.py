"""Helpers the ``eval`` and ``fit`` commands share: output values, limits, input names."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from ndvm.errors import NdvmError
from ndvm.lang.suggest import did_you_mean


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, except where there is none to show (None, False, [])
    or the help text already says it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        d = action.default
        if d is None or d is False or d == [] or d == argparse.SUPPRESS or "default" in text:
            return text
        return super()._get_help_string(action)


MAX_PRINT_CELLS = 1_000_000  # elements a printed value may have (shared parts count per path)


def json_safe(x: Any) -> Any:
    """``x`` with NumPy values as Python ones and NaN/±inf as None (RFC 8259 has no NaN)."""
    if isinstance(x, np.ndarray):
        return json_safe(x.tolist())
    if isinstance(x, (np.floating, np.integer, np.bool_)):
        return json_safe(x.item())
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    return x


def _write_leaf(x: Any) -> str:
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


def _json_leaf(x: Any) -> str:
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return "null"
    return json.dumps(x)


class _Token:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def encode(value: Any, as_json: bool = False, max_cells: int = MAX_PRINT_CELLS) -> str:
    """``value`` (numbers, lists, arrays, symbols/strings, booleans) as the language writes it
    (``#t``, ``2.5``, ``+nan.0``, ``(1 2 a)``) or as JSON (``null`` for NaN/±inf). Iterative
    and bounded: a deeply nested value prints, and one with more than ``max_cells`` elements
    (e.g. a DAG of shared lists, printed once per path) is an ``NdvmError``, not a hang."""
    open_, close, sep = (_Token("["), _Token("]"), _Token(", ")) if as_json else (
        _Token("("), _Token(")"), _Token(" "))  # fmt: skip
    leaf = _json_leaf if as_json else _write_leaf
    out: list[str] = []
    stack: list[Any] = [value]
    cells = 0
    while stack:
        x = stack.pop()
        if type(x) is _Token:
            out.append(x.text)
            continue
        cells += 1
        if cells > max_cells:
            raise NdvmError(f"the value has more than {max_cells} elements to print")
        if isinstance(x, np.ndarray):
            x = x.tolist()
        if isinstance(x, (list, tuple)):
            stack.append(close)
            for k in range(len(x) - 1, -1, -1):
                stack.append(x[k])
                if k:
                    stack.append(sep)
            stack.append(open_)
            continue
        out.append(leaf(x))
    return "".join(out)


def write_value(x: Any, max_cells: int = MAX_PRINT_CELLS) -> str:
    """A result as the language writes it (bounded; see ``encode``)."""
    return encode(x, False, max_cells)


def print_cells(value: Any) -> int:
    """The print bound for ``value``: a numeric array prints whole (its size is its cost);
    structural values are bounded by ``MAX_PRINT_CELLS``."""
    arr = np.asarray(value)
    return MAX_PRINT_CELLS if arr.dtype == object else MAX_PRINT_CELLS + 2 * arr.size


def add_limit_options(p: argparse.ArgumentParser) -> None:
    """``--max-steps`` and ``--deadline``: the per-evaluation ``ndvm.Limits``."""
    from ndvm.eval.limits import Limits

    p.add_argument(
        "--max-steps",
        type=int,
        default=Limits().max_steps,
        metavar="N",
        help="evaluation steps allowed per evaluation (StepLimitExceeded beyond)",
    )
    p.add_argument(
        "--deadline",
        type=float,
        default=None,
        metavar="SECONDS",
        help="wall-clock seconds allowed per evaluation (default: no deadline)",
    )


def limits_from(args: argparse.Namespace) -> Any:
    from ndvm.eval.limits import Limits

    try:
        return Limits(max_steps=args.max_steps, deadline=args.deadline)
    except ValueError as exc:
        raise NdvmError(f"--max-steps/--deadline: {exc}") from None


def number(option: str, name: str, text: str) -> float:
    """``float(text)``, or an error naming the option it came from."""
    try:
        return float(text)
    except ValueError:
        raise NdvmError(f"{option} {name}={text}: {text!r} is not a number") from None


def free_names(
    source: str, inputs: Iterable[str] = ()
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the program's free names in order of first use, the names its params header declares).

    Free names are what the host can bind: parameters and inputs. A name in ``inputs`` is
    free where the program uses it, even the name of a primitive (``exp`` as a column)."""
    from ndvm.lang.datum import head_name
    from ndvm.lang.reader import read

    given = tuple(inputs)
    data = read(source)
    if len(data) < 2 or head_name(data[0]) != "params":
        return _used(source, given), ()
    body = data[1]
    lines = source.split("\n")  # the reader's lines: only "\n" ends one
    offset = sum(len(s) + 1 for s in lines[: body.line - 1]) + body.column - 1
    # the header alone, checked as the compiler checks it (a 0 in the body's place)
    declared = tuple(n for n in _used(source[:offset] + "0", ()) if n not in given)
    used = _used("\n" * (body.line - 1) + source[offset:], given)
    return tuple(dict.fromkeys((*declared, *used))), declared


def _used(source: str, inputs: tuple[str, ...]) -> tuple[str, ...]:
    """The inferred parameters and the used inputs of ``source``, with ``inputs`` declared."""
    import ndvm

    compiled = ndvm.compile(source, inputs=inputs).compiled
    used = [n for n, pos in zip(compiled.inputs, compiled.input_positions) if pos != (0, 0)]
    return tuple(s.name for s in compiled.params) + tuple(used)


def check_inputs(source: str, inputs: Iterable[str], *, complete: bool) -> None:
    """Every input named on the command line must be a free name of the program; with
    ``complete``, every free name that is not a declared parameter must be given as an input."""
    given = list(inputs)
    names, declared = free_names(source, given)
    unused = [n for n in given if n not in names]
    listing = ", ".join(names) or "none"
    if unused:
        hints = [h for n in unused if (h := did_you_mean(n, names))]
        raise NdvmError(
            f"input {', '.join(repr(n) for n in unused)} is not used by the program"
            f"{' (' + '; '.join(hints) + ')' if hints else ''}; its free names are: {listing}"
        )
    if complete and declared:
        missing = [n for n in names if n not in declared and n not in given]
        if missing:
            raise NdvmError(
                f"program input {', '.join(repr(n) for n in missing)} has no column (give "
                f"--x COL --as NAME); its free names are: {listing}"
            )
