"""Levenberg–Marquardt: the runtime's solver against the NumPy reference engine, optima against
independent solutions (linear least squares, a grid over the nonlinear parameter with the
linear one solved exactly), lanes against single-start runs, curve_fit's covariance in closed
form, and the verdicts on a symmetric saddle, a bound-active optimum and a diverging fit."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ndvm
from ndvm.calibrate.lm import LM
from ndvm.calibrate.result import ConvergenceWarning

RNG = np.random.default_rng(7)
X = np.linspace(300.0, 5000.0, 44)
Y_LINE = 147.5 + 0.49 * X + RNG.normal(0.0, 30.0, X.size)
T = np.linspace(0.0, 10.0, 60)
Y_SIN = 2.0 * np.sin(1.3 * T + 0.4) + RNG.normal(0.0, 0.05, T.size)
H = np.linspace(0.0, 150.0, 50)
Y_DECAY = 8.4e4 * np.exp(-H / 37.0) + RNG.normal(0.0, 800.0, H.size)
S = np.linspace(1.0, 400.0, 40)
Y_MM = 2300.0 * S / (45.0 + S) + RNG.normal(0.0, 30.0, S.size)

CASES = {
    "line": ("(+ a (* b x))", "x", X, Y_LINE, None),
    "sine": ("(* A (sin (+ (* w t) phi)))", "t", T, Y_SIN, {"A": 1.0, "w": 1.0, "phi": 0.0}),
    "decay": ("(* a (exp (* k h)))", "h", H, Y_DECAY, {"a": 1.0, "k": -0.1}),
    "mm": ("(/ (* v s) (+ km s))", "s", S, Y_MM, {"v": 1.0, "km": 1.0}),
}


def _fit(name: str, **kw: object) -> ndvm.Calibration:
    src, inp, x, y, init = CASES[name]
    prog = ndvm.compile(src, inputs=[inp])
    kw.setdefault("init", init)
    return ndvm.calibrate(prog, {inp: x}, y, **kw)  # type: ignore[arg-type]


@pytest.mark.native
@pytest.mark.parametrize("starts", [6, 16])
@pytest.mark.parametrize("name", sorted(CASES))
def test_runtime_equals_numpy_reference(name: str, starts: int) -> None:
    """Every start's end equals the reference engine's; with 16 starts the runtime's walks
    narrow to the running lanes as starts stop, the reference always walks all of them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        nat = _fit(name, starts=starts, engine="native")
        ref = _fit(name, starts=starts, engine="numpy", optimizer=LM())
    assert nat.optimizer == ref.optimizer == "lm"
    both = np.isfinite(nat.all_losses) & np.isfinite(ref.all_losses)
    # lanes stranded 1e6 times above the optimum (decay: a ~ 1e-36 against exp(138)) run on
    # under the scale-free step test, where the engines' orders of summation differ at
    # round-off and the ill-conditioned steps amplify it: equal there to 1e-5
    near = both & (ref.all_losses <= 1e6 * ref.loss)
    np.testing.assert_allclose(nat.all_losses[near], ref.all_losses[near], rtol=1e-8)
    np.testing.assert_allclose(nat.all_losses[both], ref.all_losses[both], rtol=1e-5)
    np.testing.assert_allclose(nat.loss, ref.loss, rtol=1e-10)
    np.testing.assert_allclose(nat.theta, ref.theta, rtol=1e-6, atol=1e-9)
    assert nat.success == ref.success


def test_line_is_ordinary_least_squares_at_any_scale() -> None:
    cal = _fit("line")
    slope, intercept = np.polyfit(X, Y_LINE, 1)
    assert cal.success, cal.message
    assert cal.params["a"] == pytest.approx(intercept, rel=1e-9)
    assert cal.params["b"] == pytest.approx(slope, rel=1e-9)
    const = ndvm.calibrate("a", {"x": X}, Y_LINE)  # the constant model fits the mean
    assert const.params["a"] == pytest.approx(Y_LINE.mean(), rel=1e-12)


@pytest.mark.parametrize("engine", [pytest.param("native", marks=pytest.mark.native), "numpy"])
def test_a_model_linear_in_every_parameter_is_solved_once_for_every_start(engine: str) -> None:
    """Linear least squares: every start reports lstsq's solution (the starts after the first
    are its copies); with one target per start each start still solves its own series."""
    t = np.linspace(0.0, 4.0, 48)
    y = 2.0 - 0.7 * t + 0.3 * np.sin(2.0 * t) + RNG.normal(0.0, 0.05, t.size)
    prog = ndvm.compile("(+ a (* b t) (* c (sin (* 2 t))))", inputs=["t"])
    basis = np.stack([np.ones_like(t), t, np.sin(2.0 * t)], 1)
    cal = ndvm.calibrate(prog, {"t": t}, y, starts=16, engine=engine)
    assert cal.success and cal.n_best == 16, cal.message
    np.testing.assert_allclose(cal.all_theta, np.tile(np.linalg.lstsq(basis, y)[0], (16, 1)),
                               rtol=1e-9)  # fmt: skip
    ys = np.stack([y, 2 * y, y - 1.0])
    per = ndvm.calibrate(prog, {"t": t}, ys, starts=3, engine=engine)
    np.testing.assert_allclose(per.all_theta, np.linalg.lstsq(basis, ys.T)[0].T, rtol=1e-9)
    # affine at the probes (a = 0 and 1) but not everywhere: each start runs on its own
    piecewise = ndvm.compile("(params (a 0.0)) (if (> a 1) (* 2 a t) (* a t))", inputs=["t"])
    cal = ndvm.calibrate(piecewise, {"t": t}, 3.0 * t, starts=16, engine=engine)
    assert cal.params["a"] == pytest.approx(1.5) and len(set(cal.all_losses.tolist())) > 1
    assert cal.n_best == 16  # an exact fit from every start: round-off losses, not all 0


@pytest.mark.parametrize("name", ["decay", "mm"])
def test_nonlinear_optimum_matches_a_profiled_grid(name: str) -> None:
    """The optimum against a fine grid of the nonlinear parameter, the linear one solved
    exactly at each grid point (variable projection by brute force)."""
    cal = _fit(name)
    assert cal.success, cal.message
    src, inp, x, y, _ = CASES[name]
    if name == "decay":
        grid = np.linspace(-0.05, -0.01, 40001)
        basis = np.exp(np.outer(grid, x))
    else:
        grid = np.linspace(30.0, 60.0, 30001)
        basis = x / (grid[:, None] + x)
    lin = (basis @ y) / (basis * basis).sum(axis=1)
    sse = ((lin[:, None] * basis - y) ** 2).sum(axis=1)
    i = int(np.argmin(sse))
    assert cal.loss * y.size <= sse[i] * (1.0 + 1e-9)  # at least as good as the grid
    nonlin = "k" if name == "decay" else "km"
    step = grid[1] - grid[0]
    assert abs(cal.params[nonlin] - grid[i]) <= 2 * step


@pytest.mark.native
@pytest.mark.parametrize("name", ["sine", "decay"])
def test_lanes_equal_single_start_runs(name: str) -> None:
    """Each start that ran to its own end in a batch ends as it does alone; a start stopped as
    dominated by a converged one (above its loss, hardly improving) ends no lower alone."""
    P = 3 if name == "sine" else 2
    init = np.random.default_rng(3).normal(size=(6, P)) + (1.0, 1.0, 0.0)[:P]
    many = _fit(name, starts=6, init=init, warn=False)
    best = np.nanmin(many.all_losses)
    for i in range(6):
        # the same first start: the linear parameters are detected at the first start's point
        one = _fit(name, starts=2, init=init[[0, i]], warn=False)
        if np.isnan(many.all_losses[i]):  # a start that fails, fails alone too
            assert np.isnan(one.all_losses[1]) and many.status[i] == one.status[1]
        elif many.all_losses[i] <= best * (1 + 1e-6):
            np.testing.assert_allclose(one.all_losses[1], many.all_losses[i], rtol=1e-12)
            np.testing.assert_allclose(one.all_params[1], many.all_params[i], rtol=1e-9)
        else:
            assert one.all_losses[1] <= many.all_losses[i] * (1 + 1e-12)


def test_covariance_is_curve_fits_in_closed_form() -> None:
    design = np.stack([np.ones_like(X), X], axis=1)
    cal = _fit("line")
    resid = Y_LINE - design @ np.array([cal.params["a"], cal.params["b"]])
    s2 = resid @ resid / (X.size - 2)
    want = s2 * np.linalg.inv(design.T @ design)
    np.testing.assert_allclose(cal.cov, want, rtol=1e-6)
    sigma = np.linspace(10.0, 50.0, X.size)
    w = 1.0 / sigma**2
    cal = _fit("line", sigma=sigma, absolute_sigma=True)
    np.testing.assert_allclose(cal.cov, np.linalg.inv(design.T @ (w[:, None] * design)), rtol=1e-6)
    wls = np.linalg.solve(design.T @ (w[:, None] * design), design.T @ (w * Y_LINE))
    np.testing.assert_allclose([cal.params["a"], cal.params["b"]], wls, rtol=1e-8)
    rel = _fit("line", sigma=sigma)  # relative sigma: scaled by the reduced chi-square
    r = (Y_LINE - design @ wls) / sigma
    np.testing.assert_allclose(rel.cov, cal.cov * (r @ r) / (X.size - 2), rtol=1e-6)


def test_symmetric_saddle_is_not_a_success() -> None:
    with pytest.warns(ConvergenceWarning, match="does not depend on any parameter"):
        cal = _fit("sine", starts=1, init={"A": 0.0, "w": 0.0, "phi": 0.0})
    assert not cal.success
    cal = _fit("sine", init={"A": 0.0, "w": 0.0, "phi": 0.0})  # default starts: jittered
    assert cal.success and cal.r2 > 0.99
    assert "starts reached this loss" in cal.message and cal.n_best >= 1


def test_bound_active_optimum_converges_on_the_bound() -> None:
    cal = _fit("line", constraints={"b": (None, 0.3)})
    assert cal.success, cal.message
    assert cal.params["b"] == pytest.approx(0.3, abs=1e-12)
    assert cal.params["a"] == pytest.approx((Y_LINE - 0.3 * X).mean(), rel=1e-9)


def test_diverging_fit_is_not_a_success() -> None:
    with pytest.warns(ConvergenceWarning, match="not converged"):
        cal = ndvm.calibrate("(exp a)", {"x": X[:5]}, np.zeros(5), steps=30)
    assert not cal.success


def test_a_start_in_a_domain_error_fails_alone() -> None:
    prog = ndvm.compile("(* a (log (+ x c)))", inputs=["x"])
    x = np.linspace(1.0, 5.0, 20)
    init = np.array([[1.0, 0.5], [1.0, -100.0]])  # the second start's log is of negatives
    cal = ndvm.calibrate(prog, {"x": x}, 2.0 * np.log(x + 1.0), starts=2, init=init)
    assert cal.status[0] == "ok" and cal.status[1].startswith("failed")
    assert cal.params["a"] == pytest.approx(2.0, rel=1e-7)
    assert cal.params["c"] == pytest.approx(1.0, rel=1e-6)


def test_sigma_needs_least_squares() -> None:
    with pytest.raises(ndvm.NdvmError, match="sigma"):
        _fit("line", sigma=1.0, optimizer="adam")
    with pytest.raises(ndvm.NdvmError, match="sigma must be finite and > 0"):
        _fit("line", sigma=np.zeros(X.size))
    with pytest.raises(ndvm.NdvmError, match=r"sigma has shape \(5,\); give one number per"):
        _fit("line", sigma=np.ones(5))
    with pytest.raises(ndvm.NdvmError, match="sigma must be numeric"):
        _fit("line", sigma=["a"] * X.size)


@pytest.mark.parametrize(
    ("x", "y", "match"),
    [
        (X, Y_LINE + 0j, "target must be real numbers"),
        (X, ["a"] * X.size, "target must be numeric"),
        (X + 1j, Y_LINE, "input 'x': has complex values"),
    ],
)  # fmt: skip
def test_complex_or_text_data_is_a_clear_error(x: object, y: object, match: str) -> None:
    with pytest.raises(ndvm.NdvmError, match=match):
        ndvm.calibrate("(+ a (* b x))", {"x": x}, y)


@pytest.mark.parametrize("engine", [pytest.param("native", marks=pytest.mark.native), "numpy"])
def test_an_exact_fit_to_round_off_is_a_success(engine: str) -> None:
    """The residual of an exact fit is round-off: its cosine with J is noise, so an xtol or
    ftol stop there is a success (the stationarity test would call it not converged)."""
    x = np.linspace(0.0, 1.0, 20)
    cal = ndvm.calibrate("(+ a (* b x))", {"x": x}, 2.0 * x, engine=engine, warn=False)
    assert cal.loss < 1e-28 and cal.success, cal.message
    # a peak far from 0: (w - c)² of w near 500 leaves a relative RMS residual of 1.6e-12
    w = np.random.default_rng(0).uniform(400.0, 650.0, 200)
    y = 1200.0 * np.exp(-((w - 520.0) ** 2) / 1800.0)
    cal = ndvm.calibrate("(* a (exp (* b (- w c) (- w c))))", {"w": w}, y, engine=engine,
                         warn=False)  # fmt: skip
    assert cal.params["c"] == pytest.approx(520.0, rel=1e-9)
    assert cal.loss < 1e-20 * np.mean(y**2) and cal.success, cal.message


@pytest.mark.native
def test_time_limit_stops_a_fit_that_does_not_converge() -> None:
    # slow walks: the limit passes long before exp(a)² underflows to 0 (about 355 iterations)
    x = np.zeros(400_000)
    with pytest.warns(ConvergenceWarning, match="time limit reached"):
        cal = ndvm.calibrate("(+ (exp a) (* 0 x))", {"x": x}, x, steps=10**6, time_limit=0.2,
                             starts=2)  # fmt: skip
    assert not cal.success and np.isfinite(cal.loss) and cal.nit < 10**6
    # a limit that passes before the first evaluation fails every start, on both engines
    for opt in ("lm", LM()):
        with pytest.warns(ConvergenceWarning, match="every start failed"):
            cal = ndvm.calibrate("(exp a)", {"x": X[:5]}, np.zeros(5), time_limit=1e-12,
                                 optimizer=opt, engine="native" if opt == "lm" else "numpy")
        assert all("time limit" in s or "deadline" in s for s in cal.status), cal.status


TERMS = ["(* a (exp (* b x)))", "(* c (sin x))", "(* d x x)", "(* e (cos x))", "(* f x x x)", "g"]


@pytest.mark.native
@pytest.mark.parametrize("P", [1, 2, 3, 4, 5, 6, 7])
def test_normal_equations_are_the_jacobians(P: int) -> None:
    """The runtime's J'J at the optimum equals Jᵀ J of ``Program.jacobian`` there, for every
    parameter count (1-6 in registers, 3-4 on AVX2 as whole rows over even and odd data rows,
    7 the general loop), over an odd number of data rows, for every start alike."""
    src = "(exp (* b x))" if P == 1 else f"(+ {' '.join(TERMS[: P - 1])})"
    x = np.linspace(-1.0, 1.0, 45)
    y = 1.5 * np.exp(-0.7 * x) + 0.3 * np.sin(x) + 0.1 * x * x
    prog = ndvm.compile(src, inputs=["x"])
    assert len(prog.params) == P
    cal = ndvm.calibrate(prog, {"x": x}, y, starts=3, warn=False)
    assert cal.optimizer == "lm" and cal.jtj is not None
    J = prog.jacobian(cal.theta, {"x": x})
    want = J.T @ J
    np.testing.assert_allclose(cal.jtj, want, rtol=1e-11, atol=1e-13 * np.abs(want).max())
