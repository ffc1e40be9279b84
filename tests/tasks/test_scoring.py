"""Regression scores from one evaluation of the joined splits equal the scores computed split
by split from ``Calibration.predict`` (``ndvm.tasks.scoring``), finite or not."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ndvm
from ndvm import tasks
from ndvm.backends import registry
from ndvm.backends.inputs import Prepared, prepared
from ndvm.errors import NdvmError
from ndvm.tasks import scoring
from ndvm.tasks.base import Task, regression_score


def _by_split(cal, data) -> dict[str, float]:
    """The scores computed independently: each split predicted on its own, NumPy sums."""
    out = {"train_mse": float(cal.loss)}
    for name, x, y in (("test", data.test_inputs, data.test_target),
                       ("validation", data.valid_inputs, data.valid_target)):  # fmt: skip
        if x is None:
            continue
        y = np.asarray(y, dtype=np.float64)
        pred = np.asarray(cal.predict(dict(x)), dtype=np.float64).reshape(-1)
        with np.errstate(all="ignore"):
            ss_res = float(np.sum((pred - y) ** 2))
        out[f"{name}_mse"] = ss_res / y.size
        ss_tot = float(np.sum((y - y.mean()) ** 2))
        out[f"{name}_r2"] = 1.0 - ss_res / ss_tot if np.isfinite(pred).all() else -math.inf
    return out


def _same(a: dict[str, float], b: dict[str, float]) -> None:
    assert a.keys() == b.keys()
    for k in a:
        if math.isnan(b[k]):
            assert math.isnan(a[k]), k
        else:
            assert a[k] == pytest.approx(b[k], rel=1e-12, abs=1e-300), k


@pytest.mark.parametrize(
    "src",
    [
        "(* a (exp (* b x)) (cos (+ (* c x) d)))",
        "(+ a (* b x))",
        "(log (- x a))",  # NaN on the points below a
        "(exp (* 400 (+ a x)))",  # inf everywhere: MSE inf, R² -inf
        "(/ a (- x 3))",  # large near x = 3
    ],
)
def test_joined_scores_equal_split_by_split(src):
    task = tasks.get("sr-damped").for_search()
    data = task.data()
    assert data.valid_inputs is not None  # both splits are scored
    cal = task.calibrate(src, starts=2, seed=1, diagnostics=False)
    got = regression_score(cal, data)
    _same(got, _by_split(cal, data))


def test_scores_of_a_task_without_a_validation_split():
    task = tasks.get("sr-damped")  # no validation split: the test split alone
    cal = task.calibrate("(+ a (* b x))", starts=1, seed=0, diagnostics=False)
    got = regression_score(cal, task.data())
    assert set(got) == {"train_mse", "test_mse", "test_r2"}
    _same(got, _by_split(cal, task.data()))


def test_scores_of_a_data_task_with_two_inputs():
    rng = np.random.default_rng(2)
    X = rng.uniform(0.5, 2.0, (80, 2))
    task = Task.from_arrays(X, X[:, 0] / (1.0 + X[:, 1]), names=["u", "v"], steps=20)
    cal = task.calibrate("(/ (* a u) (+ b v))", starts=2, seed=0, diagnostics=False)
    got = task.score(cal, task.data())
    _same(got, _by_split(cal, task.data()))
    assert got["validation_r2"] > 0.9


@pytest.mark.parametrize("backend", ["native", "vm", "reference"])
def test_prepared_inputs_evaluate_bitwise_as_the_mapping(backend):
    """``Prepared`` (inputs checked and laid out once, what scoring evaluates the held-out
    splits on) gives the evaluation of the plain mapping, bit for bit, on every backend."""
    rng = np.random.default_rng(3)
    inputs = {"x": rng.uniform(-2.0, 2.0, 37), "y": rng.uniform(0.1, 3.0, 37)}
    prog = ndvm.compile("(+ (* a (sin x)) (/ b y))", inputs=("x", "y"), backend=backend,
                        free_params=True)  # fmt: skip
    theta = rng.standard_normal((3, 2))
    got = prog.evaluate(theta, Prepared(("x", "y"), inputs))
    want = prog.evaluate(theta, dict(inputs))
    assert got.value.tobytes() == want.value.tobytes()
    assert (got.status == want.status).all() and got.data_lanes == want.data_lanes
    # laid out for other inputs (another order): read as the mapping it is
    other = prog.evaluate(theta, Prepared(("y", "x"), inputs))
    assert other.value.tobytes() == want.value.tobytes()


def test_prepared_inputs_check_what_the_mapping_checks():
    with pytest.raises(NdvmError, match="missing input"):
        Prepared(("x", "y"), {"x": np.ones(3)})
    with pytest.raises(NdvmError, match="not numeric"):
        Prepared(("x",), {"x": np.array(["a", "b"])})
    p = Prepared(("x",), {"x": [1.0, 2.0]})
    assert list(p) == ["x"] and len(p) == 1 and list(p["x"]) == [1.0, 2.0]


@pytest.mark.parametrize("src", ["(+ a (* b x))", "(log (- x a))", "(if (< x a) 1 (* b x))"])
def test_scores_on_prepared_inputs_equal_those_on_the_mapping(src):
    """The scores from the prepared held-out inputs are bitwise those of evaluating the
    joined mapping itself (``Program.evaluate`` on a dict)."""
    task = tasks.get("sr-damped").for_search()
    data = task.data()
    cal = task.calibrate(src, starts=2, seed=4, diagnostics=False)
    plan = scoring._score_plan(data)
    assert plan.joint is not None
    lean = scoring._joint_values(cal, prepared(plan.prepared, cal.program.inputs, plan.joint))
    plain = scoring._joint_values(cal, dict(plan.joint))
    assert lean.tobytes() == plain.tobytes()
    _same(regression_score(cal, data), _by_split(cal, data))


def test_lean_values_report_failing_lanes_as_run_does():
    """The native backend's ``values`` (what scoring and the funnel evaluate prepared inputs
    with) gives ``run``'s value grid and its lane errors (the same masks, classes, messages
    and positions), and None for a value that is not numeric (``run`` then reports)."""
    prog = ndvm.compile('(if (< x 0) (error "negative") (* a x))', inputs=("x",),
                        backend="native", strict=False, free_params=True)  # fmt: skip
    lean = registry.get("native").values
    theta = np.array([[1.5], [-2.0]])
    for xs in ([-1.0, 1.0], [2.0, 1.0, 0.5]):
        inputs = Prepared(("x",), {"x": np.array(xs)})
        value, lanes, errors = lean(prog.compiled, theta, inputs, limits=prog.limits,
                                    dialect=None)  # fmt: skip
        want = prog.evaluate(theta, dict(inputs))
        assert lanes and value.tobytes() == want.value.tobytes()
        got = [(m.tolist(), type(e), str(e), e.lanes, e.line, e.column) for m, e in errors]
        assert got == [(m.tolist(), type(e), str(e), e.lanes, e.line, e.column)
                       for m, e in want.errors]  # fmt: skip
        assert bool(errors) == (min(xs) < 0)
    listy = ndvm.compile("(list a x)", inputs=("x",), backend="native", strict=False,
                         free_params=True)  # fmt: skip
    inputs = Prepared(("x",), {"x": np.array([1.0, 2.0])})
    assert lean(listy.compiled, theta, inputs, limits=listy.limits, dialect=None) is None


@pytest.mark.parametrize(
    "src", ["(* a (exp (* b x)) (cos (+ (* c x) d)))", "(log (- x a))", "(exp (* 400 (+ a x)))"]
)
def test_one_split_scores_are_its_own_predictions_bit_for_bit(src):
    """A task with a test split and no validation split (the joined inputs are the test
    inputs): the scores are those of ``Calibration.predict`` on the test inputs, with the
    same arithmetic, to the last bit."""
    task = tasks.get("sr-damped")
    data = task.data()
    assert data.valid_inputs is None
    cal = task.calibrate(src, starts=3, seed=2, diagnostics=False)
    y = np.asarray(data.test_target, dtype=np.float64)
    pred = np.asarray(cal.predict(dict(data.test_inputs)), dtype=np.float64).reshape(-1)
    with np.errstate(all="ignore"):
        d = pred - y
        sq = float(d @ d)
    ss_tot = float(((y - y.mean()) ** 2).sum())
    finite = bool(np.isfinite(pred).all())
    want = {"train_mse": float(cal.loss), "test_mse": sq / y.size,
            "test_r2": 1.0 - sq / ss_tot if finite else -math.inf}  # fmt: skip
    got = regression_score(cal, data)
    assert got.keys() == want.keys()
    for k in want:
        assert got[k] == want[k] or (math.isnan(got[k]) and math.isnan(want[k])), k
