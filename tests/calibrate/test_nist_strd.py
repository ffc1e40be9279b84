"""NIST StRD nonlinear regression: ``ndvm.calibrate``'s defaults against certified results.

The 27 problems, each from NIST's two starting points (tests/helpers/nist_strd.py; the data
and certified values are NIST's, computed in 128-bit arithmetic). A default fit that reports
success must have the certified residual sum of squares and (where the model's parameters are
identifiable as numbered) the certified parameters to a small fraction of their standard
deviations; every start below must succeed except the three known misses, which must say so.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from tests.helpers.nist_strd import MODELS, PERMUTABLE, Problem, load

import ndvm

pytestmark = pytest.mark.native

# Start 1 of MGH17 (a stationary point far from the minimum, as curve_fit's) and of MGH10 (a
# stop in a curved valley) and Start 2 of Bennett5 (520 iterations needed, steps=200): each
# fit stops short of the certified minimum and says so
KNOWN_MISSES = {("MGH17", 1), ("MGH10", 1), ("Bennett5", 2)}
NAMES = list(MODELS)


def _rss_close(rss: float, p: Problem) -> bool:
    """Within 1e-7 of the certified RSS, or at the round-off floor of the data (Lanczos1's
    certified RSS is 1.4e-25: its data are the model's values to 13 digits)."""
    return abs(rss - p.rss) <= 1e-7 * p.rss + 1e-20 * float(p.y @ p.y)


@pytest.mark.parametrize("name", NAMES)
def test_problem_data_and_model(name: str) -> None:
    """The loader and the NumPy model reproduce the certified RSS at the certified values, and
    the ndvm program gives the NumPy model's values there."""
    p = load(name)
    assert len(p.y) > len(p.certified) and len(p.start1) == len(p.start2) == len(p.certified)
    r = p.fn(p.x, *p.certified) - p.y
    assert _rss_close(float(r @ r), p) or abs(float(r @ r) - p.rss) <= 1e-9 * p.rss
    prog = ndvm.compile(p.source, params=dict(zip(p.params, p.certified)), inputs=p.inputs)
    assert prog.params == p.params
    value = np.asarray(prog.eval(np.array(p.certified), p.data()), dtype=np.float64)
    expect = p.fn(p.x, *p.certified)
    np.testing.assert_allclose(value, expect, rtol=1e-12, atol=1e-12 * np.abs(expect).max())


@pytest.mark.parametrize("start", [1, 2])
@pytest.mark.parametrize("name", NAMES)
def test_default_fit_reaches_certified_values(name: str, start: int) -> None:
    p = load(name)
    init = p.start1 if start == 1 else p.start2
    prog = ndvm.compile(p.source, params=dict(zip(p.params, init)), inputs=p.inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = ndvm.calibrate(prog, p.data(), p.y)
    if (name, start) in KNOWN_MISSES:
        assert not cal.success, cal.message  # honest: no claim of convergence
        return
    assert cal.success, cal.message
    rss = cal.loss * len(p.y)
    assert _rss_close(rss, p), (rss, p.rss)
    b = np.array([cal.params[n] for n in p.params])
    # the fitted curve is the certified one
    pred = np.asarray(prog.eval(b, p.data()), dtype=np.float64)
    np.testing.assert_allclose(pred, p.fn(p.x, *p.certified), rtol=0, atol=1e-4 * np.std(p.y))
    if name not in PERMUTABLE:  # each parameter within 1 % of its certified standard deviation
        z = np.abs(b - np.array(p.certified)) / np.array(p.std_dev)
        assert z.max() <= 1e-2, dict(zip(p.params, z))


def _cosines(p: Problem, b: np.ndarray) -> np.ndarray:
    """|J_iᵀr| / (‖J_i‖ ‖r‖) per parameter, J by central differences of the NumPy model."""
    r = p.fn(p.x, *b) - p.y
    cols = []
    for i in range(b.size):
        e = np.zeros_like(b)
        e[i] = 1e-6 * max(abs(b[i]), 1e-8)
        cols.append((p.fn(p.x, *(b + e)) - p.fn(p.x, *(b - e))) / (2 * e[i]))
    J = np.array(cols)
    return np.abs(J @ r) / (np.linalg.norm(J, axis=1) * np.linalg.norm(r))


def test_one_start_success_is_a_stationary_point() -> None:
    """One start each (no other start to rescue the fit): where ``success`` is claimed the fit
    is stationary (every column of an independent finite-difference Jacobian makes a cosine
    below 1e-3 with the residual), though it may be a local one (Lanczos from Start 1 stops
    where two exponentials merge, as scipy's does not); MGH10 from Start 1 (with the
    scale-free step test) runs to b1 ~ 1e-25, where the model no longer depends on b2 and b3,
    and is reported as not converged; most reach the certificate."""
    certified = 0
    for name in NAMES:
        p = load(name)
        for init in (p.start1, p.start2):
            prog = ndvm.compile(p.source, params=dict(zip(p.params, init)), inputs=p.inputs)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cal = ndvm.calibrate(prog, p.data(), p.y, starts=1)
            b = np.array([cal.params[n] for n in p.params])
            if cal.success and not _rss_close(cal.loss * len(p.y), p):
                assert _cosines(p, b).max() <= 1e-3, (name, cal.message)
            certified += bool(cal.success and _rss_close(cal.loss * len(p.y), p))
            if name == "MGH10" and init == p.start1:  # a valley stop or a degenerate point
                assert not cal.success and cal.message.startswith("not converged"), cal.message
    assert certified >= 44


@pytest.mark.parametrize("name", [n for n in NAMES if n not in PERMUTABLE and n != "Bennett5"])
def test_standard_errors_are_the_certified_ones(name: str) -> None:
    """``cal.stderr`` (Gauss–Newton ``pcov`` scaled by the reduced chi-square, as curve_fit's
    default) equals NIST's certified standard deviations to 1e-3 (4–9 digits in practice)."""
    p = load(name)
    prog = ndvm.compile(p.source, params=dict(zip(p.params, p.start2)), inputs=p.inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = ndvm.calibrate(prog, p.data(), p.y)
    assert cal.success and cal.stderr is not None, cal.message
    se = np.array([cal.stderr[n] for n in p.params])
    np.testing.assert_allclose(se, p.std_dev, rtol=1e-3)
