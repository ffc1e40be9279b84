"""Parameters under every dialect on every backend: predicates on parameter-dependent values
(which have no VJP, under any dialect), the dmci protected operators and substitutions, with
values, gradients and statuses compared with the reference backend (docs/language.md, "The
dmci dialect")."""

from __future__ import annotations

import numpy as np
import pytest

import ndvm
from ndvm.backends import registry

BACKENDS = registry.available()
DIALECTS = (None, "dmci")
THETA = np.array([[-1.5], [-1e-9], [0.0], [3e-9], [0.25], [2.0]])

PROGRAMS = [
    "(if (< x 0.0) 1.0 2.0)",
    "(if (< -1.0 x 1.0) (* x x) (- x))",
    "(if (and (>= x 0.0) (not (= x 0.25))) (sqrt x) (log (+ 2.0 x)))",
    "(cond ((zero? x) 7.0) ((positive? x) (* 3.0 x)) (else (exp x)))",
    "(+ (sqrt (abs x)) (log (max x 1e-12)) (if (<= x 0.0) 0.0 (log x)))",
    "(+ (modulo x 0.75) (remainder x 0.75) (modulo -2.0 (+ x 3.0)))",
    "(let ((y 1.0) (z (+ x 1.0))) (if (> z y) (* z y) (/ y z)))",
    "(ref (normalize (vec x (* 2.0 x))) 1)",
    "(let loop ((k 0) (s x)) (if (< k 3) (loop (+ k 1) (if (< s 1.0) (* s 2.0) s)) s))",
]


def test_dmci_predicate_on_a_parameter_is_hand_checked() -> None:
    for backend in BACKENDS:
        prog = ndvm.compile(PROGRAMS[0], params=["x"], backend=backend, dialect="dmci")
        value, grad = prog.value_and_grad(np.array([[-1.0], [1.0]]))
        assert np.asarray(value).tolist() == [1.0, 2.0]
        assert grad.tolist() == [[0.0], [0.0]]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("src", PROGRAMS)
def test_parameters_agree_on_every_backend(src: str, dialect: str | None) -> None:
    runs = {}
    for backend in BACKENDS:
        prog = ndvm.compile(src, params=["x"], backend=backend, dialect=dialect, strict=False)
        result = prog.evaluate(THETA, grad=True)
        runs[backend] = result
    ref = runs["reference"]
    for backend, result in runs.items():
        assert result.status.tolist() == ref.status.tolist(), backend
        np.testing.assert_allclose(
            np.asarray(result.value, dtype=float), ref.value, rtol=1e-12, atol=0.0,
            err_msg=backend,
        )  # fmt: skip
        np.testing.assert_allclose(result.grad, ref.grad, rtol=1e-12, atol=0.0, err_msg=backend)
