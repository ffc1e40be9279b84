"""A program, its parameters and inputs as traced values, and one trace of its body."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ndvm.api import Program
from ndvm.backends.inputs import Const
from ndvm.errors import ExportUnsupported, NdvmError
from ndvm.export.tracer import MAX_OPS, MAX_STEPS, Tracer
from ndvm.export.values import Arr, Bool
from ndvm.lang.ir import CompiledProgram
from ndvm.prims.constraints import constraint


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


def start_theta(program: Program, values: Any = None) -> np.ndarray:
    """The theta ``[P]`` an export starts from: the declared initial values (``None``), the
    fitted theta of a ``Calibration`` (its best start), or a mapping of parameter values by
    name in the space the program sees (``Calibration.params``, a search record's params;
    unconstrained here). A missing or unknown name, or a value outside its constraint, is an
    ``NdvmError``."""
    if values is None:
        return np.array(program.init_theta(), dtype=np.float64)
    names = program.params
    if hasattr(values, "theta") and hasattr(values, "names") and not isinstance(values, Mapping):
        got = tuple(values.names)[: len(names)]
        if got != names:
            raise NdvmError(f"the calibration's parameters {got} are not the program's {names}")
        return np.array(np.asarray(values.theta, dtype=np.float64)[: len(names)])
    if not isinstance(values, Mapping):
        raise NdvmError(f"values must be a mapping of parameter values or a Calibration, "
                        f"got {type(values).__name__}")  # fmt: skip
    missing = [n for n in names if n not in values]
    unknown = [n for n in values if n not in names]
    if missing or unknown:
        raise NdvmError(f"values: missing parameters {missing}, unknown {unknown}")
    try:
        return np.array(program.unconstrain([float(values[n]) for n in names]), dtype=np.float64)
    except ValueError as exc:
        raise NdvmError(f"values: {exc}") from None


def bind_params(ns: Any, compiled: CompiledProgram, theta: list[Any]) -> list[Any]:
    """Parameter values the program sees: each theta through its constraint."""
    out: list[Any] = []
    for spec, t in zip(compiled.params, theta):
        transform = constraint(spec.constraint).forward_in(ns)
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
    max_nodes: int | None = None,
) -> Arr:
    """The program's numeric result: a framework payload ``(*batch, *struct)`` and its struct."""
    tracer = Tracer(ns, params, inputs, max_steps=max_steps, max_ops=max_ops, deadline=deadline,
                    max_nodes=max_nodes)  # fmt: skip
    out = tracer.run(compiled.body)
    if type(out) is Arr:
        return Arr(out.val if ns.traced(out.val) else ns.asarray(out.val), out.struct)
    if type(out) is float:
        return Arr(ns.asarray(out), ())
    if type(out) is Bool:
        raise ExportUnsupported("the result is a boolean per lane, not a number")
    raise ExportUnsupported(f"the result is not a number (got {type(out).__name__})")
