"""The ``dmci`` dialect: each semantic difference from the default language, on every backend
(docs/language.md, "The dmci dialect"). Expected values are written out by hand."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import ndvm
from ndvm.backends import registry
from ndvm.errors import ExportUnsupported
from ndvm.export import to_sympy

BACKENDS = registry.available()


@pytest.mark.parametrize("backend", BACKENDS)
def test_dmci_let_is_sequential(backend: str) -> None:
    src = "(let ((x 1.0) (y (+ x 1.0))) y)"
    default = ndvm.compile(src, params=[], inputs=("x",), backend=backend)
    dmci = ndvm.compile(src, params=[], inputs=("x",), backend=backend, dialect="dmci")
    x = np.array([5.0])
    assert default.eval([], x=x).tolist() == [6.0]
    assert dmci.eval([], x=x).tolist() == [2.0]
    # switching dialect on a compiled program recompiles it
    assert default.with_options(dialect="dmci").eval([], x=x).tolist() == [2.0]
    assert dmci.with_options(dialect=None).eval([], x=x).tolist() == [6.0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_dmci_named_let_and_let_star_unchanged(backend: str) -> None:
    src = (
        "(let loop ((k 0) (s 0)) (if (= k 3) (let* ((t s) (u (* 2 t))) u) (loop (+ k 1) (+ s k))))"
    )
    for dialect in (None, "dmci"):
        prog = ndvm.compile(src, params=[], backend=backend, dialect=dialect)
        assert float(prog.eval([])) == 6.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_dmci_modulo_is_fmod_and_remainder_is_floor_mod(backend: str) -> None:
    src = "(params a b) (+ (modulo a b) (* 10 (remainder a b)))"
    theta = np.array([[-7.5, 2.0], [7.5, -2.0], [7.5, 2.0]])
    # Scheme: modulo has the divisor's sign, remainder the dividend's
    mod_s, rem_s = np.array([0.5, -0.5, 1.5]), np.array([-1.5, 1.5, 1.5])
    for dialect, mod, rem in ((None, mod_s, rem_s), ("dmci", rem_s, mod_s)):
        prog = ndvm.compile(src, backend=backend, dialect=dialect)
        value, grad = prog.value_and_grad(theta)
        np.testing.assert_allclose(value, mod + 10 * rem, rtol=1e-15)
        q = theta[:, 0] / theta[:, 1]
        floor_q, trunc_q = np.floor(q), np.trunc(q)
        d_mod, d_rem = (-floor_q, -trunc_q) if dialect is None else (-trunc_q, -floor_q)
        np.testing.assert_allclose(grad, np.stack([np.full(3, 11.0), d_mod + 10 * d_rem], 1))


@pytest.mark.parametrize("backend", BACKENDS)
def test_dmci_normalize_floors_the_norm(backend: str) -> None:
    src = "(params a b) (dot (vec 1 2) (normalize (vec a b)))"
    theta = np.array([[0.0, 0.0], [3.0, 4.0], [1e-9, -2e-9]])
    default = ndvm.compile(src, backend=backend, strict=False).value_and_grad(theta)
    assert np.isnan(default[0][0]) and np.isnan(default[1][0]).all()
    value, grad = ndvm.compile(src, backend=backend, dialect="dmci").value_and_grad(theta)
    np.testing.assert_allclose(value, [0.0, (3 + 8) / 5, (1e-9 - 4e-9) / 1e-8], rtol=1e-12)
    # below the floor normalize is v / 1e-8: gradient (1, 2) * 1e8
    np.testing.assert_allclose(grad[0], [1e8, 2e8], rtol=1e-15)
    np.testing.assert_allclose(grad[2], [1e8, 2e8], rtol=1e-15)
    # above it, the ordinary (I - u u^T) / |v|
    u = np.array([0.6, 0.8])
    np.testing.assert_allclose(grad[1], (np.array([1, 2]) - u * (u @ [1, 2])) / 5, rtol=1e-14)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dmci_normalize_gradient_matches_finite_differences(backend: str) -> None:
    prog = ndvm.compile("(params a b) (ref (normalize (vec a b)) 1)", backend=backend,
                        dialect="dmci")  # fmt: skip
    for theta, eps in (([0.3, -1.1], 1e-6), ([2e-9, 3e-9], 1e-10)):  # above / below the floor
        t = np.array(theta)
        _, grad = prog.value_and_grad(t)
        fd = [(prog.eval(t + eps * e) - prog.eval(t - eps * e)) / (2 * eps) for e in np.eye(2)]
        np.testing.assert_allclose(grad, fd, rtol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dmci_scale_takes_either_order(backend: str) -> None:
    src = "(params q) (+ (trace (scale q (eye 2))) (trace (scale (eye 2) q)))"
    assert float(ndvm.compile(src, backend=backend, dialect="dmci").eval([0.25])) == 1.0


def test_dmci_unsupported_by_export() -> None:
    prog = ndvm.compile("(params a) (* a a)", dialect="dmci")
    with pytest.raises(ExportUnsupported, match="dmci"):
        to_sympy(prog)


def test_cli_dialect_flag() -> None:
    src = "(let ((x 1.0) (y (+ x 1.0))) (list y (modulo -7.5 2) (remainder -7.5 2)))"
    outs = []
    for extra in ([], ["--dialect", "dmci"]):
        proc = subprocess.run(
            [sys.executable, "-m", "ndvm", "eval", "-", "--input", "x=5", *extra],
            input=src,
            capture_output=True,
            text=True,
            env=dict(os.environ),
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        outs.append(proc.stdout.strip())
    assert outs == ["value: (6 0.5 -1.5)", "value: (2 -1.5 0.5)"]
