"""to_torch: a golden's values and gradients equal ndvm's; the module trains inside torch."""

from __future__ import annotations

import numpy as np
import pytest
from tests.helpers.extras import need

import ndvm
import ndvm.export
from ndvm.errors import ExportUnsupported

from .goldens import OUTSIDE, as_framework, candidates, load

pytestmark = pytest.mark.torch
torch = need("torch")


@pytest.mark.parametrize("name", candidates())
def test_torch_equals_ndvm_on_goldens(name: str) -> None:
    prog, inputs, theta = load(name)
    given = as_framework(inputs, torch.tensor)
    if name in OUTSIDE:
        with pytest.raises(ExportUnsupported):
            ndvm.export.to_torch(prog, inputs=given)
        return
    module = ndvm.export.to_torch(prog, inputs=given)
    assert [n for n, _ in module.named_parameters()] == list(prog.params)
    for lane in theta:
        want, want_grad = prog.value_and_grad(lane, **inputs)
        with torch.no_grad():
            for p, t in zip(module.parameters(), lane):
                p.fill_(float(t))
        module.zero_grad()
        got = module(**given)
        got.sum().backward()
        grad = [0.0 if p.grad is None else p.grad.item() for p in module.parameters()]
        np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(grad, want_grad, rtol=1e-10, atol=1e-12)


def test_torch_module_trains_inside_a_larger_model() -> None:
    torch.manual_seed(0)
    prog = ndvm.compile("(params (a 0.5) (k 1.0 positive)) (* a (exp (- (* k x))))", inputs=["x"])
    head = torch.nn.Linear(3, 1, bias=False, dtype=torch.float64)
    law = ndvm.export.to_torch(prog)
    model = torch.nn.ModuleDict({"head": head, "law": law})
    features = torch.randn(64, 3, dtype=torch.float64)
    x = torch.linspace(0.0, 2.0, 64, dtype=torch.float64)
    target = 2.0 * torch.exp(-0.7 * x) + features @ torch.tensor(
        [0.3, -0.2, 0.1], dtype=torch.float64
    )
    opt = torch.optim.Adam(model.parameters(), lr=0.05)

    def loss() -> torch.Tensor:
        pred = law(x=x) + head(features)[:, 0]
        return torch.mean((pred - target) ** 2)

    first = loss().item()
    for _ in range(500):
        opt.zero_grad()
        value = loss()
        value.backward()
        opt.step()
    assert loss().item() < 0.01 * first
    fitted = law.constrained()
    assert abs(fitted["a"] - 2.0) < 0.2 and abs(fitted["k"] - 0.7) < 0.1


def test_constraints_are_applied_in_forward() -> None:
    prog = ndvm.compile("(params (k 2.0 positive) (p 0.25 unit)) (+ k p)")
    module = ndvm.export.to_torch(prog)
    assert module.k.item() == pytest.approx(float(prog.init_theta()[0]))
    assert module().item() == pytest.approx(2.25)


def test_unsupported_names_form_and_position() -> None:
    src = "(define n 3)\n(let loop ((i 0)) (if (< i a) (loop (+ i 1)) i))"
    with pytest.raises(ExportUnsupported, match=r"\(if \.\.\.\).*exit depends") as info:
        ndvm.export.to_torch(src)
    assert (info.value.line, info.value.column) == (2, 19)
