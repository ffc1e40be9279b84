"""Shared fixtures for calibration tests: available backends and a damped-oscillator problem."""

from __future__ import annotations

import numpy as np
import pytest

import ndvm
from ndvm.backends import registry

DAMPED = """\
(params (a 1.0) (k 0.3 positive) (w 2.0) (phi 0.0))
(* a (exp (- (* k x))) (cos (+ (* w x) phi)))
"""
TRUE = {"a": 1.2, "k": 0.4, "w": 2.1, "phi": 0.3}
X = np.linspace(0.1, 6.0, 44)

BACKENDS = registry.available()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


def damped(backend: str = "reference") -> tuple[ndvm.Program, np.ndarray]:
    """The damped program and noise-free data from TRUE."""
    p = ndvm.compile(DAMPED, inputs=("x",), backend=backend)
    y = np.asarray(p.eval(p.unconstrain([TRUE[n] for n in p.params]), x=X))
    return p, y
