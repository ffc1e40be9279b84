"""Lane-wise numeric primitives (opcodes 1-99) with their VJP rules and namespace formulas.

Every ``ref`` is float64 NumPy on payloads (floats or ``(R, D, *struct)`` arrays) and never
raises on a bad domain: IEEE results flow through. Every ``vjp`` returns one cotangent per
operand, broadcastable to the output (the tape sums it back), or ``None`` where none flows.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ndvm.prims import formulas as fm
from ndvm.prims.registry import Arity, Domain, Formula, Kind, Prim, between, fixed, variadic
from ndvm.prims.table import PRIMS

Payload = Any  # float | np.ndarray; kept loose because refs also see np.float64 scalars
Rule = tuple[Callable[..., Any], Callable[..., tuple[Any, ...]]]


def _ieee(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``fn`` with Python numbers as ``np.float64``, so ``1.0 / 0.0`` is inf, not a raise."""

    def wrapped(*xs: Any) -> Any:
        return fn(*(np.float64(x) if type(x) in (float, int) else x for x in xs))

    wrapped.__name__ = wrapped.__qualname__ = getattr(fn, "__name__", "rule")
    return wrapped


def _num(
    name: str,
    code: int,
    arity: Arity,
    ref: Callable[..., Any],
    vjp: Callable[..., tuple[Any, ...]],
    family: str,
    doc: str,
    aliases: tuple[str, ...] = (),
    domain: Domain = Domain.ALL,
    formula: Formula | None = None,
) -> Prim:
    ref, vjp = _ieee(ref), _ieee(vjp)
    return PRIMS.add(
        Prim(
            name,
            code,
            arity,
            Kind.NUMERIC,
            ref,
            vjp,
            family,
            doc,
            aliases,
            domain=domain,
            formula=formula,
        )
    )


def _unary(
    name: str,
    code: int,
    f: Callable[..., Any],
    d: Callable[..., Any],
    family: str,
    doc: str,
    formula: Formula | None = None,
) -> Prim:
    """Register ``f`` with VJP ``g * d(ans, x)``."""
    vjp = lambda g, ans, x: (g * d(ans, x),)  # noqa: E731
    return _num(name, code, fixed(1), f, vjp, family, doc, formula=formula)


def _safe_div(num: Payload, den: Payload) -> Payload:
    """``num / den`` with 0 where ``den == 0`` (the abs'(0) = 0 convention for norms)."""
    den_ok = np.where(den == 0, 1.0, den)
    return np.where(den == 0, 0.0, num / den_ok)


# ---- arithmetic -------------------------------------------------------------------------------


def _add(*xs: Payload) -> Payload:
    out: Payload = 0.0
    for x in xs:
        out = out + x
    return out


def _sub(x: Payload, *ys: Payload) -> Payload:
    if not ys:
        return -x
    for y in ys:
        x = x - y
    return x


def _sub_vjp(g: Payload, ans: Payload, x: Payload, *ys: Payload) -> tuple[Any, ...]:
    if not ys:
        return (-g,)
    return (g, *(-g for _ in ys))


def _mul(*xs: Payload) -> Payload:
    out: Payload = 1.0
    for x in xs:
        out = out * x
    return out


def _mul_vjp(g: Payload, ans: Payload, *xs: Payload) -> tuple[Any, ...]:
    """d/dx_i = g * (P_i * Q_(i+1)): P_0 = 1, P_(i+1) = P_i * x_i (prefix products, left to
    right) and Q_n = 1, Q_i = x_i * Q_(i+1) (suffix products): linear in the argument count,
    exact with zeros (no ans / x_i). The native core computes the same products in the same
    order (cpp/src/kernels.cpp ``variadic_vjp``); for n <= 3 they are its fixed formulas."""
    n = len(xs)
    suffix: list[Payload] = [1.0] * (n + 1)
    for i in range(n - 1, 0, -1):
        suffix[i] = xs[i] * suffix[i + 1]
    outs = []
    prefix: Payload = 1.0
    for i in range(n):
        outs.append(g * (prefix * suffix[i + 1]))
        prefix = prefix * xs[i]
    return tuple(outs)


def _div(x: Payload, *ys: Payload) -> Payload:
    if not ys:
        return 1.0 / x
    for y in ys:
        x = x / y
    return x


def _div_vjp(g: Payload, ans: Payload, x: Payload, *ys: Payload) -> tuple[Any, ...]:
    if not ys:
        return (-g * ans * ans,)
    den: Payload = 1.0
    for y in ys:
        den = den * y
    return (g / den, *(-g * ans / y for y in ys))


def _extremal_vjp(g: Payload, ans: Payload, *xs: Payload) -> tuple[Any, ...]:
    """Send ``g`` to the FIRST operand equal to the result, per lane and element: one scan
    for that operand's index (n where none is, e.g. a NaN result), then one comparison per
    operand (linear in the argument count)."""
    n = len(xs)
    first: Any = n
    for i in range(n - 1, -1, -1):  # the last write is the smallest index
        first = np.where(xs[i] == ans, i, first)
    return tuple(g * (first == i) for i in range(n))


def _fold(op: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    def ref(x: Payload, *ys: Payload) -> Payload:
        for y in ys:
            x = op(x, y)
        return x

    return ref


def _atan_ref(y: Payload, x: Payload | None = None) -> Payload:
    return np.arctan(y) if x is None else np.arctan2(y, x)


def _atan_vjp(g: Payload, ans: Payload, y: Payload, x: Payload | None = None) -> tuple[Any, ...]:
    if x is None:
        return (g / (1.0 + y * y),)
    r2 = x * x + y * y
    return (g * x / r2, -g * y / r2)


def _log_ref(x: Payload, b: Payload | None = None) -> Payload:
    return np.log(x) if b is None else np.log(x) / np.log(b)


def _log_vjp(g: Payload, ans: Payload, x: Payload, b: Payload | None = None) -> tuple[Any, ...]:
    if b is None:
        return (g / x,)
    lb = np.log(b)
    return (g / (x * lb), -g * ans / (b * lb))


def _expt_vjp(g: Payload, ans: Payload, a: Payload, b: Payload) -> tuple[Any, ...]:
    # d/da = b a^(b-1), exactly 0 when b == 0 (a^0 is constant, even at a == 0).
    da = np.where(b == 0, 0.0, b * np.power(a, b - 1.0))
    # d/db = a^b ln a for a > 0; for a <= 0 a^b is not real-valued around b, so the exponent
    # is treated as integer-valued there (no gradient, like a loop count).
    a_pos = np.where(a > 0, a, 1.0)
    db = np.where(a > 0, ans * np.log(a_pos), 0.0)
    return (g * da, g * db)


def _sigmoid(x: Payload) -> Payload:
    e = np.exp(-np.abs(x))  # never overflows, so both branches are exact
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _softplus(x: Payload) -> Payload:
    return np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))


_erf_obj = np.frompyfunc(math.erf, 1, 1)


def _erf(x: Payload) -> Payload:
    if isinstance(x, np.ndarray):
        return _erf_obj(x).astype(np.float64)
    return math.erf(float(x))


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _clamp_ref(x: Payload, lo: Payload, hi: Payload) -> Payload:
    return np.minimum(np.maximum(x, lo), hi)


def _clamp_vjp(g: Payload, ans: Payload, x: Payload, lo: Payload, hi: Payload) -> tuple[Any, ...]:
    # (clamp x lo hi) = (min (max x lo) hi); each stage follows the first-extremal rule.
    take_x = x >= lo
    inner = np.where(take_x, x, lo)
    take_inner = inner <= hi
    not_x = np.logical_not(take_x)
    return (
        g * np.logical_and(take_x, take_inner),
        g * np.logical_and(not_x, take_inner),
        g * np.logical_not(take_inner),
    )


def _none_vjp(g: Payload, ans: Payload, *xs: Payload) -> tuple[Any, ...]:
    return tuple(None for _ in xs)


def _remainder_vjp(g: Payload, ans: Payload, a: Payload, b: Payload) -> tuple[Any, ...]:
    # remainder = a - b * trunc(a / b): exact derivative away from the jumps.
    return (g, -g * np.trunc(a / b))


def _modulo_vjp(g: Payload, ans: Payload, a: Payload, b: Payload) -> tuple[Any, ...]:
    # modulo = a - b * floor(a / b): exact derivative away from the jumps.
    return (g, -g * np.floor(a / b))


_A, _T, _P = "arithmetic", "transcendental", "piecewise"
_num("+", 1, variadic(0), _add, lambda g, ans, *xs: tuple(g for _ in xs), _A,
     "Sum (0 args: 0). d/dx_i = 1.",
     formula=fm.add)  # fmt: skip
_num("-", 2, variadic(1), _sub, _sub_vjp, _A,
     "Difference; unary negates. d/dx_1 = 1, d/dx_i = -1 (unary: -1).",
     formula=fm.sub)  # fmt: skip
_num("*", 3, variadic(0), _mul, _mul_vjp, _A,
     "Product (0 args: 1). d/dx_i = product of the other operands.",
     formula=fm.mul)  # fmt: skip
_num("/", 4, variadic(1), _div, _div_vjp, _A,
     "Quotient left to right; unary reciprocates; IEEE (/ 1 0) = +inf. "
     "d/dx_1 = 1/(x_2...x_n), d/dx_i = -ans/x_i.",
     formula=fm.div)  # fmt: skip
_unary(
    "abs",
    5,
    np.abs,
    lambda ans, x: np.sign(x),
    _A,
    "|x|. d/dx = sign(x); abs'(0) = 0.",
    formula=lambda o: o.abs,
)
_num("min", 6, variadic(1), _fold(np.minimum), _extremal_vjp, _A,
     "Smallest operand (NaN propagates). Gradient 1 to the FIRST minimal operand.",
     formula=fm.first_extremal(lambda y, x: y < x))  # fmt: skip
_num("max", 7, variadic(1), _fold(np.maximum), _extremal_vjp, _A,
     "Largest operand (NaN propagates). Gradient 1 to the FIRST maximal operand.",
     formula=fm.first_extremal(lambda y, x: y > x))  # fmt: skip
_unary("exp", 8, np.exp, lambda ans, x: ans, _T, "e^x. d/dx = e^x.", formula=lambda o: o.exp)
_num("log", 9, between(1, 2), _log_ref, _log_vjp, _T,
     "Natural log; (log x b) = ln x / ln b. d/dx = 1/(x ln b), d/db = -ans/(b ln b). "
     "dmci: x clamped at 1e-8 (zero gradient below).", domain=Domain.POSITIVE,
     formula=fm.log)  # fmt: skip
_unary(
    "log1p",
    10,
    np.log1p,
    lambda ans, x: 1.0 / (1.0 + x),
    _T,
    "ln(1+x). d/dx = 1/(1+x).",
    formula=lambda o: o.log1p,
)
_unary(
    "expm1",
    11,
    np.expm1,
    lambda ans, x: ans + 1.0,
    _T,
    "e^x - 1. d/dx = e^x.",
    formula=lambda o: o.expm1,
)
_num("sqrt", 12, fixed(1), np.sqrt, lambda g, ans, x: (0.5 * g / ans,), _T,
     "Square root (NaN below 0). d/dx = 1/(2 sqrt x). "
     "dmci: x clamped at 1e-8 (zero gradient below).", domain=Domain.POSITIVE,
     formula=lambda o: o.sqrt)  # fmt: skip
_unary("cbrt", 13, np.cbrt, lambda ans, x: 1.0 / (3.0 * ans * ans), _T,
       "Real cube root. d/dx = 1/(3 cbrt(x)^2) (inf at 0).",
     formula=lambda o: o.cbrt)  # fmt: skip
_unary(
    "square",
    14,
    np.square,
    lambda ans, x: 2.0 * x,
    _A,
    "x^2. d/dx = 2x.",
    formula=lambda o: lambda x: x * x,
)
_num("expt", 15, fixed(2), np.power, _expt_vjp, _T,
     "a^b (NaN for a < 0 and non-integer b). d/da = b a^(b-1) (0 if b = 0); "
     "d/db = a^b ln a for a > 0, 0 for a <= 0.", aliases=("pow",),
     formula=lambda o: o.pow)  # fmt: skip
_unary(
    "sin", 16, np.sin, lambda ans, x: np.cos(x), _T, "sin x. d/dx = cos x.", formula=lambda o: o.sin
)
_unary(
    "cos",
    17,
    np.cos,
    lambda ans, x: -np.sin(x),
    _T,
    "cos x. d/dx = -sin x.",
    formula=lambda o: o.cos,
)
_unary(
    "tan",
    18,
    np.tan,
    lambda ans, x: 1.0 + ans * ans,
    _T,
    "tan x. d/dx = 1 + tan^2 x.",
    formula=lambda o: o.tan,
)
_unary("asin", 19, np.arcsin, lambda ans, x: 1.0 / np.sqrt(1.0 - x * x), _T,
       "arcsin x (NaN outside [-1, 1]). d/dx = 1/sqrt(1-x^2).",
     formula=lambda o: o.asin)  # fmt: skip
_unary("acos", 20, np.arccos, lambda ans, x: -1.0 / np.sqrt(1.0 - x * x), _T,
       "arccos x (NaN outside [-1, 1]). d/dx = -1/sqrt(1-x^2).",
     formula=lambda o: o.acos)  # fmt: skip
_num("atan", 21, between(1, 2), _atan_ref, _atan_vjp, _T,
     "arctan y; (atan y x) = atan2(y, x). d/dy = x/(x^2+y^2), d/dx = -y/(x^2+y^2).",
     formula=fm.atan)  # fmt: skip
_unary(
    "sinh",
    22,
    np.sinh,
    lambda ans, x: np.cosh(x),
    _T,
    "sinh x. d/dx = cosh x.",
    formula=lambda o: o.sinh,
)
_unary(
    "cosh",
    23,
    np.cosh,
    lambda ans, x: np.sinh(x),
    _T,
    "cosh x. d/dx = sinh x.",
    formula=lambda o: o.cosh,
)
_unary(
    "tanh",
    24,
    np.tanh,
    lambda ans, x: 1.0 - ans * ans,
    _T,
    "tanh x. d/dx = 1 - tanh^2 x.",
    formula=lambda o: o.tanh,
)
_unary("asinh", 25, np.arcsinh, lambda ans, x: 1.0 / np.sqrt(x * x + 1.0), _T,
       "arsinh x. d/dx = 1/sqrt(x^2+1).",
     formula=lambda o: o.asinh)  # fmt: skip
_unary("acosh", 26, np.arccosh, lambda ans, x: 1.0 / np.sqrt(x * x - 1.0), _T,
       "arcosh x (NaN below 1). d/dx = 1/sqrt(x^2-1).",
     formula=lambda o: o.acosh)  # fmt: skip
_unary("atanh", 27, np.arctanh, lambda ans, x: 1.0 / (1.0 - x * x), _T,
       "artanh x (NaN outside [-1, 1]). d/dx = 1/(1-x^2).",
     formula=lambda o: o.atanh)  # fmt: skip
_unary("sigmoid", 28, _sigmoid, lambda ans, x: ans * (1.0 - ans), _T,
       "1/(1+e^-x), overflow-free. d/dx = s(1-s).",
     formula=lambda o: o.sigmoid)  # fmt: skip
_unary("softplus", 29, _softplus, lambda ans, x: _sigmoid(x), _T,
       "ln(1+e^x), overflow-free. d/dx = sigmoid(x).",
     formula=lambda o: o.softplus)  # fmt: skip
_unary("erf", 30, _erf, lambda ans, x: _TWO_OVER_SQRT_PI * np.exp(-x * x), _T,
       "Error function. d/dx = 2/sqrt(pi) e^(-x^2).",
     formula=lambda o: o.erf)  # fmt: skip
_num("hypot", 31, fixed(2), np.hypot,
     lambda g, ans, a, b: (g * _safe_div(a, ans), g * _safe_div(b, ans)), _A,
     "sqrt(a^2+b^2) without overflow. d/da = a/ans, d/db = b/ans (0 at the origin).",
     formula=lambda o: o.hypot)  # fmt: skip
_num("logaddexp", 41, fixed(2), np.logaddexp,
     lambda g, ans, a, b: (g * np.exp(a - ans), g * np.exp(b - ans)), _T,
     "ln(e^a + e^b) without overflow. d/da = e^(a-ans), d/db = e^(b-ans).",
     formula=lambda o: o.logaddexp)  # fmt: skip
_num("clamp", 32, fixed(3), _clamp_ref, _clamp_vjp, _A,
     "(clamp x lo hi) = (min (max x lo) hi). Gradient 1 to the operand selected "
     "(x when lo <= x <= hi).",
     formula=fm.clamp)  # fmt: skip
for _name, _code, _f, _doc, _formula in (
    ("floor", 33, np.floor, "Largest integer <= x", lambda o: o.floor),
    ("ceiling", 34, np.ceil, "Smallest integer >= x", lambda o: o.ceil),
    ("round", 35, np.round, "Nearest integer, ties to even (R7RS)", lambda o: o.round),
    ("truncate", 36, np.trunc, "Integer part, toward 0", lambda o: o.trunc),
    ("sign", 37, np.sign, "Sign -1, 0 or 1 (NaN stays NaN)", lambda o: o.sign),
):
    _num(_name, _code, fixed(1), _f, _none_vjp, _P, f"{_doc}. Zero gradient.", formula=_formula)
_num("quotient", 38, fixed(2), lambda a, b: np.trunc(a / b), _none_vjp, _P,
     "trunc(a/b). Zero gradient.",
     formula=lambda o: lambda a, b: o.trunc(a / b))  # fmt: skip
_num("remainder", 39, fixed(2), np.fmod, _remainder_vjp, _P,
     "a - b trunc(a/b) (sign of a). d/da = 1, d/db = -trunc(a/b). "
     "dmci: floor-mod, the rule of modulo.",
     formula=lambda o: o.fmod)  # fmt: skip
_num("modulo", 40, fixed(2), np.mod, _modulo_vjp, _P,
     "a - b floor(a/b) (sign of b). d/da = 1, d/db = -floor(a/b). "
     "dmci: C fmod, the rule of remainder.",
     formula=lambda o: o.mod)  # fmt: skip


# ---- dmci dialect -----------------------------------------------------------------------------

DMCI_EPS = 1e-8


def _dmci_sqrt_vjp(g: Payload, ans: Payload, x: Payload) -> tuple[Any, ...]:
    return (np.where(x < DMCI_EPS, 0.0, 0.5 * g / ans),)


def _dmci_log_ref(x: Payload, b: Payload | None = None) -> Payload:
    return _log_ref(np.maximum(x, DMCI_EPS), b)


def _dmci_log_vjp(
    g: Payload, ans: Payload, x: Payload, b: Payload | None = None
) -> tuple[Any, ...]:
    grads = _log_vjp(g, ans, np.maximum(x, DMCI_EPS), b)
    return (np.where(x < DMCI_EPS, 0.0, grads[0]), *grads[1:])


# Under the ``dmci`` dialect these primitives run as the one named (the native core maps the
# same opcodes, cpp/src/interp.cpp ``dmci_code``): the reference system's ``modulo`` is C fmod
# (Scheme's remainder) and its ``remainder`` is floor-mod (Scheme's modulo); its ``normalize``
# floors the norm at 1e-8 (prims/linalg.py registers ``%dmci-normalize`` before this module).
DMCI_RUNS_AS: dict[str, str] = {
    "modulo": "remainder",
    "remainder": "modulo",
    "normalize": "%dmci-normalize",
}


def _rule_of(name: str) -> Rule:
    prim = PRIMS.by_name(name)
    assert prim.ref is not None and prim.vjp is not None
    return prim.ref, prim.vjp


# The ``dmci`` dialect's rules: the evaluator swaps these (ref, vjp) pairs in for the opcodes
# listed: the protected operators (every Domain.POSITIVE prim; only the first argument of
# ``log`` is clamped, a base is used as given) and the DMCI_RUNS_AS substitutions.
DMCI_OVERRIDES: dict[int, Rule] = {
    PRIMS.by_name("sqrt").code: (
        _ieee(lambda x: np.sqrt(np.maximum(x, DMCI_EPS))),
        _ieee(_dmci_sqrt_vjp),
    ),
    PRIMS.by_name("log").code: (_ieee(_dmci_log_ref), _ieee(_dmci_log_vjp)),
    **{PRIMS.by_name(a).code: _rule_of(b) for a, b in DMCI_RUNS_AS.items()},
}


def dmci_rule(prim: Prim) -> tuple[Any, Any]:
    """The ``(ref, vjp)`` pair ``prim`` uses under the ``dmci`` dialect (a predicate has no
    VJP, under any dialect: its ``vjp`` is None here as in the default one)."""
    return DMCI_OVERRIDES.get(prim.code, (prim.ref, prim.vjp))
