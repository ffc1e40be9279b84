"""Fits that never lie (issue 46): any data scale reaches the optimum; an underflowing sum of
squares, an unbounded objective, fewer rows than parameters or a rank-deficient Jacobian is
never a success; start caches follow the data's contents; periods behind constant factors
start from the periodogram."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ndvm
from ndvm.calibrate.starts import frequencies, roles

ENGINES = ["numpy", pytest.param("native", marks=pytest.mark.native)]
DECAY = "(params (A 1.0) (k 0.3)) (* A (exp (- 0 (* k t))))"


def _decay_data() -> tuple[np.ndarray, np.ndarray]:
    t = np.linspace(0.0, 5.0, 30)
    rng = np.random.default_rng(1)
    return t, 2.0 * np.exp(-0.7 * t) + 0.01 * rng.standard_normal(30)


def _fit(src: str, inputs: dict, y: object, **kw: object) -> ndvm.calibrate.Calibration:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ndvm.calibrate(src, inputs, y, **kw)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("scale", [1e12, 1e-12, 1e6, 1e-6])
def test_the_data_scale_does_not_change_the_optimum(engine: str, scale: float) -> None:
    """The step test is scaled (MINPACK's ‖Dδ‖ <= xtol ‖Dθ‖) and each column's damping floor
    is its own: data times 1e±12 reach the unscaled data's k (the unscaled step test stopped
    at k = 0.683 / 0.662, 'not converged')."""
    t, y = _decay_data()
    ref = _fit(DECAY, {"t": t}, y, engine=engine)
    cal = _fit(DECAY, {"t": t}, y * scale, engine=engine)
    assert ref.success and cal.success, cal.message
    assert cal.params["k"] == pytest.approx(ref.params["k"], rel=1e-7)
    assert cal.params["A"] == pytest.approx(ref.params["A"] * scale, rel=1e-7)


@pytest.mark.data  # scipy comes with the data extra
@pytest.mark.parametrize("scale", [1e12, 1e-12])
def test_scaled_decay_matches_curve_fit(scale: float) -> None:
    from scipy.optimize import curve_fit

    t, y = _decay_data()
    y = y * scale
    # curve_fit from p0 = (1, 0.3) does not move at this scale: give it the answer's scale
    popt, _ = curve_fit(lambda t, a, k: a * np.exp(-k * t), t, y, p0=[2.0 * scale, 0.5])
    cal = _fit(DECAY, {"t": t}, y)
    assert cal.success, cal.message
    assert cal.params["k"] == pytest.approx(popt[1], rel=1e-6)
    assert cal.params["A"] == pytest.approx(popt[0], rel=1e-6)


@pytest.mark.parametrize("engine", ENGINES)
def test_an_underflowing_sum_of_squares_is_not_an_exact_fit(engine: str) -> None:
    """Targets of order 1e-200: the squares underflow to 0 (the fit used to report 'exact fit
    (zero residual)' with success)."""
    t, y = _decay_data()
    cal = _fit(DECAY, {"t": t}, y * 1e-200, engine=engine)
    assert not cal.success
    assert "underflow" in cal.message and "exact fit" not in cal.message


@pytest.mark.parametrize("engine", ENGINES)
def test_an_exact_fit_is_still_one(engine: str) -> None:
    x = np.linspace(0.0, 1.0, 9)
    cal = _fit("(params (a 0.0) (b 0.0)) (+ a (* b x))", {"x": x}, 3.0 + 2.0 * x, engine=engine)
    assert cal.success, cal.message
    assert cal.params["a"] == pytest.approx(3.0) and cal.params["b"] == pytest.approx(2.0)


@pytest.mark.parametrize("engine", ENGINES)
def test_an_exact_fit_that_ignores_a_parameter_is_not_identifiable(engine: str) -> None:
    """Zero residual with a parameter the model does not depend on (unused, or multiplied by
    an amplitude that fitted to 0) used to be 'exact fit' with success and se = nan."""
    x = np.linspace(0.0, 1.0, 9)
    cal = _fit("(params (a 1.0) (b 1.0)) (* a x)", {"x": x}, 0.5 * x, engine=engine)
    assert not cal.success and cal.params["a"] == pytest.approx(0.5)
    assert "not identifiable: the data cannot determine b (an exact fit" in cal.message
    cal = _fit("(params (a 1.0) (b 0.5)) (* a (exp (* b x)))", {"x": x}, 0 * x, engine=engine)
    assert not cal.success and "cannot determine b " in cal.message


@pytest.mark.parametrize("engine", ENGINES)
def test_an_unbounded_value_loss_is_not_a_success(engine: str) -> None:
    cal = _fit("(params (a 0.0)) (- 0 a)", {}, None, loss="value", engine=engine)
    assert not cal.success
    assert "kept falling" in cal.message


@pytest.mark.parametrize("engine", ENGINES)
def test_lbfgs_running_to_overflow_is_not_a_success(engine: str) -> None:
    cal = _fit("(params (a 0.5)) (* a a -1)", {}, None, loss="value", optimizer="lbfgs",
               engine=engine)  # fmt: skip
    assert not cal.success
    assert "kept falling" in cal.message


@pytest.mark.parametrize("engine", ENGINES)
def test_a_bounded_value_loss_still_converges(engine: str) -> None:
    cal = _fit("(params (a 0.0)) (+ (* (- a 3) (- a 3)) 1)", {}, None, loss="value",
               engine=engine)  # fmt: skip
    assert cal.success, cal.message
    assert cal.params["a"] == pytest.approx(3.0, abs=1e-4)


@pytest.mark.parametrize("engine", ENGINES)
def test_fewer_rows_than_parameters_is_not_identifiable(engine: str) -> None:
    src = "(params (a 1.0) (b 1.0) (c 1.0) (d 1.0)) (+ a (* b x) (* c x x) (* d x x x))"
    cal = _fit(src, {"x": np.array([1.0])}, np.array([2.0]), engine=engine)
    assert not cal.success
    assert "cannot determine a, b, c, d" in cal.message and "1 data row" in cal.message


@pytest.mark.parametrize("engine", ENGINES)
def test_a_rank_deficient_jacobian_names_the_parameters(engine: str) -> None:
    """a and b enter only as their sum: the data determine a + b, not each; c is fine."""
    x = np.linspace(0.0, 3.0, 20)
    y = 1.5 + np.exp(-0.8 * x)
    cal = _fit("(params (a 1.0) (b 0.0) (c 0.5)) (+ a b (exp (- 0 (* c x))))", {"x": x}, y,
               engine=engine)  # fmt: skip
    assert not cal.success
    assert "cannot determine a, b " in cal.message and "rank-deficient" in cal.message


def test_the_periodogram_cache_follows_the_contents() -> None:
    """A buffer refilled in place is new data (the cache was keyed by the arrays' identity)."""
    x = np.linspace(0.0, 100.0, 400)
    y = np.sin(0.5 * x)
    first = frequencies(x, y, 1)
    y[:] = np.sin(2.0 * x)  # the same array object, new data
    second = frequencies(x, y, 1)
    assert first is not None and second is not None
    assert first[0] == pytest.approx(0.5, rel=0.02)
    assert second[0] == pytest.approx(2.0, rel=0.02)


def test_a_refilled_target_buffer_fits_its_own_data() -> None:
    src = "(params (A 1.0) (w 1.0) (phi 0.0)) (* A (sin (+ (* w x) phi)))"
    x = np.linspace(0.0, 60.0, 300)
    data = [np.sin(0.3 * x + 0.2), 2.0 * np.sin(1.7 * x + 1.0)]
    y = np.empty_like(x)
    for row in data:
        y[:] = row
        cal = _fit(src, {"x": x}, y)
        fresh = _fit(src, {"x": x}, row.copy())
        assert cal.loss == pytest.approx(fresh.loss, abs=1e-12)
        assert cal.success and cal.loss < 1e-12, cal.message


@pytest.mark.parametrize(
    ("src", "expect"),
    [
        ("(sin (+ (* 2 pi (/ t P)) phi))", ("period", 2 * np.pi)),
        ("(sin (/ t P))", ("period", 1.0)),
        ("(cos (/ (* 2 pi t) P))", ("period", 2 * np.pi)),
        ("(sin (- phi (* 2 pi f t)))", ("freq", 2 * np.pi)),
        ("(sin (* P t))", ("freq",)),
        ("(exp (- (/ (- t phi) (* 2 P))))", ("width", 2.0)),
        ("(- t (* 3 P))", ("loc-", 3.0)),
    ],
)
def test_roles_behind_constant_factors(src: str, expect: tuple) -> None:
    found = roles(src, ("t",), ("P", "f", "phi"))
    role = next(r for r in found if r[0] in (0, 1))
    assert role[2] == expect[0]
    assert role[3:] == pytest.approx(expect[1:])


@pytest.mark.parametrize("form", ["(* 2 pi (/ t P))", "(/ (* 2 pi t) P)", "(/ t P)"])
def test_a_period_written_as_a_period_starts_from_the_periodogram(form: str) -> None:
    """An 11-year cycle in 270 years of data, from no initial values: the period form used to
    get no data-driven start (P = 103 'converged')."""
    rng = np.random.default_rng(3)
    t = np.linspace(1750.0, 2020.0, 800)
    period = 10.9
    y = 80 + 60 * np.sin(2 * np.pi * t / period + 1.0) + 10 * rng.standard_normal(t.size)
    src = f"(params (A 1.0) (P 1.0) (phi 0.0) (c 0.0)) (+ c (* A (sin (+ {form} phi))))"
    cal = _fit(src, {"t": t}, y)
    assert cal.success, cal.message
    expect = period if form != "(/ t P)" else period / (2 * np.pi)
    assert cal.params["P"] == pytest.approx(expect, rel=2e-3)
    assert cal.loss < 110  # the noise's variance is 100


def test_the_full_rank_shortcut_never_hides_a_null_direction() -> None:
    """verdicts._surely_full_rank (a determinant bound) says "full rank" only where the
    eigenvalues agree: random Jacobians, half with a column a multiple of another."""
    from ndvm.calibrate.verdicts import RANK_RTOL, _surely_full_rank

    rng = np.random.default_rng(0)
    for _ in range(500):
        P = int(rng.integers(2, 7))
        A = rng.standard_normal((P + int(rng.integers(0, 3)), P))
        if rng.random() < 0.5:
            A[:, -1] = A[:, 0] * rng.normal()
        J = A.T @ A
        d = np.sqrt(np.diag(J))
        C = J / np.outer(d, d)
        w = np.linalg.eigvalsh(C)
        if _surely_full_rank(C.tolist()):
            assert w[0] > RANK_RTOL * w[-1]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("scale", [1e100, 1e-100])
def test_a_column_small_only_against_another_is_not_dead(engine: str, scale: float) -> None:
    """Michaelis–Menten with the data times 1e±100: v's column is 1e∓100 times km's, but
    the model depends on both (the dead-column test compares with the data's norm too)."""
    s = np.linspace(1.0, 400.0, 40)
    y = 2300.0 * s / (45.0 + s) + 30.0 * np.random.default_rng(4).standard_normal(40)
    src = "(params (v 1.0) (km 1.0)) (/ (* v s) (+ km s))"
    ref = _fit(src, {"s": s}, y, engine=engine)
    cal = _fit(src, {"s": s}, y * scale, engine=engine)
    assert ref.success and cal.success, cal.message
    assert cal.params["km"] == pytest.approx(ref.params["km"], rel=1e-7)
    assert cal.params["v"] == pytest.approx(ref.params["v"] * scale, rel=1e-7)


def _large_decay() -> tuple[np.ndarray, np.ndarray]:
    t = np.linspace(0.0, 10.0, 1500)
    y = 3.0 * np.exp(-0.45 * t) + 0.5 + 0.01 * np.random.default_rng(2).standard_normal(t.size)
    return t, y


LARGE = "(params (a 1.0) (k 0.1) (c 0.0)) (+ (* a (exp (- 0 (* k t)))) c)"


# the NumPy engine takes about 30 s for a fit of 1,500 rows: these run in the runtime
@pytest.mark.native
@pytest.mark.parametrize("engine", ["native"])
def test_large_data_stops_after_an_agreeing_first_wave(
    engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1,500 rows: the first 4 starts agree, the other 12 are not run; the optimum is the
    one all 16 starts give."""
    import sys

    waves = sys.modules["ndvm.calibrate.waves"]
    t, y = _large_decay()
    cal = _fit(LARGE, {"t": t}, y, engine=engine, starts=16)  # explicit: waves from 1,000 rows
    monkeypatch.setattr(waves, "ADAPTIVE_N", 10**9)  # explicit starts: every one, as below
    full = _fit(LARGE, {"t": t}, y, engine=engine, starts=16)
    assert cal.success and full.success, cal.message
    assert len(cal.status) == waves.WAVE and len(full.status) == 16
    assert cal.loss == pytest.approx(full.loss, rel=1e-10)
    assert cal.params["k"] == pytest.approx(full.params["k"], rel=1e-7)


@pytest.mark.parametrize("engine", ENGINES)
def test_small_data_default_starts_run_in_waves(engine: str) -> None:
    """44 rows: the default starts stop after an agreeing first wave of 4 (the optimum of all
    16, which an explicit ``starts=16`` runs); fewer rows than 1,000 with explicit starts run
    every one."""
    import sys

    waves = sys.modules["ndvm.calibrate.waves"]
    x = np.linspace(0.1, 6.0, 44)
    y = 1.2 * np.exp(-0.4 * x) * np.cos(2.1 * x) + 0.02 * np.random.default_rng(0).normal(size=44)
    src = "(* a (exp (- 0 (* k x))) (cos (* w x)))"
    init = {"a": 1.0, "k": 0.3, "w": 2.0}
    prog = ndvm.compile(src, params=init, inputs=["x"])
    cal = _fit(prog, {"x": x}, y, engine=engine)
    full = _fit(prog, {"x": x}, y, engine=engine, starts=16)
    assert len(cal.status) == waves.WAVE and cal.n_best >= waves.AGREE, cal.message
    assert len(full.status) == 16 and cal.success and full.success
    assert cal.loss == pytest.approx(full.loss, rel=1e-9)
    assert cal.params["w"] == pytest.approx(full.params["w"], rel=1e-6)
    assert cal.params["w"] == pytest.approx(2.1, abs=0.02)  # the data's frequency


@pytest.mark.native
@pytest.mark.parametrize("engine", ["native"])
def test_a_first_wave_that_does_not_agree_runs_the_rest(
    engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    waves = sys.modules["ndvm.calibrate.waves"]
    t, y = _large_decay()
    monkeypatch.setattr(waves, "AGREE", waves.WAVE + 1)  # the first wave can never agree
    cal = _fit(LARGE, {"t": t}, y, engine=engine)
    monkeypatch.setattr(waves, "ADAPTIVE_N", 10**9)
    full = _fit(LARGE, {"t": t}, y, engine=engine, starts=16)
    assert len(cal.status) == 16 and cal.history.shape[1] == 16 and cal.all_losses.shape == (16,)
    assert cal.success, cal.message
    assert cal.loss == pytest.approx(full.loss, rel=1e-10)
    assert np.isfinite(cal.history[-1]).all()


@pytest.mark.native
@pytest.mark.parametrize("agree", [2, 5])  # 5 > 4 starts: the first wave never agrees
def test_the_runtime_waves_are_the_two_call_waves(
    agree: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The native backend runs the adaptive starts in one runtime call (optimize_waves.cpp):
    the same fit, bit for bit, as the first wave and (when it does not agree) every start
    afresh by two calls from ``ndvm.calibrate.waves``, evaluations included."""
    import sys

    from ndvm.backends.native import NativeBackend

    waves = sys.modules["ndvm.calibrate.waves"]
    monkeypatch.setattr(waves, "AGREE", agree)
    x = np.linspace(0.1, 6.0, 44)
    y = 1.2 * np.exp(0.3 * x) + 0.5 + 0.02 * np.random.default_rng(3).normal(size=44)
    prog = ndvm.compile("(+ (* a (exp (* b x))) c)", params=["a", "b", "c"], inputs=["x"])
    one = _fit(prog, {"x": x}, y)
    monkeypatch.setattr(NativeBackend, "optimize_waves", False)
    two = _fit(prog, {"x": x}, y)
    assert len(one.status) == len(two.status) == (waves.WAVE if agree == 2 else 16)
    assert one.loss == two.loss and one.params == two.params and one.nfev == two.nfev
    assert one.success == two.success and one.message == two.message
    np.testing.assert_array_equal(one.history, two.history)
    np.testing.assert_array_equal(one.all_theta, two.all_theta)
