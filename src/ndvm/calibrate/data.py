"""Data as users have them: a DataFrame's columns picked by the program, and NaN rows.

- ``frame_inputs``: a pandas DataFrame's columns that are the program's inputs — for a
  compiled program its declared inputs, for source text the columns it names — converted to
  float arrays; every other column is ignored whatever its dtype (R's Puromycin has a text
  column ``state``; for source text, a column named like a parameter its ``params``
  header declares is not an input either). A column named like a parameter of a compiled
  program without a ``params`` header (its parameters are its free names) is an error
  saying to declare it as an input: fitting it as a parameter while the data sit in the
  frame is never what was meant.
- ``apply_nan_policy``: ``"raise"`` (default) names the column and row of the first NaN in
  the target or a data input; ``"omit"`` drops the rows with a NaN in any of them (as
  scipy's and lmfit's ``nan_policy``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from ndvm.backends.inputs import as_array, as_inputs
from ndvm.errors import NdvmError

NAN_POLICIES = ("raise", "omit")
_ATOM = re.compile(r"[^\s()\[\]\"';]+")


def _is_frame(x: Any) -> bool:
    return type(x).__name__ == "DataFrame" and type(x).__module__.split(".")[0] == "pandas"


def frame_inputs(program: Any, frame: Any) -> dict[str, Any]:
    """The program's inputs from ``frame`` (a pandas DataFrame; anything else goes through
    ``as_inputs`` unchanged; no program: every column)."""
    if not _is_frame(frame) or program is None:
        return as_inputs(frame, getattr(program, "inputs", None))
    if isinstance(program, str):  # source text: the columns it names are its inputs
        used = set(_ATOM.findall(re.sub(r";[^\n]*", "", program))) - _declared(program)
        names = tuple(c for c in frame.columns if isinstance(c, str) and c in used)
        return as_inputs(frame, names)
    guessed = () if program.compiled.has_header else program.params
    clash = [c for c in frame.columns if isinstance(c, str) and c in guessed]
    if clash:
        raise NdvmError(
            f"inputs: the DataFrame has a column {clash[0]!r}, which the program takes as a "
            f"parameter (a free name): declare it as an input, e.g. ndvm.compile(source, "
            f"inputs={(*program.inputs, clash[0])!r})"
        )
    return as_inputs(frame, tuple(program.inputs))


def user_data(
    program: Any, inputs: Any, target: Any, sigma: Any, nan_policy: str
) -> tuple[dict[str, Any], Any, Any]:
    """``calibrate``'s ``(inputs, target, sigma)`` as arrays: a DataFrame's columns picked by
    ``frame_inputs``, a pandas target converted, NaN rows by ``nan_policy``."""
    inputs = frame_inputs(program, inputs)
    name = getattr(target, "name", None) if type(target).__name__ == "Series" else None
    label = f"target {name!r}" if isinstance(name, str) else "target"
    target = as_array(target)  # a pandas Series / one-column DataFrame
    return apply_nan_policy(inputs, target, sigma, nan_policy, label)


def _declared(source: str) -> set[str]:
    """The names a ``(params ...)`` header declares (a column of that name is not an input);
    none when the source does not read (the compiler reports it)."""
    from ndvm.lang.datum import SList, Sym, head_name
    from ndvm.lang.reader import read

    try:
        forms = read(source)
    except NdvmError:
        return set()
    if not forms or head_name(forms[0]) != "params":
        return set()
    out = set()
    for entry in forms[0].items[1:]:  # type: ignore[union-attr]
        first = entry.items[0] if isinstance(entry, SList) and entry.items else entry
        if isinstance(first, Sym):
            out.add(first.name)
    return out


def apply_nan_policy(
    inputs: Mapping[str, Any], target: Any, sigma: Any, policy: str, label: str = "target"
) -> tuple[dict[str, Any], Any, Any]:
    """``(inputs, target, sigma)`` with NaN handled by ``policy`` over the data rows: the
    1-D float inputs as long as a 1-D target (with a per-start ``[starts, N]`` target only
    ``"raise"``); ``label`` names the target in the error (``target 'rate'``)."""
    if policy not in NAN_POLICIES:
        raise NdvmError(f"nan_policy must be 'raise' or 'omit', got {policy!r}")
    inputs = dict(inputs)
    y = _float_array(target)
    n = y.shape[-1] if y is not None and y.ndim in (1, 2) else None
    cols = {label: y} if y is not None else {}
    for k, v in inputs.items():
        a = _float_array(v)
        if a is not None and a.ndim == 1 and (n is None or a.shape[0] == n):
            cols[f"input {k!r}"] = a
    bad = None
    for what, a in cols.items():
        if not math.isnan(a.sum()):  # no NaN (one reduction; inf - inf is checked below)
            continue
        nan = np.isnan(a)
        if nan.any():
            rows = nan if nan.ndim == 1 else nan.any(axis=0)
            bad = rows if bad is None else bad | rows
            if policy == "raise":
                row = int(np.flatnonzero(rows)[0])
                raise NdvmError(
                    f"{what} has NaN at row {row} ({int(rows.sum())} NaN row(s) in all): "
                    "remove or impute them, or pass nan_policy='omit' to drop those rows"
                )
    if bad is None:
        return inputs, target, sigma
    keep = ~bad
    if not keep.any():
        raise NdvmError("nan_policy='omit': every row has a NaN")
    for k, v in inputs.items():
        if f"input {k!r}" in cols:
            inputs[k] = np.asarray(v)[keep]
    assert y is not None
    target = y[..., keep]
    s = np.asarray(sigma) if sigma is not None else None
    if s is not None and s.ndim == 1 and s.shape[0] == keep.shape[0]:
        sigma = s[keep]
    return inputs, target, sigma


def _float_array(x: Any) -> np.ndarray | None:
    """``x`` as a float array when it is a NumPy array of floats or a list or tuple of
    numbers with a float among them (NaN only exists there); else None."""
    if isinstance(x, (list, tuple)):
        try:
            x = np.asarray(x)
        except (TypeError, ValueError):
            return None
    if isinstance(x, np.ndarray) and x.dtype.kind == "f":
        return x
    return None
