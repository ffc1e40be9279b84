"""Array namespaces the tracer computes with: torch, jax.numpy and sympy, imported lazily.

Each namespace has the functions ``baselines.kernels.numeric_impls`` needs (so every NUMERIC
primitive has one formula for all frameworks; ``logaddexp`` is each framework's stable one),
plus the few the tracer itself uses: ``asarray``
(a constant as a framework value), ``where``, ``stack``, ``broadcast_to``/``broadcast_shapes``,
``eq``/``isfinite`` for predicates, and ``traced`` (whether a value is a framework value rather
than a Python or NumPy constant).
"""

from __future__ import annotations

from functools import cache
from types import SimpleNamespace
from typing import Any

import numpy as np

from ndvm.errors import MissingExtra, NdvmError


def require(module: str) -> Any:
    """Import an optional dependency or raise ``MissingExtra`` (an ``NdvmError``) naming the
    extra that provides it, as ``ndvm.extras`` declares it (``pip install 'ndvm[sympy]'``)."""
    import importlib

    from ndvm import extras

    try:
        return importlib.import_module(module)
    except ImportError:
        extra = next((e for e, mods in extras.EXTRAS.items() if module in mods), module)
        raise MissingExtra(extras.message("ndvm.export", [extra])) from None


@cache
def torch_namespace() -> SimpleNamespace:
    torch = require("torch")

    def softplus(x: Any) -> Any:
        return torch.logaddexp(torch.zeros_like(x), x)

    def logaddexp(a: Any, b: Any) -> Any:
        a, b = torch.broadcast_tensors(torch.as_tensor(a), torch.as_tensor(b))
        return torch.logaddexp(a, b)

    def fmod(a: Any, b: Any) -> Any:
        # torch's vectorized CPU fmod is NaN where the quotient a/b overflows (0.75 by 5e-324,
        # -1e308 by 7e-320). Reduce first by b 2^k, an exact multiple of b, with k leaving a
        # quotient below 2^1001: three steps cover the whole exponent range, the last with
        # k = 0; every step is exact, as ndvm's (C's) fmod.
        a, b = torch.broadcast_tensors(torch.as_tensor(a), torch.as_tensor(b))
        eb = torch.frexp(b).exponent
        r = a
        for _ in range(3):
            k = torch.clamp(torch.frexp(r).exponent - eb - 1000, min=0).to(b.dtype)
            half = torch.floor(k / 2)
            r = torch.fmod(r, b * torch.exp2(half) * torch.exp2(k - half))
        return r

    return SimpleNamespace(
        exp=torch.exp, log=torch.log, log1p=torch.log1p, expm1=torch.expm1, sqrt=torch.sqrt,
        abs=torch.abs, sin=torch.sin, cos=torch.cos, tan=torch.tan, asin=torch.asin,
        acos=torch.acos, atan=torch.atan, atan2=torch.atan2, sinh=torch.sinh, cosh=torch.cosh,
        tanh=torch.tanh, asinh=torch.asinh, acosh=torch.acosh, atanh=torch.atanh,
        floor=torch.floor, ceil=torch.ceil, round=torch.round, trunc=torch.trunc,
        sign=torch.sign, hypot=torch.hypot, where=torch.where, isnan=torch.isnan,
        isfinite=torch.isfinite, eq=torch.eq, erf=torch.erf, sigmoid=torch.sigmoid,
        softplus=softplus, logaddexp=logaddexp, fmod=fmod,
        mod=torch.remainder, pow=torch.pow, matmul=torch.matmul,
        swapaxes=torch.swapaxes, inv=torch.linalg.inv, det=torch.linalg.det,
        solve=torch.linalg.solve, cholesky=torch.linalg.cholesky,
        sum=lambda x, axis: torch.sum(x, dim=axis),
        cbrt=lambda x: torch.sign(x) * torch.abs(x).pow(1.0 / 3.0),
        logdet=lambda a: torch.linalg.slogdet(a)[1],
        cross=lambda a, b: torch.linalg.cross(a, b, dim=-1),
        trace=lambda a: torch.diagonal(a, dim1=-2, dim2=-1).sum(-1),
        asarray=lambda x: torch.as_tensor(x, dtype=torch.float64),
        stack=lambda xs: torch.stack(xs, dim=-1),
        broadcast_to=torch.broadcast_to, broadcast_shapes=torch.broadcast_shapes,
        traced=lambda x: isinstance(x, torch.Tensor),
        scalar=False,
    )  # fmt: skip


@cache
def jax_namespace() -> SimpleNamespace:
    jax = require("jax")
    jnp = jax.numpy
    import jax.scipy.special

    return SimpleNamespace(
        exp=jnp.exp, log=jnp.log, log1p=jnp.log1p, expm1=jnp.expm1, sqrt=jnp.sqrt, abs=jnp.abs,
        sin=jnp.sin, cos=jnp.cos, tan=jnp.tan, asin=jnp.arcsin, acos=jnp.arccos,
        atan=jnp.arctan, atan2=jnp.arctan2, sinh=jnp.sinh, cosh=jnp.cosh, tanh=jnp.tanh,
        asinh=jnp.arcsinh, acosh=jnp.arccosh, atanh=jnp.arctanh, floor=jnp.floor,
        ceil=jnp.ceil, round=jnp.round, trunc=jnp.trunc, sign=jnp.sign, hypot=jnp.hypot,
        where=jnp.where, isnan=jnp.isnan, isfinite=jnp.isfinite, eq=jnp.equal,
        erf=jax.scipy.special.erf, sigmoid=jax.nn.sigmoid,
        softplus=lambda x: jnp.logaddexp(0.0, x), logaddexp=jnp.logaddexp, cbrt=jnp.cbrt,
        fmod=jnp.fmod, mod=jnp.mod, pow=jnp.power,
        matmul=jnp.matmul, swapaxes=jnp.swapaxes, inv=jnp.linalg.inv, det=jnp.linalg.det,
        logdet=lambda a: jnp.linalg.slogdet(a)[1], solve=jnp.linalg.solve,
        cholesky=jnp.linalg.cholesky, cross=jnp.cross,
        sum=lambda x, axis: jnp.sum(x, axis=axis),
        trace=lambda a: jnp.trace(a, axis1=-2, axis2=-1),
        asarray=lambda x: jnp.asarray(x, dtype=jnp.float64),
        stack=lambda xs: jnp.stack(xs, axis=-1),
        broadcast_to=jnp.broadcast_to, broadcast_shapes=jnp.broadcast_shapes,
        traced=lambda x: isinstance(x, jax.Array),
        scalar=False,
    )  # fmt: skip


def _unsupported(what: str) -> Any:
    def fail(*_: Any) -> Any:
        raise NdvmError(f"{what} has no closed form for sympy")

    return fail


@cache
def sympy_namespace() -> SimpleNamespace:
    """Scalar expressions only: vectors and matrices are outside ``to_sympy``'s subset."""
    sp = require("sympy")
    from sympy.codegen import cfunctions as cf  # log1p, expm1, hypot: exact, and C's in lambdify

    def where(c: Any, a: Any, b: Any) -> Any:
        if c is sp.true or c is True:
            return a
        if c is sp.false or c is False:
            return b
        return sp.Piecewise((a, _folded(c)), (b, True), evaluate=False)  # NaN tests as written

    third = sp.Rational(1, 3)

    def cbrt(x: Any) -> Any:  # the real cube root (sympy's cbrt is the principal one)
        return sp.Piecewise((x**third, x >= 0), (-((-x) ** third), True))

    def trunc(x: Any) -> Any:
        return sp.sign(x) * sp.floor(sp.Abs(x))

    def mod(a: Any, b: Any) -> Any:  # floor-mod (the divisor's sign), NaN for a zero divisor
        return sp.nan if getattr(b, "is_zero", None) is True else sp.Mod(a, b)

    def logaddexp(a: Any, b: Any) -> Any:  # the larger operand plus a bounded correction
        stable = sp.Max(a, b) + sp.log(1 + sp.exp(-sp.Abs(a - b)))
        return sp.Piecewise((stable, sp.Ne(a, b)), (a + sp.log(2), True))  # a = b = ±inf

    return SimpleNamespace(
        exp=sp.exp, log=sp.log, log1p=cf.log1p, expm1=cf.expm1,
        sqrt=sp.sqrt, abs=sp.Abs, sin=sp.sin, cos=sp.cos, tan=sp.tan, asin=sp.asin,
        acos=sp.acos, atan=sp.atan, atan2=sp.atan2, sinh=sp.sinh, cosh=sp.cosh, tanh=sp.tanh,
        asinh=sp.asinh, acosh=sp.acosh, atanh=sp.atanh, floor=sp.floor, ceil=sp.ceiling,
        round=_unsupported("round"), trunc=trunc,
        sign=sp.sign, hypot=cf.hypot, where=where,
        isnan=lambda x: sp.Ne(x, x, evaluate=False), eq=sp.Eq,
        isfinite=lambda x: sp.Eq(sp.Add(x, -x, evaluate=False), 0, evaluate=False),
        erf=sp.erf, sigmoid=lambda x: 1 / (1 + sp.exp(-x)),
        softplus=lambda x: logaddexp(sp.Integer(0), x), logaddexp=logaddexp, cbrt=cbrt,
        fmod=_sympy_fmod(), mod=mod,
        pow=sp.Pow, matmul=_unsupported("matmul"),
        swapaxes=_unsupported("transpose"), inv=_unsupported("inv"), det=_unsupported("det"),
        logdet=_unsupported("logdet"), solve=_unsupported("solve"),
        cholesky=_unsupported("cholesky"), cross=_unsupported("cross"),
        sum=_unsupported("vector sums"), trace=_unsupported("trace"),
        asarray=constant, stack=_unsupported("vectors"), broadcast_to=_unsupported("vectors"),
        broadcast_shapes=_unsupported("vectors"),
        traced=lambda x: isinstance(x, sp.Basic),
        scalar=True, min=sp.Min, max=sp.Max, keep=_keep_operations, unevaluated=_unevaluated,
    )  # fmt: skip


def _folded(cond: Any) -> Any:
    """A condition with the selects (``Piecewise``) inside it spelled out as ``And``/``Or`` of
    their branches, built unevaluated: sympy's own folding (``ExprCondPair`` rewrites to
    ``ITE`` and evaluates) would drop a NaN test such as ``Eq(x - x, 0)``."""
    import sympy as sp
    from sympy.core.parameters import evaluate

    if not isinstance(cond, sp.Basic):
        return cond
    inner = next(iter(cond.atoms(sp.Piecewise)), None)
    if inner is None:
        return cond
    with evaluate(False):
        taken, cases = [], []
        for expr, c in inner.args:
            branch = _folded(cond.xreplace({inner: expr}))
            cases.append(sp.And(*(sp.Not(t) for t in taken), _folded(c), branch))
            taken.append(_folded(c))
        return sp.Or(*cases)


def _unevaluated(fn: Any) -> Any:
    """``fn`` over sympy values with sympy's evaluation off (comparisons kept as written)."""
    from sympy.core.parameters import evaluate

    def run(*args: Any) -> Any:
        with evaluate(False):
            return fn(*args)

    return run


def _keep_operations(fn: Any, kept: dict[int, Any]) -> Any:
    """``fn`` over sympy values, rebuilt with evaluation off where sympy's evaluation would
    hide a NaN of the float computation: an operand's symbol cancelled (``x - x``, ``x/x``,
    ``0*x``), a function undone by its inverse (``exp(log(x))``, ``log(exp(x))``), an
    operand kept so before or a select (``Piecewise``) rewritten, or a select folded into
    new ones (sympy takes powers and products branch by branch: ``1/x`` overflows where
    ``x/x`` does not). ``kept`` (id -> expression, one per translation) holds
    the expressions built that way and those containing one."""
    from sympy import Basic, Piecewise, zoo
    from sympy.core.cache import clear_cache
    from sympy.core.parameters import evaluate

    def run(*args: Any) -> Any:
        out = fn(*args)
        symbolic = [a for a in args if isinstance(a, Basic) and a.free_symbols]
        if not symbolic or not isinstance(out, Basic):
            return out
        had = set().union(*(a.free_symbols for a in symbolic))
        undone = len(args) == 1 and args[0].args and out == args[0].args[0]
        guarded = [a for a in symbolic if id(a) in kept or isinstance(a, Piecewise)]
        folded = out.atoms(Piecewise) - set().union(*(a.atoms(Piecewise) for a in symbolic))
        if (undone or folded or not had <= out.free_symbols or out.has(zoo)
                or not all(out.has(a) for a in guarded)):  # fmt: skip
            clear_cache()  # sympy's cache ignores ``evaluate``: it could return ``out`` again
            with evaluate(False):
                out = fn(*args)
            kept[id(out)] = out
        elif guarded:
            kept[id(out)] = out
        return out

    return run


@cache
def _sympy_fmod() -> Any:
    """C ``fmod`` as a sympy function (``Mod`` has the divisor's sign, ndvm's ``remainder`` the
    dividend's): exact on numbers (``a - b*trunc(a/b)``, NaN for a zero divisor or an
    infinite dividend, ``a`` for an infinite divisor), printed as ``numpy.fmod`` by
    ``lambdify`` so float evaluation is exact too, differentiable, and rewritable with
    ``expr.rewrite(sympy.floor)``."""
    sp = require("sympy")

    def trunc(x: Any) -> Any:
        return sp.sign(x) * sp.floor(sp.Abs(x))

    class fmod(sp.Function):  # noqa: N801 - the name sympy prints
        nargs = 2

        @classmethod
        def eval(cls, a: Any, b: Any) -> Any:
            if not (a.is_Number and b.is_Number):
                return None
            if a is sp.nan or b is sp.nan or b.is_zero or a.is_infinite:
                return sp.nan
            if b.is_infinite:
                return a
            return a - b * trunc(a / b)

        def fdiff(self, argindex: int = 1) -> Any:
            a, b = self.args
            return sp.Integer(1) if argindex == 1 else -trunc(a / b)

        def _eval_rewrite_as_floor(self, a: Any, b: Any, **_: Any) -> Any:
            return a - b * trunc(a / b)

        def _numpycode(self, printer: Any) -> str:
            a, b = (printer._print(x) for x in self.args)
            return f"{printer._module_format('numpy.fmod')}({a}, {b})"

        _scipycode = _numpycode

        def _latex(self, printer: Any) -> str:
            a, b = (printer._print(x) for x in self.args)
            return rf"\operatorname{{fmod}}\left({a}, {b}\right)"

    return fmod


def constant(x: Any) -> Any:
    """A float as an exact sympy number: integers stay integers, others keep every digit."""
    import sympy as sp

    if isinstance(x, np.ndarray):
        if x.ndim:
            raise NdvmError("vectors and matrices have no closed form for sympy")
        x = float(x)
    x = float(x)
    if x.is_integer() and abs(x) < 2**53:
        return sp.Integer(int(x))
    if not np.isfinite(x):
        return {True: sp.oo, False: -sp.oo}[x > 0] if not np.isnan(x) else sp.nan
    return sp.Float(repr(x), 17)
