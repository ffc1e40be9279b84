"""A constrained parameter's transform in the native core (``Interp::constrain``): over data
lanes its row form evaluates the transform, and in the reverse sweep its derivative, once per
parameter row. Values and gradients are bitwise those of the same transform applied lane by
lane (the program with a free parameter and the transform written out, which runs the
primitive's lane form), for every constraint kind, both clients, both dtypes, replay on and
off, one and many parameter rows and data lanes, and in the in-runtime optimizers; they agree
with NumPy (values) and central differences (gradients)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from tests.native.run_options import run_options_with

from ndvm import compile as ndvm_compile
from ndvm.backends import native, registry
from ndvm.lang.ir import CONSTRAINTS
from ndvm.prims.constraints import constraint

pytestmark = pytest.mark.native

# the language's constraints and the primitive each one applies (docs/language.md)
PRIMITIVE = {"free": None, "positive": "softplus", "unit": "sigmoid", "signed-unit": "tanh"}
BODY = "(+ (* a (exp (- (* k x)))) (* k (sin (* 2 x))))"  # k read twice: two cotangents
RAW_K = np.array([-2.5, 0.3, 1.7, 31.0, -40.0])  # softplus' both branches, saturated tails


def _programs(kind: str) -> tuple[str, str]:
    """The constrained program and the same computation with the transform written out."""
    fn = PRIMITIVE[kind]
    constrained = f"(params (a 1.0) (k {constraint(kind).forward(np.float64(0.4))} {kind}))\n{BODY}"
    written = f"(params (a 1.0) (k 0.4))\n{BODY}"
    if fn is not None:
        written = f"(params (a 1.0) (kr 0.0))\n(let ((k ({fn} kr))) {BODY})"
    return constrained, written


def _theta(B: int, shift: float = 0.0) -> np.ndarray:
    rows = np.stack([np.linspace(0.5, 2.0, 5), RAW_K + shift], axis=1)
    return rows[:B] if B <= 5 else np.resize(rows, (B, 2)) + 1e-3 * np.arange(B)[:, None]


def _runs(source: str, client: str, dtype: str, replay: bool, B: int, x: np.ndarray,
          dialect: str | None = None) -> list[Any]:  # fmt: skip
    """Three evaluations with gradients (theta, another theta, theta again): the first walks,
    the others replay when ``replay``."""
    prog = ndvm_compile(source, inputs=("x",), backend="native", dialect=dialect)
    backend = registry.get(client)
    out = []
    for theta in (_theta(B), _theta(B, 0.25), _theta(B)):
        opts = {"limits": prog.limits, "dialect": dialect, "dtype": dtype, "replay": replay}
        out.append(backend.run(prog.compiled, theta, {"x": x}, grad=True, cotangent=None, **opts))
    return out


@pytest.mark.parametrize("replay", [True, False])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("client", ["native", "vm"])
@pytest.mark.parametrize(("B", "n"), [(1, 1), (1, 33), (5, 1), (7, 33)])
@pytest.mark.parametrize("kind", CONSTRAINTS)
def test_constrained_parameter_is_the_transform_written_out_bitwise(
    kind: str, B: int, n: int, client: str, dtype: str, replay: bool
) -> None:
    x = np.linspace(0.0, 3.0, n)
    constrained, written = _programs(kind)
    got = _runs(constrained, client, dtype, replay, B, x)
    want = _runs(written, client, dtype, replay, B, x)
    for g, w in zip(got, want, strict=True):
        assert g.value.shape == (B, n)
        np.testing.assert_array_equal(g.value, w.value)
        np.testing.assert_array_equal(g.grad, w.grad)
        assert g.stats["replayed"] == w.stats["replayed"]
    assert [r.stats["replayed"] for r in got] == [False, replay, replay]


def _numpy_value(kind: str, theta: np.ndarray, x: np.ndarray) -> np.ndarray:
    a = theta[:, :1]
    k = constraint(kind).forward(theta[:, 1:])
    return a * np.exp(-k * x) + k * np.sin(2 * x)


@pytest.mark.parametrize("client", ["native", "vm"])
@pytest.mark.parametrize(("B", "n"), [(1, 33), (5, 1), (7, 33)])
@pytest.mark.parametrize("kind", CONSTRAINTS)
def test_constrained_values_and_gradients_match_numpy(kind: str, B: int, n: int,
                                                      client: str) -> None:  # fmt: skip
    """Values against NumPy, gradients (of the sum over data lanes) against central
    differences of the NumPy function; float32 within its precision of float64."""
    x = np.linspace(0.0, 3.0, n)
    theta = _theta(B)
    theta[:, 1] = np.clip(theta[:, 1], -3.0, 3.0)  # where the differences resolve the slope
    prog = ndvm_compile(_programs(kind)[0], inputs=("x",), backend=client)
    value, grad = prog.value_and_grad(theta, x=x)
    np.testing.assert_allclose(value, _numpy_value(kind, theta, x), rtol=1e-13, atol=1e-15)
    h = 1e-6
    fd = np.empty_like(theta)
    for j in range(theta.shape[1]):
        up, down = theta.copy(), theta.copy()
        up[:, j] += h
        down[:, j] -= h
        diff = _numpy_value(kind, up, x) - _numpy_value(kind, down, x)
        fd[:, j] = diff.sum(axis=1) / (2 * h)
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-7)
    v32, g32 = prog.with_options(dtype="float32").value_and_grad(theta, x=x)
    np.testing.assert_allclose(v32, value, rtol=2e-5, atol=1e-5)
    np.testing.assert_allclose(g32, grad, rtol=2e-4, atol=1e-4 * n)


@pytest.mark.parametrize("option", [{"block_rows": 2}, {"chain_lanes": 8}, {"fused": False},
                                    {"pairs": False}, {"dialect": "dmci"}])  # fmt: skip
def test_constrained_parameter_under_run_options(
    option: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocked rows, fused chains (which leave the row form out), the buffered sweep, the
    dmci dialect: the same bits as the transform written out under the same options."""
    dialect = option.pop("dialect", None)
    monkeypatch.setattr(native, "_run_options", run_options_with(**option))
    x = np.linspace(0.0, 3.0, 40)
    for kind in ("positive", "unit", "signed-unit"):
        constrained, written = _programs(kind)
        got = _runs(constrained, "native", "float64", True, 7, x, dialect)
        want = _runs(written, "native", "float64", True, 7, x, dialect)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g.value, w.value)
            np.testing.assert_array_equal(g.grad, w.grad)


def _optimize(source: str, client: str, method: str) -> dict[str, Any]:
    prog = ndvm_compile(source, inputs=("x",), backend="native")
    x = np.linspace(0.1, 3.0, 24)
    target = 1.3 * np.exp(-0.7 * x) + 0.7 * np.sin(2 * x)
    return registry.get(client).optimize(
        prog.compiled, _theta(5), {"x": x}, weight=1.0, method=method, steps=20,
        options={"lr": 0.05} if method == "adam" else {}, lower=None, upper=None,
        early_stop=None, limits=prog.limits, dialect=None, target=target,
    )  # fmt: skip


@pytest.mark.parametrize("method", ["adam", "lbfgs", "lm"])
@pytest.mark.parametrize("client", ["native", "vm"])
def test_in_runtime_optimizer_with_constrained_parameter(client: str, method: str) -> None:
    """Context.optimize (Adam, L-BFGS, LM) evaluates through the row form: its iterates and
    losses are those of the transform written out, bit for bit."""
    for kind in ("positive", "unit", "signed-unit"):
        constrained, written = _programs(kind)
        got, want = _optimize(constrained, client, method), _optimize(written, client, method)
        for name in ("theta", "best_theta", "best_loss", "history"):
            np.testing.assert_array_equal(got[name], want[name], err_msg=f"{kind} {name}")
