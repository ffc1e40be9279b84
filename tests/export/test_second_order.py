"""Second derivatives: the exported torch module's Hessian-vector products against central
finite differences of the reference backend's exact gradient, per NUMERIC primitive.

The ``ndvm.torch`` boundary is first order only (its backward is not differentiable, see
``ndvm/torch/function.py``); ``ndvm.export.to_torch`` builds torch operations, so torch's
double backward differentiates the exported formulas. The primitives and operand shapes come
from the table (tests/helpers/prim_programs.py).
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from tests.helpers.extras import need
from tests.helpers.prim_programs import Case, cases, tangents, theta

import ndvm
import ndvm.export

pytestmark = pytest.mark.torch
torch = need("torch")
# %-primitives belong to the dmci dialect, which export refuses by design.
CASES = [c for c in cases() if not c.prim.name.startswith("%")]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hessian_vector_products_match_central_differences(case: Case) -> None:
    rng = np.random.default_rng(zlib.crc32(case.id.encode()))
    th = theta(case, 1, rng)
    u = tangents(case, 1, 1, rng)[0]
    header = "(params " + " ".join(f"p{k}" for k in range(case.n_params)) + ")"
    inits = "(params " + " ".join(f"(p{k} {float(t)!r})" for k, t in enumerate(th[0])) + ")"
    prog = ndvm.compile(case.source.replace(header, inits), backend="reference")
    value = prog.evaluate(th).value
    ct = rng.standard_normal(np.shape(value))

    module = ndvm.export.to_torch(prog)  # its parameters start at th (the declared inits)
    params = module.theta()
    out = module()
    s = (out * torch.as_tensor(ct.reshape(out.shape))).sum()
    (g,) = [torch.stack(torch.autograd.grad(s, params, create_graph=True))]
    if not g.requires_grad:  # piecewise-constant: no second-order graph, and none needed
        hv = np.zeros(case.n_params)
    else:
        grads = torch.autograd.grad((g * torch.as_tensor(u[0])).sum(), params, allow_unused=True)
        hv = np.array([0.0 if x is None else float(x) for x in grads])

    h = 1e-5
    lanes = np.concatenate([th + h * u, th - h * u])
    grad = prog.evaluate(lanes, grad=True, cotangent=np.concatenate([ct, ct])).grad
    fd = (grad[0] - grad[1]) / (2 * h)
    np.testing.assert_allclose(hv, fd, rtol=1e-5, atol=1e-6)
