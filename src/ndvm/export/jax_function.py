"""``to_jax``: a program as a pure JAX function of a parameter pytree."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ndvm.api import Program, merge_inputs
from ndvm.export.binding import bind_inputs, bind_params, start_theta, trace
from ndvm.export.namespaces import jax_namespace


def export_jax(
    program: Program, inputs: Mapping[str, Any] | None, values: Any = None
) -> tuple[Callable[..., Any], dict[str, Any]]:
    """``(fn, params)``; ``fn(params, inputs)`` or ``fn(params, **inputs)`` traces the program
    with jax.numpy (``params`` and ``inputs`` are positional-only: any input name works).

    ``params`` maps each parameter name to its theta (unconstrained) as a float64 array: the
    declared initial values, or those of ``values`` (fitted values by name or a
    ``Calibration``, see ``binding.start_theta``); the function applies the constraints.
    Float64 needs ``jax_enable_x64`` (as ndvm computes in float64); without it JAX computes
    in float32.
    """
    ns = jax_namespace()
    compiled = program.compiled
    names = program.params

    def fn(
        params: Mapping[str, Any], inputs: Mapping[str, Any] | None = None, /, **given: Any
    ) -> Any:
        theta = [ns.asarray(params[n]) for n in names]
        bound = bind_params(ns, compiled, theta)
        data = merge_inputs(inputs, given)
        return trace(ns, compiled, bound, bind_inputs(ns, compiled, data)).val

    params = {n: ns.asarray(float(t)) for n, t in zip(names, start_theta(program, values))}
    if inputs is not None or not compiled.inputs:
        fn(params, dict(inputs or {}))  # translate once now: errors at export time
    return fn, params
