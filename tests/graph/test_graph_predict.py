"""Closed-form cost formulas: finite values, limits and fitted wall-clock constants."""

from __future__ import annotations

import pytest

from ndvm.graph import predict


def test_predict_uniform_rho_matches_layered_formula():
    for L in (2, 5, 10, 100):
        assert predict.layered_rho([7] * L) == pytest.approx(predict.uniform_rho(L), rel=1e-12)


def test_predict_wallclock_reproduces_published_values():
    a, beta = 0.042, 2.24 / 412
    assert round(predict.wallclock(a, beta, 10), 3) == 1.949
    assert round(predict.wallclock(a, beta, 100), 3) == 1.809
    assert round(predict.wallclock(a, beta, 1000), 3) == 1.796
    assert round(predict.wallclock_limit(a, beta), 3) == 1.794
    assert predict.wallclock(a, 0.0, 50) == pytest.approx(predict.uniform_rho(50))


@pytest.mark.parametrize("q", [0.0, 0.5, 1.0, 2.0])
def test_predict_layered_rho_converges_to_karamata_limits(q):
    def rho(L: int, profile: str) -> float:
        js = range(1, L + 1)
        return predict.layered_rho([(j if profile == "output" else L + 1 - j) ** q for j in js])

    for profile in ("output", "input"):
        errs = [abs(rho(L, profile) - predict.limit(q, profile)) for L in (100, 1000, 10000)]
        assert errs[0] > errs[1] > errs[2]
        assert errs[2] < 0.01 * predict.limit(q, profile)


def test_predict_delta_extremes():
    assert predict.delta_extremes(6, 20) == (0, 300, 150.0)


def test_predict_fit_wallclock_recovers_constants():
    cones = [10, 20, 40, 80, 160]
    secs = [0.5 * c + 3.0 for c in cones]
    fit = predict.fit_wallclock(cones, secs, n_nodes=300)
    assert fit.a == pytest.approx(0.5) and fit.intercept == pytest.approx(3.0)
    assert fit.beta == pytest.approx(0.01)


def test_predict_layered_train_rho_is_one_on_a_chain():
    w = [5, 1, 9, 3]
    assert predict.layered_train_rho(w, w) == 1.0
