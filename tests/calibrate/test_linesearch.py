"""The strong-Wolfe line search over lanes, on one-dimensional quadratics whose minimizers along
the direction are known: the step it returns is checked against the two conditions computed
here, on lanes that accept the first step, must grow it, must zoom back, or meet a failing
region; and L-BFGS with it against closed-form optima."""

from __future__ import annotations

import numpy as np
import pytest

import ndvm
from ndvm.calibrate.linesearch import strong_wolfe
from ndvm.calibrate.objective import Eval

C1, C2 = 1e-4, 0.9


class Quadratics:
    """Lane b: loss (x - m_b)^2, failing (a lane error) where x > fail_b."""

    dim = 1

    def __init__(self, m: list[float], fail: list[float]) -> None:
        self.m = np.array(m)
        self.fail = np.array(fail)
        self.calls = 0

    def __call__(self, theta: np.ndarray, grad: bool = False) -> Eval:
        self.calls += 1
        x = theta[:, 0]
        failed = x > self.fail
        loss = np.where(failed, np.nan, (x - self.m) ** 2)
        g = np.where(failed, np.nan, 2.0 * (x - self.m))[:, None]
        return Eval(loss, g, failed, ["domain" if f else None for f in failed])


def _search(m: list[float], fail: list[float], pending: list[bool], max_ls: int = 15):  # type: ignore[no-untyped-def]
    obj = Quadratics(m, fail)
    B = len(m)
    theta = np.zeros((B, 1))
    f = obj.m**2
    g = -2.0 * obj.m[:, None]
    d = np.ones((B, 1))
    slope = (g * d).sum(axis=1)
    out = strong_wolfe(obj, theta, f, g, d, slope, np.array(pending), None, C1, C2, max_ls)
    return obj, f, slope, out


def test_steps_satisfy_the_strong_wolfe_conditions() -> None:
    # accepted at 1; must grow (minimum at 50); must zoom back (minimum at 0.01)
    m = [1.0, 50.0, 0.01]
    obj, f, slope, out = _search(m, [np.inf] * 3, [True] * 3)
    assert out.found.all()
    a = out.theta[:, 0]  # theta 0, d 1: the point is the step
    phi = (a - obj.m) ** 2
    dphi = 2.0 * (a - obj.m)
    assert (phi <= f + C1 * a * slope).all()  # sufficient decrease
    assert (np.abs(dphi) <= C2 * np.abs(slope)).all()  # curvature
    np.testing.assert_allclose(out.loss, phi, rtol=0, atol=0)
    np.testing.assert_allclose(out.grad[:, 0], dphi, rtol=0, atol=0)
    assert a[0] == 1.0 and a[1] >= 8.0 and a[2] < 0.5  # grown 1, 2, 4, 8; zoomed back
    assert out.evaluations <= 15 and obj.calls == out.evaluations


def test_a_failing_region_is_too_far_and_the_lowest_good_trial_is_kept() -> None:
    # minimum at 20 but the loss fails beyond 1.5: no Wolfe step exists; the lane keeps its
    # lowest trial with sufficient decrease, which lies inside the domain
    obj, f, slope, out = _search([20.0], [1.5], [True], max_ls=12)
    a = out.theta[0, 0]
    assert out.found[0] and np.isfinite(out.loss[0])
    assert 1.0 <= a <= 1.5
    assert out.loss[0] == pytest.approx((a - 20.0) ** 2, rel=0, abs=0)
    assert out.loss[0] <= f[0] + C1 * a * slope[0]
    assert out.evaluations == 12  # it searched to the end of its budget


def test_every_trial_failing_leaves_the_lane_where_it_was() -> None:
    obj, f, slope, out = _search([3.0, 2.0], [0.0, np.inf], [True, False], max_ls=6)
    assert not out.found.any()  # lane 1 was not searching
    np.testing.assert_array_equal(out.theta, np.zeros((2, 1)))
    np.testing.assert_array_equal(out.loss, f)


def test_lbfgs_reaches_closed_form_optima_from_far() -> None:
    """A quadratic bowl whose minimum is 1e4 from the start: L-BFGS must grow its steps; a
    narrow valley: it must shorten them. Both to the closed-form optimum."""
    bowl = ndvm.compile("(params (a 0.0) (b 0.0)) (+ (square (- a 1e4)) (* 3 (square (+ b 2e3))))")
    cal = ndvm.calibrate(bowl, {}, loss="value", optimizer="lbfgs", starts=1, steps=100)
    assert cal.success, cal.message
    assert cal.params == pytest.approx({"a": 1e4, "b": -2e3}, rel=1e-9)
    valley = ndvm.compile(
        "(params (a -1.2) (b 1.0)) (+ (square (- 1 a)) (* 100 (square (- b (* a a)))))"
    )
    cal = ndvm.calibrate(valley, {}, loss="value", optimizer="lbfgs", starts=1, steps=200)
    assert cal.success, cal.message
    assert cal.params == pytest.approx({"a": 1.0, "b": 1.0}, abs=1e-6)
