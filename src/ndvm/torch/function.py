"""``torch.autograd.Function`` over a compiled program: theta ``[B, P]`` (or ``[P]``) -> values.

The forward runs one value-only evaluation; the backward runs one evaluation with the incoming
gradient as cotangent (the VJP), only when theta needs a gradient. The VJP is not itself
differentiable (``once_differentiable``). Data inputs are constants (no gradient).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from torch.autograd.function import once_differentiable

from ndvm.api import Program


def _host(inputs: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in inputs.items():
        out[k] = v.detach().cpu().numpy().astype(np.float64) if isinstance(v, torch.Tensor) else v
    return out


class ProgramFunction(torch.autograd.Function):
    """``ProgramFunction.apply(theta, program, inputs)``: values shaped like ``Program.eval``."""

    @staticmethod
    def forward(theta: torch.Tensor, program: Program, inputs: Mapping[str, Any]) -> torch.Tensor:
        th = theta.detach().cpu().numpy().astype(np.float64)
        value = np.asarray(program.eval(th, **inputs), dtype=np.float64)
        return torch.from_numpy(value.copy()).to(dtype=theta.dtype, device=theta.device)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        theta, program, host_inputs = inputs
        ctx.save_for_backward(theta)
        ctx.program = program
        ctx.host_inputs = host_inputs

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, None, None]:
        if not ctx.needs_input_grad[0]:
            return None, None, None
        (theta,) = ctx.saved_tensors
        th = theta.detach().cpu().numpy().astype(np.float64)
        ct = grad_out.detach().cpu().numpy().astype(np.float64)
        _, grad = ctx.program.value_and_grad(th, ct, **ctx.host_inputs)
        g = torch.from_numpy(np.asarray(grad, dtype=np.float64).copy())
        return g.to(dtype=theta.dtype, device=theta.device), None, None


def apply(program: Program, theta: torch.Tensor, **inputs: Any) -> torch.Tensor:
    """Evaluate ``program`` at unconstrained ``theta`` as a differentiable torch op."""
    return ProgramFunction.apply(theta, program, _host(inputs))


def op(program: Program, **inputs: Any) -> Callable[[torch.Tensor], torch.Tensor]:
    """A callable ``theta [B, P] -> values`` with ``inputs`` bound (converted once)."""
    host = _host(inputs)

    def f(theta: torch.Tensor) -> torch.Tensor:
        return ProgramFunction.apply(theta, program, host)

    return f
