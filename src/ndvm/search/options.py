"""Checks of a search's numeric options, shared by ``SymbolicRegressor`` and ``ndvm search``.

Each check raises ``ConfigError`` (an ``NdvmError`` and a ``ValueError``) with a one-line
message naming the option as the caller spells it (``time_budget`` for the estimator,
``--budget`` for the command line), so a NaN budget, a zero start count or a negative seed
fails at once instead of hanging or failing deep inside the search.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

from ndvm.errors import ConfigError


def seconds(name: str, value: Any, *, optional: bool = False) -> float | None:
    """A duration: a finite number > 0 (None allowed when ``optional``)."""
    if value is None and optional:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not 0 < float(value) < math.inf
    ):
        raise ConfigError(f"{name} must be a finite number of seconds > 0, got {value!r}")
    return float(value)


def count(name: str, value: Any, *, minimum: int = 1, optional: bool = False) -> int | None:
    """A whole number >= ``minimum`` (None allowed when ``optional``)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ConfigError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    return int(value)


def fractions(name: str, value: Any) -> tuple[float, float, float]:
    """Train / validation / test fractions: three finite numbers >= 0 summing to 1 (a
    sequence, or text ``"0.6,0.2,0.2"`` as ``--split`` takes them)."""
    from ndvm.textnum import parse_numbers

    try:
        out = tuple(parse_numbers(value) if isinstance(value, str) else map(float, value))
    except (TypeError, ValueError):
        out = ()
    if len(out) != 3 or not all(0 <= f < math.inf for f in out):
        raise ConfigError(f"{name} must be three fractions (train, validation, test) summing to "
                          f"1, got {value!r}")  # fmt: skip
    if not 0.99 < sum(out) < 1.01:
        raise ConfigError(f"{name} must sum to 1, got {value!r} (sum {sum(out):g})")
    return out[0], out[1], out[2]


def parse_early_stop(value: Any) -> Callable[[float, int, float], bool] | None:
    """``SymbolicRegressor``'s ``early_stop_condition`` as a predicate on a calibrated
    program's ``(loss, complexity, validation R²)``; None: no early stop.

    - a number ``L``: stop when a program's loss (``equations_``'s ``loss`` column: the
      validation MSE) is at most ``L`` (PySR's meaning);
    - ``"r2>=R"`` (or ``"r2>R"``): stop when a program's validation R² reaches ``R``;
      ``"loss<=L"`` is the number's form as text;
    - a callable ``f(loss, complexity) -> bool``: stop when it returns true (PySR's form).
    """
    if value is None:
        return None
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        limit = float(value)
        if not (math.isfinite(limit) and limit >= 0):
            raise ConfigError(f"early_stop_condition must be a finite loss >= 0, got {value!r}")
        return lambda loss, cx, r2: loss <= limit
    if isinstance(value, str):
        return _parse_text(value)
    if callable(value):
        return lambda loss, cx, r2: bool(value(loss, cx))
    raise ConfigError(
        "early_stop_condition must be a loss threshold (a number), 'r2>=R', 'loss<=L' or a "
        f"callable (loss, complexity) -> bool, got {value!r}"
    )


_COMPARISONS: dict[str, Callable[[float, float], bool]] = {
    ">=": lambda a, b: a >= b, ">": lambda a, b: a > b,
    "<=": lambda a, b: a <= b, "<": lambda a, b: a < b,
}  # fmt: skip


def _parse_text(text: str) -> Callable[[float, int, float], bool]:
    spec = text.replace(" ", "").lower()
    for what, ops in (("r2", (">=", ">")), ("loss", ("<=", "<"))):
        for op in ops:
            if spec.startswith(what + op):
                try:
                    limit = float(spec[len(what) + len(op) :])
                except ValueError:
                    break
                if not math.isfinite(limit):
                    break
                cmp = _COMPARISONS[op]
                if what == "r2":
                    return lambda loss, cx, r2: cmp(r2, limit)
                return lambda loss, cx, r2: cmp(loss, limit)
    raise ConfigError(
        f"early_stop_condition {text!r} is not 'r2>=R', 'r2>R', 'loss<=L' or 'loss<L' "
        "with a finite number"
    )
