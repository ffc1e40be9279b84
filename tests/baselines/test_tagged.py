"""The tagged-tensor interpreter gives the reference backend's values and gradients."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import assert_same, cases, reference_run
from tests.helpers.extras import need

import ndvm
from ndvm.prims import PRIMS

torch = need("torch")
from ndvm.baselines.tagged import TORCH_IMPLS, TaggedBackend  # noqa: E402

pytestmark = pytest.mark.torch

CASES = cases()


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


def test_torch_impls_cover_every_numeric_prim() -> None:
    assert set(TORCH_IMPLS) == {p.code for p in PRIMS.numeric()}


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
