"""Every lane-wise primitive's ``formula`` over a NumPy namespace equals its NumPy ``ref``.

This checks the formulas without torch or JAX (the baselines' tests check them there, with
gradients). The primitives, arities and operand shapes come from the table.
"""

from __future__ import annotations

import math
import zlib
from types import SimpleNamespace

import numpy as np
import pytest
from tests.helpers.formulas import operands
from tests.helpers.prim_programs import Case, cases

from ndvm.prims import PRIMS, Kind, Prim


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


NP = SimpleNamespace(
    exp=np.exp, log=np.log, log1p=np.log1p, expm1=np.expm1, sqrt=np.sqrt, abs=np.abs,
    sin=np.sin, cos=np.cos, tan=np.tan, asin=np.arcsin, acos=np.arccos, atan=np.arctan,
    atan2=np.arctan2, sinh=np.sinh, cosh=np.cosh, tanh=np.tanh, asinh=np.arcsinh,
    acosh=np.arccosh, atanh=np.arctanh, floor=np.floor, ceil=np.ceil, round=np.round,
    trunc=np.trunc, sign=np.sign, hypot=np.hypot, where=np.where, isnan=np.isnan,
    isfinite=np.isfinite, eq=np.equal, sigmoid=_sigmoid, softplus=lambda x: np.logaddexp(0, x),
    logaddexp=np.logaddexp, mod=np.mod,
    erf=np.vectorize(math.erf), cbrt=np.cbrt, fmod=np.fmod, pow=np.power, matmul=np.matmul,
    swapaxes=np.swapaxes, inv=np.linalg.inv, det=np.linalg.det, solve=np.linalg.solve,
    cholesky=np.linalg.cholesky, cross=np.cross, logdet=lambda a: np.linalg.slogdet(a)[1],
    sum=lambda x, axis: np.sum(x, axis=axis), trace=lambda a: np.trace(a, axis1=-2, axis2=-1),
    asarray=np.asarray,
)  # fmt: skip
NUMERIC = cases()


@pytest.mark.parametrize("case", NUMERIC, ids=[c.id for c in NUMERIC])
def test_numeric_formula_over_numpy_matches_ref(case: Case) -> None:
    assert case.prim.formula is not None and case.prim.ref is not None
    xs = operands(case, np.random.default_rng(zlib.crc32(case.id.encode())))
    got = case.prim.formula(NP)(*xs)
    np.testing.assert_allclose(got, case.prim.ref(*xs), rtol=1e-12, atol=1e-14)


_LANES = np.array(
    [
        [0.0, 1.0, -1.0, np.nan, 2.0, 2.0, np.inf, -0.0],
        [0.0, 2.0, -1.0, 1.0, np.nan, 2.0, 1.0, 0.0],
        [1.0, 3.0, -1.0, 0.0, 1.0, 2.0, np.inf, 5.0],
    ]
)


@pytest.mark.parametrize("prim", PRIMS.of_kind(Kind.PREDICATE), ids=lambda p: p.name)
def test_predicate_formula_over_numpy_matches_ref(prim: Prim) -> None:
    assert prim.formula is not None and prim.ref is not None
    hi = prim.arity.max_args if prim.arity.max_args is not None else 3
    for n in range(prim.arity.min_args, hi + 1):
        xs = list(_LANES[:n])
        want = np.broadcast_to(prim.ref(*xs), xs[0].shape)
        np.testing.assert_array_equal(prim.formula(NP)(*xs), want)
