"""Starts from the data: parameters that shift an input start inside the input's range."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ndvm
from ndvm.calibrate.api import _init_theta
from ndvm.calibrate.starts import input_range, place_shifts, program_shifts, shifts


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        ("(* a (exp (* b (square (- w c)))))", ((2, "w", 1.0),)),
        ("(* a (exp (* b (square (- c w)))))", ((2, "w", 1.0),)),
        ("(/ a (+ 1 (exp (* b (+ c t)))))", ((2, "t", -1.0),)),
        ("(/ a (+ 1 (exp (* b (+ t c)))))", ((2, "t", -1.0),)),
        ("(+ (- w c) (* c t))", ((2, "w", 1.0),)),  # the first role counts
        ("(- (* b w) c)", ()),  # c shifts a product, not an input
        ("(- w c t)", ()),  # not a binary difference
        ("(let ((w (* 2 t))) (- w c))", ()),  # w may be rebound: left alone
        ("(loop ((i 0)) (- w c))", ()),
    ],
)
def test_shifts_are_parameters_added_to_or_subtracted_from_an_input(
    src: str, expected: tuple
) -> None:
    params = ("a", "b", "c")
    assert shifts(src, ("w", "t"), params) == expected


def test_only_free_parameters_are_shifts() -> None:
    src = "(params (c 1 positive) (d 0)) (+ (- w c) (- w d))"
    prog = ndvm.compile(src, inputs=["w"])
    assert program_shifts(prog) == ((1, "w", 1.0),)


def test_place_shifts_sets_the_odd_starts_of_every_series_inside_the_range() -> None:
    w = np.array([400.0, np.nan, 650.0, 512.0])
    assert input_range(w) == (400.0, 650.0)
    assert input_range(np.array(["a"])) is None and input_range(3.0) is None
    theta = np.zeros((2 * 6, 3))  # two series of six starts each
    place_shifts(theta, 6, ((2, "w", -1.0),), {"w": w}, np.random.default_rng(0))
    odd = np.arange(12) % 6 % 2 == 1
    assert np.all(theta[~odd] == 0) and np.all(theta[:, :2] == 0)
    assert np.all((-650 <= theta[odd, 2]) & (theta[odd, 2] <= -400))
    same = np.zeros((1, 3))
    place_shifts(same, 1, ((2, "w", 1.0),), {"w": w}, np.random.default_rng(0))
    assert np.all(same == 0)  # one start: the jitter alone


def test_programs_without_shifts_draw_the_starts_they_drew_before() -> None:
    x = np.linspace(300, 5000, 20)
    plain = ndvm.compile("(+ a (* b (exp (* c x))))", inputs=["x"], free_params=True)
    with_data, _ = _init_theta(plain, None, 8, np.random.default_rng(3), {"x": x})
    without, _ = _init_theta(plain, None, 8, np.random.default_rng(3))
    np.testing.assert_array_equal(with_data, without)
    shifted = ndvm.compile("(* a (exp (* b (square (- x c)))))", inputs=["x"], free_params=True)
    with_data, _ = _init_theta(shifted, None, 8, np.random.default_rng(3), {"x": x})
    without, _ = _init_theta(shifted, None, 8, np.random.default_rng(3))
    odd = np.arange(8) % 2 == 1
    np.testing.assert_array_equal(with_data[~odd], without[~odd])
    np.testing.assert_array_equal(with_data[:, :2], without[:, :2])
    assert np.all((300 <= with_data[odd, 2]) & (with_data[odd, 2] <= 5000))


def _peak() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    w = rng.uniform(400, 650, 200)
    return w, 1200 * np.exp(-((w - 520) ** 2) / 1800) + 5 * rng.standard_normal(200)


PEAKS = ["(* a (exp (- (square (/ (- w c) s)))))", "(* a (exp (* b (square (- c w)))))"]


@pytest.mark.parametrize("src", PEAKS)
def test_a_peak_at_natural_scale_is_found_by_several_default_starts(src: str) -> None:
    w, y = _peak()
    prog = ndvm.compile(src, inputs=["w"], free_params=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cal = ndvm.calibrate(prog, {"w": w}, y)
    assert cal.success and cal.n_best >= 2
    assert cal.r2 is not None and cal.r2 > 0.999
    assert cal.params["c"] == pytest.approx(520, abs=1)  # noise of sd 5 on a peak of 1200


@pytest.mark.data  # scipy comes with the data extra (statsmodels)
def test_the_peak_optimum_is_curve_fits_from_the_true_values() -> None:
    from scipy.optimize import curve_fit

    w, y = _peak()
    cal = ndvm.calibrate(ndvm.compile(PEAKS[0], inputs=["w"], free_params=True), {"w": w}, y)
    popt, _ = curve_fit(lambda w, a, c, s: a * np.exp(-(((w - c) / s) ** 2)), w, y,
                        p0=(1200, 520, 42))  # fmt: skip
    best = np.mean((popt[0] * np.exp(-(((w - popt[1]) / popt[2]) ** 2)) - y) ** 2)
    assert cal.loss == pytest.approx(best, rel=1e-8)
    assert cal.params["c"] == pytest.approx(popt[1], rel=1e-7)
    assert abs(cal.params["s"]) == pytest.approx(abs(popt[2]), rel=1e-6)


def test_search_calibrates_a_shifted_candidate_from_the_data() -> None:
    from ndvm.search import CalibLimits
    from ndvm.search.candidate import Candidate
    from ndvm.search.evaluate import Job, run_job
    from ndvm.tasks.base import from_arrays

    w, y = _peak()
    task = from_arrays(w[:, None], y, names=["w"]).for_search()
    job = Job(0, Candidate("(* a (exp (* b (square (- w c)))))"), 7)
    first = run_job(task, job, CalibLimits(), set()).evaluation
    again = run_job(task, job, CalibLimits(), set()).evaluation
    assert first.status == "ok" and first.validation_r2 > 0.999
    assert first.params == again.params  # deterministic for a seed
    assert first.params["c"] == pytest.approx(520, abs=1)
