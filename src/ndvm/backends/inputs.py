"""Host inputs -> lane layout: scalars, data-lane arrays [N], constant vectors/matrices."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ndvm.errors import NdvmError


class Const:
    """Marks an array as a constant shared by all lanes (a vector or matrix), not data lanes."""

    __slots__ = ("array",)

    def __init__(self, array: Any) -> None:
        try:
            arr = np.asarray(array, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise NdvmError(f"const: not a numeric array ({_reason(exc)})") from None
        if arr.ndim not in (0, 1, 2):
            raise NdvmError(f"const: expected a scalar, vector or matrix, got shape {arr.shape}")
        self.array = arr

    def __repr__(self) -> str:
        return f"ndvm.const(shape={self.array.shape})"


def const(array: Any) -> Const:
    """Declare ``array`` a constant vector/matrix input (shared by every lane)."""
    return Const(array)


def _reason(exc: Exception) -> str:
    text = str(exc)
    return "ragged nesting" if "inhomogeneous" in text or "sequence" in text else text


def classify_inputs(
    names: tuple[str, ...],
    given: Mapping[str, Any],
    positions: tuple[tuple[int, int], ...] = (),
) -> tuple[list[tuple[str, np.ndarray]], int | None]:
    """Check input names and find the data-lane count N (None if no data lanes).

    Returns ``(kind, array)`` per declared input, kind one of scalar / data / const. A bad
    input's error carries the position of its first use in the source (``positions``).
    """

    def bad(name: str, message: str) -> NdvmError:
        line, column = dict(zip(names, positions)).get(name, (0, 0))
        return NdvmError(f"input {name!r}: {message}", line or None, column if line else None)

    if len(given) != len(names) or given.keys() != set(names):
        missing = [n for n in names if n not in given]
        if missing:
            raise NdvmError(f"missing input(s): {', '.join(missing)}")
        extra = [n for n in given if n not in names]
        if extra:
            raise NdvmError(
                f"unknown input(s): {', '.join(extra)} (declared: {', '.join(names) or 'none'})"
            )
    out: list[tuple[str, np.ndarray]] = []
    n_data: int | None = None
    for name in names:
        value = given[name]
        if isinstance(value, Const):
            arr = value.array
            out.append(("scalar" if arr.ndim == 0 else "const", arr))
            continue
        try:
            arr = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise bad(name, f"not numeric ({_reason(exc)})") from None
        ndim = arr.ndim
        if ndim == 0:
            out.append(("scalar", arr))
        elif ndim == 1:
            if n_data is not None and arr.shape[0] != n_data:
                raise bad(name, f"has {arr.shape[0]} data lanes, others have {n_data}")
            n_data = arr.shape[0]
            if n_data == 0:
                raise bad(name, "is empty")
            out.append(("data", arr))
        elif ndim == 2:
            out.append(("const", arr))
        else:
            raise bad(name, f"arrays of rank {ndim} are not supported")
    return out, n_data
