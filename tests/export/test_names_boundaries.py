"""Adversarial input and parameter names through the torch and JAX boundaries and the exports
(see tests/test_names.py for the rest): values and gradients equal NumPy's formulas."""

from __future__ import annotations

import numpy as np
import pytest
from tests.helpers.extras import need

import ndvm
import ndvm.export

NAMES = ["theta", "inputs", "self", "program", "params", "training", "exp", "class",
         "a.b", "forward", "cotangent"]  # fmt: skip
XS = np.array([0.5, 1.0, 2.0, 3.5])


def _programs(name: str) -> tuple[ndvm.Program, ndvm.Program]:
    """``k * name`` (name an input) and ``name * u`` (name a parameter); ``params`` is a special
    form, so it is only tried where it is no program name (the JAX export's argument)."""
    in_name = name if name != "params" else "p"
    by_input = ndvm.compile(f"(* k {in_name})", params=["k"], inputs=[in_name])
    par_name = name if name != "params" else "q"
    by_param = ndvm.compile(f"(* {par_name} u)", params=[par_name], inputs=["u"])
    return by_input, by_param


@pytest.mark.torch
@pytest.mark.parametrize("name", NAMES)
def test_torch_boundary_and_export(name: str) -> None:
    torch = need("torch")
    from ndvm.torch import apply, op

    by_input, by_param = _programs(name)
    in_name = by_input.inputs[0]
    theta = torch.tensor([2.0], dtype=torch.float64, requires_grad=True)
    out = apply(by_input, theta, {in_name: torch.tensor(XS)})
    out.sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), 2.0 * XS, rtol=1e-15)
    np.testing.assert_allclose(theta.grad.numpy(), [XS.sum()], rtol=1e-14)
    out_kw = op(by_input, **{in_name: XS})(theta.detach())
    np.testing.assert_allclose(out_kw.numpy(), 2.0 * XS, rtol=1e-15)
    module = ndvm.export.to_torch(by_param, inputs={"u": XS})
    pname = by_param.params[0]
    with torch.no_grad():
        module.parameter(pname).fill_(3.0)
    np.testing.assert_allclose(module({"u": XS}).detach().numpy(), 3.0 * XS, rtol=1e-15)
    assert [p for p in module.parameters()] == [module.parameter(pname)]
    m2 = ndvm.export.to_torch(by_input, inputs={in_name: XS})
    want = by_input.eval(None, {in_name: XS})
    np.testing.assert_allclose(m2({in_name: XS}).detach().numpy(), want, rtol=1e-15)
    if in_name != "self":  # torch's Module.__call__ takes ``self`` itself: use the mapping
        np.testing.assert_allclose(m2(**{in_name: XS}).detach().numpy(), want, rtol=1e-15)


@pytest.mark.jax
@pytest.mark.parametrize("name", NAMES)
def test_jax_boundary_and_export(name: str) -> None:
    jax = need("jax")
    from ndvm.jax import op

    by_input, by_param = _programs(name)
    in_name = by_input.inputs[0]
    with jax.enable_x64(True):
        f = op(by_input, {in_name: XS})
        np.testing.assert_allclose(np.asarray(f(np.array([2.0]))), 2.0 * XS, rtol=1e-15)
        g = jax.grad(lambda th: f(th).sum())(np.array([2.0]))
        np.testing.assert_allclose(np.asarray(g), [XS.sum()], rtol=1e-14)
        fn, params = ndvm.export.to_jax(by_input, inputs={in_name: XS})
        np.testing.assert_allclose(np.asarray(fn({"k": 2.0}, **{in_name: XS})), 2.0 * XS)
        fn, params = ndvm.export.to_jax(by_param, inputs={"u": XS})
        pname = by_param.params[0]
        np.testing.assert_allclose(np.asarray(fn({pname: 3.0}, {"u": XS})), 3.0 * XS)


@pytest.mark.sympy
@pytest.mark.parametrize("name", NAMES)
def test_sympy_export(name: str) -> None:
    sympy = need("sympy")
    by_input, by_param = _programs(name)
    expr = ndvm.export.to_sympy(by_param, {by_param.params[0]: 3.0}, inputs=("u",))
    u = sympy.Symbol("u", real=True)
    assert sympy.simplify(expr - 3 * u) == 0
    expr = ndvm.export.to_sympy(by_input, inputs=by_input.inputs)
    assert {s.name for s in expr.free_symbols} == {"k", by_input.inputs[0]}
