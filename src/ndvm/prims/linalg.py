"""Vector and matrix primitives (opcodes 150-199): NUMERIC, ``Shape.CUSTOM``, with VJP rules.

Operands are ``(*lanes, *struct)`` float64 arrays; every rule is batched over the leading lane
axes. Cotangents have the operand's struct shape (lane axes broadcast; the tape sums them back).
Singular or non-positive-definite inputs never raise: the affected lanes become NaN.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ndvm.errors import ShapeError
from ndvm.prims import formulas as fm
from ndvm.prims.registry import Formula, Kind, Prim, Shape, fixed
from ndvm.prims.table import PRIMS

Arr = np.ndarray[Any, np.dtype[np.float64]]
StructShape = tuple[int, ...]
_RANK_NOUN = {0: "a scalar", 1: "a vector", 2: "a matrix"}


# ---- shape rules ------------------------------------------------------------------------------


def _ranked(name: str, ranks: tuple[int, ...], shapes: tuple[StructShape, ...]) -> None:
    for i, (rank, shape) in enumerate(zip(ranks, shapes)):
        if len(shape) != rank:
            raise ShapeError(
                f"{name}: argument {i + 1} must be {_RANK_NOUN[rank]}, got shape {tuple(shape)}"
            )


def _misfit(name: str, a: StructShape, b: StructShape, why: str = "do not align") -> ShapeError:
    return ShapeError(f"{name}: shapes {tuple(a)} and {tuple(b)} {why}")


def _square(name: str, a: StructShape) -> int:
    if a[0] != a[1]:
        raise ShapeError(f"{name}: expected a square matrix, got shape {tuple(a)}")
    return a[0]


def _to_scalar(name: str) -> Callable[[StructShape], StructShape]:
    def body(a: StructShape) -> StructShape:
        _square(name, a)
        return ()

    return body


def _rule(
    name: str, ranks: tuple[int, ...], body: Callable[..., StructShape]
) -> Callable[..., StructShape]:
    """A shape rule that first checks operand ranks, then applies ``body``."""

    def rule(*shapes: StructShape) -> StructShape:
        _ranked(name, ranks, shapes)
        return body(*shapes)

    return rule


def _same_len(name: str) -> Callable[[StructShape, StructShape], StructShape]:
    def body(a: StructShape, b: StructShape) -> StructShape:
        if a != b:
            raise _misfit(name, a, b)
        return ()

    return body


def _cross_shape(a: StructShape, b: StructShape) -> StructShape:
    if a != (3,) or b != (3,):
        raise _misfit("cross", a, b, "must both be (3,)")
    return (3,)


def _matvec_shape(a: StructShape, b: StructShape) -> StructShape:
    if a[1] != b[0]:
        raise _misfit("matvec", a, b)
    return (a[0],)


def _matmul_shape(a: StructShape, b: StructShape) -> StructShape:
    if a[1] != b[0]:
        raise _misfit("matmul", a, b)
    return (a[0], b[1])


def _solve_shape(a: StructShape, b: StructShape) -> StructShape:
    n = _square("solve", a)
    if b[0] != n:
        raise _misfit("solve", a, b)
    return (n,)


# ---- lane-safe LAPACK -------------------------------------------------------------------------


def _lanewise(
    fn: Callable[..., Arr], out_struct: StructShape, ranks: tuple[int, ...], *xs: Arr
) -> Arr:
    """``fn(*xs)`` batched; if LAPACK refuses some lane, redo lane by lane with NaN there."""
    try:
        return fn(*xs)
    except np.linalg.LinAlgError:
        pass
    lanes = np.broadcast_shapes(*(x.shape[: x.ndim - r] for x, r in zip(xs, ranks)))
    full = [np.broadcast_to(x, lanes + x.shape[x.ndim - r :]) for x, r in zip(xs, ranks)]
    out = np.full(lanes + out_struct, np.nan)
    for idx in np.ndindex(*lanes):
        try:
            out[idx] = fn(*(x[idx] for x in full))
        except np.linalg.LinAlgError:
            pass  # stays NaN: this lane's matrix is singular / not positive definite
    return out


def _lu2(a: Arr) -> tuple[Arr, ...]:
    """The 2 x 2 LU of the native core (cpp/src/lanes.hpp ``lu2``), operation for operation:
    partial pivoting with the first maximal row, l10 = r10 / u00 (a division, where LAPACK
    multiplies by a reciprocal), u11 = r11 - l10 u01; singular iff u00 or u11 is exactly 0.
    Returns (swapped, u00, u01, l10, u11, singular), so every backend finds the same 2 x 2
    matrices singular."""
    a00, a01, a10, a11 = a[..., 0, 0], a[..., 0, 1], a[..., 1, 0], a[..., 1, 1]
    swapped = np.abs(a10) > np.abs(a00)
    u00 = np.where(swapped, a10, a00)
    u01 = np.where(swapped, a11, a01)
    r10 = np.where(swapped, a00, a10)
    r11 = np.where(swapped, a01, a11)
    zero = u00 == 0.0
    l10 = np.where(zero, r10, r10 / np.where(zero, 1.0, u00))
    u11 = r11 - l10 * u01
    return swapped, u00, u01, l10, u11, zero | (u11 == 0.0)


def _inv2(a: Arr) -> Arr:
    """The 2 x 2 inverse of the native core (lanes.hpp ``inverse2``), operation for
    operation: ``_lu2``, then the forward and back substitution of the permuted identity, so
    every backend gives the same bits, and the same status, at the edge of singularity."""
    swapped, u00, u01, l10, u11, singular = _lu2(a)
    b00, b01 = np.where(swapped, 0.0, 1.0), np.where(swapped, 1.0, 0.0)
    b10, b11 = np.where(swapped, 1.0, 0.0), np.where(swapped, 0.0, 1.0)
    b10 = (b10 - l10 * b00) / u11
    b11 = (b11 - l10 * b01) / u11
    b00 = (b00 - u01 * b10) / u00
    b01 = (b01 - u01 * b11) / u00
    out = np.stack([np.stack([b00, b01], -1), np.stack([b10, b11], -1)], -2)
    return np.where(singular[..., None, None], np.nan, out)


def _slogdet2(a: Arr) -> tuple[Arr, Arr]:
    """(sign, |det|) of a 2 x 2 matrix from ``_lu2`` (0 and 0 where it is singular), as the
    native core's slogdet2_parts: the same singular lanes; |u00 u11| as a product (the native
    core takes exp(log) of it, which differs by rounding only)."""
    swapped, u00, _, _, u11, singular = _lu2(a)
    sign = np.where(swapped, -1.0, 1.0) * np.sign(u00) * np.sign(u11)
    return np.where(singular, 0.0, sign), np.where(singular, 0.0, np.abs(u00 * u11))


def _inv(a: Arr) -> Arr:
    """Per-lane inverse; a lane that is singular, has a non-finite entry or whose inverse
    overflows is NaN everywhere (never LAPACK's partial NaN/inf propagation). 2 x 2: the
    native core's formulas (``_inv2``); larger: LAPACK."""
    if a.shape[-2:] == (2, 2):
        out = _inv2(np.asarray(a, dtype=np.float64))
    else:
        out = _lanewise(np.linalg.inv, a.shape[-2:], (2,), a)
    bad = ~(np.isfinite(a).all(axis=(-2, -1)) & np.isfinite(out).all(axis=(-2, -1)))
    return np.where(bad[..., None, None], np.nan, out) if bad.any() else out


def _solve_vec(a: Arr, b: Arr) -> Arr:
    # NumPy 2 reads a batched b as (..., n, k), so solve with an explicit column.
    return _lanewise(lambda m, v: np.linalg.solve(m, v[..., None])[..., 0], b.shape[-1:],
                     (2, 1), a, b)  # fmt: skip


def _mT(a: Arr) -> Arr:
    return np.swapaxes(a, -1, -2)


# ---- rules ------------------------------------------------------------------------------------


def _dot(v: Arr, w: Arr) -> Arr:
    return np.einsum("...i,...i->...", v, w)


def _norm(v: Arr) -> Arr:
    return np.sqrt(_dot(v, v))


def _norm_vjp(g: Arr, ans: Arr, v: Arr) -> tuple[Any, ...]:
    safe = np.where(ans == 0, 1.0, ans)
    return (np.where(ans[..., None] == 0, 0.0, g[..., None] * v / safe[..., None]),)


def _normalize_vjp(g: Arr, ans: Arr, v: Arr) -> tuple[Any, ...]:
    n = _norm(v)[..., None]
    return ((g - ans * _dot(ans, g)[..., None]) / n,)


DMCI_NORM_EPS = 1e-8  # the dmci dialect's floor on |v| in normalize


def _dmci_normalize(v: Arr) -> Arr:
    return v / np.maximum(_norm(v), DMCI_NORM_EPS)[..., None]


def _dmci_normalize_vjp(g: Arr, ans: Arr, v: Arr) -> tuple[Any, ...]:
    # v / max(|v|, eps): below the floor the divisor is the constant eps (d/dv = I / eps).
    n = _norm(v)[..., None]
    small = n < DMCI_NORM_EPS
    safe = np.where(small, 1.0, n)
    u = v / safe
    return (np.where(small, g / DMCI_NORM_EPS, (g - u * _dot(u, g)[..., None]) / safe),)


def _vmean(v: Arr) -> Arr:
    return np.sum(v, axis=-1) / v.shape[-1]  # 0/0 = NaN for an empty vector, no warning


def _spread(g: Arr, n: int, factor: float = 1.0) -> Arr:
    return g[..., None] * np.full(n, factor)


def _nan_lanes(a: Arr, out: Arr, out_rank: int = 0) -> Arr:
    # LAPACK can read a NaN entry as a zero pivot (det 0) or skip it (cholesky); keep NaN.
    bad = np.isnan(a).any(axis=(-2, -1))
    return np.where(bad.reshape(bad.shape + (1,) * out_rank), np.nan, out)


def _det(a: Arr) -> Arr:
    if a.shape[-2:] == (2, 2):
        sign, mag = _slogdet2(np.asarray(a, dtype=np.float64))
        return _nan_lanes(a, sign * mag)
    return _nan_lanes(a, _lanewise(np.linalg.det, (), (2,), a))


def _det_vjp(g: Arr, ans: Arr, a: Arr) -> tuple[Arr]:
    # d det/dA = adj(A)^T, finite even where A is singular: with A = U S V^T,
    # adj(A)^T = det(U) det(V) U diag(prod_{j != i} s_j) V^T.
    def cofactor(m: Arr) -> Arr:
        if not np.isfinite(m).all():  # LAPACK's SVD may not return on inf/NaN: lane by lane
            raise np.linalg.LinAlgError("non-finite matrix")
        u, s, vt = np.linalg.svd(m)
        n = s.shape[-1]
        others = np.stack([np.prod(np.delete(s, i, axis=-1), axis=-1) for i in range(n)], -1)
        sign = np.linalg.det(u) * np.linalg.det(vt)
        return sign[..., None, None] * (u * others[..., None, :]) @ vt

    adj_t = _nan_lanes(a, _lanewise(cofactor, a.shape[-2:], (2,), a), 2)
    return (g[..., None, None] * adj_t,)


def _logdet(a: Arr) -> Arr:
    if a.shape[-2:] == (2, 2):
        return _nan_lanes(a, np.log(_slogdet2(np.asarray(a, dtype=np.float64))[1]))
    return _nan_lanes(a, _lanewise(lambda m: np.linalg.slogdet(m)[1], (), (2,), a))


def _solve_vjp(g: Arr, ans: Arr, a: Arr, b: Arr) -> tuple[Any, ...]:
    lam = _solve_vec(_mT(a), g)
    return (-lam[..., :, None] * ans[..., None, :], lam)


def _cholesky(a: Arr) -> Arr:
    return _nan_lanes(a, _lanewise(np.linalg.cholesky, a.shape[-2:], (2,), a), 2)


def _cholesky_vjp(g: Arr, ans: Arr, a: Arr) -> tuple[Any, ...]:
    # Murray (2016): S = L^-T phi(L^T Lbar) L^-1 with phi = lower triangle, halved diagonal;
    # the input is symmetric, so the cotangent is symmetrized.
    n = a.shape[-1]
    phi = np.tril(_mT(ans) @ g) / (1.0 + np.eye(n))
    lt = _mT(ans)
    left = _lanewise(np.linalg.solve, phi.shape[-2:], (2, 2), lt, phi)  # L^-T phi
    s = _mT(_lanewise(np.linalg.solve, phi.shape[-2:], (2, 2), lt, _mT(left)))  # .. L^-1
    return (0.5 * (s + _mT(s)),)


def _add(
    name: str,
    code: int,
    ranks: tuple[int, ...],
    body: Callable[..., StructShape],
    ref: Callable[..., Any],
    vjp: Callable[..., tuple[Any, ...]],
    doc: str,
    formula: Formula | None = None,
) -> None:
    PRIMS.add(Prim(name, code, fixed(len(ranks)), Kind.NUMERIC, ref, vjp, "linalg", doc,
                   shape=Shape.CUSTOM, shape_rule=_rule(name, ranks, body),
                   in_ranks=ranks, formula=formula))  # fmt: skip


_add("dot", 150, (1, 1), _same_len("dot"), _dot,
     lambda g, ans, v, w: (g[..., None] * w, g[..., None] * v),
     "Inner product v.w. d/dv = w, d/dw = v.",
     formula=fm.dot)  # fmt: skip
_add("vsum", 151, (1,), lambda a: (), lambda v: np.sum(v, axis=-1),
     lambda g, ans, v: (_spread(g, v.shape[-1]),),
     "Sum of a vector's elements. d/dv_i = 1.",
     formula=lambda o: lambda v: o.sum(v, -1))  # fmt: skip
_add("vmean", 152, (1,), lambda a: (), _vmean,
     lambda g, ans, v: (_spread(g, v.shape[-1], 1.0 / v.shape[-1]),),
     "Mean of a vector's elements (NaN if empty). d/dv_i = 1/n.",
     formula=lambda o: lambda v: o.sum(v, -1) / v.shape[-1])  # fmt: skip
_add("norm", 153, (1,), lambda a: (), _norm, _norm_vjp,
     "Euclidean norm |v|. d/dv = v/|v| (0 at v = 0).",
     formula=fm.norm)  # fmt: skip
_add("normalize", 154, (1,), lambda a: a, lambda v: v / _norm(v)[..., None], _normalize_vjp,
     "v/|v| (NaN at v = 0). d/dv = (I - u u^T)/|v| with u = v/|v|. "
     "dmci: the norm floored at 1e-8 (%dmci-normalize).",
     formula=fm.normalize(None))  # fmt: skip
_add("cross", 155, (1, 1), _cross_shape, lambda v, w: np.cross(v, w),
     lambda g, ans, v, w: (np.cross(w, g), np.cross(g, v)),
     "Cross product of two 3-vectors. d/dv: w x g, d/dw: g x v.",
     formula=lambda o: o.cross)  # fmt: skip
# scale is the one ELEMENTWISE primitive of the family: a scalar broadcasts against a vector
# or matrix in either operand position, exactly as in ``*`` (every backend's broadcasting
# path does the work, so there is no rank-specific kernel).
PRIMS.add(Prim("scale", 156, fixed(2), Kind.NUMERIC, np.multiply,
               lambda g, ans, a, b: (g * b, g * a), "linalg",
               "(scale a b) = a b with a scalar broadcast against a vector or matrix, in either "
               "order: (scale v s), (scale s v), (scale s M), (scale M s); two operands of one "
               "shape multiply elementwise, like *. d/da = b, d/db = a.",
               formula=lambda o: lambda a, b: a * b))  # fmt: skip
_add("outer", 157, (1, 1), lambda a, b: (a[0], b[0]),
     lambda v, w: v[..., :, None] * w[..., None, :],
     lambda g, ans, v, w: (np.einsum("...ij,...j->...i", g, w),
                           np.einsum("...ij,...i->...j", g, v)),
     "Outer product v w^T. d/dv = G w, d/dw = G^T v.",
     formula=lambda o: lambda v, w: v[..., :, None] * w[..., None, :])  # fmt: skip
_add("matvec", 158, (2, 1), _matvec_shape, lambda a, v: np.einsum("...ij,...j->...i", a, v),
     lambda g, ans, a, v: (g[..., :, None] * v[..., None, :],
                           np.einsum("...ij,...i->...j", a, g)),
     "Matrix-vector product A v. d/dA = g v^T, d/dv = A^T g.",
     formula=lambda o: lambda a, v: o.matmul(a, v[..., None])[..., 0])  # fmt: skip
_add("matmul", 159, (2, 2), _matmul_shape, np.matmul,
     lambda g, ans, a, b: (g @ _mT(b), _mT(a) @ g),
     "Matrix product A B. d/dA = G B^T, d/dB = A^T G.",
     formula=lambda o: o.matmul)  # fmt: skip
_add("transpose", 160, (2,), lambda a: (a[1], a[0]), _mT, lambda g, ans, a: (_mT(g),),
     "Matrix transpose. d/dA = G^T.",
     formula=lambda o: lambda a: o.swapaxes(a, -1, -2))  # fmt: skip
_add("trace", 161, (2,), _to_scalar("trace"),
     lambda a: np.trace(a, axis1=-2, axis2=-1),
     lambda g, ans, a: (g[..., None, None] * np.eye(a.shape[-1]),),
     "Trace of a square matrix. d/dA = I.",
     formula=lambda o: o.trace)  # fmt: skip
_add("det", 162, (2,), _to_scalar("det"), _det, _det_vjp,
     "Determinant. d/dA = adj(A)^T (finite at singular A).",
     formula=lambda o: o.det)  # fmt: skip
_add("logdet", 163, (2,), _to_scalar("logdet"), _logdet,
     lambda g, ans, a: (g[..., None, None] * _mT(_inv(a)),),
     "log|det A| (via slogdet; -inf if singular). d/dA = A^-T.",
     formula=lambda o: o.logdet)  # fmt: skip
_add("inv", 164, (2,), lambda a: (_square("inv", a),) * 2, _inv,
     lambda g, ans, a: (-_mT(ans) @ g @ _mT(ans),),
     "Matrix inverse (NaN lanes where singular, non-finite or overflowing). "
     "d/dA = -A^-T G A^-T.",
     formula=lambda o: o.inv)  # fmt: skip
_add("solve", 165, (2, 1), _solve_shape, _solve_vec, _solve_vjp,
     "(solve A b) = x with A x = b (NaN where singular). "
     "d/db = A^-T g, d/dA = -(A^-T g) x^T.",
     formula=lambda o: lambda a, b: o.solve(a, b[..., None])[..., 0])  # fmt: skip
_add("cholesky", 166, (2,), lambda a: (_square("cholesky", a),) * 2, _cholesky, _cholesky_vjp,
     "Lower L with L L^T = A (NaN lanes where not positive definite). Only the lower "
     "triangle of A is read (NumPy's convention): a non-symmetric A is factored as the "
     "symmetric matrix with that lower triangle. VJP: Murray 2016, symmetrized.",
     formula=lambda o: o.cholesky)  # fmt: skip
_add("%dmci-normalize", 167, (1,), lambda a: a, _dmci_normalize, _dmci_normalize_vjp,
     "normalize under the dmci dialect: v/max(|v|, 1e-8), so (normalize 0) = 0 with gradient "
     "1e8 I. d/dv = (I - u u^T)/|v| above the floor, I/1e-8 below.",
     formula=fm.normalize(DMCI_NORM_EPS))  # fmt: skip
