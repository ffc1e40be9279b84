"""ndvm.export: a program as a PyTorch module, a JAX function or a sympy expression.

- ``to_torch(program)``: a ``torch.nn.Module`` whose named ``nn.Parameter``s are the program's
  parameters (unconstrained theta, as ``Program.value_and_grad`` uses; constraints are applied
  in ``forward``); ``forward(inputs)`` (or keywords) evaluates over batches of inputs.
  ``values=`` (a ``Calibration`` or fitted values by name) starts the parameters there instead
  of at the declared initial values — as ``to_jax``'s parameter pytree.
- ``to_jax(program)``: ``(fn, params)``, a pure function ``fn(params, inputs)`` and the
  parameter pytree (a dict of theta scalars), usable under ``jit``, ``vmap`` and ``grad``.
- ``to_sympy(program)``: an exact expression for a closed-form scalar program (constants keep
  every digit; parameters are symbols, or numbers given in ``values``).

One translator (``tracer.py``) serves all three and the staged-JAX baseline. The subset:
straight-line code, lists, closures and higher-order procedures, loops and recursion whose
trip counts are known at trace time (they unroll), vectors and matrices (torch and JAX), and
branches whose test depends on parameters or inputs as element-wise selects (both arms must
produce the same structure). Anything else — a loop whose trip count depends on a parameter,
arms of different structure, lane errors, non-numeric results — raises ``ExportUnsupported``
naming the form and its line and column. Inputs: an array is a batch of scalar inputs (any
shape: the batch axes lead the result), an ``ndvm.const`` array is a vector or matrix shared by
the batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ndvm.errors import ExportUnsupported
from ndvm.export.binding import bind_inputs, bind_params, program_of, trace


def to_torch(program: Any, *, inputs: Mapping[str, Any] | None = None, values: Any = None) -> Any:
    """A ``torch.nn.Module`` computing ``program``; see the module docstring.

    ``inputs`` (example inputs) checks the translation now; without them, a program that has
    inputs is checked on its first ``forward``. ``values``: the parameters' starting values —
    a ``Calibration`` (its fitted theta) or a mapping name -> value as the program sees it
    (``Calibration.params``); default: the declared initial values.
    """
    from ndvm.export.namespaces import require

    require("torch")
    from ndvm.export.torch_module import ExportedModule

    module = ExportedModule(program_of(program, tuple(inputs or ())), values)
    if inputs is not None or not module.program.inputs:
        module(dict(inputs or {}))
    return module


def to_jax(
    program: Any, *, inputs: Mapping[str, Any] | None = None, values: Any = None
) -> tuple[Any, Any]:
    """``(fn, params)``: ``fn(params, **inputs)`` is pure; ``params`` maps names to theta
    (of ``values`` when given, as for ``to_torch``)."""
    from ndvm.export.jax_function import export_jax

    return export_jax(program_of(program, tuple(inputs or ())), inputs, values)


def to_sympy(
    program: Any,
    values: Mapping[str, float] | None = None,
    *,
    inputs: tuple[str, ...] = (),
    max_ops: int = 2_000,
    deadline: float = 5.0,
    max_nodes: int = 1_000_000,
) -> Any:
    """An exact sympy expression for a closed-form scalar program.

    Parameters are real symbols in the space the program sees (after constraints), or the
    exact numbers given in ``values``; inputs are real symbols. Work is bounded by
    ``max_ops`` operations, ``deadline`` seconds (checked inside sympy's calls too, where a
    ``SIGALRM`` timer can be set: the main thread on POSIX) and ``max_nodes`` nodes of any
    expression built, counted as a tree (a shared subexpression once per use); past any of
    them, ``ExportUnsupported``.
    """
    from ndvm.export.sympy_expr import export_sympy

    return export_sympy(program_of(program, inputs), values, max_ops, deadline, max_nodes)


__all__ = ["ExportUnsupported", "bind_inputs", "bind_params", "program_of", "to_jax",
           "to_sympy", "to_torch", "trace"]  # fmt: skip
