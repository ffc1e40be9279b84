"""Property: a generated NumPy skeleton read by ``ndvm.from_numpy`` has the values and the
gradients of the same source run by NumPy (values) and by forward-mode dual numbers over NumPy
(gradients, ``numpy_dual``), to 1e-12 relative, on every data point."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.lang.numpy_dual import reference

import ndvm

N_PARAMS = 6
RNG = np.random.default_rng(7)
X = RNG.uniform(-2.0, 2.0, 7)
Y = RNG.uniform(-2.0, 2.0, 7)
PARAMS = RNG.uniform(-1.5, 1.5, N_PARAMS)

UNARY = (
    "np.sin({a})", "np.cos({a})", "np.tanh({a})", "np.arctan({a})", "-{a}", "({a}) ** 2",
    "({a}) ** 3", "np.exp(np.clip({a}, -3.0, 3.0))", "np.log(1.0 + np.abs({a}))",
    "np.sqrt(np.abs({a}) + 0.1)", "np.power(np.abs({a}) + 0.5, 1.5)",
    "(np.abs({a}) + 0.5) ** params[{p}]", "np.sign({a}) * params[{p}]",
)  # fmt: skip
BINARY = (
    "{a} + {b}", "{a} - {b}", "{a} * {b}", "{a} / (1.0 + ({b}) ** 2)", "np.maximum({a}, {b})",
    "np.minimum({a}, {b})", "np.where({a} > {b}, {a}, 0.5 * {b})",
    "({a} if {b} > 0.2 else -{a})", "params[{p}] * {a} - {b} / 2",
)  # fmt: skip


@st.composite
def exprs(draw: st.DrawFn, names: tuple[str, ...], depth: int) -> str:
    kind = draw(st.integers(0, 2 if depth > 0 else 0))
    if kind == 0:
        leaf = draw(st.integers(0, 2))
        if leaf == 0:
            return draw(st.sampled_from(names))
        if leaf == 1:
            return f"params[{draw(st.integers(0, N_PARAMS - 1))}]"
        return repr(draw(st.sampled_from([0.5, 1.25, 2.0, 3.0, 0.1])))
    p = draw(st.integers(0, N_PARAMS - 1))
    a = draw(exprs(names, depth - 1))
    if kind == 1:
        return "(" + draw(st.sampled_from(UNARY)).format(a=a, p=p) + ")"
    b = draw(exprs(names, depth - 1))
    return "(" + draw(st.sampled_from(BINARY)).format(a=a, b=b, p=p) + ")"


@st.composite
def skeletons(draw: st.DrawFn) -> str:
    names: tuple[str, ...] = ("x", "y")
    head = []
    if draw(st.booleans()):
        head = ["def helper(u, params):", "    return params[1] * np.tanh(u) + u", ""]
    body = []
    for k in range(draw(st.integers(0, 3))):
        # "* 1.0": a new array (or a NumPy scalar), never an alias of an input, so that
        # "v += ..." below is NumPy's in-place update of v alone (aliases: test_numpy_reader)
        body.append(f"    v{k} = ({draw(exprs(names, 2))}) * 1.0")
        names += (f"v{k}",)
    if len(names) > 2 and draw(st.booleans()):
        op = draw(st.sampled_from(["+", "-", "*"]))
        body.append(f"    {names[-1]} {op}= {draw(exprs(names, 1))}")
    if draw(st.booleans()):
        body += ["    acc = 0.0", "    for i in range(3):",
                 f"        acc = acc + params[i + 1] * {draw(exprs(names, 1))}"]
        names += ("acc",)
    ret = " + ".join([draw(exprs(names, 3)), *names[2:]])  # every local reaches the result
    if head and draw(st.booleans()):
        ret = f"helper({ret}, params)"
    return "\n".join([*head, "def equation(x, y, params):", *body, f"    return {ret}", ""])


def _check(source: str) -> None:
    prog = ndvm.from_numpy(source)
    assert prog.inputs == ("x", "y")
    used = [int(name[1:]) for name in prog.params]  # p{i} is params[i]
    value, grad = prog.value_and_grad(PARAMS[used], None, {"x": X, "y": Y})
    ref_v, ref_g, scale = reference(source, "equation", [X, Y], PARAMS)
    value = np.broadcast_to(np.asarray(value), ref_v.shape)
    tol_v = 1e-12 * max(1.0, float(np.max(np.abs(ref_v))))
    np.testing.assert_allclose(value, ref_v, rtol=1e-12, atol=tol_v)
    atol = 1e-12 * (1.0 + float(np.max(scale, initial=0.0)))
    np.testing.assert_allclose(grad, ref_g[used], rtol=1e-12, atol=atol)
    unused = np.setdiff1d(np.arange(N_PARAMS), used)
    assert np.all(ref_g[unused] == 0.0)  # an index the skeleton never reads: no gradient
    if " if " not in source:  # NumPy itself, vectorized (a conditional expression needs scalars)
        namespace = {"np": np, "__builtins__": {"range": range}}
        exec(source, namespace)  # the test's reference only: generated, trusted text
        with np.errstate(all="ignore"):
            ref = np.broadcast_to(namespace["equation"](X, Y, PARAMS), ref_v.shape)
        np.testing.assert_allclose(value, ref, rtol=1e-12, atol=tol_v)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(skeletons())
def test_generated_skeletons_match_numpy_values_and_gradients(source: str) -> None:
    _check(source)


@pytest.mark.parametrize(
    "source",
    [
        "def equation(x, y, params):\n    return params[0] * x + params[1] * y ** 2\n",
        "def equation(x, y, params):\n    a = np.clip(params[0] * x, -1.0, params[2])\n"
        "    a *= np.exp(-np.abs(y) * params[1])\n    return np.where(a > 0.1, a, params[3] * a)\n",
        "def equation(x, y, params):\n    r = 0.0\n    for k in range(4):\n"
        "        r += params[k] * x ** k\n    return r / (1.0 + (params[4] * y) ** 2)\n",
    ],
)
def test_hand_written_skeletons_match(source: str) -> None:
    _check(source)
