"""``SymbolicRegressor.pytorch()`` / ``.jax()``: a fitted program callable as PySR's exports.

Both take the data as PySR's do — ``X`` ``[N, d]`` with the columns in the estimator's
feature order (``feature_names_in_``), or a DataFrame whose columns are taken by name — and
return ``[N]`` values; the older mapping form (``module(**{name: column})``,
``fn(params, **{name: column})``) still works. The program is compiled with only the inputs
its equation uses, so a mapping or DataFrame needs only those columns and a constant
program broadcasts to the rows of ``X``. torch and JAX are imported when an export is made.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ndvm.errors import NdvmError
from ndvm.lang.datum import symbols_in
from ndvm.lang.reader import read


def used_inputs(src: str, names: Sequence[str]) -> tuple[str, ...]:
    """The estimator's inputs that ``src`` mentions, in feature order."""
    used = symbols_in(read(src))
    return tuple(n for n in names if n in used)


def compile_used(src: str, values: Mapping[str, float], names: Sequence[str]) -> Any:
    """``src`` compiled (reference backend) with its fitted parameters and used inputs."""
    from ndvm.api import compile as ndvm_compile

    return ndvm_compile(src, list(values), used_inputs(src, names), backend="reference")


def columns_of(
    X: Any, names: Sequence[str], used: Sequence[str], to_array: Any
) -> tuple[dict[str, Any], int | None]:
    """``({name: column}, rows)`` of the used inputs from ``X``: a mapping (by name; other
    names are ignored), a DataFrame (by column name) or an ``[N, d]`` array or tensor in
    feature order (``to_array`` makes each column the framework's array). ``rows`` is None for
    a mapping (its columns give the shape)."""
    if isinstance(X, Mapping):
        return pick(X, names, used), None
    if hasattr(X, "columns"):
        have = [str(c) for c in X.columns]
        missing = [n for n in used if n not in have]
        if missing:
            raise NdvmError(f"X has no column(s) {missing} (the equation uses {list(used)})")
        return {n: to_array(X[n].to_numpy(dtype=float, copy=True)) for n in used}, len(X)
    shape = tuple(getattr(X, "shape", ()))
    if len(shape) == 1 and len(names) == 1:
        return ({names[0]: to_array(X)} if used else {}), shape[0]
    if len(shape) != 2 or shape[1] != len(names):
        raise NdvmError(
            f"X must be [N, {len(names)}] (columns {list(names)}) or a mapping of names, "
            f"got shape {shape}"
        )
    return {n: to_array(X[:, names.index(n)]) for n in used}, shape[0]


def pick(given: Mapping[str, Any], names: Sequence[str], used: Sequence[str]) -> dict[str, Any]:
    """The used inputs of a mapping of feature names (an unknown name is an error)."""
    unknown = [n for n in given if n not in names]
    missing = [n for n in used if n not in given]
    if unknown or missing:
        raise NdvmError(f"inputs: missing {missing}, unknown {unknown} (features "
                        f"{list(names)}; the equation uses {list(used)})")  # fmt: skip
    return {n: given[n] for n in used}


def torch_module(src: str, values: Mapping[str, float], names: Sequence[str]) -> Any:
    """A ``torch.nn.Module``: ``module(X)`` (``[N, d]`` tensor or array, or a DataFrame) or
    ``module(**{name: tensor})`` / ``module({name: tensor})``; its submodule ``program`` is
    ``ndvm.export.to_torch``'s module holding the fitted values as parameters. Columns taken
    from ``X`` are computed in float64, as ``predict`` (a float32 X gives float64 values
    equal to ``predict`` on the same numbers); a mapping's tensors are used as given."""
    import torch

    from ndvm.export import to_torch

    prog = compile_used(src, values, names)
    inner = to_torch(prog, values=dict(values))

    def _float64(column: Any) -> Any:  # ndvm computes in float64: so does the module
        return torch.as_tensor(column, dtype=torch.float64)

    class FittedModule(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.program = inner
            self.feature_names = tuple(names)
            self.used_inputs = prog.inputs

        def forward(self, X: Any = None, /, **named: Any) -> Any:
            data = named if X is None else X
            cols, rows = columns_of(data, self.feature_names, self.used_inputs, _float64)
            out = self.program(**cols)
            return out if rows is None else out.expand(rows) if out.ndim == 0 else out

    return FittedModule()


class JaxExport(tuple):
    """``(fn, params)``, also read as PySR's ``{"callable": fn, "parameters": params}``."""

    def __getitem__(self, key: Any) -> Any:
        if key == "callable":
            return tuple.__getitem__(self, 0)
        if key == "parameters":
            return tuple.__getitem__(self, 1)
        return tuple.__getitem__(self, key)

    def keys(self) -> tuple[str, str]:
        return ("callable", "parameters")


def jax_function(src: str, values: Mapping[str, float], names: Sequence[str]) -> JaxExport:
    """``(fn, params)`` of ``ndvm.export.to_jax`` with the fitted values: ``fn(X, params)``
    (PySR's order: X ``[N, d]`` or a DataFrame) or ``fn(params, **{name: array})``.
    ``fn(X, params)`` on concrete data computes in float64 (JAX's x64 mode for the call),
    so it equals ``predict``; traced (under ``jit``/``grad``) and in the mapping form it
    follows ``jax_enable_x64`` (float32 without it)."""
    import jax
    import jax.numpy as jnp

    from ndvm.export import to_jax

    prog = compile_used(src, values, names)
    with _x64():  # the fitted values as float64 arrays (float32 would round them)
        inner, params = to_jax(prog, values=dict(values))
    feature_names, used = tuple(names), prog.inputs

    def fn(first: Any, second: Any = None, /, **named: Any) -> Any:
        if isinstance(first, Mapping) and (second is None or isinstance(second, Mapping)):
            given = dict(second or {}, **named)  # (params, inputs) or (params, **inputs)
            return inner(first, pick(given, feature_names, used))
        if second is None:
            raise NdvmError("call fn(X, params) (PySR's order) or fn(params, **inputs)")
        if isinstance(first, jax.core.Tracer):  # under jit / grad: JAX's own precision
            return on_x(first, second)
        with _x64():  # as ndvm and predict, whatever jax_enable_x64 says
            return on_x(first, second)

    def on_x(X: Any, params: Any) -> Any:
        cols, rows = columns_of(X, feature_names, used, jnp.asarray)
        out = inner(params, cols)
        return jnp.broadcast_to(out, (rows,)) if rows is not None and out.ndim == 0 else out

    return JaxExport((fn, params))


def _x64() -> Any:
    """JAX's context manager that turns on 64-bit types for its block."""
    import jax

    scope = getattr(jax, "enable_x64", None)
    if scope is None:  # JAX before the top-level name
        from jax.experimental import enable_x64 as scope
    return scope(True)
