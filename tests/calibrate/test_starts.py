"""Starts from the data: parameters that shift or scale an input start at the input's scale."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ndvm
from ndvm.calibrate.api import _init_theta
from ndvm.calibrate.starts import (
    WIDTH_DECADES,
    RoleData,
    frequencies,
    input_range,
    place_roles,
    program_roles,
    roles,
)


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        ("(* a (exp (* b (square (- w c)))))", ((2, "w", "loc-"),)),
        ("(* a (exp (* b (square (- c w)))))", ((2, "w", "loc-"),)),
        ("(/ a (+ 1 (exp (+ c t))))", ((2, "t", "loc+"),)),
        ("(/ a (+ 1 (exp (* b (+ t c)))))", ((1, "t", "inv"), (2, "t", "loc+"))),
        ("(+ (- w c) (* c t))", ((2, "w", "loc-"),)),  # the first role counts
        ("(* a (exp (- (square (/ (- w c) b)))))", ((1, "w", "width"), (2, "w", "loc-"))),
        ("(exp (- (/ t b)))", ((1, "t", "width"),)),
        ("(* b (- w c))", ((1, "w", "inv"), (2, "w", "loc-"))),
        ("(* (+ c t) b)", ((1, "t", "inv"), (2, "t", "loc+"))),
        ("(- (* b w) c)", ()),  # c shifts a product, not an input
        ("(* a (exp (* b w)))", ()),  # a rate: not from the range
        ("(/ (- w 1) c)", ((2, "w", "width"),)),
        ("(+ c (* a (sin (+ (* b t) c))))", ((1, "t", "freq"),)),
        ("(* a (cos (* t b)))", ((1, "t", "freq"),)),
        ("(sin (- c (* b w)))", ((1, "w", "freq"),)),
        ("(- w c t)", ()),  # not a binary difference
        ("(let ((w (* 2 t))) (- w c))", ()),  # w may be rebound: left alone
        ("(loop ((i 0)) (- w c))", ()),
    ],
)
def test_roles_are_read_from_the_forms_around_an_input(src: str, expected: tuple) -> None:
    assert roles(src, ("w", "t"), ("a", "b", "c")) == expected


def test_only_free_parameters_have_roles() -> None:
    src = "(params (c 1 positive) (d 0)) (+ (- w c) (- w d))"
    prog = ndvm.compile(src, inputs=["w"])
    assert program_roles(prog) == ((1, "w", "loc-"),)


def test_roles_are_drawn_in_the_odd_starts_of_every_series_at_the_input_scale() -> None:
    w = np.array([400.0, np.nan, 650.0, 512.0])
    assert input_range(w) == (400.0, 650.0)
    assert input_range(np.array(["a"])) is None and input_range(3.0) is None
    theta = np.zeros((2 * 6, 4))  # two series of six starts each
    found = ((1, "w", "width"), (2, "w", "loc+"), (3, "w", "inv"))
    place_roles(theta, 6, found, {"w": w}, np.random.default_rng(0))
    odd = np.arange(12) % 6 % 2 == 1
    assert np.all(theta[~odd] == 0) and np.all(theta[:, 0] == 0)
    assert np.all((400 <= abs(theta[odd, 2])) & (abs(theta[odd, 2]) <= 650))  # either sign
    lo = 250 * 10**-WIDTH_DECADES
    assert np.all((lo <= theta[odd, 1]) & (theta[odd, 1] <= 250))
    assert np.all((1 / 250 <= abs(theta[odd, 3])) & (abs(theta[odd, 3]) <= 1 / lo))
    same = np.zeros((1, 4))
    place_roles(same, 1, found, {"w": w}, np.random.default_rng(0))
    flat = np.zeros((4, 4))
    place_roles(flat, 4, ((1, "w", "width"),), {"w": np.full(5, 3.0)}, np.random.default_rng(0))
    assert np.all(same == 0) and np.all(flat == 0)  # one start; an input without a spread


def test_programs_without_roles_draw_the_starts_they_drew_before() -> None:
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


def test_search_calibrates_a_located_candidate_from_the_data() -> None:
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


TWO_PEAKS = "(+ (* a (exp (- (square (/ (- w c) s))))) (* b (exp (- (square (/ (- w d) u))))))"


@pytest.mark.parametrize("engine", ["native", "numpy"])
def test_two_peaks_are_found_when_the_declared_start_divides_by_zero(engine: str) -> None:
    """The declared start (all zeros) divides by zero, so the amplitudes' exact linear solve
    is found at the next start whose probe is finite; with the centres and widths drawn from
    the data, several default starts reach the two-peak optimum."""
    rng = np.random.default_rng(5)
    w = rng.uniform(400, 700, 200)
    y = 1000 * np.exp(-(((w - 480) / 20) ** 2)) + 600 * np.exp(-(((w - 590) / 35) ** 2))
    y = y + 3 * rng.standard_normal(200)
    prog = ndvm.compile(TWO_PEAKS, inputs=["w"], free_params=True)
    near = {"a": 900, "c": 470, "s": 30, "b": 500, "d": 600, "u": 30}
    ref = ndvm.calibrate(prog, {"w": w}, y, starts=1, init=near, engine=engine)
    cal = ndvm.calibrate(prog, {"w": w}, y, engine=engine)
    assert ref.success and cal.success and cal.n_best >= 2
    assert cal.loss == pytest.approx(ref.loss, rel=1e-9)
    centres = sorted([cal.params["c"], cal.params["d"]])
    assert centres == pytest.approx([480, 590], abs=1)


def test_the_periodogram_finds_the_frequency_of_irregularly_sampled_data() -> None:
    rng = np.random.default_rng(2)
    t = rng.uniform(0, 1000, 300)
    y = 3 * np.sin(2 * np.pi / 50 * t + 0.5) + 0.3 * rng.standard_normal(300) + 7
    peaks = frequencies(t, y, 3)
    assert peaks is not None and peaks.shape == (3,)
    assert abs(peaks[0] - 2 * np.pi / 50) < np.pi / 1000  # within the grid's resolution
    assert frequencies(t, y, 3) is peaks or np.array_equal(frequencies(t, y, 3), peaks)
    assert frequencies(t[:5], y[:5], 3) is None  # too few points
    assert frequencies(t, y[:-1], 3) is None and frequencies(t, None, 3) is None
    assert frequencies(np.full(50, 2.0), y[:50], 3) is None  # no range


@pytest.mark.parametrize("engine", ["native", "numpy"])
def test_a_damped_oscillation_of_twenty_periods_is_found_from_default_starts(
    engine: str,
) -> None:
    """A 50-day period over 1,000 days: from N(0, 1) starts the frequency is out of reach
    (curve_fit's default p0 misses it too); from the periodogram's peaks it is found."""
    rng = np.random.default_rng(5)
    t = rng.uniform(0, 1000, 300)
    y = 3 * np.exp(-t / 300) * np.cos(2 * np.pi / 50 * t + 0.5)
    y = y + 0.01 * np.std(y) * rng.standard_normal(300)
    src = "(* A (exp (- (/ t tau))) (cos (+ (* w t) p)))"
    prog = ndvm.compile(src, inputs=["t"], free_params=True)
    near = {"A": 2.5, "tau": 250, "w": 0.125, "p": 0.4}
    ref = ndvm.calibrate(prog, {"t": t}, y, starts=1, init=near, engine=engine)
    cal = ndvm.calibrate(prog, {"t": t}, y, engine=engine)
    assert ref.success and cal.success and cal.n_best >= 2
    assert cal.loss == pytest.approx(ref.loss, rel=1e-9)
    assert abs(cal.params["w"]) == pytest.approx(2 * np.pi / 50, rel=1e-3)


def test_input_range_and_content_keys_small_and_large() -> None:
    """input_range's two-reduction path and its masked path agree with a plain filter; the
    periodogram key is the content for small arrays (bytes) and large ones (a digest)."""
    from ndvm.calibrate.starts import DIGEST_BYTES, _digest, input_range

    x = np.linspace(-2.0, 5.0, 50)
    assert input_range(x) == (-2.0, 5.0)
    x[[3, 7]] = [np.inf, np.nan]
    assert input_range(x) == (-2.0, 5.0)
    assert input_range(np.array([np.nan, -np.inf])) is None
    assert input_range(np.arange(4)) == (0.0, 3.0)
    for n in (8, DIGEST_BYTES // 8 + 1):  # under and over the byte-key size
        a = np.random.default_rng(n).normal(size=n)
        key = _digest(a, a[::-1])
        assert _digest(a.copy(), a[::-1].copy()) == key
        b = a.copy()
        b[-1] += 1e-9
        assert _digest(b, a[::-1]) != key and _digest(a.astype(np.float32), a[::-1]) != key


def test_role_data_kept_across_programs_places_what_each_call_places() -> None:
    """One ``RoleData`` serving many programs (the search's worker) draws every start as a
    call given the inputs and target does, whatever role, input and order came before."""
    t = np.linspace(0.0, 20.0, 80)
    w = np.linspace(400.0, 650.0, 80)
    y = np.sin(1.7 * t) + 0.5 * np.cos(4.1 * t) + 0.01 * w
    inputs = {"t": t, "w": w, "c": np.full(80, 2.0)}
    sources = [
        "(+ (sin (* a t)) (sin (* b t)))",  # two frequencies: the first and second peaks
        "(* a (exp (- (/ (- w b) c))))",
        "(* a (sin (/ (* 2 pi t) b)))",  # a period behind a factor
        "(- w (* 3 a))",
        "(* a (- t b))",
        "(/ (- c a) b)",  # an input without a spread: no width
        "(sin (* a w))",
        "(+ a b)",
    ]
    kept = RoleData(inputs, y)
    for _ in range(2):  # the second round from what the first kept
        for i, src in enumerate(sources):
            prog = ndvm.compile(src, inputs=["t", "w", "c"], free_params=True)
            found = program_roles(prog)
            P = len(prog.params)
            for K, S in ((8, 1), (6, 2)):
                fresh = np.zeros((S * K, P))
                place_roles(fresh, K, found, inputs, np.random.default_rng(i), y)
                shared = np.zeros((S * K, P))
                place_roles(shared, K, found, kept, np.random.default_rng(i))
                np.testing.assert_array_equal(shared, fresh)
                assert bool(found) == bool(np.any(fresh)) or src.startswith("(/ (- c")
    assert kept.span("w") == input_range(w) and kept.span("nope") is None
    np.testing.assert_array_equal(kept.peaks("t", 2), frequencies(t, y, 2))
