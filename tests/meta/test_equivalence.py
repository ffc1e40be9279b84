"""ndvm.meta equals direct evaluation: values, gradients, lane status and lane errors.

The pairs are (program, parameter lane): every lane of every golden (closures, higher-order
procedures, recursion, lists, vectors and matrices, the 80-step Kalman filter, divergent and
failing lanes) and hypothesis-generated programs over data lanes. Relative tolerance 1e-12
(the evaluator calls the same host primitives in the same order, so the results agree to the
last bit in practice). The interpretive tower (levels=2) runs on a subset.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.helpers.genprog import programs

import ndvm
import ndvm.meta
from ndvm.backends import registry

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "programs"
SPECS = {p.name[: -len(".expected.json")]: json.loads(p.read_text())
         for p in sorted(GOLDEN.glob("*.expected.json"))}  # fmt: skip
BACKENDS = registry.available()
FAST = "native" if "native" in BACKENDS else BACKENDS[0]
RTOL = 1e-12
GENERATED = 40  # hypothesis examples, each over 2 parameter lanes
TOWER = ("009-if-divergent-grad", "019-named-let", "030-closures", "048-divergent-branches",
         "051-structural-divergence", "054-lane-errors", "045-damped-oscillator",
         "037-vectors")  # fmt: skip
TOWER_LIMITS = ndvm.Limits(max_steps=200_000_000, max_heap=100_000_000)


def golden_case(name: str) -> tuple[str, dict[str, Any], np.ndarray, bool]:
    spec = SPECS[name]
    inputs: dict[str, Any] = {}
    for key, item in spec["inputs"].items():
        arr = np.asarray(item["value"], dtype=np.float64)
        inputs[key] = ndvm.const(arr) if item["kind"] == "const" else arr
    theta = np.asarray(spec["theta"], dtype=np.float64).reshape(len(spec["theta"]), -1)
    return (GOLDEN / spec["source"]).read_text(), inputs, theta, spec["grad"] is not None


def _errors(result: Any) -> list[tuple[str, bytes]]:
    """Error kinds with the lanes they failed (positions differ: the evaluator raised them)."""
    return sorted((type(e).__name__, np.asarray(m).tobytes()) for m, e in result.errors)


def assert_equivalent(src: str, inputs: dict[str, Any], theta: np.ndarray, grad: bool,
                      backend: str, levels: int = 1, limits: Any = None) -> None:  # fmt: skip
    opts: dict[str, Any] = {"backend": backend, "strict": False}
    if limits is not None:
        opts["limits"] = limits
    direct = ndvm.compile(src, inputs=tuple(inputs), **opts)
    meta = ndvm.meta.compile(src, inputs=tuple(inputs), levels=levels, **opts)
    assert meta.param_specs == direct.param_specs
    want = direct.evaluate(theta, inputs, grad=grad)
    got = meta.evaluate(theta, inputs, grad=grad)
    np.testing.assert_array_equal(got.status, want.status)
    assert _errors(got) == _errors(want)
    assert (got.numeric, got.data_lanes) == (want.numeric, want.data_lanes)
    ok = want.status != 2
    if want.numeric:
        np.testing.assert_allclose(got.value[ok], want.value[ok], rtol=RTOL, atol=0, equal_nan=True)
    else:
        assert repr(got.value[ok].tolist()) == repr(want.value[ok].tolist())
    if grad:
        np.testing.assert_allclose(got.grad, want.grad, rtol=RTOL, atol=0, equal_nan=True)


def test_enough_pairs() -> None:
    golden_pairs = sum(len(spec["theta"]) for spec in SPECS.values())
    assert golden_pairs + 2 * GENERATED >= 171


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(SPECS))
def test_meta_equals_direct_on_goldens(name: str, backend: str) -> None:
    assert_equivalent(*golden_case(name), backend=backend)


@settings(max_examples=GENERATED, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(programs(), st.lists(st.floats(-3, 3, allow_nan=False), min_size=6, max_size=6))
def test_meta_equals_direct_on_generated_programs(src: str, coords: list[float]) -> None:
    theta = np.asarray(coords).reshape(2, 3)
    inputs = {"x": np.asarray([-1.5, 0.25, 2.0])}
    limits = ndvm.Limits(max_steps=2_000_000)
    try:
        ndvm.compile(src, inputs=("x",), limits=limits).evaluate(theta, inputs, grad=True)
    except ndvm.NdvmError as exc:  # whole-run failures: the evaluator fails the same way
        with pytest.raises(type(exc)):
            ndvm.meta.compile(src, inputs=("x",), limits=limits).evaluate(theta, inputs, grad=True)
        return
    assert_equivalent(src, inputs, theta, True, FAST, limits=limits)


@pytest.mark.parametrize("name", TOWER)
def test_tower_two_levels(name: str) -> None:
    """The evaluator running itself running the program (on the fastest backend)."""
    assert_equivalent(*golden_case(name), backend=FAST, levels=2, limits=TOWER_LIMITS)


@pytest.mark.slow
def test_tower_on_the_reference_backend() -> None:
    theta = np.array([[0.7, -0.3], [-1.2, 0.5]])
    assert_equivalent("(* a (sin b))", {}, theta, True, "reference", levels=2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_object_runtime_errors_are_ndvm_errors(backend: str) -> None:
    src = '(if (> a 0) (error "boom" a) (if (< a -5) (car a) a))'
    prog = ndvm.meta.compile(src, backend=backend)
    result = prog.evaluate(np.array([[1.0], [-1.0], [-10.0]]), {})
    np.testing.assert_array_equal(result.status[:, 0], [2, 0, 2])
    assert [type(e) for _, e in result.errors] == [ndvm.ProgramError, ndvm.ProgramError]
    assert any("boom" in e.message for _, e in result.errors)
    with pytest.raises(ndvm.ProgramError, match="boom"):
        prog.with_options(strict=True).eval([1.0])


def test_object_compile_errors_carry_object_positions() -> None:
    with pytest.raises(ndvm.errors.UnsupportedForm) as info:
        ndvm.meta.compile("(+ a\n   (set! a 1))")
    assert (info.value.line, info.value.column) == (2, 4)
    with pytest.raises(ndvm.CompileError, match="unbound"):
        ndvm.meta.compile("(+ a b)", params=["a"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_object_tail_calls_run_in_constant_depth(backend: str) -> None:
    src = "(let loop ((i 0) (s 0)) (if (= i 3000) s (loop (+ i 1) (+ s a))))"
    prog = ndvm.meta.compile(src, backend=backend, limits=ndvm.Limits(max_depth=500))
    assert float(prog.eval([0.5])) == 1500.0
    runaway = ndvm.meta.compile("(let loop () (loop))", backend=backend,
                                limits=ndvm.Limits(max_steps=100_000))  # fmt: skip
    with pytest.raises(ndvm.errors.StepLimitExceeded):
        runaway.eval([])


def test_object_names_do_not_clash_with_the_evaluator() -> None:
    src = "(define (meval x) (* 2 x)) (+ (meval lookup) env)"
    prog = ndvm.meta.compile(src, inputs=("env",))
    value = prog.eval([1.5], env=np.array([1.0, 2.0]))
    np.testing.assert_array_equal(value, [4.0, 5.0])
