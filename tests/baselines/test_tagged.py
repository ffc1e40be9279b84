"""The tagged-tensor interpreter gives the reference backend's values and gradients."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from tests.helpers.baseline_cases import assert_same, cases, reference_run
from tests.helpers.extras import need
from tests.helpers.formulas import check_formula
from tests.helpers.prim_programs import Case
from tests.helpers.prim_programs import cases as prim_cases

import ndvm
from ndvm.prims import PRIMS, Kind

torch = need("torch")
from ndvm.baselines.tagged import TORCH_IMPLS, TORCH_PREDICATES, TaggedBackend  # noqa: E402

pytestmark = pytest.mark.torch

CASES = cases()
NUMERIC = prim_cases()


def _unsupported(spec: dict[str, Any], result: Any) -> str | None:
    """Features the tagged baseline documents as unsupported (docs/baselines.md)."""
    if spec.get("errors") or result.errors:
        return "per-lane runtime errors: the tagged baseline raises for the whole walk"
    return None


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_tagged_matches_reference(case: Any) -> None:
    _, source, inputs, theta, spec = case
    prog, th, want, numeric = reference_run(source, inputs, theta)
    reason = _unsupported(spec, want)
    if reason:
        pytest.skip(reason)
    got = TaggedBackend().run(prog.compiled, th, inputs, grad=numeric)
    assert_same(got, want, numeric)


def _torch_value_and_vjp(impl: Any, xs: list[np.ndarray], ct: np.ndarray) -> Any:
    ts = [torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in xs]
    out = impl(*ts)
    grads = torch.autograd.grad(out, ts, torch.as_tensor(ct), allow_unused=True)
    cts = [np.zeros(x.shape) if g is None else g.numpy() for x, g in zip(xs, grads)]
    return out.detach().numpy(), cts


@pytest.mark.parametrize("case", NUMERIC, ids=[c.id for c in NUMERIC])
def test_torch_formula_matches_the_reference_rule(case: Case) -> None:
    """Each NUMERIC primitive of the table: the torch formula's value and autograd against the
    NumPy rule and its VJP (a primitive without a formula fails with KeyError)."""
    check_formula(case, TORCH_IMPLS[case.prim.code], _torch_value_and_vjp)


# Lanes with ties, signs, zeros, infinities and NaNs in every operand position.
_PRED_LANES = np.array(
    [
        [0.0, 1.0, -1.0, np.nan, 2.0, 2.0, np.inf, -0.0],
        [0.0, 2.0, -1.0, 1.0, np.nan, 2.0, 1.0, 0.0],
        [1.0, 3.0, -1.0, 0.0, 1.0, 2.0, np.inf, 5.0],
    ]
)


@pytest.mark.parametrize("prim", PRIMS.of_kind(Kind.PREDICATE), ids=lambda p: p.name)
def test_torch_predicate_formula_matches_the_reference_rule(prim: Any) -> None:
    hi = prim.arity.max_args if prim.arity.max_args is not None else 3
    for n in range(prim.arity.min_args, hi + 1):
        xs = list(_PRED_LANES[:n])
        want = np.broadcast_to(prim.ref(*xs), xs[0].shape)
        got = TORCH_PREDICATES[prim.code](*(torch.tensor(x) for x in xs))
        np.testing.assert_array_equal(got.numpy(), want)


def test_tagged_values_are_14_float_tensors() -> None:
    from ndvm.baselines.tagged import Interpreter
    from ndvm.eval.limits import Limits

    it = Interpreter(3, Limits())
    v = it.cons(it.num(1.0), it.struct(2))
    assert v.shape == (3, 14) and v.dtype == torch.float64
    assert it.tag(v) == 3 and float(v[0, :10].sum()) == 1.0
    with pytest.raises(RuntimeError, match="written twice"):
        it.write(0, v)


def test_tagged_divergent_branch_falls_back_to_single_lanes() -> None:
    prog = ndvm.compile("(if (> a 0) (* a a) (sin a))", backend="reference")
    theta = np.array([[1.5], [-0.5], [2.0]])
    got = TaggedBackend().run(prog.compiled, theta, {}, grad=True)
    want = prog.evaluate(theta, {}, grad=True)
    np.testing.assert_allclose(got.value, want.value)
    np.testing.assert_allclose(got.grad, want.grad)


def test_tagged_long_tail_loop_runs_in_constant_stack() -> None:
    src = "(let loop ((k 0) (s 0)) (if (= k 3000) s (loop (+ k 1) (+ s a))))"
    prog = ndvm.compile(src, backend="reference")
    got = TaggedBackend().run(prog.compiled, np.array([[0.5]]), {}, grad=True)
    np.testing.assert_allclose(got.value.reshape(-1), [1500.0])
    np.testing.assert_allclose(got.grad, [[3000.0]])
