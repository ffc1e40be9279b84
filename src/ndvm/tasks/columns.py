"""Columns of a user's data: the CSV reader, seeded row splits and the operator check that
``Task.from_arrays`` / ``Task.from_csv`` (``ndvm.tasks.base``) build a task from.

The rows are split at random (seeded) into train / validation / test (60 / 20 / 20 by
default): candidates are calibrated on train, every selection uses validation, and the test
split is only scored. ``holdout_rows`` can move a fraction of the training rows to a
selection split that only the final choice of the reported model reads. Operators follow
PySR's convention (``binary_operators``, ``unary_operators``; its ``"^"`` and ``"neg"`` are
``pow`` and ``-``) and must be numeric primitives of the language with that arity.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ndvm.errors import NdvmError
from ndvm.prims import PRIMS
from ndvm.prims.registry import Kind
from ndvm.textnum import parse_number

DEFAULT_BINARY = ("+", "-", "*", "/")
DEFAULT_UNARY = ("exp", "log", "sqrt", "sin", "cos")


PYSR_SPELLINGS = {"^": "pow", "neg": "-"}  # PySR's operator names that are not primitives
HOLDOUT_MIN_ROWS = 30  # a selection split of fewer rows is not carved (small data: CV)
SUCCESS_R2 = 0.99  # a data task's success without a user threshold: validation R² >= this


def threshold_success(
    metrics: Mapping[str, float], r2: float | None = None, rmse: float | None = None
) -> bool:
    """Validation R² at least ``r2`` and validation RMSE at most ``rmse`` (None: not asked)."""
    if r2 is not None and not metrics.get("validation_r2", -math.inf) >= r2:
        return False
    if rmse is None:
        return True
    mse = metrics.get("validation_mse", math.nan)
    return bool(mse >= 0 and math.sqrt(mse) <= rmse)


def success_rule(
    r2: float | None = None,
    rmse: float | None = None,
    names: tuple[str, str] = ("success_r2", "success_rmse"),
) -> Callable[[Mapping[str, float]], bool]:
    """A data task's success (picklable): the user's thresholds, or R² >= ``SUCCESS_R2``.
    ``r2`` must be a finite number <= 1 and ``rmse`` a finite number > 0 (errors name them
    as ``names``)."""
    if r2 is not None and not (isinstance(r2, int | float) and -math.inf < r2 <= 1):
        raise NdvmError(f"{names[0]} (a validation R²) must be a finite number <= 1, got {r2!r}")
    if rmse is not None and not (isinstance(rmse, int | float) and 0 < rmse < math.inf):
        raise NdvmError(f"{names[1]} (a validation RMSE) must be a finite number > 0, "
                        f"got {rmse!r}")  # fmt: skip
    if r2 is None and rmse is None:
        r2 = SUCCESS_R2
    return partial(threshold_success, r2=r2, rmse=rmse)


def operator_names(names: Sequence[str]) -> tuple[str, ...]:
    """``names`` with PySR's spellings (``"^"``, ``"neg"``) as the language's primitives."""
    if isinstance(names, str) or not isinstance(names, Iterable):
        raise NdvmError(f"operators must be a list of names, got {names!r}")
    out = tuple(names)
    bad = [n for n in out if not isinstance(n, str)]
    if bad:
        raise NdvmError(f"operators must be names (strings), got {bad[0]!r}")
    return tuple(PYSR_SPELLINGS.get(n, n) for n in out)


def check_operators(
    binary: Sequence[str], unary: Sequence[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The operators as primitive names (``operator_names``), each checked to be a numeric
    primitive (or prelude procedure) taking that many args."""
    binary, unary = operator_names(binary), operator_names(unary)
    for names, arity in ((binary, 2), (unary, 1)):
        for name in names:
            prim = PRIMS.get(name)
            if prim is None or prim.kind not in (Kind.NUMERIC, Kind.PRELUDE):
                raise NdvmError(f"unknown operator {name!r}: not a numeric primitive")
            if not prim.arity.accepts(arity):
                raise NdvmError(
                    f"operator {name!r} takes {prim.arity.describe()} argument(s), not {arity}"
                )
    return binary, unary


def split_rows(n: int, fractions: Sequence[float], seed: int) -> tuple[np.ndarray, ...]:
    """Seeded train / validation / test row indices (each sorted, none empty)."""
    if len(fractions) != 3 or any(f < 0 for f in fractions) or not 0.99 < sum(fractions) < 1.01:
        raise NdvmError(f"split must be three fractions summing to 1, got {tuple(fractions)}")
    if n < 6:
        raise NdvmError(f"need at least 6 rows to split into train/validation/test, got {n}")
    perm = np.random.default_rng(seed).permutation(n)
    n_va = max(1, int(round(fractions[1] * n)))
    n_te = max(1, int(round(fractions[2] * n)))
    n_tr = n - n_va - n_te
    if n_tr < 2:
        raise NdvmError(f"split {tuple(fractions)} leaves {n_tr} training rows of {n}")
    parts = (perm[:n_tr], perm[n_tr : n_tr + n_va], perm[n_tr + n_va :])
    return tuple(np.sort(p) for p in parts)


def holdout_rows(
    train: np.ndarray, fraction: float, n: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(train, selection)``: a seeded ``fraction`` of all ``n`` rows moved out of the train
    rows into a selection split that the search never reads (only the final choice of the
    reported model does). None moved when that would be fewer than ``HOLDOUT_MIN_ROWS`` rows
    (small data: cross-validation chooses instead) or leave under 2 training rows."""
    if not (isinstance(fraction, int | float) and 0 <= fraction < 1):
        raise NdvmError(f"holdout must be a fraction in [0, 1), got {fraction!r}")
    k = int(round(fraction * n))
    if k < HOLDOUT_MIN_ROWS or len(train) - k < 2:
        return train, np.zeros(0, dtype=np.int64)
    perm = np.random.default_rng([seed, 1]).permutation(len(train))
    return np.sort(train[perm[k:]]), np.sort(train[perm[:k]])


def read_csv(path: str | Path, columns: Sequence[str]) -> dict[str, np.ndarray]:
    """Named float columns of a CSV file with a header row (delimiter sniffed: , ; tab).

    Cells are read by ``ndvm.textnum.parse_number`` (what NumPy/pandas read as a number: no
    ``1_0``, no non-ASCII digits). A header naming a column twice is refused. Errors name
    the file, the column and the 1-based line of a missing, non-numeric or non-finite cell."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise NdvmError(f"{p}: error: cannot read data file ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise NdvmError(f"{p}: error: not a UTF-8 text file ({exc.reason})") from None
    if "\x00" in text:
        raise NdvmError(f"{p}: error: not a CSV file (NUL byte)")
    lines = text.splitlines()
    if not lines or not lines[0].strip():
        raise NdvmError(f"{p}: error: empty CSV file (expected a header row)")
    try:
        dialect: Any = csv.Sniffer().sniff(lines[0], delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    rows = list(csv.reader(lines, dialect))
    header = [h.strip() for h in rows[0]]
    twice = sorted({h for h in header if header.count(h) > 1})
    if twice:
        raise NdvmError(f"{p}:1: error: the header names column(s) {', '.join(map(repr, twice))}"
                        " more than once")  # fmt: skip
    body = [(i + 2, r) for i, r in enumerate(rows[1:]) if any(c.strip() for c in r)]
    if not body:
        raise NdvmError(f"{p}: error: no data rows after the header")
    out = {}
    for col in columns:
        if col not in header:
            raise NdvmError(f"{p}: error: no column {col!r} (columns: {', '.join(header)})")
        j = header.index(col)
        vals = np.empty(len(body))
        for k, (line, r) in enumerate(body):
            cell = r[j].strip() if j < len(r) else ""
            try:
                vals[k] = parse_number(cell)
            except ValueError:
                what = "missing" if not cell else f"not a number ({cell[:20]!r})"
                raise NdvmError(f"{p}:{line}: error: column {col!r}: {what}") from None
            if not np.isfinite(vals[k]):
                raise NdvmError(f"{p}:{line}: error: column {col!r}: non-finite value {cell!r}")
        out[col] = vals
    return out
