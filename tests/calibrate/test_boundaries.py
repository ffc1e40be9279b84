"""torch.autograd.gradcheck and JAX gradient checks through the program boundary."""

from __future__ import annotations

import numpy as np
import pytest
from tests.calibrate.conftest import X, damped

import ndvm

KALMAN_SHORT = """\
(params (q 0.3 positive) (r 0.3 positive))
(define T (rows Y))
(let loop ((t 0) (m (zeros 2)) (P (eye 2)) (nll 0))
  (if (= t T) nll
      (let* ((Pp (+ P (* (eye 2) (* q q)))) (v (- (ref Y t) m)) (S (+ Pp (* (eye 2) (* r r))))
             (Si (inv S)) (K (matmul Pp Si)))
        (loop (+ t 1) (+ m (matvec K v)) (- Pp (matmul K Pp))
              (+ nll (* 0.5 (+ (logdet S) (dot v (matvec Si v)))))))))
"""
Y = np.random.default_rng(0).standard_normal((8, 2))


def _theta(p: ndvm.Program, B: int) -> np.ndarray:
    rng = np.random.default_rng(1)
    return np.tile(p.init_theta(), (B, 1)) + 0.2 * rng.standard_normal((B, len(p.params)))


@pytest.mark.torch
def test_torch_gradcheck_data_lanes(backend: str) -> None:
    import torch

    from ndvm.torch import op

    p, _ = damped(backend)
    f = op(p, x=X[:6])
    th = torch.tensor(_theta(p, 3), requires_grad=True)
    assert torch.autograd.gradcheck(f, (th,))
    th1 = torch.tensor(p.init_theta(), requires_grad=True)  # [P] -> no lane axis
    assert f(th1).shape == (6,)
    assert torch.autograd.gradcheck(f, (th1,))


@pytest.mark.torch
def test_torch_gradcheck_matrix_program(backend: str) -> None:
    import torch

    from ndvm.torch import apply

    p = ndvm.compile(KALMAN_SHORT, inputs=("Y",), backend=backend)
    th = torch.tensor(_theta(p, 2), requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: apply(p, t, Y=ndvm.const(Y)), (th,))


@pytest.mark.torch
def test_torch_no_grad_pass_when_not_needed(backend: str) -> None:
    import torch

    from ndvm.torch import op

    p, _ = damped(backend)
    out = op(p, x=X[:4])(torch.tensor(_theta(p, 2)))
    assert out.grad_fn is None and out.shape == (2, 4)


@pytest.mark.torch
def test_torch_adam_drives_a_torch_loss(backend: str) -> None:
    import torch

    from ndvm.torch import op

    p, y = damped(backend)
    f = op(p, x=X)
    th = torch.tensor(p.init_theta()[None], requires_grad=True)
    opt = torch.optim.Adam([th], lr=0.05)
    target = torch.tensor(y)
    first = None
    for _ in range(40):
        opt.zero_grad()
        loss = torch.nn.functional.huber_loss(f(th)[0], target)
        loss.backward()
        opt.step()
        first = first if first is not None else loss.item()
    assert loss.item() < 0.2 * first


@pytest.mark.jax
def test_jax_check_grads_and_jit(backend: str) -> None:
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax.test_util import check_grads

    from ndvm.jax import op

    p, y = damped(backend)
    f = op(p, x=X[:6])
    th = jnp.asarray(_theta(p, 3))
    check_grads(f, (th,), order=1, modes=("rev",))

    def loss(t: jnp.ndarray) -> jnp.ndarray:
        return jnp.sum((f(t) - jnp.asarray(y[:6])) ** 2)

    check_grads(jax.jit(loss), (th,), order=1, modes=("rev",))
    g_jit = jax.jit(jax.grad(loss))(th)
    np.testing.assert_allclose(np.asarray(g_jit), np.asarray(jax.grad(loss)(th)), rtol=1e-12)
    # manual central differences agree with the jitted gradient
    eps = 1e-6
    e = np.zeros_like(np.asarray(th))
    e[1, 2] = eps
    fd = (loss(th + e) - loss(th - e)) / (2 * eps)
    np.testing.assert_allclose(float(fd), float(g_jit[1, 2]), rtol=1e-6)


@pytest.mark.jax
def test_jax_matrix_input_under_jit(backend: str) -> None:
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax.test_util import check_grads

    from ndvm.jax import op

    p = ndvm.compile(KALMAN_SHORT, inputs=("Y",), backend=backend)
    f = op(p, Y=ndvm.const(Y))
    th = jnp.asarray(_theta(p, 2))
    check_grads(jax.jit(lambda t: jnp.sum(f(t))), (th,), order=1, modes=("rev",))


@pytest.mark.torch
def test_torch_second_order_raises_instead_of_zeros() -> None:
    torch = pytest.importorskip("torch")

    from ndvm.torch import op

    p = ndvm.compile("(* a a x)", inputs=("x",), backend="reference")
    f = op(p, x=2.0)
    th = torch.tensor([1.5], dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(f(th).sum(), th)  # first order works: d(2 a^2)/da = 4 a
    assert float(g) == pytest.approx(6.0)
    with pytest.raises(ndvm.NdvmError, match="second-order derivatives"):
        torch.autograd.functional.hessian(lambda t: f(t).sum(), th.detach())
    with pytest.raises(ndvm.NdvmError, match="second-order derivatives"):
        torch.autograd.gradgradcheck(f, (th,))
    with pytest.raises(ndvm.NdvmError, match="torch.func transforms"):
        torch.func.grad(lambda t: f(t).sum())(th.detach())
