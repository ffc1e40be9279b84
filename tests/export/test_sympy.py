"""to_sympy: exact expressions whose values and derivatives equal ndvm's."""

from __future__ import annotations

import numpy as np
import pytest
from tests.helpers.extras import need

import ndvm
import ndvm.export
from ndvm.errors import ExportUnsupported

from .goldens import OUTSIDE, candidates, load

pytestmark = pytest.mark.sympy
sp = need("sympy")
# Beyond the torch/jax subset: vectors and matrices, and round (no closed form here).
SCALAR_ONLY = {"004-piecewise", "037-vectors", "038-matrices", "039-linalg-spd", "043-kalman80",
               "059-reader-syntax", "060-vector-results", "061-matrix-result",
               "062-scalar-input", "063-scale-orders"}  # fmt: skip
# A 16-fold nested map: exact, but its tree (shared subexpressions unshared) is too big to print.
HUGE = {"044-logistic-map"}


@pytest.mark.parametrize("name", [n for n in candidates() if n not in HUGE])
def test_sympy_equals_ndvm_on_goldens(name: str) -> None:
    prog, inputs, theta = load(name)
    if name in OUTSIDE | SCALAR_ONLY:
        with pytest.raises(ExportUnsupported):
            ndvm.export.to_sympy(prog, deadline=2.0)
        return
    expr = ndvm.export.to_sympy(prog)
    params = [sp.Symbol(n, real=True) for n in prog.params]
    names = params + [sp.Symbol(n, real=True) for n in prog.inputs]
    value = sp.lambdify(names, expr, "numpy")
    grads = [sp.lambdify(names, sp.diff(expr, p), "numpy") for p in params]
    data = [inputs[n] for n in prog.inputs]
    for lane, seen, jac in zip(theta, prog.constrain(theta), prog.constrain_jacobian(theta)):
        want, want_grad = prog.value_and_grad(lane, **inputs)
        with np.errstate(all="ignore"):
            np.testing.assert_allclose(value(*seen, *data), want, rtol=1e-10, atol=1e-12)
            got = [np.sum(g(*seen, *data)) * j for g, j in zip(grads, jac)]
        np.testing.assert_allclose(got, want_grad, rtol=1e-9, atol=1e-12)


def test_constants_keep_every_digit() -> None:
    expr = ndvm.export.to_sympy("(+ (* 0.1234567890123456 a) 3 (/ b 7))")
    a, b = sp.symbols("a b", real=True)
    assert float(expr.coeff(a)) == 0.1234567890123456
    assert expr.coeff(b) == sp.Rational(1, 7)
    fitted = ndvm.export.to_sympy("(* a (sin x))", {"a": 1 / 3}, inputs=("x",))
    assert float(fitted / sp.sin(sp.Symbol("x", real=True))) == 1 / 3


def test_let_star_and_closed_forms() -> None:
    expr = ndvm.export.to_sympy("(let* ((u (* a x)) (v (+ u 1))) (* v v))", inputs=("x",))
    a, x = sp.symbols("a x", real=True)
    assert sp.expand(expr - (a * x + 1) ** 2) == 0


def test_work_is_bounded() -> None:
    src = "(let loop ((x a) (n 0)) (if (< (abs x) 1e-9) n (loop (* 0.5 (+ x (/ a x))) (+ n 1))))"
    with pytest.raises(ExportUnsupported, match="exit depends"):
        ndvm.export.to_sympy(src, deadline=1.0)
    with pytest.raises(ExportUnsupported, match="operations"):
        ndvm.export.to_sympy("(let loop ((i 0) (s a)) (if (= i 500) s (loop (+ i 1) (sin s))))",
                             max_ops=100)  # fmt: skip
