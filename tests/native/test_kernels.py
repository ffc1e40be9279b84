"""Native lane kernels: the fused small-matrix forms, the inverse's non-finite policy, signed
zeros of adjoints, and the deadline inside long linear algebra."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ndvm
from ndvm import errors
from ndvm.eval.limits import Limits

pytestmark = pytest.mark.native


def _run(source: str, theta: np.ndarray, backend: str) -> Any:
    prog = ndvm.compile(source, backend=backend, strict=False)
    return prog.evaluate(theta, {}, grad=True)


def _matrix(n: int, offset: int = 0) -> str:
    """An n x n matrix whose entries mix the parameters a, b and constants."""
    rows = []
    for i in range(n):
        cells = []
        for j in range(n):
            k = offset + i * n + j
            const = 3.0 if i == j else 0.1 * k
            cells.append(f"(+ (* {1 + k % 3} a) (* {0.5 - (k % 5) * 0.25} b) {const})")
        rows.append("(vec " + " ".join(cells) + ")")
    return "(mat " + " ".join(rows) + ")"


def _same_lanes_and_reference(source: str, theta: np.ndarray) -> None:
    ref = _run(source, theta, "reference")
    nat = _run(source, theta, "native")
    np.testing.assert_array_equal(nat.status, ref.status)
    np.testing.assert_allclose(nat.value, ref.value, rtol=1e-12, atol=1e-13, equal_nan=True)
    np.testing.assert_allclose(nat.grad, ref.grad, rtol=1e-10, atol=1e-12, equal_nan=True)
    for b in range(theta.shape[0]):  # lane-parallel kernels == one-lane kernels, bitwise
        one = _run(source, theta[b : b + 1], "native")
        np.testing.assert_array_equal(one.value[0], nat.value[b])
        np.testing.assert_array_equal(one.grad[0], nat.grad[b])


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_products_and_inverse_of_small_matrices(n: int) -> None:
    """matmul/matvec/dot/outer/inv/logdet and their VJPs for the register-resident sizes
    (inner dimension 1-4) and the streaming fallback (5)."""
    m, p = _matrix(n), _matrix(n, 7)
    source = (
        f"(let* ((m {m}) (p {p}) (v (matvec m (vec {' '.join(['a'] * n)}))) "
        f"(s (+ (matmul m (transpose m)) (* {n} (eye {n}))))) "
        f"(+ (trace (matmul m p)) (dot v (matvec (inv s) v)) (logdet s) "
        f"(vsum (matvec (outer v v) v)) (det (matmul p m))))"
    )
    theta = np.random.default_rng(n).normal(size=(9, 2))
    _same_lanes_and_reference(source, theta)


def _diag_source(n: int) -> str:
    """inv of a matrix with `a` on its first diagonal entry (the rest diagonal-dominant)."""
    rows = []
    for i in range(n):
        diag = "(+ a 0.0)" if i == 0 else "(+ b 1.0)"
        cells = [diag if i == j else "0.5" if j > i else "0" for j in range(n)]
        rows.append("(vec " + " ".join(cells) + ")")
    return f"(vsum (matvec (inv (mat {' '.join(rows)})) (vec {' '.join(['1'] * n)})))"


@pytest.mark.parametrize("n", [2, 3])
def test_inverse_with_non_finite_or_denormal_diagonal_agrees(n: int) -> None:
    """A lane whose matrix has a non-finite entry, or whose inverse overflows, is NaN on both
    backends (not LAPACK's partial propagation); finite lanes are unaffected."""
    theta = np.array(
        [[np.nan, 0.0], [1e-310, 0.0], [np.inf, 0.0], [-np.inf, 0.5], [2.0, 0.0], [1e-3, 1.0]]
    )
    source = _diag_source(n)
    ref = _run(source, theta, "reference")
    nat = _run(source, theta, "native")
    np.testing.assert_array_equal(nat.status, ref.status)
    np.testing.assert_array_equal(np.isnan(nat.value), np.isnan(ref.value))
    assert np.isnan(nat.value[:4]).all() and np.isfinite(nat.value[4:]).all()
    np.testing.assert_allclose(nat.value, ref.value, rtol=1e-12, equal_nan=True)
    np.testing.assert_allclose(nat.grad, ref.grad, rtol=1e-10, equal_nan=True)
    for b in range(theta.shape[0]):
        one = _run(source, theta[b : b + 1], "native")
        np.testing.assert_array_equal(one.value[0], nat.value[b])


@pytest.mark.parametrize(
    "source",
    [
        "(params (a 1.0) (b 0.0)) (/ b a)",
        "(params (a 1.0) (b 0.0)) (* (- b) a)",
        "(params (a 1.0) (b 0.0)) (+ (/ b a) (* b a))",
    ],  # fmt: skip
)
def test_signed_zero_gradients_agree(source: str) -> None:
    """The first cotangent is stored, not added to a zeroed adjoint: -0.0 stays -0.0 as on
    the reference (whose adjoint is its first cotangent)."""
    theta = np.array([[2.0, 0.0], [-2.0, 0.0], [1.0, -0.0]])
    ref = _run(source, theta, "reference")
    nat = _run(source, theta, "native")
    np.testing.assert_array_equal(nat.grad, ref.grad)
    np.testing.assert_array_equal(np.signbit(nat.grad), np.signbit(ref.grad))


@pytest.mark.parametrize(
    "source,lanes",
    [
        ("(det (matmul (ones 1500 1500) (ones 1500 1500)))", 1),
        ("(trace (inv (eye 1500)))", 1),
        ("(logdet (+ (eye 300) (matmul (* a (ones 300 300)) (ones 300 300))))", 64),
    ],
)
def test_deadline_is_checked_inside_linear_algebra(source: str, lanes: int) -> None:
    """One kernel call runs for seconds; the deadline still stops it (the step counter alone
    would only look at the clock after it returned). The deadline is far below what each
    takes (the quickest, the 64-lane matmul, 0.6 s on a loaded machine here; 0.2 s was within
    reach of a fast one) and above the steps before the kernel (15 ms here)."""
    prog = ndvm.compile(source, backend="native", limits=Limits(deadline=0.05))
    with pytest.raises(errors.DeadlineExceeded):
        prog.evaluate(np.full((lanes, len(prog.params)), 0.1), {}, grad=False)
    ok = ndvm.compile("(* a 2)", backend="native")
    assert float(ok.eval(np.array([1.5]))) == 3.0


@pytest.mark.parametrize(
    "source",
    [
        "(if (> a 0) (vsum (* a (vec 1 2 3))) (vsum (+ b (vec 1 2))))",
        "(let ((v (vec a b))) (if (> b 0) (dot (+ a v) (* b v)) (vsum (- v a))))",
        "(if (> a 0.2) (trace (* a (eye 3))) (norm (* b (vec 1 a))))",
    ],
)
def test_scalar_adjoints_from_vector_cotangents_under_masks(source: str) -> None:
    """A scalar operand of a vector operation receives the sum of the vector cotangent (as the
    reference's unbroadcast), first stored then added, and only on the lanes of its arm."""
    theta = np.random.default_rng(3).normal(size=(16, 2))
    _same_lanes_and_reference(source, theta)


def test_cholesky_reads_the_lower_triangle_on_both_backends() -> None:
    """Documented convention (docs/primitives.md): the upper triangle of A is ignored."""
    src = "(cholesky (mat (vec 4 a) (vec 2 3)))"
    outs = []
    for backend in ("reference", "native"):
        p = ndvm.compile(src, backend=backend)
        outs.append([np.asarray(p.eval(np.array([[a]]))) for a in (2.0, 9.0, -5.0)])
    for got in outs:
        for v in got:
            np.testing.assert_allclose(v[0], [[2.0, 0.0], [1.0, np.sqrt(2.0)]], rtol=1e-15)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("prim", ["logdet", "det"])
def test_log_determinant_over_lanes_with_non_normal_products(prim: str, dtype: str) -> None:
    """2 x 2 logdet/det over many lanes take the logs of all lanes' |u00 u11| in one vector
    call, and a lane whose product is not a normal number (underflow, overflow, singular)
    the sum of logs: every lane equals the lane run alone, bitwise, and NumPy's slogdet."""
    tiny, huge = (1e-200, 1e200) if dtype == "float64" else (1e-25, 1e25)
    pairs = [(2.0, 3.0), (tiny, tiny), (huge, huge), (tiny, huge), (0.0, 1.0), (-2.0, 0.5),
             (np.nan, 1.0), (np.inf, 1.0), (0.7, -1.3), (5.0, 1e-3), (tiny, 2.0)]  # fmt: skip
    theta = np.array(pairs * 2)  # 22 lanes: whole vectors and a tail
    prog = ndvm.compile(f"({prim} (mat (vec a 0.25) (vec 0 b)))", backend="native",
                        dtype=dtype, strict=False)  # fmt: skip
    many = prog.evaluate(theta, {}, grad=True)
    for b in range(theta.shape[0]):
        one = prog.evaluate(theta[b : b + 1], {}, grad=True)
        np.testing.assert_array_equal(one.value[0], many.value[b])
        np.testing.assert_array_equal(one.grad[0], many.grad[b])
    with np.errstate(all="ignore"):
        sign, logabs = np.linalg.slogdet(np.array([[[a, 0.25], [0, b]] for a, b in pairs * 2]))
        want = logabs if prim == "logdet" else sign * np.exp(logabs)
    rtol, atol = (1e-12, 1e-300) if dtype == "float64" else (2e-5, 1e-37)  # f32 det: 0
    finite = np.isfinite(want) & (np.abs(want) < (1e300 if dtype == "float64" else 1e30))
    got = np.asarray(many.value, dtype=np.float64).reshape(-1)
    np.testing.assert_allclose(got[finite], want[finite], rtol=rtol, atol=atol)
