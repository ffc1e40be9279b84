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
        arr = real_array(array, lambda why: NdvmError(f"const: {why}"))
        if arr.ndim not in (0, 1, 2):
            raise NdvmError(f"const: expected a scalar, vector or matrix, got shape {arr.shape}")
        self.array = arr

    def __repr__(self) -> str:
        return f"ndvm.const(shape={self.array.shape})"


def const(array: Any) -> Const:
    """Declare ``array`` a constant vector/matrix input (shared by every lane)."""
    return Const(array)


def is_complex(x: Any) -> bool:
    """``x`` is an array (or pandas object) of complex numbers, which NumPy would cast to float
    by dropping the imaginary part (a list of complex numbers fails the cast by itself)."""
    dtype = getattr(x, "dtype", None)
    return getattr(dtype, "kind", None) == "c"


# float64, the dtype every input and theta is read as (compared by identity on hot paths:
# NumPy keeps one instance of each native built-in dtype)
F64 = np.dtype(np.float64)


def real_array(value: Any, fail: Any) -> np.ndarray:
    """``value`` as a float64 array, or ``fail(reason)`` raised: ``None`` (alone or as an
    element, which NumPy would read as NaN), complex numbers (it would drop the imaginary
    part) and anything not numeric are refused."""
    if type(value) is np.ndarray and value.dtype is F64:
        return value  # what the checks below return for it, without them
    if value is None:
        raise fail("is None, not a number")
    if is_complex(value) or isinstance(value, complex):
        raise fail("has complex values (ndvm computes with real numbers)")
    try:
        raw = np.asarray(value)
        if raw.dtype.kind == "c":
            raise fail("has complex values (ndvm computes with real numbers)")
        if raw.dtype.kind in "USM" or (raw.dtype == object and any(
                isinstance(v, str | bytes) for v in raw.ravel())):  # fmt: skip
            raise fail("not numeric (text or dates; NumPy would parse text like '1_0' as 10)")
        if raw.dtype == object and any(v is None for v in raw.ravel()):
            raise fail("holds None, not a number")
        if raw.dtype == object and any(isinstance(v, complex) for v in raw.ravel()):
            raise fail("has complex values (ndvm computes with real numbers)")
        return np.asarray(raw, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise fail(f"not numeric ({_reason(exc)})") from None


def _is_pandas(x: Any, kind: str) -> bool:
    """``x`` is a pandas ``kind`` ("DataFrame" or "Series"), without importing pandas."""
    return type(x).__name__ == kind and type(x).__module__.split(".")[0] == "pandas"


def _column(series: Any, what: str) -> np.ndarray:
    """A pandas column as float64: numbers (and booleans, as NumPy reads them) only. Dates,
    durations, categories and text are refused rather than converted (a date would become
    nanoseconds, a category its codes or labels, a string ``"1_0"`` 10)."""
    dtype = series.dtype
    kind = getattr(dtype, "kind", None)
    if str(dtype) == "category" or kind in ("M", "m", "U", "S") or str(dtype).startswith(
        ("datetime", "timedelta", "period", "interval", "string")
    ):
        raise NdvmError(f"{what}: a {dtype} column, not numbers (convert it explicitly)")
    if kind == "O":
        bad = next((v for v in series if not isinstance(v, int | float | np.number)), None)
        if bad is not None:
            raise NdvmError(f"{what}: not numeric (holds {type(bad).__name__} values)")
    if is_complex(series):
        raise NdvmError(f"{what}: has complex values (ndvm computes with real numbers)")
    try:
        return np.asarray(series.to_numpy(dtype=np.float64))
    except (TypeError, ValueError) as exc:
        raise NdvmError(f"{what}: not numeric ({_reason(exc)})") from None


def _columns(frame: Any, what: str, only: tuple[str, ...] | None = None) -> dict[str, np.ndarray]:
    """The frame's columns (those in ``only`` when given: a column the program does not use
    is never converted, so it may hold anything)."""
    names = list(frame.columns)
    bad = [c for c in names if not isinstance(c, str)]
    if bad:
        raise NdvmError(f"{what}: DataFrame columns must be named by strings, got {bad[0]!r}")
    twice = sorted({c for c in names if names.count(c) > 1})
    if twice:
        raise NdvmError(f"{what}: the DataFrame names column(s) {twice} more than once")
    if only is not None:
        missing = [n for n in only if n not in names]
        if missing:
            raise NdvmError(
                f"{what}: the DataFrame has no column {missing[0]!r} (an input of the program); "
                f"its columns: {', '.join(names) or 'none'}"
            )
        names = list(only)
    return {c: _column(frame[c], f"{what} column {c!r}") for c in names}


def as_inputs(
    inputs: Any, names: tuple[str, ...] | None = None, what: str = "inputs"
) -> dict[str, Any]:
    """Inputs by name as a dict: a mapping (pandas Series values become arrays), a pandas
    DataFrame (one data input per column, named by the column; with ``names``, the program's
    inputs, only those columns, the others not even converted), or None (no inputs)."""
    if inputs is None:
        return {}
    if type(inputs) is Prepared:  # checked once already: kept as is (a backend reads it)
        return inputs  # type: ignore[return-value]
    if _is_pandas(inputs, "DataFrame"):
        if names is None:
            return _columns(inputs, what)
        have = [c for c in inputs.columns if isinstance(c, str)]
        missing = [n for n in names if n not in have]
        if missing and len(have) < len(inputs.columns):  # unnamed columns: say so
            _columns(inputs, what)
        if missing:
            raise NdvmError(
                f"{what}: the DataFrame has no column {missing[0]!r} (an input of the program); "
                f"its columns: {', '.join(map(str, inputs.columns)) or 'none'}"
            )
        # only the program's columns are converted: the others are ignored, whatever their dtype
        return {n: _column(inputs[n], f"{what} column {n!r}") for n in names}
    if not isinstance(inputs, Mapping):
        raise NdvmError(
            f"{what} must be a mapping of names to values or a pandas DataFrame, "
            f"got {type(inputs).__name__}"
        )
    return {k: _column(v, f"input {k!r}") if _is_pandas(v, "Series") else v
            for k, v in inputs.items()}  # fmt: skip


def as_array(value: Any, what: str = "target") -> Any:
    """``value`` with a pandas Series (or one-column DataFrame) as a float array; anything
    else unchanged."""
    if _is_pandas(value, "Series"):
        return _column(value, what)
    if _is_pandas(value, "DataFrame"):
        cols = _columns(value, what)
        if len(cols) != 1:
            raise NdvmError(f"{what}: a DataFrame needs exactly one column, got {list(cols)}")
        return next(iter(cols.values()))
    return value


def as_table(value: Any, what: str = "X") -> tuple[Any, list[str] | None]:
    """``(array, column names)`` of a pandas DataFrame (``[N, d]``) or a named Series
    (``[N]``, its name); anything else is returned with no names."""
    if _is_pandas(value, "DataFrame"):
        cols = _columns(value, what)
        rows = np.column_stack(list(cols.values())) if cols else np.zeros((len(value), 0))
        return rows, list(cols)
    if _is_pandas(value, "Series"):
        name = value.name
        return _column(value, what), [name] if isinstance(name, str) else None
    return value, None


def _reason(exc: Exception) -> str:
    text = str(exc)
    return "ragged nesting" if "inhomogeneous" in text or "sequence" in text else text


class _Refused(Exception):
    """Why ``real_array`` refused an input (``classify_inputs`` names the input)."""


def _input_error(
    names: tuple[str, ...], positions: tuple[tuple[int, int], ...], name: str, message: str
) -> NdvmError:
    """The error of input ``name``, at its first use in the source (``positions``)."""
    line, column = dict(zip(names, positions)).get(name, (0, 0))
    return NdvmError(f"input {name!r}: {message}", line or None, column if line else None)


def classify_inputs(
    names: tuple[str, ...],
    given: Mapping[str, Any],
    positions: tuple[tuple[int, int], ...] = (),
) -> tuple[list[tuple[str, np.ndarray]], int | None]:
    """Check input names and find the data-lane count N (None if no data lanes).

    Returns ``(kind, array)`` per declared input, kind one of scalar / data / const. A bad
    input's error carries the position of its first use in the source (``positions``).
    """
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
            arr = real_array(value, _Refused)
        except _Refused as why:
            raise _input_error(names, positions, name, str(why)) from None
        ndim = arr.ndim
        if ndim == 0:
            out.append(("scalar", arr))
        elif ndim == 1:
            if n_data is not None and arr.shape[0] != n_data:
                why = f"has {arr.shape[0]} data lanes, others have {n_data}"
                raise _input_error(names, positions, name, why)
            n_data = arr.shape[0]
            if n_data == 0:
                raise _input_error(names, positions, name, "is empty")
            out.append(("data", arr))
        elif ndim == 2:
            out.append(("const", arr))
        else:
            raise _input_error(names, positions, name, f"arrays of rank {ndim} are not supported")
    return out, n_data


class Prepared(Mapping[str, Any]):
    """Inputs checked and laid out once (``classify_inputs``) for programs whose declared
    inputs are ``names``: a read-only mapping of the given values, which a backend may run
    without checking them again (the native backend takes the layout as it is; any other
    backend, or a program with other inputs, reads it as the mapping it is). For inputs
    evaluated many times and never changed (a task's held-out data); raises as
    ``classify_inputs`` does for inputs that do not fit ``names``."""

    __slots__ = ("_values", "names", "kinds", "n_data", "memo")

    def __init__(self, names: tuple[str, ...], values: Mapping[str, Any]) -> None:
        self._values = dict(values)
        self.names = tuple(names)
        kinds, self.n_data = classify_inputs(self.names, self._values)
        self.kinds = [(k, np.ascontiguousarray(a)) for k, a in kinds]
        self.memo: dict[str, Any] = {}  # what a backend derives from the layout, by backend

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Any:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


def prepared(memo: dict[tuple[str, ...], Any], names: tuple[str, ...],
             values: Mapping[str, Any]) -> Mapping[str, Any]:  # fmt: skip
    """``Prepared(names, values)``, kept in ``memo`` by ``names``; ``values`` itself when they
    do not fit ``names`` (an evaluation on them then raises what it raises)."""
    got = memo.get(names)
    if got is None:
        try:
            got = Prepared(names, values)
        except NdvmError:
            got = values
        memo[names] = got
    return got  # type: ignore[no-any-return]
