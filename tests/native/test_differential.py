"""Native vs reference backend: values, gradients, per-lane status and errors must agree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ndvm

pytestmark = pytest.mark.native

ROOT = Path(__file__).resolve().parents[2]
X = np.linspace(-1.5, 2.5, 11)
RNG_Y = np.random.default_rng(7).normal(size=(80, 2)).cumsum(axis=0)

# (name, source, inputs); theta lanes are drawn per test.
PROGRAMS: list[tuple[str, str, dict[str, Any]]] = [
    ("arith", "(+ (* a b) (/ a (+ 2 b)) (- a) (- a b 1))", {}),
    ("unary", "(+ (exp (* 0.3 a)) (sin b) (tanh a) (sigmoid b) (softplus a) (erf b))", {}),
    ("more-unary", "(+ (log1p (square a)) (expm1 (* 0.1 b)) (cbrt a) (atan a b) (hypot a b))", {}),
    ("expt", "(+ (expt (abs a) b) (pow 2 a) (log (+ 3 (abs a)) 2))", {}),
    ("minmax", "(+ (min a b 0.5) (max a b) (clamp a -0.5 0.5) (abs b))", {}),
    ("piecewise", "(+ (floor a) (round b) (* a (sign b)) (modulo a 0.7) (remainder b 0.3))", {}),
    ("sr", "(* a (exp (- (* b x))) (cos (+ (* c x) d)))", {"x": X}),
    ("let", "(let* ((u (* a x)) (v (+ u b))) (let ((w (* u v))) (- w u)))", {"x": X}),
    ("lambda", "(define (f u) (* u u a)) (define g (lambda (v w) (+ (f v) w))) (g b x)", {"x": X}),
    ("named-let", "(let loop ((k 0) (s 0)) (if (= k 10) s (loop (+ k 1) (+ s (* a k b)))))", {}),
    ("do-loop", "(do ((i 0 (+ i 1)) (acc 1 (* acc a))) ((= i 4) (+ acc b)))", {}),
    ("uniform-if", "(if (> 2 1) (* a b) (- a b))", {}),
    ("divergent-if", "(if (> a 0) (* a a b) (- b a))", {}),
    ("divergent-data", "(if (> (* a x) 0.5) (* b x) (sin (* a x)))", {"x": X}),
    ("cond", "(cond ((< a -0.5) (* 2 a)) ((< a 0.5) (* b b)) (else (+ a b)))", {}),
    ("and-or", "(if (or (> a 1) (and (< b 0) (> a -1))) (* a b) (+ a b))", {}),
    ("or-value", "(let ((t (or (> a 0) 5))) (if (number? t) (* t b) (+ a b)))", {}),
    (
        "loop-divergent",
        "(let loop ((k 0) (s a)) (if (> s 3) (+ s k) (loop (+ k 1) (+ (* (abs s) 1.5) 0.7))))",
        {},
    ),
    ("vectors", "(let ((v (vec a b (* a b)))) (+ (dot v v) (vsum v) (norm v) (ref v 2)))", {}),
    (
        "matrices",
        "(let ((m (mat (vec a b) (vec b (+ 3 a))))) "
        "(+ (det m) (trace (matmul m m)) (logdet (+ (eye 2) (matmul m (transpose m)))) "
        "(vsum (matvec (inv (+ (eye 2) (matmul m (transpose m)))) (vec 1 a)))))",
        {},
    ),
    (
        "solve-chol",
        "(let* ((m (mat (vec (+ 3 (* a a)) b) (vec b (+ 2 (* b b))))) "
        "(l (cholesky m)) (s (solve m (vec a 1)))) (+ (vsum (vector-map (lambda (z) z) s)) "
        "(ref l 1 0) (ref l 1 1)))",
        {},
    ),
    (
        "vector-ops",
        "(let ((v (vec a b 1)) (w (vec b 2 a))) "
        "(+ (vsum (cross v w)) (vsum (normalize v)) (vmean (scale w a)) (trace (outer v w))))",
        {},
    ),
    (
        "scale-orders",
        "(let ((m (mat (vec a 1) (vec b 2)))) (+ (trace (matmul (scale a (eye 2)) m)) "
        "(det (scale m b)) (vsum (scale 2 (vec a b))) (vsum (scale (vec b a) (* a b)))))",
        {},
    ),
    ("elementwise-vec", "(vsum (+ (* a (vec 1 2 3)) (exp (vec b a 0)) 1))", {}),
    ("vector-result", "(vec a (* a b) (sin b))", {}),
    ("matrix-result", "(mat (vec a b) (vec (* a b) 1))", {}),
    (
        "lists",
        "(let ((l (list a b (* a b)))) (+ (car l) (cadr l) (length l) "
        "(apply + l) (fold-left + 0 (map (lambda (z) (* z z)) l))))",
        {},
    ),
    ("list-result", '(list a (* a b) \'sym "str" #t)', {}),
    ("iota", "(apply + (map (lambda (k) (* k a)) (iota 5 1 b)))", {}),
    (
        "divergent-structure",
        "(let ((r (if (> a 0) (list a b) (* a b)))) (if (pair? r) (car r) r))",
        {},
    ),
    ("divergent-index", "(let ((v (vec a b 3))) (ref v (if (> a 0) 0 2)))", {}),
    ("kalman80", (ROOT / "examples" / "kalman80.scm").read_text(), {"Y": ndvm.const(RNG_Y)}),
    ("damped", (ROOT / "examples" / "damped.scm").read_text(), {"x": X}),
    ("lane-error", "(if (> a 0) (car a) (* a b))", {}),
    ("all-error", "(+ a (car b))", {}),
    ("error-prim", '(if (> a 0) (error "bad lane" a \'sym) b)', {}),
    ("assert", "(begin (assert (> a -0.5)) (* a b))", {}),
    ("shape-error", "(if (> a 0) (dot (vec a b) (vec a b 1)) a)", {}),
    # integers beyond int64 as sizes and indices: the same message (clamped to its bounds)
    ("huge-size", "(if (> a 0) (vsum (ones (* (abs b) 1e30))) (+ a b))", {}),
    ("huge-index", "(if (> a 0) (list-ref (list a b) (* (sign b) 1e30)) (ref (vec a) 1e19))", {}),
    ("nonfinite", "(/ a (- b b))", {}),
    ("dmci-like", "(+ (sqrt a) (log b))", {}),
]


def _theta(source: str, inputs: dict[str, Any], B: int, seed: int) -> tuple[Any, np.ndarray]:
    prog = ndvm.compile(source, inputs=tuple(inputs), backend="reference", strict=False)
    rng = np.random.default_rng(seed)
    return prog, rng.normal(size=(B, len(prog.params)))


def _evaluate(
    source: str, inputs: dict[str, Any], theta: np.ndarray, backend: str, dialect: str | None = None
) -> Any:
    prog = ndvm.compile(
        source, inputs=tuple(inputs), backend=backend, strict=False, dialect=dialect
    )
    try:
        return prog.evaluate(theta, inputs, grad=True)
    except ndvm.NdvmError as exc:
        if "numeric result" not in str(exc):
            raise
        return prog.evaluate(theta, inputs, grad=False)


def _same_errors(a: list[Any], b: list[Any]) -> None:
    assert len(a) == len(b)
    for (ma, ea), (mb, eb) in zip(a, b):
        np.testing.assert_array_equal(ma, mb)
        assert type(ea) is type(eb)
        assert (ea.line, ea.column, ea.lanes) == (eb.line, eb.column, eb.lanes)
        assert ea.message == eb.message


def _same_values(a: np.ndarray, b: np.ndarray, numeric: bool, rtol: float) -> None:
    if numeric:
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-13, equal_nan=True)
        return
    assert a.shape == b.shape
    for x, y in zip(a.reshape(-1), b.reshape(-1)):
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            np.testing.assert_allclose(x, y, rtol=rtol)
        elif isinstance(x, list):
            assert repr(x) == repr(y) or np.allclose(
                [v for v in x if isinstance(v, float)],
                [v for v in y if isinstance(v, float)],
                rtol=rtol,
            )
        else:
            assert x == y or (x != x and y != y), (x, y)


@pytest.mark.parametrize("name,source,inputs", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_native_matches_reference(
    name: str, source: str, inputs: dict[str, Any], client: str
) -> None:
    _, theta = _theta(source, inputs, 6, seed=len(name))
    ref = _evaluate(source, inputs, theta, "reference")
    nat = _evaluate(source, inputs, theta, client)
    assert ref.numeric == nat.numeric
    assert ref.data_lanes == nat.data_lanes
    np.testing.assert_array_equal(ref.status, nat.status)
    _same_values(ref.value, nat.value, ref.numeric, 1e-12)
    _same_errors(ref.errors, nat.errors)
    if ref.grad is not None:
        np.testing.assert_allclose(nat.grad, ref.grad, rtol=1e-10, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("name,source,inputs", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_native_lanes_equal_single_runs(
    name: str, source: str, inputs: dict[str, Any], client: str
) -> None:
    _, theta = _theta(source, inputs, 5, seed=len(name) + 1)
    full = _evaluate(source, inputs, theta, client)
    for b in range(theta.shape[0]):
        one = _evaluate(source, inputs, theta[b : b + 1], client)
        np.testing.assert_array_equal(one.status[0], full.status[b])
        if full.numeric and one.numeric:
            np.testing.assert_array_equal(one.value[0], full.value[b])
            if full.grad is not None:
                np.testing.assert_array_equal(one.grad[0], full.grad[b])


def test_native_dmci_dialect_matches_reference(client: str) -> None:
    source = "(+ (sqrt a) (log b) (log b 3))"
    theta = np.array([[1.0, 2.0], [-1.0, 1e-12], [0.0, -3.0]])
    ref = _evaluate(source, {}, theta, "reference", dialect="dmci")
    nat = _evaluate(source, {}, theta, client, dialect="dmci")
    np.testing.assert_allclose(nat.value, ref.value, rtol=1e-12, equal_nan=True)
    np.testing.assert_allclose(nat.grad, ref.grad, rtol=1e-10, equal_nan=True)


def test_native_dmci_substitutions_match_reference(client: str) -> None:
    source = (
        "(+ (modulo a 0.7) (* 3 (remainder b 0.3)) (ref (normalize (vec a b)) 0) "
        "(let ((a 2) (c (* a b))) c))"
    )
    theta = np.array([[1.3, -2.1], [0.0, 0.0], [-2.6, 1e-9], [3e-9, 0.4]])
    ref = _evaluate(source, {}, theta, "reference", dialect="dmci")
    nat = _evaluate(source, {}, theta, client, dialect="dmci")
    np.testing.assert_allclose(nat.value, ref.value, rtol=1e-13)
    np.testing.assert_allclose(nat.grad, ref.grad, rtol=1e-13)
    plain = _evaluate(source, {}, theta[:1], "reference")
    assert not np.allclose(plain.value, ref.value[:1])


def test_native_cotangent_matches_reference(client: str) -> None:
    source = "(vec (* a x) (sin (* b x)))"
    inputs = {"x": X}
    theta = np.random.default_rng(3).normal(size=(4, 2))
    ct = np.random.default_rng(4).normal(size=(4, X.size, 2))
    out = []
    for backend in ("reference", client):
        prog = ndvm.compile(source, inputs=("x",), backend=backend)
        out.append(prog.evaluate(theta, inputs, grad=True, cotangent=ct).grad)
    np.testing.assert_allclose(out[1], out[0], rtol=1e-10)


@pytest.mark.parametrize("core", ["_core", "_core32"])
def test_native_has_every_row(core: str) -> None:
    """Every NUMERIC, PREDICATE, STRUCTURAL and CONTROL primitive has its row in both cores."""
    import importlib

    module = importlib.import_module(f"ndvm.{core}")
    assert module.dtype == ("float32" if core == "_core32" else "float64")
    assert module.missing_kernels() == []


def test_native_singular_and_nan_lanes_match_reference(client: str) -> None:
    source = (
        "(let ((m (mat (vec a 1 0) (vec 1 a b) (vec 0 b 2)))) "
        "(vec (det m) (logdet m) (vsum (matvec (inv m) (vec 1 2 3)))))"
    )
    theta = np.array([[1.0, 0.0], [2.0, 1.0], [np.nan, 0.5], [0.0, 0.0], [-3.0, 2.0]])
    ref = _evaluate(source, {}, theta, "reference")
    nat = _evaluate(source, {}, theta, client)
    np.testing.assert_array_equal(ref.status, nat.status)
    np.testing.assert_allclose(nat.value, ref.value, rtol=1e-12, equal_nan=True)
    np.testing.assert_allclose(nat.grad, ref.grad, rtol=1e-10, atol=1e-12, equal_nan=True)


def test_native_2x2_lanes_match_reference_and_single_runs(client: str) -> None:
    """The 2x2 lane-parallel inv/det/logdet (pivoting, singular, NaN, negative det)."""
    source = (
        "(let ((m (mat (vec a b) (vec c 1.5)))) "
        "(vec (det m) (logdet (matmul m (transpose m))) (vsum (matvec (inv m) (vec 1 2)))))"
    )
    theta = np.array(
        [
            [1.0, 0.5, 0.25],  # no pivot swap
            [0.1, 2.0, 3.0],  # swap rows
            [-2.0, 1.0, 0.5],  # negative det
            [1.0, 1.0, 1.5],  # singular after elimination
            [0.0, 1.0, 0.0],  # singular first column
            [np.nan, 1.0, 0.5],
            [0.0, 1.0, -2.0],
        ]
    )
    ref = _evaluate(source, {}, theta, "reference")
    nat = _evaluate(source, {}, theta, client)
    np.testing.assert_array_equal(ref.status, nat.status)
    np.testing.assert_allclose(nat.value, ref.value, rtol=1e-12, equal_nan=True)
    np.testing.assert_allclose(nat.grad, ref.grad, rtol=1e-10, atol=1e-12, equal_nan=True)
    for b in range(theta.shape[0]):
        one = _evaluate(source, {}, theta[b : b + 1], client)
        np.testing.assert_array_equal(one.value[0], nat.value[b])
        np.testing.assert_array_equal(one.grad[0], nat.grad[b])
