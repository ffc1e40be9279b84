"""The in-runtime Adam (``NativeBackend.optimize``) equals ``ndvm.calibrate.optim.Adam``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ndvm
from ndvm.backends import registry
from ndvm.calibrate import optim
from ndvm.calibrate.losses import MSE, GaussianNLL, Prepared, Value
from ndvm.calibrate.objective import ProgramObjective

ROOT = Path(__file__).resolve().parents[2]
X = np.linspace(0.1, 6.0, 44)
DAMPED = """\
(params (a 1.0) (k 0.3 positive) (w 2.0) (phi 0.0))
(* a (exp (- (* k x))) (cos (+ (* w x) phi)))
"""
FIELDS = ("theta", "best_theta", "best_loss", "history", "state")


def _native(prep: Prepared, theta0: np.ndarray, steps: int, **kw: Any) -> dict[str, Any]:
    adam = kw.pop("adam", optim.Adam())
    program = prep.program
    return registry.get("native").optimize(
        program.compiled,
        theta0,
        prep.inputs,
        weight=prep.weight,
        method=kw.get("method", "adam"),
        steps=steps,
        options={"lr": adam.lr, "betas": adam.betas, "eps": adam.eps},
        lower=kw.get("lower"),
        upper=kw.get("upper"),
        early_stop=kw.get("early_stop"),
        limits=program.limits,
        dialect=program.dialect,
    )


def _numpy(prep: Prepared, theta0: np.ndarray, steps: int, **kw: Any) -> optim.Trace:
    adam = kw.get("adam", optim.Adam())
    control = optim.Control()
    lo, hi = kw.get("lower"), kw.get("upper")
    if lo is not None or hi is not None:
        control.project = lambda th: np.clip(th, lo, hi)
    es = kw.get("early_stop")
    if es is not None:
        control.early_stop = optim.EarlyStop(*es)
    return adam.minimize(ProgramObjective(prep), theta0, steps, control)


def _compare(prep: Prepared, theta0: np.ndarray, steps: int, **kw: Any) -> dict[str, Any]:
    out = _native(prep, theta0, steps, **kw)
    ref = _numpy(prep, theta0, steps, **kw)
    for name in FIELDS:
        a, b = np.asarray(out[name]), np.asarray(getattr(ref, name))
        assert a.shape == b.shape, name
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=0, err_msg=name)
    assert out["reasons"] == ref.reasons
    assert out["evaluations"] == ref.evaluations
    return out


def _damped(backend: str = "native") -> tuple[ndvm.Program, np.ndarray]:
    p = ndvm.compile(DAMPED, inputs=("x",), backend=backend)
    y = np.asarray(p.eval(p.unconstrain([1.2, 0.4, 2.1, 0.3]), x=X))
    return p, y + 0.01 * np.sin(7 * X)


def test_sr_with_data_lanes_matches_numpy_adam() -> None:
    p, y = _damped()
    prep = MSE().prepare(p, {"x": X}, y)
    theta0 = p.init_theta() + 0.3 * np.random.default_rng(1).standard_normal((6, 4))
    out = _compare(prep, theta0, 50, adam=optim.Adam(lr=0.07, betas=(0.8, 0.99), eps=1e-7))
    assert out["history"].shape == (51, 6)
    assert (out["state"] == optim.OK).all()


def test_kalman80_matches_numpy_adam() -> None:
    src = (ROOT / "examples" / "kalman80.scm").read_text()
    p = ndvm.compile(src, inputs=("Y",), backend="native")
    Y = ndvm.const(np.random.default_rng(0).standard_normal((80, 2)))
    prep = Value().prepare(p, {"Y": Y}, None)
    theta0 = p.init_theta() + 0.2 * np.random.default_rng(2).standard_normal((3, 2))
    out = _compare(prep, theta0, 50)
    assert out["history"][-1].max() < out["history"][0].min()


def test_nan_lane_is_dropped_and_leaves_other_lanes_bitwise_unchanged() -> None:
    p = ndvm.compile("(params (a 1.0) (b 0.0)) (+ (square (- b 1)) (log a) (* a x))", inputs=("x",))
    prep = MSE().prepare(p, {"x": X}, np.cos(X))
    theta0 = np.array([[0.5, 0.2], [-1.0, 0.3], [0.7, -0.4], [2.0, 0.0]])
    out = _compare(prep, theta0, 30)
    assert out["state"].tolist() == [optim.OK, optim.FAILED, optim.OK, optim.OK]
    assert out["reasons"][1] == "non-finite loss" and np.isnan(out["history"][1:, 1]).all()
    alone = _native(prep, theta0[[0, 2, 3]], 30)
    keep = [0, 2, 3]
    for name in FIELDS:
        a = np.asarray(out[name])
        np.testing.assert_array_equal(a[:, keep] if name == "history" else a[keep], alone[name])
    # a lane that fails later (a goes negative after some steps) is frozen at that iterate
    q = ndvm.compile("(params (a 1.0)) (+ a (sqrt a))", backend="native")
    late = _compare(
        Value().prepare(q, {}, None), np.array([[0.5], [50.0]]), 30, adam=optim.Adam(lr=0.2)
    )
    assert late["state"].tolist() == [optim.FAILED, optim.OK]
    assert np.isfinite(late["history"][:3, 0]).all() and np.isnan(late["history"][-1, 0])


def test_lane_error_reason_matches_numpy() -> None:
    src = '(params (a 1.0)) (if (< a 0) (error "negative a" a) (square (- a x)))'
    p = ndvm.compile(src, inputs=("x",))
    prep = MSE().prepare(p, {"x": X}, np.zeros_like(X))
    out = _compare(prep, np.array([[1.0], [-1.0], [2.0]]), 10)
    assert out["reasons"][1] is not None and "negative a" in out["reasons"][1]
    assert out["reasons"][0] is None and out["state"][1] == optim.FAILED


def test_early_stop_matches_numpy() -> None:
    p = ndvm.compile("(params (a 1.0)) (* a x)", inputs=("x",), backend="native")
    prep = MSE().prepare(p, {"x": X}, 3 * X)
    theta0 = np.array([[0.0], [2.9], [10.0]])
    out = _compare(prep, theta0, 400, early_stop=(1e-9, 0.0, 10))
    assert (out["state"] == optim.CONVERGED).any() and out["history"].shape[0] <= 401


def test_box_projection_matches_numpy() -> None:
    p, y = _damped()
    prep = MSE().prepare(p, {"x": X}, y)
    theta0 = p.init_theta() + 0.3 * np.random.default_rng(3).standard_normal((4, 4))
    lo = np.array([-np.inf, -1.0, 1.9, -np.inf])
    hi = np.array([1.1, np.inf, 2.05, 0.1])
    out = _compare(prep, theta0, 40, lower=lo, upper=hi, adam=optim.Adam(lr=0.1))
    assert (out["theta"] >= lo).all() and (out["theta"] <= hi).all()


def test_zero_steps_and_all_lanes_failed() -> None:
    p, y = _damped()
    prep = MSE().prepare(p, {"x": X}, y)
    _compare(prep, np.tile(p.init_theta(), (2, 1)), 0)
    q = ndvm.compile("(params (a 1.0)) (log a)", backend="native")
    out = _compare(Value().prepare(q, {}, None), np.array([[-1.0], [-2.0]]), 5)
    assert out["history"].shape == (1, 2) and (out["state"] == optim.FAILED).all()


def test_calibrate_dispatches_adam_to_the_runtime() -> None:
    p, y = _damped()
    kw: dict[str, Any] = {"starts": 4, "steps": 30, "constraints": {"a": (None, 1.1)},
                          "optimizer": "adam"}  # fmt: skip
    native = ndvm.calibrate(p, {"x": X}, y, engine="native", **kw)
    plain = ndvm.calibrate(p, {"x": X}, y, engine="numpy", **kw)
    np.testing.assert_allclose(native.history, plain.history, rtol=1e-12)
    assert native.params == pytest.approx(plain.params, rel=1e-12)
    assert native.status == plain.status
    # a learned noise scale (a loss-owned parameter) stays in NumPy: "native" refuses
    with pytest.raises(ndvm.NdvmError):
        ndvm.calibrate(p, {"x": X}, y, steps=2, loss="gaussian_nll", engine="native")
    with pytest.raises(ndvm.NdvmError):
        _native(MSE().prepare(p, {"x": X}, y), np.zeros((1, 4)), 1, method="bfgs")


def test_residual_formed_in_runtime_equals_loss_augmented_program() -> None:
    """With a target the runtime forms (v - y)^2 itself: bitwise the augmented program's fit."""
    p, y = _damped()
    prep = MSE().prepare(p, {"x": X}, y)
    theta0 = np.random.default_rng(3).normal(size=(5, 4))
    aug = _native(prep, theta0, 25)  # prep.program: the loss-augmented copy
    direct = registry.get("native").optimize(
        p.compiled, theta0, {"x": X}, weight=prep.weight, method="adam", steps=25,
        options={"lr": 0.05}, lower=None, upper=None, early_stop=None, limits=p.limits,
        dialect=None, target=y,
    )  # fmt: skip
    for name in FIELDS:
        np.testing.assert_array_equal(np.asarray(direct[name]), np.asarray(aug[name]), name)


def _per_lane_targets() -> tuple[ndvm.Program, np.ndarray, np.ndarray]:
    p, y = _damped()
    rng = np.random.default_rng(5)
    targets = y[None, :] * np.array([[1.0], [0.7], [1.3]]) + 0.01 * rng.normal(size=(3, X.size))
    init = np.array([[1.0, 0.3, 2.0, 0.0], [0.8, 0.5, 1.9, 0.1], [1.1, 0.2, 2.2, -0.1]])
    return p, targets, init


@pytest.mark.parametrize("engine", ["native", "numpy"])
def test_per_start_targets_equal_one_fit_per_series(engine: str) -> None:
    """target [starts, N]: start k fits series k, exactly as a one-start fit of that series."""
    p, targets, init = _per_lane_targets()
    kw: dict[str, Any] = {"steps": 20, "engine": engine}
    cal = ndvm.calibrate(p, {"x": X}, targets, starts=3, init=init, **kw)
    for k in range(3):
        one = ndvm.calibrate(p, {"x": X}, targets[k], starts=1, init=init[k], **kw)
        np.testing.assert_allclose(cal.all_losses[k], one.loss, rtol=1e-13)
        np.testing.assert_allclose(cal.all_theta[k], one.theta, rtol=1e-13)
    with pytest.raises(ndvm.NdvmError, match="one row per start"):
        ndvm.calibrate(p, {"x": X}, targets, starts=2, **kw)


def test_per_start_targets_native_equals_numpy() -> None:
    p, targets, init = _per_lane_targets()
    runs = [
        ndvm.calibrate(p, {"x": X}, targets, starts=3, init=init, steps=20, engine=e,
                       optimizer="adam")  # fmt: skip
        for e in ("native", "numpy")
    ]
    np.testing.assert_allclose(runs[0].history, runs[1].history, rtol=1e-12)
    np.testing.assert_allclose(runs[0].all_theta, runs[1].all_theta, rtol=1e-12)


def test_cosine_schedule_native_equals_numpy_and_changes_the_fit() -> None:
    p, y = _damped()
    kw: dict[str, Any] = {"starts": 3, "steps": 30, "lr": 0.1, "lr_final": 1e-3,
                          "optimizer": "adam"}  # fmt: skip
    native = ndvm.calibrate(p, {"x": X}, y, engine="native", **kw)
    plain = ndvm.calibrate(p, {"x": X}, y, engine="numpy", **kw)
    np.testing.assert_allclose(native.history, plain.history, rtol=1e-12)
    constant = ndvm.calibrate(p, {"x": X}, y, engine="native", starts=3, steps=30, lr=0.1,
                              optimizer="adam")  # fmt: skip
    assert not np.allclose(constant.history[-1], native.history[-1])
    sched = optim.Adam(lr=0.1, lr_final=1e-3).schedule(30)
    assert sched is not None and sched[0] == 0.1 and sched[-1] == pytest.approx(1e-3)
    assert np.all(np.diff(sched) < 0)


@pytest.mark.parametrize("engine", ["native", "numpy"])
def test_time_limit_fails_the_running_starts(engine: str) -> None:
    p, y = _damped()
    cal = ndvm.calibrate(p, {"x": X}, y, starts=2, steps=10**6, time_limit=0.05, engine=engine,
                         optimizer="adam")  # fmt: skip
    assert all(s.startswith("failed: time limit of 0.05 s reached after") for s in cal.status)
    assert np.isfinite(cal.all_losses).all()  # the best iterate so far is kept
    assert 1 < cal.history.shape[0] < 10**6


@pytest.mark.parametrize("steps", [0, 1, 25])
def test_best_grad_and_sse_are_the_objectives_at_best_theta(steps: int) -> None:
    """What the runtime reports at each lane's best iterate is, bitwise, what the NumPy
    objective evaluates there: the gradient, and the sum of the squared residuals."""
    p, y = _damped()
    prep = MSE().prepare(p, {"x": X}, y)
    theta0 = np.random.default_rng(7).normal(size=(5, 4))
    out = registry.get("native").optimize(
        p.compiled, theta0, {"x": X}, weight=prep.weight, method="adam", steps=steps,
        options={"lr": 0.05}, lower=None, upper=None, early_stop=None, limits=p.limits,
        dialect=None, target=y,
    )  # fmt: skip
    ev = ProgramObjective(prep)(np.asarray(out["best_theta"]), grad=True)
    assert ev.grad is not None and ev.sq is not None
    np.testing.assert_array_equal(out["best_grad"], ev.grad)
    np.testing.assert_array_equal(out["best_sse"], [row.sum() for row in ev.sq])
    f = p.with_options(strict=False).evaluate(np.asarray(out["best_theta"]), {"x": X}).value
    np.testing.assert_allclose(out["best_sse"], ((f - y) ** 2).sum(axis=1), rtol=1e-12)


def test_calibration_grad_norm_and_r2_at_the_best_start() -> None:
    """The result's gradient norm and R² (taken from the runtime) against their definitions."""
    p, y = _damped()
    cal = ndvm.calibrate(p, {"x": X}, y, starts=4, steps=30, optimizer="adam", engine="native")
    g = ProgramObjective(MSE().prepare(p, {"x": X}, y))(cal.theta[None, :], grad=True).grad
    assert g is not None and cal.grad_norm == np.abs(g).max()
    f = np.asarray(cal.predict())
    assert cal.r2 == pytest.approx(1.0 - ((f - y) ** 2).sum() / ((y - y.mean()) ** 2).sum())


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"constraints": {"a": (None, 1.1), "k": (0.35, None)}},
        {"loss": GaussianNLL(sigma=0.05)},
        {"early_stop": 1e-6},
    ],
)
def test_lbfgs_in_the_runtime_equals_numpys(kw: dict[str, Any]) -> None:
    """The runtime's L-BFGS is optim.LBFGS operation for operation: the same iterates."""
    p, y = _damped()
    y = y + np.random.default_rng(1).normal(0.0, 0.02, y.shape)
    runs = [
        ndvm.calibrate(p, {"x": X}, y, starts=5, steps=40, optimizer="lbfgs", engine=e,
                       warn=False, **kw)
        for e in ("native", "numpy")
    ]  # fmt: skip
    if "loss" in kw:  # the runtime adds gaussian_nll's constant after the fit: last bits
        np.testing.assert_allclose(runs[0].all_losses, runs[1].all_losses, rtol=1e-12)
        np.testing.assert_allclose(runs[0].all_theta, runs[1].all_theta, rtol=1e-6)
        return
    np.testing.assert_array_equal(runs[0].history, runs[1].history)
    np.testing.assert_array_equal(runs[0].all_theta, runs[1].all_theta)
    assert runs[0].nfev == runs[1].nfev and runs[0].status == runs[1].status
    q = ndvm.compile("(params (a 3.0) (b -1.0)) (+ (square (- a 1.5)) (square (* 2 (- b a))))")
    runs = [ndvm.calibrate(q, {}, loss="value", steps=30, optimizer="lbfgs", engine=e)
            for e in ("native", "numpy")]  # fmt: skip
    np.testing.assert_array_equal(runs[0].history, runs[1].history)
    assert runs[0].params == pytest.approx({"a": 1.5, "b": 1.5}, abs=1e-8)
