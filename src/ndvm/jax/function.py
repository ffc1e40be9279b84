"""A compiled program as a ``jax.custom_vjp`` op that works under ``jax.jit`` and ``jax.grad``.

Forward and VJP are host callbacks (``jax.pure_callback``) into ``Program.eval`` and
``Program.value_and_grad``. The output shape for a theta shape is probed once (one B=1 run) and
cached. Values are float64 when ``jax_enable_x64`` is on, else float32 (computed in float64).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ndvm.api import Program, merge_inputs


def _host(inputs: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in inputs.items():
        out[k] = np.asarray(v, dtype=np.float64) if isinstance(v, jax.Array) else v
    return out


def op(
    program: Program, inputs: Mapping[str, Any] | None = None, /, **named: Any
) -> Callable[[Any], Any]:
    """``f(theta)`` with theta ``[B, P]`` or ``[P]`` (unconstrained) -> values like ``eval``.
    Inputs by name as a mapping, keywords, or both."""
    host = _host(merge_inputs(inputs, named))
    probe = np.asarray(program.eval(program.init_theta()[None], host))
    trailing = probe.shape[1:]

    def out_struct(theta_shape: tuple[int, ...], dtype: Any) -> jax.ShapeDtypeStruct:
        lead = theta_shape[:-1]
        return jax.ShapeDtypeStruct(lead + trailing, dtype)

    def fwd_host(theta: np.ndarray) -> np.ndarray:
        th = np.asarray(theta, dtype=np.float64)
        return np.asarray(program.eval(th, host), dtype=theta.dtype)

    def vjp_host(theta: np.ndarray, ct: np.ndarray) -> np.ndarray:
        th = np.asarray(theta, dtype=np.float64)
        _, g = program.value_and_grad(th, np.asarray(ct, dtype=np.float64), host)
        return np.asarray(g, dtype=theta.dtype)

    @jax.custom_vjp
    def f(theta: Any) -> Any:
        theta = jnp.asarray(theta)
        return jax.pure_callback(
            fwd_host, out_struct(theta.shape, theta.dtype), theta, vmap_method="sequential"
        )

    def f_fwd(theta: Any) -> tuple[Any, Any]:
        return f(theta), theta

    def f_bwd(theta: Any, ct: Any) -> tuple[Any]:
        shape = jax.ShapeDtypeStruct(theta.shape, theta.dtype)
        return (jax.pure_callback(vjp_host, shape, theta, ct, vmap_method="sequential"),)

    f.defvjp(f_fwd, f_bwd)
    return f
