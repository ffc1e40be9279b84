"""Staged JAX baseline: a program's IR translated by ``ndvm.export`` into one ``jax.jit`` function.

The translation (``ndvm.export.tracer``) is partial evaluation at trace time: structure (lists,
closures, loop counters, shapes) is evaluated in Python; only numbers that depend on parameters
or data become traced JAX arrays, loops unroll, and a branch whose test depends on a parameter
or data value becomes an element-wise select of both arms. A program outside that subset raises
``ExportUnsupported``. Compile (trace + XLA) and steady-state calls are timed separately. JAX
runs with float64 inside ``jax.enable_x64``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ndvm.backends.base import STATUS_NONFINITE, RunResult
from ndvm.backends.inputs import classify_inputs
from ndvm.baselines.kernels import numeric_impls
from ndvm.errors import ExportUnsupported, NdvmError
from ndvm.export import trace
from ndvm.export.namespaces import jax_namespace
from ndvm.export.values import Arr
from ndvm.lang.ir import CompiledProgram

JAX_IMPLS = numeric_impls(jax_namespace())
# Unrolling bounds: beyond them XLA compile time and memory explode (a 1000-op chain at B=2
# made XLA 0.10 CPU allocate > 20 GB); kalman80 stages about 1,300 numeric operations.
MAX_STEPS = 100_000
MAX_OPS = 1_500


def _build(
    program: CompiledProgram, kinds: list[tuple[str, np.ndarray]], B: int, Ng: int
) -> Callable[..., Any]:
    """The traceable function ``(theta [B, P], arrays) -> value [B, Ng, *struct]``."""
    from ndvm.export import bind_params

    ns = jax_namespace()

    def fn(theta: Any, arrays: tuple[Any, ...]) -> Any:
        params = bind_params(ns, program, [theta[:, i][:, None] for i in range(theta.shape[1])])
        inputs: list[Any] = []
        it = iter(arrays)
        for kind, arr in kinds:
            if kind == "scalar":
                inputs.append(float(arr))
            elif kind == "data":
                inputs.append(Arr(next(it)[None, :], ()))
            else:
                inputs.append(Arr(next(it)[None, None], tuple(arr.shape)))
        out = trace(ns, program, params, inputs, max_steps=MAX_STEPS, max_ops=MAX_OPS)
        return jnp.broadcast_to(out.val, (B, Ng, *out.struct))

    return fn


class StagedProgram:
    """One candidate staged and compiled for a fixed lane count and input shapes.

    ``trace_seconds`` (Python translation) and ``compile_seconds`` (trace + XLA compile, the
    whole one-time cost) are measured when it is built; calling it is the steady state.
    """

    def __init__(
        self, program: CompiledProgram, B: int, inputs: Mapping[str, Any], *, grad: bool = True
    ) -> None:
        kinds, n_data = classify_inputs(program.inputs, inputs)
        self.B, self.Ng, self.grad = B, n_data or 1, grad
        self.data_lanes = n_data is not None
        fn = _build(program, kinds, self.B, self.Ng)
        P = len(program.params)

        def value_and_grad(theta: Any, arrays: tuple[Any, ...], ct: Any) -> Any:
            if not grad:
                return fn(theta, arrays), None

            def loss(th: Any) -> Any:
                val = fn(th, arrays)
                c = ct.reshape(ct.shape + (1,) * (val.ndim - ct.ndim))
                return jnp.sum(val * c), val

            (_, val), g = jax.value_and_grad(loss, has_aux=True)(theta)
            return val, g

        with jax.enable_x64(True):
            self.arrays = tuple(jnp.asarray(a) for k, a in kinds if k != "scalar")
            t0 = time.perf_counter()
            try:
                lowered = jax.jit(value_and_grad).lower(
                    jnp.zeros((B, P)), self.arrays, jnp.ones((B, self.Ng))
                )
            except RecursionError:
                raise ExportUnsupported("recursion too deep to unroll at trace time") from None
            t1 = time.perf_counter()
            self._compiled = lowered.compile()
            t2 = time.perf_counter()
        self._ones = np.ones((B, self.Ng))  # host arrays: no extra device op per call
        self.trace_seconds = t1 - t0
        self.compile_seconds = t2 - t0

    def __call__(self, theta: Any, cotangent: Any = None) -> tuple[np.ndarray, Any]:
        """Values ``[B, Ng, *struct]`` and (if staged with grad) d sum(ct * value)/d theta."""
        with jax.enable_x64(True):
            ct = self._ones if cotangent is None else np.asarray(cotangent, dtype=np.float64)
            val, g = self._compiled(np.asarray(theta, dtype=np.float64), self.arrays, ct)
            val = np.asarray(jax.block_until_ready(val))
            return val, (None if g is None else np.asarray(g))


class StagedJaxBackend:
    """Backend-shaped entry point: stage, compile and run once (for equality tests)."""

    name = "staged-jax"

    def run(
        self,
        program: CompiledProgram,
        theta: np.ndarray,
        inputs: Mapping[str, Any],
        *,
        grad: bool,
        cotangent: np.ndarray | None = None,
        dialect: str | None = None,
        **_: Any,
    ) -> RunResult:
        if dialect is not None:
            raise NdvmError(f"staged-jax baseline: dialect {dialect!r} is not supported")
        staged = StagedProgram(program, theta.shape[0], inputs, grad=grad)
        ct = None if cotangent is None else np.broadcast_to(cotangent, (staged.B, staged.Ng))
        val, g = staged(theta, ct)
        bad = ~np.isfinite(val.reshape(staged.B, staged.Ng, -1)).all(axis=2)
        status = np.where(bad, STATUS_NONFINITE, 0).astype(np.int8)
        return RunResult(val, status, [], g, staged.data_lanes, True)
