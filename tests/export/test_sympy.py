"""to_sympy: exact expressions whose values and derivatives equal ndvm's."""

from __future__ import annotations

import threading
import time

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


def test_doubling_expression_is_refused_by_its_size() -> None:
    # Newton's iteration unrolled (its exit depends on the parameter): the expression doubles
    # each step and sympy's evaluation of it grows faster still; the node bound stops it.
    prog, _, _ = load("050-newton-sqrt")
    with pytest.raises(ExportUnsupported, match="grows past 1000 nodes"):
        ndvm.export.to_sympy(prog, max_nodes=1000, deadline=600.0)


def _slow_sin(finished: list[object]) -> object:
    def slow_sin(x: object) -> object:  # a minute of Python bytecodes, as sympy's evaluation
        end = time.monotonic() + 60.0
        while time.monotonic() < end:
            pass
        finished.append(x)
        return sp.sin(x)

    return slow_sin


@pytest.mark.parametrize("thread", [False, True])
def test_deadline_holds_inside_one_sympy_call(monkeypatch: pytest.MonkeyPatch,
                                              thread: bool) -> None:  # fmt: skip
    # The deadline interrupts one long operation rather than waiting for it to return: a
    # timer on the main thread, a profile hook on another.
    from ndvm.export.namespaces import sympy_namespace

    finished: list[object] = []
    monkeypatch.setattr(sympy_namespace(), "sin", _slow_sin(finished))
    raised: list[BaseException] = []

    def export() -> None:
        try:
            ndvm.export.to_sympy("(sin a)", deadline=0.5)
        except ExportUnsupported as exc:
            raised.append(exc)

    if thread:
        worker = threading.Thread(target=export)
        worker.start()
        worker.join()
    else:
        export()
    assert finished == []
    assert len(raised) == 1 and "deadline" in str(raised[0])
