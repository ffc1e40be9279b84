"""Singular and nearly singular 2 x 2 matrices: ``inv`` gives the same status and the same bits
on every backend, over many lanes and one lane at a time, and ``det`` finds the same matrices
singular (docs/language.md, "Singular matrices")."""

from __future__ import annotations

import numpy as np
import pytest

import ndvm
from ndvm.backends import registry

BACKENDS = registry.available()
RNG = np.random.default_rng(3)
# [[a, 3a], [c, 3c]] is singular in exact arithmetic, and after rounding 3a and 3c its LU
# pivot u11 is exactly 0 on some lanes and a few ulps on others (an inverse near 1e16)
VALUES = np.concatenate([RNG.uniform(0.1, 3.0, 120), [0.1, 0.3, 1 / 3, 0.7, 1.1, 2.9, 0.0]])
THETA = np.stack([VALUES, VALUES[::-1]], axis=1)
SOURCES = [
    "(inv (mat (vec a (* a 3.0)) (vec c (* c 3.0))))",
    "(inv (mat (vec a (* a 0.1)) (vec c (* c 0.1))))",
    "(det (inv (mat (vec (* 0.3 a) a) (vec (* 0.3 c) c))))",
    "(det (mat (vec a (* a 3.0)) (vec c (* c 3.0))))",
    "(logdet (mat (vec a (* a 3.0)) (vec c (* c 3.0))))",
]


def test_exactly_singular_is_nan_with_status_one() -> None:
    for backend in BACKENDS:
        prog = ndvm.compile("(inv (mat (vec a 2.0) (vec 2.0 4.0)))", params=["a"], backend=backend)
        result = prog.evaluate(np.array([[1.0], [0.5]]))
        assert result.status.tolist() == [[1], [0]]
        assert np.isnan(result.value[0]).all()
        assert result.value[1, 0].tolist() == [[-2.0, 1.0], [1.0, -0.25]]


@pytest.mark.parametrize("src", SOURCES)
def test_nearly_singular_inverse_is_the_same_everywhere(src: str) -> None:
    runs = []
    for backend in BACKENDS:
        prog = ndvm.compile(src, params=["a", "c"], backend=backend)
        runs.append(prog.evaluate(THETA))
        singles = [prog.evaluate(t[None]) for t in THETA[:25]]
        runs.append(
            type(runs[-1])(
                np.concatenate([s.value for s in singles]),
                np.concatenate([s.status for s in singles]),
                [],
                numeric=True,
            )
        )
    statuses = {tuple(r.status.ravel()[:25].tolist()) for r in runs}
    assert len(statuses) == 1, "backends disagree on which lanes are singular"
    first = runs[0]
    singular = np.isnan(first.value) if src.startswith("(inv") else ~(np.abs(first.value) > 0)
    if src.startswith("(logdet"):
        singular = np.isinf(first.value)
    assert 0 < singular.sum() < singular.size  # both kinds of lane occur
    for r in runs[1:]:
        n = r.value.shape[0]
        if src.startswith("(inv"):  # the same operations: the same bits
            np.testing.assert_array_equal(r.value, first.value[:n])
        else:  # det: exp(log|u00 u11|) natively, the product here: rounding apart
            np.testing.assert_allclose(r.value, first.value[:n], rtol=1e-13, atol=0.0)
