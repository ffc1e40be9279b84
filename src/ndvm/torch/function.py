"""``torch.autograd.Function`` over a compiled program: theta ``[B, P]`` (or ``[P]``) -> values.

The forward runs one value-only evaluation; the backward runs one evaluation with the incoming
gradient as cotangent (the VJP), only when theta needs a gradient. Data inputs are constants (no
gradient). First order only: the VJP is not itself differentiable, so a double backward
(``create_graph=True``: ``torch.autograd.functional.hessian``, ``gradgradcheck``) raises
``NdvmError`` rather than returning zeros; and the evaluator runs on host arrays, so
``torch.func`` transforms (``grad``, ``vmap``) are refused with the same error. For second
derivatives use central differences of the exact gradient (``ndvm.calibrate.uncertainty``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from ndvm.api import Program, merge_inputs
from ndvm.errors import NdvmError

SECOND_ORDER = (
    "ndvm.torch: second-order derivatives (create_graph=True, torch.autograd.functional."
    "hessian, gradgradcheck) are not supported: the program's VJP is not itself differentiable; "
    "use central differences of the gradient (ndvm.calibrate.uncertainty.hessian)"
)
FUNC_TRANSFORMS = (
    "ndvm.torch: torch.func transforms (grad, vmap, jacrev, ...) are not supported: the "
    "evaluator runs on host arrays; use torch.autograd (loss.backward() or torch.autograd.grad)"
)


def _host_array(t: torch.Tensor) -> np.ndarray:
    try:
        return t.detach().cpu().numpy().astype(np.float64)
    except RuntimeError:  # a torch.func wrapper has no storage to read
        raise NdvmError(FUNC_TRANSFORMS) from None


def _host(inputs: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in inputs.items():
        out[k] = v.detach().cpu().numpy().astype(np.float64) if isinstance(v, torch.Tensor) else v
    return out


class ProgramFunction(torch.autograd.Function):
    """``ProgramFunction.apply(theta, program, inputs)``: values shaped like ``Program.eval``."""

    @staticmethod
    def forward(theta: torch.Tensor, program: Program, inputs: Mapping[str, Any]) -> torch.Tensor:
        th = _host_array(theta)
        value = np.asarray(program.eval(th, inputs), dtype=np.float64)
        return torch.from_numpy(value.copy()).to(dtype=theta.dtype, device=theta.device)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        theta, program, host_inputs = inputs
        ctx.save_for_backward(theta)
        ctx.program = program
        ctx.host_inputs = host_inputs

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, None, None]:
        if not ctx.needs_input_grad[0]:
            return None, None, None
        ct = _host_array(grad_out)  # first: under torch.func this is a wrapper and says so
        if torch.is_grad_enabled():  # the engine enables grad mode exactly for create_graph
            raise NdvmError(SECOND_ORDER)
        (theta,) = ctx.saved_tensors
        th = _host_array(theta)
        _, grad = ctx.program.value_and_grad(th, ct, ctx.host_inputs)
        g = torch.from_numpy(np.asarray(grad, dtype=np.float64).copy())
        return g.to(dtype=theta.dtype, device=theta.device), None, None


def apply(
    program: Program,
    theta: torch.Tensor,
    inputs: Mapping[str, Any] | None = None,
    /,
    **named: Any,
) -> torch.Tensor:
    """Evaluate ``program`` at unconstrained ``theta`` as a differentiable torch op. Inputs
    by name as a mapping, keywords, or both (any input name works: the API's own arguments
    are positional-only)."""
    return ProgramFunction.apply(theta, program, _host(merge_inputs(inputs, named)))


def op(
    program: Program, inputs: Mapping[str, Any] | None = None, /, **named: Any
) -> Callable[[torch.Tensor], torch.Tensor]:
    """A callable ``theta [B, P] -> values`` with ``inputs`` bound (converted once)."""
    host = _host(merge_inputs(inputs, named))

    def f(theta: torch.Tensor) -> torch.Tensor:
        return ProgramFunction.apply(theta, program, host)

    return f
