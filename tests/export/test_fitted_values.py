"""to_torch / to_jax start from fitted values (a Calibration or values by name): the exported
model's values equal ndvm's at the fitted parameters, constraints included."""

from __future__ import annotations

import numpy as np
import pytest

import ndvm
import ndvm.export
from ndvm.export.binding import start_theta

SRC = "(params (a 0.5) (k 1.0 positive) (p 0.3 unit)) (+ (* a (exp (- (* k x)))) p)"
X = np.linspace(0.0, 3.0, 50)


def _fitted() -> tuple[ndvm.Program, ndvm.Calibration]:
    prog = ndvm.compile(SRC, inputs=["x"])
    y = 2.0 * np.exp(-0.7 * X) + 0.2
    cal = ndvm.calibrate(prog, {"x": X}, y, starts=4, steps=300, warn=False)
    assert cal.ok and abs(cal.params["k"] - 0.7) < 0.05  # far from the declared values
    return prog, cal


def test_start_theta_of_values_and_calibration() -> None:
    prog, cal = _fitted()
    np.testing.assert_allclose(start_theta(prog, cal), cal.theta[: len(prog.params)])
    by_name = start_theta(prog, {n: cal.params[n] for n in prog.params})
    np.testing.assert_allclose(prog.constrain(by_name), [cal.params[n] for n in prog.params],
                               rtol=1e-12)  # fmt: skip
    np.testing.assert_allclose(start_theta(prog), prog.init_theta())
    with pytest.raises(ndvm.NdvmError, match="missing parameters"):
        start_theta(prog, {"a": 1.0})
    with pytest.raises(ndvm.NdvmError, match="unknown"):
        start_theta(prog, {"a": 1.0, "k": 1.0, "p": 0.5, "zz": 1.0})
    with pytest.raises(ndvm.NdvmError, match="values"):
        start_theta(prog, {"a": 1.0, "k": -1.0, "p": 0.5})  # outside 'positive'
    with pytest.raises(ndvm.NdvmError, match="mapping"):
        start_theta(prog, [1.0, 2.0, 0.5])


@pytest.mark.torch
def test_torch_with_fitted_values_equals_ndvm() -> None:
    import torch

    prog, cal = _fitted()
    want = np.asarray(prog.eval(cal.theta[: len(prog.params)], x=X))
    for values in (cal, {n: cal.params[n] for n in prog.params}):
        module = ndvm.export.to_torch(prog, values=values)
        got = module(x=torch.tensor(X)).detach().numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
        assert module.constrained() == pytest.approx(
            {n: cal.params[n] for n in prog.params}, rel=1e-12
        )


@pytest.mark.jax
def test_jax_with_fitted_values_equals_ndvm() -> None:
    import jax

    prog, cal = _fitted()
    want = np.asarray(prog.eval(cal.theta[: len(prog.params)], x=X))
    with jax.enable_x64(True):
        for values in (cal, {n: cal.params[n] for n in prog.params}):
            fn, params = ndvm.export.to_jax(prog, values=values)
            got = np.asarray(jax.jit(fn)(params, x=X))
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
