"""calibrate(): recovery of a known optimum, Adam == torch.optim.Adam, NaN-lane isolation."""

from __future__ import annotations

import numpy as np
import pytest
from tests.calibrate.conftest import TRUE, X, damped

import ndvm
from ndvm.calibrate import GaussianNLL, optim
from ndvm.calibrate.losses import MSE
from ndvm.calibrate.objective import ProgramObjective


def _close_to_truth(params: dict[str, float], tol: float) -> None:
    for name, value in TRUE.items():
        assert abs(params[name] - value) < tol, (name, params[name], value)


def test_recovers_known_optimum_one_start(backend: str) -> None:
    p, y = damped(backend)
    cal = ndvm.calibrate(p, {"x": X}, y, starts=1, steps=40, optimizer="adam+lbfgs")
    assert cal.status == ("ok",)
    assert cal.loss < 1e-18
    _close_to_truth(cal.params, 1e-7)


def test_recovers_known_optimum_256_starts(backend: str) -> None:
    p, y = damped(backend)
    cal = ndvm.calibrate(p, {"x": X}, y, starts=256, steps=30, optimizer="adam+lbfgs", seed=3)
    assert cal.history.shape[1] == 256 and cal.all_params.shape == (256, 4)
    assert cal.all_losses[cal.best] == np.nanmin(cal.all_losses) == cal.loss
    assert cal.loss < 1e-18
    _close_to_truth(cal.params, 1e-7)


def test_seed_may_be_a_generator() -> None:
    """A Generator seed draws the jittered starts and restarts from its own stream: the same
    fit as its integer seed (a fresh generator of it), and a different one once drawn from."""
    p, y = damped()
    kw = dict(starts=8, steps=20, optimizer="adam", on_failure="restart", warn=False)
    by_int = ndvm.calibrate(p, {"x": X}, y, seed=7, **kw)
    by_gen = ndvm.calibrate(p, {"x": X}, y, seed=np.random.default_rng(7), **kw)
    np.testing.assert_array_equal(by_gen.all_theta, by_int.all_theta)
    used = np.random.default_rng(7)
    used.standard_normal(3)
    moved = ndvm.calibrate(p, {"x": X}, y, seed=used, **kw)
    assert not np.array_equal(moved.all_theta, by_int.all_theta)


def test_adam_history_and_shapes() -> None:
    p, y = damped()
    cal = ndvm.calibrate(p, {"x": X}, y, starts=3, steps=25, lr=0.05, optimizer="adam")
    assert cal.history.shape == (26, 3)
    assert cal.evaluations == 26
    assert np.all(np.diff(np.minimum.accumulate(cal.history, axis=0), axis=0) <= 0)
    np.testing.assert_array_equal(cal.all_losses, np.nanmin(cal.history, axis=0))
    assert set(cal.params) == set(p.params)
    assert cal.params["k"] > 0  # constrained space


@pytest.mark.torch
def test_numpy_adam_matches_torch_adam_step_by_step() -> None:
    import torch

    from ndvm.torch import op

    p, y = damped()
    theta0 = p.init_theta() + 0.3 * np.random.default_rng(5).standard_normal((4, 4))
    seen: list[np.ndarray] = []
    obj = ProgramObjective(MSE().prepare(p, {"x": X}, y))

    def recording(theta: np.ndarray, grad: bool = True) -> optim.Eval:
        seen.append(theta.copy())
        return obj(theta, grad)

    recording.dim = obj.dim  # type: ignore[attr-defined]
    steps, lr = 20, 0.07
    optim.Adam(lr=lr).minimize(recording, theta0, steps, optim.Control())

    f = op(p, x=X)
    th = torch.tensor(theta0, requires_grad=True)
    adam = torch.optim.Adam([th], lr=lr)
    target = torch.tensor(y)
    for k in range(steps):
        np.testing.assert_allclose(seen[k], th.detach().numpy(), rtol=1e-13, atol=1e-15)
        adam.zero_grad()
        ((f(th) - target) ** 2).mean(dim=1).sum().backward()
        adam.step()
    np.testing.assert_allclose(seen[steps], th.detach().numpy(), rtol=1e-12, atol=1e-14)


GUARDED = """\
(params (a 0.5) (k 0.3 positive) (c 1.0))
(if (and (< c 0) (> a 1.5)) (sqrt -1.0) (* a (exp (- (* k x)))))
"""


def _guarded_run(c_lane1: float, a_lane1: float, on_failure: str = "drop") -> ndvm.Calibration:
    p = ndvm.compile(GUARDED, inputs=("x",), backend="reference")
    y = 2.0 * np.exp(-0.5 * X)
    init = np.array([[0.5, 0.3, 1.0], [a_lane1, 0.3, c_lane1], [0.8, 0.6, 1.0], [0.2, 0.1, 2.0]])
    return ndvm.calibrate(
        p, {"x": X}, y, starts=4, steps=60, lr=0.05, init=init, on_failure=on_failure,
        optimizer="adam",
    )


def test_nan_lane_does_not_change_other_lanes_bitwise() -> None:
    clean = _guarded_run(c_lane1=1.0, a_lane1=0.9)
    mid = _guarded_run(c_lane1=-1.0, a_lane1=0.9)  # crosses a > 1.5 mid-trajectory
    start = _guarded_run(c_lane1=-1.0, a_lane1=1.6)  # NaN from the first step
    others = [0, 2, 3]
    for bad in (mid, start):
        assert bad.status[1].startswith("failed: non-finite")
        assert all(s == "ok" for i, s in enumerate(bad.status) if i != 1)
        assert np.array_equal(bad.history[:, others], clean.history[:, others])
        assert np.array_equal(bad.all_theta[others], clean.all_theta[others])
    assert np.isnan(mid.history[-1, 1]) and np.isfinite(mid.history[0, 1])
    assert clean.status == ("ok",) * 4


def test_restart_redraws_failed_lane_only() -> None:
    clean = _guarded_run(c_lane1=1.0, a_lane1=0.9)
    rest = _guarded_run(c_lane1=-1.0, a_lane1=1.6, on_failure="restart")
    assert rest.restarts[1] >= 1 and rest.restarts[[0, 2, 3]].sum() == 0
    assert np.array_equal(rest.history[:, [0, 2, 3]], clean.history[:, [0, 2, 3]])


def test_error_lane_reason_is_reported() -> None:
    p = ndvm.compile(
        "(params (a 1.0) (b 1.0)) (if (< b 0) (car 5) (* a x))", inputs=("x",), backend="reference"
    )
    cal = ndvm.calibrate(p, {"x": X}, 2 * X, starts=2, steps=5, init=[[1.0, 1.0], [1.0, -1.0]])
    assert cal.status[0] == "ok"
    assert cal.status[1].startswith("failed: ProgramError")
    assert cal.best == 0


def test_gaussian_nll_learns_noise_and_value_loss() -> None:
    p, y = damped()
    noisy = y + np.random.default_rng(0).normal(0, 0.05, y.shape)
    cal = ndvm.calibrate(p, {"x": X}, noisy, loss="gaussian_nll", steps=60, optimizer="adam+lbfgs")
    resid = noisy - np.asarray(cal.predict())
    assert abs(cal.params["sigma"] - np.sqrt(np.mean(resid**2))) < 1e-6
    fixed = ndvm.calibrate(p, {"x": X}, noisy, loss=GaussianNLL(sigma=0.05), steps=10)
    assert "sigma" not in fixed.params
    q = ndvm.compile("(params (a 3.0)) (square (- a 1.5))")
    cal = ndvm.calibrate(q, {}, loss="value", steps=20, optimizer="lbfgs")
    assert abs(cal.params["a"] - 1.5) < 1e-8


@pytest.mark.torch
def test_callable_loss_goes_through_torch() -> None:
    p, y = damped()

    def l1(value, target):  # type: ignore[no-untyped-def]
        return (value - target).abs().mean(dim=1)

    cal = ndvm.calibrate(p, {"x": X}, y, loss=l1, steps=150, lr=0.02, optimizer="adam")
    assert cal.loss_name == "l1" and cal.loss < 0.01


def test_constraints_early_stop_and_source_string() -> None:
    p, y = damped()
    cal = ndvm.calibrate(
        p, {"x": X}, y, steps=30, constraints={"a": (None, 1.1), "k": (0.35, None)}
    )
    assert cal.params["a"] <= 1.1 + 1e-12 and cal.params["k"] >= 0.35 - 1e-12
    cal = ndvm.calibrate("(* a x)", {"x": X}, 3 * X, starts=1, steps=400, lr=0.05,
                         early_stop=1e-9, optimizer="adam")  # fmt: skip
    assert cal.history.shape[0] < 401 and abs(cal.params["a"] - 3) < 1e-2
    assert cal.status == ("ok",)


def test_native_optimizer_dispatch_is_a_drop_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend with ``optimize`` gets the whole loop; results equal the NumPy path's."""
    from ndvm.backends import registry
    from ndvm.calibrate.losses import Prepared

    calls = []

    def optimize(
        compiled,
        theta0,
        inputs,
        *,
        weight,
        method,
        steps,
        options,
        lower,
        upper,
        early_stop,
        limits,
        dialect,
        lr_schedule,
        target,
        time_limit,
        replay,
    ):  # type: ignore[no-untyped-def]
        calls.append((method, steps, options))
        assert lr_schedule is None and time_limit is None and replay is True
        prog = ndvm.Program(compiled, "reference", limits=limits, dialect=dialect, strict=False)
        inner = optim.Adam(**options) if method == "adam" else optim.LBFGS(**options)
        tr = inner.minimize(
            ProgramObjective(Prepared(prog, dict(inputs), weight, "mse", target=target)),
            theta0,
            steps,
            optim.Control(),
        )
        return {
            "theta": tr.theta,
            "best_theta": tr.best_theta,
            "best_loss": tr.best_loss,
            "history": tr.history,
            "state": tr.state,
            "reasons": tr.reasons,
            "evaluations": tr.evaluations,
        }

    p, y = damped()
    plain = ndvm.calibrate(p, {"x": X}, y, starts=3, steps=15, optimizer="adam", engine="numpy")
    with pytest.raises(ndvm.NdvmError):
        ndvm.calibrate(p, {"x": X}, y, steps=2, engine="native")
    monkeypatch.setattr(registry.get("reference"), "optimize", optimize, raising=False)
    native = ndvm.calibrate(p, {"x": X}, y, starts=3, steps=15, optimizer="adam")
    assert calls and calls[0][0] == "adam" and calls[0][2]["lr"] == 0.05
    assert native.optimizer == "adam" and native.params == plain.params
    np.testing.assert_array_equal(native.history, plain.history)
