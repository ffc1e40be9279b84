"""NUMERIC and PREDICATE primitives: forward vs independent float64 oracles, VJPs vs finite
differences, broadcasting over lane axes, kink conventions, IEEE behaviour, linalg shapes."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from tests.helpers.fd import check_grads, check_prim_vjp, unbroadcast

from ndvm.errors import ShapeError
from ndvm.prims import PRIMS, Kind, Prim, Shape
from ndvm.prims.numeric import DMCI_OVERRIDES, dmci_rule

# ---- elementwise oracles ----------------------------------------------------------------------

# A sampling range per operand: (lo, hi) uniform, or ("pm", lo, hi) = random sign, |x| in [lo, hi].
Range = tuple[Any, ...]
G: Range = (-3.0, 3.0)
POS: Range = (0.2, 4.0)
NZ: Range = ("pm", 0.6, 2.5)


def _sign(x: float) -> float:
    return 0.0 if x == 0 else math.copysign(1.0, x)


def _reduce(op: Callable[[float, float], float], unit: float | None = None) -> Callable[..., float]:
    def f(*xs: float) -> float:
        if not xs:
            assert unit is not None
            return unit
        out = xs[0]
        for x in xs[1:]:
            out = op(out, x)
        return out

    return f


# name -> (oracle per element, [operand ranges for each arity tested])
ORACLES: dict[str, tuple[Callable[..., float], list[list[Range]]]] = {
    "+": (lambda *xs: math.fsum(xs), [[], [G], [G, G], [G, G, G]]),
    "-": (lambda x, *ys: -x if not ys else x - math.fsum(ys), [[G], [G, G], [G, G, G]]),
    "*": (_reduce(lambda a, b: a * b, 1.0), [[], [G], [G, G], [G, G, G]]),
    "/": (
        lambda x, *ys: 1 / x if not ys else _reduce(lambda a, b: a / b)(x, *ys),
        [[NZ], [G, NZ], [G, NZ, NZ]],
    ),
    "abs": (abs, [[G]]),
    "min": (lambda *xs: min(xs), [[G], [G, G], [G, G, G]]),
    "max": (lambda *xs: max(xs), [[G], [G, G], [G, G, G]]),
    "exp": (math.exp, [[G]]),
    "log": (lambda x, b=math.e: math.log(x) / math.log(b), [[POS], [POS, (1.5, 5.0)]]),
    "log1p": (math.log1p, [[(-0.5, 3.0)]]),
    "expm1": (math.expm1, [[G]]),
    "sqrt": (math.sqrt, [[POS]]),
    "cbrt": (math.cbrt, [[NZ]]),
    "square": (lambda x: x * x, [[G]]),
    "expt": (math.pow, [[POS, (-2.0, 2.0)]]),
    "sin": (math.sin, [[G]]),
    "cos": (math.cos, [[G]]),
    "tan": (math.tan, [[(-1.2, 1.2)]]),
    "asin": (math.asin, [[(-0.9, 0.9)]]),
    "acos": (math.acos, [[(-0.9, 0.9)]]),
    "atan": (lambda y, x=None: math.atan(y) if x is None else math.atan2(y, x), [[G], [G, NZ]]),
    "sinh": (math.sinh, [[G]]),
    "cosh": (math.cosh, [[G]]),
    "tanh": (math.tanh, [[G]]),
    "asinh": (math.asinh, [[G]]),
    "acosh": (math.acosh, [[(1.2, 5.0)]]),
    "atanh": (math.atanh, [[(-0.9, 0.9)]]),
    "sigmoid": (lambda x: 1 / (1 + math.exp(-x)), [[(-6.0, 6.0)]]),
    "softplus": (lambda x: math.log1p(math.exp(x)), [[(-6.0, 6.0)]]),
    "erf": (math.erf, [[G]]),
    "hypot": (math.hypot, [[G, G]]),
    "logaddexp": (lambda a, b: math.log(math.exp(a) + math.exp(b)), [[G, G]]),
    "clamp": (lambda x, lo, hi: min(max(x, lo), hi), [[G, (-2.0, -0.5), (0.5, 2.0)]]),
    "floor": (lambda x: float(math.floor(x)), [[G]]),
    "ceiling": (lambda x: float(math.ceil(x)), [[G]]),
    "round": (lambda x: float(round(x)), [[G]]),
    "truncate": (lambda x: float(math.trunc(x)), [[G]]),
    "sign": (_sign, [[G]]),
    "quotient": (lambda a, b: float(math.trunc(a / b)), [[(-5.0, 5.0), NZ]]),
    "remainder": (math.fmod, [[(-5.0, 5.0), NZ]]),
    "modulo": (lambda a, b: a % b, [[(-5.0, 5.0), NZ]]),
    "scale": (lambda a, b: a * b, [[G, G]]),
}

PRED_ORACLES: dict[str, Callable[..., bool]] = {
    "=": lambda *xs: all(a == b for a, b in zip(xs, xs[1:])),
    "<": lambda *xs: all(a < b for a, b in zip(xs, xs[1:])),
    ">": lambda *xs: all(a > b for a, b in zip(xs, xs[1:])),
    "<=": lambda *xs: all(a <= b for a, b in zip(xs, xs[1:])),
    ">=": lambda *xs: all(a >= b for a, b in zip(xs, xs[1:])),
    "zero?": lambda x: x == 0,
    "positive?": lambda x: x > 0,
    "negative?": lambda x: x < 0,
    "finite?": math.isfinite,
    "nan?": math.isnan,
}

ELEMENTWISE = [p for p in PRIMS.numeric() if p.shape is Shape.ELEMENTWISE]
LINALG = [p for p in PRIMS.numeric() if p.shape is Shape.CUSTOM]
PREDICATES = PRIMS.of_kind(Kind.PREDICATE)
CASES = [
    pytest.param(p, ranges, id=f"{p.name}/{len(ranges)}")
    for p in ELEMENTWISE
    for ranges in ORACLES[p.name][1]
]


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20240607)


@pytest.fixture(autouse=True)
def _ieee_quiet() -> Any:
    # The evaluator runs every primitive under errstate(all="ignore"); so do the tests.
    with np.errstate(all="ignore"):
        yield


def sample(rng: np.random.Generator, r: Range, shape: tuple[int, ...]) -> np.ndarray:
    if r[0] == "pm":
        return rng.choice([-1.0, 1.0], size=shape) * rng.uniform(r[1], r[2], size=shape)
    return rng.uniform(r[0], r[1], size=shape)


def oracle(name: str, xs: list[np.ndarray]) -> np.ndarray:
    f = ORACLES[name][0]
    if not xs:
        return np.asarray(f(), dtype=np.float64)
    return np.vectorize(f, otypes=[np.float64])(*xs)


def test_every_elementwise_numeric_prim_has_an_oracle() -> None:
    assert {p.name for p in ELEMENTWISE} == set(ORACLES)
    assert {p.name for p in PREDICATES} == set(PRED_ORACLES)


@pytest.mark.parametrize(("prim", "ranges"), CASES)
def test_numeric_forward_matches_oracle(prim: Prim, ranges: list[Range], rng: Any) -> None:
    assert prim.ref is not None
    xs = [sample(rng, r, (3, 4)) for r in ranges]
    np.testing.assert_allclose(prim.ref(*xs), oracle(prim.name, xs), rtol=1e-13, atol=1e-15)
    # Lane-uniform floats in, a scalar out.
    fs = [float(x[0, 0]) for x in xs]
    got = prim.ref(*fs)
    assert np.ndim(got) == 0
    np.testing.assert_allclose(float(got), oracle(prim.name, [np.asarray(f) for f in fs]),
                               rtol=1e-13, atol=1e-15)  # fmt: skip


@pytest.mark.parametrize(("prim", "ranges"), CASES)
def test_numeric_forward_broadcasts_lanes(prim: Prim, ranges: list[Range], rng: Any) -> None:
    assert prim.ref is not None
    shapes = [(1, 4), (3, 1)]
    xs = [sample(rng, r, shapes[i % 2]) for i, r in enumerate(ranges)]
    # Struct axes too: a (1, 4, 2) vector operand next to lane-only ones.
    got = np.asarray(prim.ref(*xs))
    want = oracle(prim.name, [np.broadcast_to(x, got.shape) for x in xs])
    assert got.shape == (np.broadcast_shapes(*(x.shape for x in xs)) if xs else ())
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)
    if xs:
        vecs = [x[..., None] * np.ones(2) for x in xs]
        np.testing.assert_allclose(prim.ref(*vecs), want[..., None] * np.ones(2), rtol=1e-13)


@pytest.mark.parametrize(("prim", "ranges"), [c for c in CASES if c.values[1]])
def test_numeric_vjp_matches_finite_differences(prim: Prim, ranges: list[Range], rng: Any) -> None:
    assert prim.ref is not None and prim.vjp is not None
    shapes = [(3, 4), (1, 4), (3, 1)]
    for layout in range(2):
        # layout 0: all (3, 4); layout 1: mixed lane shapes, cotangents summed back.
        xs = [sample(rng, r, shapes[(i + 1) % 3] if layout else (3, 4)) for i, r in
              enumerate(ranges)]  # fmt: skip
        check_prim_vjp(prim.ref, prim.vjp, xs, rng, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("prim", ELEMENTWISE, ids=lambda p: p.name)
def test_numeric_prims_never_raise_on_ieee_specials(prim: Prim) -> None:
    assert prim.ref is not None and prim.vjp is not None
    specials = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e308, -1e-310])
    n = max(prim.arity.min_args, 1)
    n = min(n + 1, prim.arity.max_args or n + 1)
    for k in range(prim.arity.min_args, n + 1):
        grid = np.meshgrid(*([specials] * k), indexing="ij") if k else []
        xs = [g.reshape(1, -1) for g in grid]
        ans = prim.ref(*xs)
        prim.vjp(np.ones_like(np.asarray(ans, dtype=float)), ans, *xs)
        for i in range(0, len(specials), 2):  # lane-uniform floats, too
            fs = [float(specials[(i + j) % len(specials)]) for j in range(k)]
            prim.vjp(1.0, prim.ref(*fs), *fs)


def test_numeric_ieee_results() -> None:
    ref = {n: PRIMS.by_name(n).ref for n in ("/", "log", "sqrt", "expt", "quotient", "modulo")}
    assert ref["/"](1.0, 0.0) == np.inf
    assert ref["/"](0.0) == np.inf
    assert math.isnan(ref["log"](-1.0))
    assert ref["log"](0.0) == -np.inf
    assert math.isnan(ref["sqrt"](-1.0))
    assert math.isnan(ref["expt"](-2.0, 0.5))
    assert ref["expt"](-2.0, 3.0) == -8.0
    assert ref["quotient"](1.0, 0.0) == np.inf
    assert math.isnan(ref["modulo"](1.0, 0.0))
    lanes = ref["/"](np.array([[1.0, -1.0, 0.0]]), np.zeros((1, 3)))
    np.testing.assert_equal(lanes, [[np.inf, -np.inf, np.nan]])


def _vjp(name: str, *xs: Any, g: Any = 1.0) -> tuple[Any, ...]:
    p = PRIMS.by_name(name)
    assert p.ref is not None and p.vjp is not None
    return tuple(p.vjp(g, p.ref(*xs), *xs))


def test_numeric_kink_conventions() -> None:
    # abs'(0) = 0; min/max: the FIRST extremal operand takes the gradient.
    assert _vjp("abs", 0.0) == (0.0,)
    assert [float(c) for c in _vjp("min", 1.0, 1.0, 2.0)] == [1.0, 0.0, 0.0]
    assert [float(c) for c in _vjp("max", 2.0, 3.0, 3.0)] == [0.0, 1.0, 0.0]
    lanes = _vjp("max", np.array([[1.0, 2.0]]), np.array([[1.0, 1.0]]), g=np.ones((1, 2)))
    np.testing.assert_equal(lanes, [[[1.0, 1.0]], [[0.0, 0.0]]])
    assert [float(c) for c in _vjp("clamp", -1.0, -1.0, 1.0)] == [1.0, 0.0, 0.0]
    assert [float(c) for c in _vjp("clamp", -2.0, -1.0, 1.0)] == [0.0, 1.0, 0.0]
    assert [float(c) for c in _vjp("clamp", 3.0, -1.0, 1.0)] == [0.0, 0.0, 1.0]
    assert [float(c) for c in _vjp("hypot", 0.0, 0.0)] == [0.0, 0.0]
    for name in ("floor", "ceiling", "round", "truncate", "sign"):
        assert _vjp(name, 0.5) == (None,)
    assert _vjp("quotient", 7.0, 2.0) == (None, None)
    # Integer exponent on a negative base: d/da = b a^(b-1); no gradient to the exponent.
    assert [float(c) for c in _vjp("expt", -2.0, 3.0)] == [12.0, 0.0]
    assert float(_vjp("expt", 0.0, 0.0)[0]) == 0.0  # a^0 is constant in a


def test_numeric_order1_at_kinks_matches_one_sided_differences() -> None:
    # The realized-path gradient at a kink equals the one-sided derivative along its branch.
    eps = 1e-7
    (dmax,) = _vjp("max", 1.0, 1.0)[:1]
    assert abs(float(dmax) - (max(1.0 + eps, 1.0) - 1.0) / eps) < 1e-6
    d = _vjp("remainder", 7.5, 2.0)
    assert float(d[0]) == 1.0 and float(d[1]) == -3.0  # 7.5 = 2 * 3 + 1.5


def test_numeric_piecewise_divisor_gradient_matches_fd(rng: Any) -> None:
    for name in ("remainder", "modulo"):
        p = PRIMS.by_name(name)
        assert p.ref is not None and p.vjp is not None
        a, b = np.array([[-7.3, 7.3, 5.1]]), np.array([[2.0, -2.0, -1.3]])
        check_prim_vjp(p.ref, p.vjp, [a, b], rng)


def test_numeric_expt_negative_base_integer_exponent_fd(rng: Any) -> None:
    p = PRIMS.by_name("pow")
    assert p.ref is not None and p.vjp is not None
    a, b = np.array([[-2.0, -0.5, 1.5]]), np.array([[3.0, 2.0, -2.0]])
    ans = p.ref(a, b)
    # Only the base is perturbed: the exponent is integer-valued where a < 0.
    check_grads(lambda x: p.ref(x, b), lambda v: p.vjp(v, ans, a, b)[:1], [a], rng)


def test_numeric_sigmoid_softplus_are_overflow_free() -> None:
    sig, sp = PRIMS.by_name("sigmoid").ref, PRIMS.by_name("softplus").ref
    assert sig is not None and sp is not None
    x = np.array([-800.0, -40.0, 0.0, 40.0, 800.0])
    s = sig(x)
    assert np.all(np.isfinite(s)) and s[0] == 0.0 and s[-1] == 1.0 and s[2] == 0.5
    np.testing.assert_allclose(sp(x), [0.0, math.exp(-40.0), math.log(2.0), 40.0, 800.0],
                               rtol=1e-15, atol=0)  # fmt: skip


def test_dmci_clamps_sqrt_and_log() -> None:
    names = {"sqrt", "log", "modulo", "remainder", "normalize"}
    assert set(DMCI_OVERRIDES) == {PRIMS.by_name(n).code for n in names}
    sq_ref, sq_vjp = dmci_rule(PRIMS.by_name("sqrt"))
    lg_ref, lg_vjp = dmci_rule(PRIMS.by_name("log"))
    x = np.array([[-1.0, 0.0, 1e-9, 4.0]])
    np.testing.assert_allclose(sq_ref(x), [[1e-4, 1e-4, 1e-4, 2.0]])
    np.testing.assert_allclose(sq_vjp(np.ones_like(x), sq_ref(x), x)[0], [[0, 0, 0, 0.25]])
    np.testing.assert_allclose(lg_ref(x), np.log([[1e-8, 1e-8, 1e-8, 4.0]]))
    np.testing.assert_allclose(lg_vjp(np.ones_like(x), lg_ref(x), x)[0], [[0, 0, 0, 0.25]])
    assert float(lg_ref(-5.0)) == math.log(1e-8)
    assert dmci_rule(PRIMS.by_name("exp")) == (PRIMS.by_name("exp").ref, PRIMS.by_name("exp").vjp)


def test_dmci_rules_match_fd_above_the_clamp(rng: Any) -> None:
    cases = {
        "sqrt": [rng.uniform(0.1, 3.0, (3, 4))],
        "log": [rng.uniform(0.1, 3.0, (3, 4)), rng.uniform(1.5, 4.0, (1, 4))],
    }
    for name, xs in cases.items():
        ref, vjp = dmci_rule(PRIMS.by_name(name))
        check_prim_vjp(ref, vjp, xs, rng)


# ---- predicates -------------------------------------------------------------------------------


@pytest.mark.parametrize("prim", PREDICATES, ids=lambda p: p.name)
def test_predicate_forward_matches_oracle(prim: Prim, rng: Any) -> None:
    assert prim.ref is not None and prim.vjp is None
    f = PRED_ORACLES[prim.name]
    pool = np.array([-1.0, 0.0, 0.0, 1.0, 2.0, np.inf, np.nan])
    ks = [1, 2, 3] if prim.arity.max_args is None else [1]
    for k in ks:
        xs = [rng.choice(pool, size=(3, 4)) for _ in range(k)]
        got = prim.ref(*xs)
        if k == 1 and prim.arity.max_args is None:
            assert got is True  # a one-operand chain holds on every lane: lane-uniform #t
            continue
        assert isinstance(got, np.ndarray) and got.dtype == bool
        np.testing.assert_array_equal(got, np.vectorize(f, otypes=[bool])(*xs))
        fs = [float(x[0, 0]) for x in xs]
        assert prim.ref(*fs) is f(*fs)
        lanes = prim.ref(*[x[:1, :] if i % 2 else x[:, :1] for i, x in enumerate(xs)])
        assert np.shape(lanes) == ((3, 4) if k > 1 else (3, 1))


# ---- linalg -----------------------------------------------------------------------------------

LANES = (2, 3)


def _mat(rng: np.random.Generator, n: int, m: int | None = None, lanes: Any = LANES) -> Any:
    m = n if m is None else m
    a = 0.4 * rng.standard_normal((*lanes, n, m))
    return a + (np.eye(n, m) * 2.0 if n == m else 0.0)


def _spd(rng: np.random.Generator, n: int, lanes: Any = LANES) -> Any:
    a = rng.standard_normal((*lanes, n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def _vec(rng: np.random.Generator, n: int, lanes: Any = LANES) -> Any:
    return rng.standard_normal((*lanes, n))


# name -> operand factory; each rank-2 operand is well conditioned.
LINALG_ARGS: dict[str, Callable[[np.random.Generator], list[Any]]] = {
    "dot": lambda r: [_vec(r, 4), _vec(r, 4)],
    "vsum": lambda r: [_vec(r, 4)],
    "vmean": lambda r: [_vec(r, 4)],
    "norm": lambda r: [_vec(r, 4)],
    "normalize": lambda r: [_vec(r, 4)],
    "%dmci-normalize": lambda r: [_vec(r, 4)],
    "cross": lambda r: [_vec(r, 3), _vec(r, 3)],
    "outer": lambda r: [_vec(r, 3), _vec(r, 2)],
    "matvec": lambda r: [_mat(r, 3, 2), _vec(r, 2)],
    "matmul": lambda r: [_mat(r, 3, 2), _mat(r, 2, 4)],
    "transpose": lambda r: [_mat(r, 3, 2)],
    "trace": lambda r: [_mat(r, 3)],
    "det": lambda r: [_mat(r, 3)],
    "logdet": lambda r: [_mat(r, 3)],
    "inv": lambda r: [_mat(r, 3)],
    "solve": lambda r: [_mat(r, 3), _vec(r, 3)],
    "cholesky": lambda r: [_spd(r, 3)],
}


def _lane_oracle(name: str, *xs: np.ndarray) -> Any:
    """Per-lane definitions, written independently of the batched rules."""
    if name == "dot":
        return sum(a * b for a, b in zip(*xs))
    if name == "vsum":
        return math.fsum(xs[0])
    if name == "vmean":
        return math.fsum(xs[0]) / len(xs[0])
    if name == "norm":
        return math.sqrt(math.fsum(a * a for a in xs[0]))
    if name == "%dmci-normalize":
        return xs[0] / max(math.sqrt(math.fsum(a * a for a in xs[0])), 1e-8)
    if name == "normalize":
        return xs[0] / math.sqrt(math.fsum(a * a for a in xs[0]))
    if name == "cross":
        (a1, a2, a3), (b1, b2, b3) = xs
        return np.array([a2 * b3 - a3 * b2, a3 * b1 - a1 * b3, a1 * b2 - a2 * b1])
    if name == "outer":
        return np.array([[a * b for b in xs[1]] for a in xs[0]])
    if name == "matvec":
        return np.array([math.fsum(a * b for a, b in zip(row, xs[1])) for row in xs[0]])
    if name == "matmul":
        return np.array([[math.fsum(a * b for a, b in zip(row, col)) for col in xs[1].T]
                         for row in xs[0]])  # fmt: skip
    if name == "transpose":
        return xs[0].T
    if name == "trace":
        return math.fsum(xs[0][i, i] for i in range(len(xs[0])))
    a = xs[0]
    det3 = (a[0, 0] * (a[1, 1] * a[2, 2] - a[1, 2] * a[2, 1])
            - a[0, 1] * (a[1, 0] * a[2, 2] - a[1, 2] * a[2, 0])
            + a[0, 2] * (a[1, 0] * a[2, 1] - a[1, 1] * a[2, 0]))  # fmt: skip
    if name == "det":
        return det3
    if name == "logdet":
        return math.log(abs(det3))
    if name == "inv":  # adjugate / det
        cof = np.array([[(-1) ** (i + j) * np.linalg.det(np.delete(np.delete(a, i, 0), j, 1))
                         for j in range(3)] for i in range(3)])  # fmt: skip
        return cof.T / det3
    if name == "solve":
        return _lane_oracle("inv", a) @ xs[1]
    if name == "cholesky":
        n = len(a)
        low = np.zeros_like(a)
        for j in range(n):
            low[j, j] = math.sqrt(a[j, j] - math.fsum(low[j, :j] ** 2))
            for i in range(j + 1, n):
                low[i, j] = (a[i, j] - math.fsum(low[i, :j] * low[j, :j])) / low[j, j]
        return low
    raise KeyError(name)


def test_every_linalg_prim_has_a_case() -> None:
    assert {p.name for p in LINALG} == set(LINALG_ARGS)
    for p in LINALG:
        assert p.in_ranks is not None and len(p.in_ranks) == p.arity.min_args
        assert p.shape_rule is not None and 150 <= p.code < 200


@pytest.mark.parametrize("prim", LINALG, ids=lambda p: p.name)
def test_linalg_forward_matches_lane_oracle(prim: Prim, rng: Any) -> None:
    assert prim.ref is not None and prim.shape_rule is not None and prim.in_ranks is not None
    xs = LINALG_ARGS[prim.name](rng)
    got = np.asarray(prim.ref(*xs))
    structs = [x.shape[len(LANES) :] for x in xs]
    assert got.shape == LANES + prim.shape_rule(*structs)
    for lane in np.ndindex(*LANES):
        want = _lane_oracle(prim.name, *(x[lane] for x in xs))
        np.testing.assert_allclose(got[lane], want, rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("prim", LINALG, ids=lambda p: p.name)
def test_linalg_vjp_matches_finite_differences(prim: Prim, rng: Any) -> None:
    assert prim.ref is not None and prim.vjp is not None
    xs = LINALG_ARGS[prim.name](rng)
    tangents = None
    if prim.name == "cholesky":  # the input is symmetric: perturb symmetrically
        u = rng.standard_normal(xs[0].shape)
        tangents = [u + np.swapaxes(u, -1, -2)]
    check_prim_vjp(prim.ref, prim.vjp, xs, rng, tangents=tangents, rtol=1e-6, atol=1e-8)


def test_linalg_broadcasts_lane_axes(rng: Any) -> None:
    mm = PRIMS.by_name("matmul")
    assert mm.ref is not None and mm.vjp is not None
    a, b = _mat(rng, 3, 2, lanes=(2, 1)), _mat(rng, 2, 4, lanes=(1, 3))
    out = mm.ref(a, b)
    assert out.shape == (2, 3, 3, 4)
    np.testing.assert_allclose(out[1, 2], a[1, 0] @ b[0, 2])
    check_prim_vjp(mm.ref, mm.vjp, [a, b], rng)
    sv = PRIMS.by_name("solve")
    assert sv.ref is not None and sv.vjp is not None
    check_prim_vjp(sv.ref, sv.vjp, [_mat(rng, 3, lanes=(2, 1)), _vec(rng, 3, lanes=(1, 3))], rng)
    ct = sv.vjp(np.ones((2, 3, 3)), sv.ref(_mat(rng, 3, lanes=(1, 1)), _vec(rng, 3)),
                _mat(rng, 3, lanes=(1, 1)), _vec(rng, 3))  # fmt: skip
    assert unbroadcast(ct[0], (1, 1, 3, 3)).shape == (1, 1, 3, 3)


BAD_SHAPES = [
    ("dot", [(3,), (4,)]),
    ("cross", [(2,), (3,)]),
    ("matvec", [(2, 3), (2,)]),
    ("matmul", [(2, 3), (2, 3)]),
    ("solve", [(3, 3), (2,)]),
    ("outer", [(3, 3), (2,)]),
    ("inv", [(2, 3)]),
    ("det", [(2, 3)]),
    ("logdet", [(3, 2)]),
    ("trace", [(3, 2)]),
    ("cholesky", [(1, 2)]),
    ("solve", [(2, 3), (2,)]),
    ("transpose", [(3,)]),
    ("norm", [(2, 2)]),
]


@pytest.mark.parametrize(("name", "shapes"), BAD_SHAPES, ids=[f"{n}{s}" for n, s in BAD_SHAPES])
def test_linalg_shape_errors_name_the_primitive(name: str, shapes: list[Any]) -> None:
    rule = PRIMS.by_name(name).shape_rule
    assert rule is not None
    with pytest.raises(ShapeError) as err:
        rule(*shapes)
    msg = str(err.value)
    assert msg.startswith(f"{name}:")
    assert any(str(tuple(s)) in msg for s in shapes)
    if name in ("dot", "cross", "matvec", "matmul"):
        assert all(str(tuple(s)) in msg for s in shapes)


def test_linalg_matmul_message() -> None:
    rule = PRIMS.by_name("matmul").shape_rule
    assert rule is not None
    with pytest.raises(ShapeError, match=r"matmul: shapes \(2, 3\) and \(2, 3\) do not align"):
        rule((2, 3), (2, 3))


def test_linalg_singular_lanes_are_nan_never_raise(rng: Any) -> None:
    a = _mat(rng, 2, lanes=(1, 3))
    a[0, 1] = [[1.0, 2.0], [2.0, 4.0]]  # singular lane
    b = _vec(rng, 2, lanes=(1, 3))
    ref = {n: PRIMS.by_name(n) for n in ("inv", "det", "logdet", "solve", "cholesky")}
    inv = ref["inv"].ref(a)  # type: ignore[misc]
    assert np.all(np.isnan(inv[0, 1])) and np.all(np.isfinite(inv[0, [0, 2]]))
    np.testing.assert_allclose(inv[0, 0] @ a[0, 0], np.eye(2), atol=1e-12)
    det = ref["det"].ref(a)  # type: ignore[misc]
    assert det[0, 1] == 0.0
    assert ref["logdet"].ref(a)[0, 1] == -np.inf  # type: ignore[misc]
    x = ref["solve"].ref(a, b)  # type: ignore[misc]
    assert np.all(np.isnan(x[0, 1])) and np.all(np.isfinite(x[0, [0, 2]]))
    chol = ref["cholesky"].ref(-_spd(rng, 2, lanes=(1, 2)))  # type: ignore[misc]
    assert np.all(np.isnan(chol))
    nan_a = np.full((1, 1, 2, 2), np.nan)
    for name in ("inv", "det", "logdet", "cholesky"):
        p = ref[name]
        ans = p.ref(nan_a)  # type: ignore[misc]
        assert np.all(np.isnan(ans))
        p.vjp(np.ones_like(ans), ans, nan_a)  # type: ignore[misc]
    for name in ("inv", "det", "logdet"):  # VJPs at a singular lane: NaN there, no raise
        p = ref[name]
        ans = p.ref(a)  # type: ignore[misc]
        p.vjp(np.ones_like(ans), ans, a)  # type: ignore[misc]
    ref["solve"].vjp(np.ones_like(x), x, a, b)  # type: ignore[misc]
