"""to_jax: values and gradients equal ndvm's on goldens, under jit, grad and vmap."""

from __future__ import annotations

import numpy as np
import pytest
from tests.helpers.extras import need

import ndvm
import ndvm.export
from ndvm.errors import ExportUnsupported

from .goldens import OUTSIDE, candidates, load

pytestmark = pytest.mark.jax
jax = need("jax")
jnp = jax.numpy


@pytest.fixture(autouse=True)
def _x64() -> object:
    with jax.enable_x64(True):
        yield


@pytest.mark.parametrize("name", candidates())
def test_jax_equals_ndvm_on_goldens(name: str) -> None:
    prog, inputs, theta = load(name)
    if name in OUTSIDE:
        with pytest.raises(ExportUnsupported):
            ndvm.export.to_jax(prog, inputs=inputs)
        return
    fn, params = ndvm.export.to_jax(prog, inputs=inputs)
    assert list(params) == list(prog.params)
    value_and_grad = jax.jit(jax.value_and_grad(lambda p: jnp.sum(fn(p, **inputs))))
    for lane in theta:
        want, want_grad = prog.value_and_grad(lane, **inputs)
        total, grad = value_and_grad({n: jnp.asarray(t) for n, t in zip(prog.params, lane)})
        np.testing.assert_allclose(float(total), np.sum(want), rtol=1e-10, atol=1e-12)
        got_grad = [float(grad[n]) for n in prog.params]
        np.testing.assert_allclose(got_grad, want_grad, rtol=1e-10, atol=1e-12)


def test_vmap_over_data_and_parameters() -> None:
    prog = ndvm.compile("(if (> x b) (* a (sin x)) (* b x x))", inputs=["x"])
    fn, params = ndvm.export.to_jax(prog, inputs={"x": np.zeros(3)})
    xs = jnp.linspace(-2.0, 2.0, 7)
    batched = fn(params, x=xs)
    mapped = jax.vmap(lambda x: fn(params, x=x))(xs)
    np.testing.assert_allclose(mapped, batched, rtol=0, atol=0)
    thetas = jnp.asarray([[0.5, -1.0], [1.5, 0.3]])
    per_lane = jax.vmap(lambda t: fn(dict(zip(prog.params, t)), x=xs))(thetas)
    want = prog.eval(np.asarray(thetas), x=np.asarray(xs))
    np.testing.assert_allclose(per_lane, want, rtol=1e-12)
