"""The loss-augmented program is built from the model's IR; it must equal the program a user
would write by hand around the model's last form, on every backend, values and gradients."""

from __future__ import annotations

import numpy as np
import pytest

import ndvm
from ndvm.backends import registry
from ndvm.calibrate.losses import TARGET, augmented

MODELS = [
    ("(* a (exp (- (* k x))) (cos (* w x)))", "(* a (exp (- (* k x))) (cos (* w x)))"),
    (
        "(define (f t) (* a (tanh (* b t))))\n(+ (f x) (* 0.5 (f (* 2 x))))",
        "(+ (f x) (* 0.5 (f (* 2 x))))",
    ),
    ("(fold-left + 0 (map (lambda (t) (* a t x)) (list 1 2 3)))", None),
]
BACKENDS = [b for b in ("reference", "native") if b in registry.available()]


def _by_hand(source: str, last: str | None) -> str:
    """The augmented source written out: the last form E becomes (let ((r (- E y))) (* r r))."""
    last = last or source
    head = source[: len(source) - len(last)]
    return f"{head}(let ((r (- {last} y))) (* r r))"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("source,last", MODELS)
def test_augmented_equals_the_hand_written_residual_program(
    backend: str, source: str, last: str | None
) -> None:
    model = ndvm.compile(source, inputs=["x"], backend=backend)
    aug = augmented(model)
    assert aug.inputs == ("x", TARGET) and aug.params == model.params
    assert aug.source == model.source  # errors point into the user's program
    hand = ndvm.compile(_by_hand(source, last), model.params, ["x", "y"], backend=backend)
    rng = np.random.default_rng(0)
    theta = rng.uniform(0.2, 1.5, size=(4, len(model.params)))
    x = np.linspace(0.1, 2.0, 7)
    y = np.sin(x)
    v1, g1 = aug.value_and_grad(theta, x=x, **{TARGET: y})
    v2, g2 = hand.value_and_grad(theta, x=x, y=y)
    np.testing.assert_allclose(v1, v2, rtol=1e-14, atol=0)
    np.testing.assert_allclose(g1, g2, rtol=1e-12, atol=1e-15)
    assert augmented(model) is aug  # cached per model


@pytest.mark.parametrize("backend", BACKENDS)
def test_augmented_keeps_model_positions_in_lane_errors(backend: str) -> None:
    src = "(+ a\n   (vector-ref (vec 1 2) (if (> a 0) 5 0)))"
    model = ndvm.compile(src, strict=False, backend=backend)
    out = augmented(model).eval(np.array([[1.0], [-1.0]]), **{TARGET: 0.0})
    assert list(out.status)[1] == 0 and out.status[0] != 0
    ((_, error),) = out.errors
    assert (error.line, error.column) == (2, 4)
    assert str(error) == str(model.eval(np.array([[1.0]])).errors[0][1])


@pytest.mark.parametrize("engine", ["auto", "numpy"])
@pytest.mark.parametrize("loss", ["mse", "gaussian_nll"])
def test_a_model_without_data_lanes_fits_its_vector_against_the_target(
    engine: str, loss: str
) -> None:
    """A model without data inputs that returns a vector of N meets a target [N] entry for
    entry (N residuals), on either engine: the least-squares line through the points."""
    t = np.array([1.0, 2.0, 3.0, 4.5, 0.5])
    y = np.array([2.0, 4.0, 6.5, 9.0, 1.5])
    src = f"(params (a 1.0) (b 0.0))\n(+ (* a (vector {' '.join(map(str, t))})) b)"
    program = ndvm.compile(src, backend=BACKENDS[-1])
    fit = ndvm.calibrate(program, target=y, loss=loss, engine=engine, steps=400, seed=1)
    a, b = np.polyfit(t, y, 1)
    np.testing.assert_allclose(fit.theta[:2], [a, b], rtol=1e-6, atol=1e-6)
    r2 = 1.0 - np.sum((a * t + b - y) ** 2) / np.sum((y - y.mean()) ** 2)
    np.testing.assert_allclose(fit.r2, r2, rtol=1e-6)


@pytest.mark.parametrize("engine", ["auto", "numpy"])
def test_a_scalar_model_without_data_lanes_fits_the_targets_mean(engine: str) -> None:
    y = np.array([2.0, 4.0, 6.5])
    program = ndvm.compile("(params (a 1.0))\n(* 2 a)", backend=BACKENDS[-1])
    fit = ndvm.calibrate(program, target=y, engine=engine, steps=300, seed=1)
    np.testing.assert_allclose(fit.theta, [y.mean() / 2], rtol=1e-7)
    assert fit.r2 == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("engine", ["auto", "numpy"])
def test_a_scalar_model_without_data_lanes_fits_each_series_mean(engine: str) -> None:
    """One target series per start: the one number of each lane predicts every entry."""
    Y = np.array([[2.0, 4.0, 6.5], [1.0, 1.0, 1.5]])
    program = ndvm.compile("(params (a 1.0))\n(* 2 a)", backend=BACKENDS[-1])
    fit = ndvm.calibrate(program, target=Y, starts=2, engine=engine, steps=300, seed=1)
    assert fit.status == ("ok", "ok")
    np.testing.assert_allclose(fit.all_params[:, 0], Y.mean(axis=1) / 2, rtol=1e-7)
    np.testing.assert_allclose(fit.all_losses, Y.var(axis=1), rtol=1e-6)
