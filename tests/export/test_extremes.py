"""Exports equal the runtime over the whole float range (issue 48).

A differential test: generated closed-form programs (``genprog.export_expressions``: the
remainders, ``logaddexp``, ``softplus``, the NaN/finite tests, ``(/ e e)``, ``(- e e)``,
``(exp (log e))``...) evaluated at generated extreme inputs (±inf, ±0, NaN, ±1e308, ±1e-308,
subnormals) by ndvm and by each exporter: equal to 1e-9 relative, NaN where ndvm is NaN.
sympy is evaluated with float semantics (``lambdify`` over NumPy). Plus the issue's own
reproducers, each with its value worked out by hand.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from tests.helpers.extras import need
from tests.helpers.genprog import export_expressions, extremes

import ndvm
import ndvm.export
from ndvm.errors import ExportUnsupported

THETA = (0.75, -1.25)
TINY = np.finfo(np.float64).tiny  # the smallest normal float64
SETTINGS = settings(max_examples=20, deadline=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))  # fmt: skip


def runtime(src: str, xs: np.ndarray) -> np.ndarray:
    prog = ndvm.compile(src, inputs=["x"], backend="reference")
    with np.errstate(all="ignore"):
        return np.asarray(prog.eval(np.array(THETA), x=xs), dtype=np.float64)


def agree(  # noqa: PLR0913
    got: np.ndarray,
    want: np.ndarray,
    src: str,
    xs: np.ndarray,
    flush: bool = False,
    rounding: bool = False,
) -> None:
    """Equal (1e-9 relative), NaN where ``want`` is NaN. ``rounding`` (sympy, whose printed
    expression sums terms in its own order): also within 1e-12 of the largest operand, the
    rounding a cancellation leaves. ``flush`` (JAX, torch): XLA on CPU flushes subnormals to
    zero, and torch's vectorized ``log1p`` returns 0 for a subnormal, so a subnormal result may
    be 0."""
    got = np.broadcast_to(np.asarray(got, dtype=np.float64), want.shape)
    same = (np.isnan(got) & np.isnan(want)) | (got == want)
    if rounding:  # sympy's own operation order: a cancellation differs by rounding of operands
        scale = np.abs(xs[np.isfinite(xs)]).max(initial=max(map(abs, THETA)))
        same |= np.abs(got - want) <= 1e-12 * scale
    if flush:
        same |= (np.abs(want) < TINY) & (got == 0.0)
    close = np.isclose(got, want, rtol=1e-9, atol=0.0)
    bad = ~(same | close)
    assert not bad.any(), f"{src} at x={xs[bad]}: export {got[bad]}, ndvm {want[bad]}"


def sympy_values(src: str, xs: np.ndarray) -> np.ndarray:
    sp = need("sympy")
    prog = ndvm.compile(src, inputs=["x"], backend="reference")
    expr = ndvm.export.to_sympy(prog)  # parameters as symbols: every operand a NumPy value
    names = [sp.Symbol(n, real=True) for n in (*prog.params, "x")]
    fn = sp.lambdify(names, expr, "numpy")
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return np.asarray(fn(*(np.full_like(xs, t) for t in THETA), xs), dtype=np.float64)
        except ValueError:  # lambdify's select of scalar and array branches: lane by lane
            theta = [np.float64(t) for t in THETA]
            return np.array([fn(*theta, np.float64(x)) for x in xs], dtype=np.float64)


def torch_values(src: str, xs: np.ndarray) -> np.ndarray:
    torch = need("torch")
    module = ndvm.export.to_torch(ndvm.compile(src, inputs=["x"], backend="reference"))
    with torch.no_grad():
        for p, t in zip(module.parameters(), THETA):
            p.fill_(t)
        return module(x=torch.tensor(xs, dtype=torch.float64)).numpy()


def jax_values(src: str, xs: np.ndarray) -> np.ndarray:
    jax = need("jax")
    jax.config.update("jax_enable_x64", True)
    fn, params = ndvm.export.to_jax(ndvm.compile(src, inputs=["x"], backend="reference"))
    params = {k: jax.numpy.asarray(t) for k, t in zip(params, THETA)}
    return np.asarray(fn(params, x=jax.numpy.asarray(xs)))


EXPORTERS = {
    "sympy": pytest.param(sympy_values, marks=pytest.mark.sympy),
    "torch": pytest.param(torch_values, marks=pytest.mark.torch),
    "jax": pytest.param(jax_values, marks=pytest.mark.jax),
}


@pytest.mark.parametrize("export", EXPORTERS.values(), ids=list(EXPORTERS))
def test_exports_equal_runtime_at_extreme_inputs(export) -> None:  # type: ignore[no-untyped-def]
    exported = []

    @SETTINGS
    @given(src=export_expressions(), xs=extremes(8))
    def check(src: str, xs: list[float]) -> None:
        x = np.array(xs, dtype=np.float64)
        want = runtime(src, x)
        try:
            got = export(src, x)
        except ExportUnsupported:
            return
        exported.append(src)
        if export is jax_values:
            x = np.where(np.abs(x) < TINY, np.copysign(0.0, x), x)  # XLA flushes subnormals
            want = runtime(src, x)
        agree(got, want, src, x, flush=export is not sympy_values, rounding=export is sympy_values)

    check()
    assert len(exported) >= 12  # the closed-form subset: most generated programs export


REPRODUCERS = [  # (source, x values, ndvm's values worked out by hand)
    ("(remainder x 2)", [-2.5, 2.5, -0.0], [-0.5, 0.5, -0.0]),
    ("(logaddexp 1 x)", [-1e10, -np.inf, np.inf, np.nan], [1.0, 1.0, np.inf, np.nan]),
    ("(logaddexp x x)", [np.inf, -np.inf, 0.0], [np.inf, -np.inf, np.log(2.0)]),
    ("(softplus x)", [1e308, -1e308, 0.0], [1e308, 0.0, np.log(2.0)]),
    ("(/ x x)", [0.0, 2.0, np.inf], [np.nan, 1.0, np.nan]),
    ("(- x x)", [np.inf, 3.0], [np.nan, 0.0]),
    ("(exp (log x))", [-1.0, 0.0, 2.0], [np.nan, 0.0, 2.0]),
    ("(if (nan? x) 1 2)", [np.nan, 1.0], [1.0, 2.0]),
    ("(if (finite? x) 1 2)", [np.inf, np.nan, 1e308], [2.0, 2.0, 1.0]),
]


@pytest.mark.parametrize("export", EXPORTERS.values(), ids=list(EXPORTERS))
@pytest.mark.parametrize(("body", "xs", "want"), REPRODUCERS)
def test_issue_reproducers(export, body: str, xs: list[float], want: list[float]) -> None:  # type: ignore[no-untyped-def]
    src = f"(params a b) (+ (* 0 a b) {body})"
    x = np.array(xs, dtype=np.float64)
    expected = np.array(want, dtype=np.float64)
    agree(runtime(src, x), expected, src, x)  # the hand-worked values are ndvm's
    agree(export(src, x), expected, src, x)


@pytest.mark.sympy
def test_sympy_keeps_the_operations_it_is_given() -> None:
    sp = need("sympy")
    x = sp.Symbol("x", real=True)
    for src in ("(/ x x)", "(- x x)", "(exp (log x))", "(if (nan? x) 1 2)"):
        expr = ndvm.export.to_sympy(src, inputs=("x",))
        assert expr.has(x), f"{src} folded to {expr}"


@pytest.mark.torch
def test_torch_attribute_names_are_unique() -> None:
    need("torch")
    prog = ndvm.compile("(params (param_1 2.0) (training 3.0)) (+ param_1 training)")
    module = ndvm.export.to_torch(prog)
    names = [n for n, _ in module.named_parameters()]
    assert len(set(names)) == 2
    assert float(module()) == 5.0 == float(prog.eval())
    assert float(module.parameter("training")) == 3.0
    assert float(module.parameter("param_1")) == 2.0
