"""ndvm.export: a program as a PyTorch module, a JAX function or a sympy expression.

- ``to_torch(program)``: a ``torch.nn.Module`` whose named ``nn.Parameter``s are the program's
  parameters (unconstrained theta, as ``Program.value_and_grad`` uses; constraints are applied
  in ``forward``); ``forward(**inputs)`` evaluates over batches of inputs.
- ``to_jax(program)``: ``(fn, params)``, a pure function ``fn(params, **inputs)`` and the
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

from ndvm.api import Program
from ndvm.backends.inputs import Const
from ndvm.baselines.kernels import constraint_transform
from ndvm.errors import ExportUnsupported, NdvmError
from ndvm.export.tracer import MAX_OPS, MAX_STEPS, Arr, Bool, Tracer
from ndvm.lang.ir import CompiledProgram


def program_of(program: Any, inputs: tuple[str, ...] = ()) -> Program:
    """A ``Program`` from a ``Program``, a ``CompiledProgram`` or source text."""
    if isinstance(program, Program):
        if program.dialect is not None:
            raise ExportUnsupported(f"the {program.dialect} dialect is not supported by export")
        return program
    if isinstance(program, CompiledProgram):
        return Program(program, "reference")
    if isinstance(program, str):
        from ndvm.api import compile as ndvm_compile

        return ndvm_compile(program, inputs=inputs, backend="reference")
    raise NdvmError(f"expected a Program, CompiledProgram or source text, got {type(program)}")


def bind_params(ns: Any, compiled: CompiledProgram, theta: list[Any]) -> list[Any]:
    """Parameter values the program sees: each theta through its constraint."""
    out: list[Any] = []
    for spec, t in zip(compiled.params, theta):
        transform = constraint_transform(ns, spec.constraint)
        out.append(Arr(transform(t) if transform else t, ()))
    return out


def bind_inputs(ns: Any, compiled: CompiledProgram, given: Mapping[str, Any]) -> list[Any]:
    """Inputs as traced values: arrays are batches of scalars, ``ndvm.const`` ones are shared."""
    missing = [n for n in compiled.inputs if n not in given]
    extra = [n for n in given if n not in compiled.inputs]
    if missing or extra:
        raise NdvmError(f"inputs: missing {missing}, unknown {extra}")
    out: list[Any] = []
    for name in compiled.inputs:
        value = given[name]
        if isinstance(value, Const):
            arr = value.array
            out.append(float(arr) if arr.ndim == 0 else Arr(ns.asarray(arr), tuple(arr.shape)))
        else:
            out.append(Arr(value if ns.traced(value) else ns.asarray(value), ()))
    return out


def trace(
    ns: Any,
    compiled: CompiledProgram,
    params: list[Any],
    inputs: list[Any],
    *,
    max_steps: int = MAX_STEPS,
    max_ops: int = MAX_OPS,
    deadline: float | None = None,
) -> Arr:
    """The program's numeric result: a framework payload ``(*batch, *struct)`` and its struct."""
    tracer = Tracer(ns, params, inputs, max_steps=max_steps, max_ops=max_ops, deadline=deadline)
    out = tracer.run(compiled.body)
    if type(out) is Arr:
        return Arr(out.val if ns.traced(out.val) else ns.asarray(out.val), out.struct)
    if type(out) is float:
        return Arr(ns.asarray(out), ())
    if type(out) is Bool:
        raise ExportUnsupported("the result is a boolean per lane, not a number")
    raise ExportUnsupported(f"the result is not a number (got {type(out).__name__})")


def to_torch(program: Any, *, inputs: Mapping[str, Any] | None = None) -> Any:
    """A ``torch.nn.Module`` computing ``program``; see the module docstring.

    ``inputs`` (example inputs) checks the translation now; without them, a program that has
    inputs is checked on its first ``forward``.
    """
    from ndvm.export.namespaces import require

    require("torch")
    from ndvm.export.torch_module import ExportedModule

    module = ExportedModule(program_of(program, tuple(inputs or ())))
    if inputs is not None or not module.program.inputs:
        module(**dict(inputs or {}))
    return module


def to_jax(program: Any, *, inputs: Mapping[str, Any] | None = None) -> tuple[Any, Any]:
    """``(fn, params)``: ``fn(params, **inputs)`` is pure; ``params`` maps names to theta."""
    from ndvm.export.jax_function import export_jax

    return export_jax(program_of(program, tuple(inputs or ())), inputs)


def to_sympy(
    program: Any,
    values: Mapping[str, float] | None = None,
    *,
    inputs: tuple[str, ...] = (),
    max_ops: int = 2_000,
    deadline: float = 5.0,
) -> Any:
    """An exact sympy expression for a closed-form scalar program.

    Parameters are real symbols in the space the program sees (after constraints), or the
    exact numbers given in ``values``; inputs are real symbols. Work is bounded by
    ``max_ops`` operations and ``deadline`` seconds (then ``ExportUnsupported``).
    """
    from ndvm.export.sympy_expr import export_sympy

    return export_sympy(program_of(program, inputs), values, max_ops, deadline)


__all__ = ["ExportUnsupported", "bind_inputs", "bind_params", "program_of", "to_jax",
           "to_sympy", "to_torch", "trace"]  # fmt: skip
