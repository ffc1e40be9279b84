"""``ndvm.calibrate.plan``: a plan made once and run on many programs gives each the
``Calibration`` that ``calibrate`` gives it (every compared field, exactly), whatever ran
through the plan before; ``calibrate``'s and ``plan``'s settings agree."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

import ndvm
from ndvm.calibrate import GaussianNLL, Plan, calibrate, plan
from ndvm.calibrate.result import Calibration

X = np.linspace(0.1, 4.0, 40)
Y = 1.3 * np.exp(-0.5 * X) * np.cos(1.7 * X) + 0.01 * np.random.default_rng(0).standard_normal(40)
PROGRAMS = [
    "(params (a 1.0) (b -0.3)) (* a (exp (* b x)))",
    "(params (a 1.0) (b 1.0) (c 0.0)) (* a (cos (+ (* b x) c)))",
    "(params (a 1.0) (b -0.5) (c 1.5)) (* a (exp (* b x)) (cos (* c x)))",
    "(params (a 0.5) (b 2.0)) (/ a (- x b))",  # a pole inside the data: lanes may fail
]
SETTINGS = [
    {},  # auto: Levenberg–Marquardt, default starts in waves
    {"optimizer": "adam", "steps": 60, "starts": 5},
    {"optimizer": "auto", "starts": 4, "on_failure": "restart", "steps": 40},  # Adam + polish
    {"loss": GaussianNLL(), "optimizer": "adam", "steps": 40, "starts": 3},  # learned sigma
    {"sigma": np.full(40, 0.05), "starts": 3},
    {"constraints": {"a": (0.0, 2.0)}, "fixed": {"b": -0.4}, "starts": 3, "steps": 30},
    {"optimizer": "adam", "steps": 30, "starts": 3, "diagnostics": False, "lr_final": 0.01},
    {"engine": "numpy", "optimizer": "lbfgs", "steps": 30, "starts": 2},
]


def _fields(cal: Calibration) -> dict:
    out = {}
    for f in dataclasses.fields(Calibration):
        if f.compare:
            v = getattr(cal, f.name)
            out[f.name] = repr(v.tolist()) if isinstance(v, np.ndarray) else repr(v)
    return out


def _compiled(src: str) -> ndvm.Program:
    return ndvm.compile(src, inputs=("x",))


@pytest.mark.filterwarnings("ignore::ndvm.calibrate.ConvergenceWarning")
@pytest.mark.parametrize("settings", SETTINGS)
def test_a_reused_plan_gives_calibrates_result(settings):
    fit = plan(None, {"x": X}, Y, **settings)
    progs = [_compiled(s) for s in PROGRAMS]
    reused = [_fields(fit.run(p, None, 3)) for p in [*progs, *progs[::-1]]]
    alone = [_fields(calibrate(p, {"x": X}, Y, seed=3, **settings)) for p in progs]
    assert reused[: len(progs)] == alone
    assert reused[len(progs) :] == alone[::-1]  # what ran before does not matter


@pytest.mark.filterwarnings("ignore::ndvm.calibrate.ConvergenceWarning")
def test_a_plan_on_source_text_and_a_generator_seed():
    fit = plan(None, {"x": X}, Y, optimizer="adam", steps=20, starts=4)
    src = "(params (a 1.0) (b -0.3)) (* a (exp (* b x)))"
    got = fit.run(src, None, np.random.default_rng(5), 10.0)
    want = calibrate(src, {"x": X}, Y, optimizer="adam", steps=20, starts=4,
                     seed=np.random.default_rng(5), time_limit=10.0)  # fmt: skip
    assert _fields(got) == _fields(want)


def test_a_plan_checks_data_and_settings_once():
    with pytest.raises(ndvm.NdvmError, match="needs a target"):
        plan(None, {"x": X}, None)
    with pytest.raises(ndvm.NdvmError, match="NaN at row 2"):
        plan(None, {"x": X}, np.where(np.arange(40) == 2, np.nan, Y))
    with pytest.raises(ndvm.NdvmError, match="per-start target"):
        plan(None, {"x": X}, np.tile(Y, (3, 1)), starts=2)
    assert isinstance(plan(None, {"x": X}, Y), Plan)


def test_calibrate_declares_plans_settings_and_the_run_arguments():
    cal = inspect.signature(calibrate).parameters
    fit = inspect.signature(plan).parameters
    assert list(cal) == [*fit, "init", "seed", "time_limit"]
    assert all(cal[k].default == fit[k].default for k in list(fit)[1:])
    with pytest.raises(TypeError, match="stepz"):
        calibrate("(params (a 1.0)) (* a x)", {"x": X}, Y, stepz=3)
