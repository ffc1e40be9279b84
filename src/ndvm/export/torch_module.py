"""``to_torch``: a program as a ``torch.nn.Module`` (the tracer over torch, run per call)."""

from __future__ import annotations

from typing import Any

import torch

from ndvm.api import Program
from ndvm.export.binding import bind_inputs, bind_params, start_theta, trace
from ndvm.export.namespaces import torch_namespace


class ExportedModule(torch.nn.Module):
    """``forward(**inputs)`` evaluates the program; its parameters are named as the program's.

    Each parameter holds the unconstrained theta (``Program.init_theta()`` initially, or the
    theta of ``values``: fitted values by name or a ``Calibration``), so
    gradients match ``Program.value_and_grad``; ``positive``/``unit``/``signed-unit`` are
    applied in ``forward``. ``constrained()`` gives the values the program sees.
    """

    def __init__(self, program: Program, values: Any = None) -> None:
        super().__init__()
        self.program = program
        for spec, t in zip(program.param_specs, start_theta(program, values)):
            self.register_parameter(
                spec.name, torch.nn.Parameter(torch.tensor(float(t), dtype=torch.float64))
            )

    def theta(self) -> list[torch.Tensor]:
        return [getattr(self, name) for name in self.program.params]

    def constrained(self) -> dict[str, float]:
        values = self.program.constrain([t.detach().item() for t in self.theta()])
        return dict(zip(self.program.params, (float(v) for v in values)))

    def forward(self, **inputs: Any) -> torch.Tensor:
        ns = torch_namespace()
        compiled = self.program.compiled
        params = bind_params(ns, compiled, self.theta())
        return trace(ns, compiled, params, bind_inputs(ns, compiled, inputs)).val
