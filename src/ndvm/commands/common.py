"""Helpers the ``eval`` and ``fit`` commands share: output values, limits, input names."""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from ndvm.errors import NdvmError
from ndvm.lang.suggest import did_you_mean
from ndvm.printer import JSON, SCHEME, render


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


def encode(value: Any, as_json: bool = False, max_cells: int = MAX_PRINT_CELLS) -> str:
    """``value`` (numbers, lists, arrays, symbols/strings, booleans) as the language writes it
    (``#t``, ``2.5``, ``+nan.0``, ``(1 2 a)``) or as JSON (``null`` for NaN/±inf), through the
    one printer (``ndvm.printer``). Iterative and bounded: a deeply nested value prints; in
    the written form a list reached twice prints once (``#0=(...)``, then ``#0#``); JSON
    copies shared parts per path, and more than ``max_cells`` elements is a
    ``ResultTooLarge`` error, not a hang."""
    style = JSON if as_json else SCHEME
    return render(value, style, max_cells=max_cells, labels=not as_json)


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
    """``text`` as a float (``ndvm.textnum.parse_number``: what NumPy/pandas read as a number),
    or an error naming the option it came from."""
    from ndvm.textnum import parse_number

    try:
        return parse_number(text)
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

    compiled = ndvm.compile(source, inputs=inputs, free_params=True).compiled
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
        near = [h for n in missing if (h := did_you_mean(n, (*declared, *given)))]
        if near:  # a typo of a declared name, as the API says it
            raise NdvmError(
                f"unbound name {', '.join(repr(n) for n in missing)} (not a declared parameter "
                f"or an input given with --x; {'; '.join(near)})"
            )
        if missing:
            raise NdvmError(
                f"program input {', '.join(repr(n) for n in missing)} has no column (give "
                f"--x COL --as NAME); its free names are: {listing}"
            )
