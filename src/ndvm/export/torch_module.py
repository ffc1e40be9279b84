"""``to_torch``: a program as a ``torch.nn.Module`` (the tracer over torch, run per call)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ndvm.api import Program, merge_inputs
from ndvm.export.binding import bind_inputs, bind_params, start_theta, trace
from ndvm.export.namespaces import torch_namespace


class ExportedModule(torch.nn.Module):
    """``forward(inputs)`` or ``forward(**inputs)`` evaluates the program; its parameters are
    named as the program's (a name torch cannot take as an attribute, one with a ``.`` or one
    of ``torch.nn.Module``'s own, is registered as ``param_<i>``: ``parameter(name)`` and
    ``attribute_names`` map program names to attributes).

    Each parameter holds the unconstrained theta (``Program.init_theta()`` initially, or the
    theta of ``values``: fitted values by name or a ``Calibration``), so
    gradients match ``Program.value_and_grad``; ``positive``/``unit``/``signed-unit`` are
    applied in ``forward``. ``constrained()`` gives the values the program sees.
    """

    def __init__(self, program: Program, values: Any = None) -> None:
        super().__init__()
        self.program = program
        self.attribute_names: dict[str, str] = {}  # program parameter name -> attribute
        names = set(program.params)
        for i, (spec, t) in enumerate(zip(program.param_specs, start_theta(program, values))):
            attr = spec.name
            if "." in attr or hasattr(self, attr):  # torch's rule, or a Module attribute
                attr = _fresh(f"param_{i}", self, names)
            self.attribute_names[spec.name] = attr
            self.register_parameter(
                attr, torch.nn.Parameter(torch.tensor(float(t), dtype=torch.float64))
            )

    def parameter(self, name: str) -> torch.nn.Parameter:
        """The torch parameter of the program's parameter ``name``."""
        return getattr(self, self.attribute_names[name])

    def theta(self) -> list[torch.Tensor]:
        return [self.parameter(name) for name in self.program.params]

    def constrained(self) -> dict[str, float]:
        values = self.program.constrain([t.detach().item() for t in self.theta()])
        return dict(zip(self.program.params, (float(v) for v in values)))

    def forward(self, inputs: Mapping[str, Any] | None = None, /, **named: Any) -> torch.Tensor:
        ns = torch_namespace()
        compiled = self.program.compiled
        params = bind_params(ns, compiled, self.theta())
        data = merge_inputs(inputs, named)
        return trace(ns, compiled, params, bind_inputs(ns, compiled, data)).val


def _fresh(base: str, module: torch.nn.Module, taken: set[str]) -> str:
    """``base`` (then ``base_1``, ``base_2``, ...): a name no program parameter and no
    attribute of ``module`` has, so two parameters never share one torch attribute."""
    attr, k = base, 0
    while attr in taken or hasattr(module, attr):
        k += 1
        attr = f"{base}_{k}"
    taken.add(attr)
    return attr
