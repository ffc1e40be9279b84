"""exp, log, sin and cos through the core's vector math (``cpp/src/vmath.cpp``: glibc's libmvec
where it loads, else libm): values and derivatives within a few ulps of NumPy's, in both
dtypes and clients; a lane's bits the same alone and at any position of any batch (the vector
tail is padded, never computed by a different routine); the libm fallback agrees."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ndvm
from ndvm.backends import native

pytestmark = pytest.mark.native

ROOT = Path(__file__).resolve().parents[2]

# value, derivative (NumPy), and points that cover each function's range and special regions
FUNCS = {
    "exp": (np.exp, np.exp),
    "log": (np.log, np.reciprocal),
    "sin": (np.sin, np.cos),
    "cos": (np.cos, lambda x: -np.sin(x)),
}


def _points(name: str) -> np.ndarray:
    if name == "exp":
        return np.concatenate([np.linspace(-700.0, 700.0, 389), [-1e-300, 0.0, 1e-8, 709.5]])
    if name == "log":
        return np.concatenate([np.geomspace(1e-300, 1e300, 389), [0.5, 1.0, 2.0, np.e]])
    trig = np.linspace(-40.0, 40.0, 389)
    return np.concatenate([trig, [0.0, 1e-300, 3e-9, np.pi, 1e5 + 0.25, -2.5e6]])


# libmvec's documented bound is 4 ulp; NumPy's own result is within about 1 ulp of the truth
ULPS = {"float64": 6, "float32": 6}


def _within_ulps(got: np.ndarray, want: np.ndarray, dtype: str) -> None:
    kind = np.float32 if dtype == "float32" else np.float64
    want = want.astype(kind)
    got = np.asarray(got, dtype=kind)
    tol = ULPS[dtype] * np.spacing(np.abs(want)).astype(np.float64)
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    bad = ~(err <= tol) & ~(got == want)
    assert not bad.any(), (got[bad][:5], want[bad][:5])


def _run(name: str, x: np.ndarray, backend: str, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    prog = ndvm.compile(f"({name} a)", params={"a": 1.0}, backend=backend, dtype=dtype)
    res = prog.evaluate(x[:, None], grad=True)
    return res.value.reshape(-1), res.grad.reshape(-1)


def test_the_implementation_is_named() -> None:
    assert native._core.vector_math() in ("libmvec-avx2", "libmvec-sse2", "libm")
    assert native._core32.vector_math() == native._core.vector_math()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(FUNCS))
def test_values_and_derivatives_within_ulps_of_numpy(name: str, dtype: str, client: str) -> None:
    kind = np.float32 if dtype == "float32" else np.float64
    with np.errstate(all="ignore"):  # the float32 range of exp, the domain of log
        x = _points(name).astype(kind)
        x = x[np.isfinite(FUNCS[name][0](x)) & np.isfinite(FUNCS[name][1](x))]
    value, grad = _run(name, x.astype(np.float64), client, dtype)
    f, df = FUNCS[name]
    _within_ulps(value, f(x), dtype)
    if name == "log":  # 1/x: one correctly rounded division
        np.testing.assert_array_equal(grad.astype(kind), df(x))
    else:
        _within_ulps(grad, df(x), dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(FUNCS))
def test_a_lane_has_the_same_bits_alone_and_anywhere_in_a_batch(
    name: str, dtype: str, client: str
) -> None:
    x = _points(name)[::37][:11]  # 11 lanes: not a multiple of 2, 4 or 8
    value, grad = _run(name, x, client, dtype)
    order = np.random.default_rng(0).permutation(x.size)
    shuffled = _run(name, x[order], client, dtype)
    np.testing.assert_array_equal(shuffled[0], value[order])
    np.testing.assert_array_equal(shuffled[1], grad[order])
    for k in range(x.size):
        one = _run(name, x[k : k + 1], client, dtype)
        assert one[0][0] == value[k] or (np.isnan(one[0][0]) and np.isnan(value[k]))
        assert one[1][0] == grad[k] or (np.isnan(one[1][0]) and np.isnan(grad[k]))


def test_data_lanes_and_parameter_lanes_agree_bitwise() -> None:
    """The same x through a data input (one record over its rows) and through parameter
    lanes, inside a larger expression: the same bits element by element."""
    x = np.linspace(-3.0, 3.0, 23)
    src = "(+ (exp (* a x)) (sin (* a x)) (cos (* a x)) (log (+ 4 (* a x))))"
    prog = ndvm.compile(src, params={"a": 1.0}, inputs=["x"])
    by_data = prog.evaluate(np.ones((1, 1)), {"x": x}).value.reshape(-1)
    theta = np.ones((x.size, 1))
    by_lane = np.array([prog.evaluate(theta[:1], {"x": v}).value.item() for v in x])
    np.testing.assert_array_equal(by_data, by_lane)


def test_the_libm_fallback_agrees_within_ulps() -> None:
    """NDVM_NO_LIBMVEC=1 makes a process use the scalar C library; its values agree with the
    vector path's to the same tolerance (and equal NumPy's on the same points)."""
    code = (
        "import json, numpy as np, ndvm; from ndvm.backends import native\n"
        "x = np.linspace(-20.0, 20.0, 41)[:, None]\n"
        "p = ndvm.compile('(+ (sin a) (cos a) (exp a))', params={'a': 1.0})\n"
        "r = p.evaluate(x, grad=True)\n"
        "print(json.dumps([native._core.vector_math(), r.value.ravel().tolist(),"
        " r.grad.ravel().tolist()]))\n"
    )
    env = dict(os.environ, NDVM_NO_LIBMVEC="1")
    env["PYTHONPATH"] = os.pathsep.join([str(Path(ndvm.__file__).parents[1]), str(ROOT)])
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120, check=True)  # fmt: skip
    kind, value, grad = json.loads(out.stdout.strip().splitlines()[-1])
    assert kind == "libm"
    x = np.linspace(-20.0, 20.0, 41)
    prog = ndvm.compile("(+ (sin a) (cos a) (exp a))", params={"a": 1.0})
    here = prog.evaluate(x[:, None], grad=True)
    for got, want in ((value, here.value.ravel()), (grad, here.grad.ravel()),
                      (value, np.sin(x) + np.cos(x) + np.exp(x))):  # fmt: skip
        # a sum of three terms: a few ulps of the largest term
        scale = np.abs(np.sin(x)) + np.abs(np.cos(x)) + np.exp(x)
        assert np.all(np.abs(np.asarray(got) - want) <= 16 * np.spacing(scale))
