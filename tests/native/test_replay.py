"""Trace replay: an evaluation replayed from the recorded trace equals a full walk bitwise.

Each sequence of evaluations runs twice on one context: with replay (the default) and with
``replay=False``. Values, gradients, statuses, errors and step counts must be identical, and
the guards must make the replayed sequence fall back to the walk exactly where the realized
path changes (a branch outcome, a lane split, an index read from a parameter-dependent value,
a structural comparison) or the key changes (inputs, shapes, lane count, limits).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.helpers.clients import NATIVE_CLIENTS
from tests.helpers.genprog import programs
from tests.native.test_differential import PROGRAMS

import ndvm
from ndvm.backends import registry

pytestmark = pytest.mark.native

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "programs"


def _sequence(
    src: str,
    thetas: list[np.ndarray],
    inputs: list[dict[str, Any]],
    replay: bool,
    **options: Any,
) -> list[Any]:
    names = tuple(inputs[0])
    options.setdefault("backend", "native")
    prog = ndvm.compile(src, inputs=names, strict=False, replay=replay, **options)
    out = []
    for th, inp in zip(thetas, inputs):
        try:
            out.append(prog.evaluate(th, inp, grad=True))
        except ndvm.NdvmError as exc:
            out.append((type(exc).__name__, str(exc)))
    return out


def _key(r: Any) -> Any:
    if isinstance(r, tuple):
        return r
    errors = [
        (np.asarray(m).tobytes(), type(e).__name__, e.message, e.line, e.column)
        for m, e in r.errors
    ]
    grad = None if r.grad is None else np.asarray(r.grad).tobytes()
    value = np.asarray(r.value).tobytes() if r.numeric else repr(r.value.tolist())
    return (value, grad, np.asarray(r.status).tobytes(), errors, r.stats["steps"])


def _replayed(results: list[Any]) -> list[bool]:
    return [not isinstance(r, tuple) and bool(r.stats["replayed"]) for r in results]


def check(
    src: str,
    thetas: list[Any],
    inputs: dict[str, Any] | list[dict[str, Any]] | None = None,
    **options: Any,
) -> list[bool]:
    """Runs the sequence with and without replay; returns which evaluations replayed."""
    ths = [np.atleast_2d(np.asarray(t, dtype=np.float64)) for t in thetas]
    inps = inputs if isinstance(inputs, list) else [dict(inputs or {})] * len(ths)
    on = _sequence(src, ths, inps, True, **options)
    off = _sequence(src, ths, inps, False, **options)
    assert not any(_replayed(off))
    for k, (a, b) in enumerate(zip(on, off)):
        assert _key(a) == _key(b), f"evaluation {k} differs from the walk"
    return _replayed(on)


def _perturbed(theta: np.ndarray, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    steps = [theta, theta + 1e-3 * rng.normal(size=theta.shape), theta]
    steps.append(theta + 0.5 * rng.normal(size=theta.shape))  # may change the path
    steps.append(steps[-1] * (1 + 1e-6))
    return steps


@pytest.mark.parametrize("name,source,inputs", PROGRAMS, ids=[p[0] for p in PROGRAMS])
@pytest.mark.parametrize("B", [1, 5])
def test_replay_equals_walk_on_the_differential_programs(
    name: str, source: str, inputs: dict[str, Any], B: int, client: str
) -> None:
    n = len(ndvm.compile(source, inputs=tuple(inputs), backend="reference").params)
    theta = np.random.default_rng(B).normal(size=(B, n))
    replayed = check(source, _perturbed(theta, B), inputs, backend=client)
    assert not replayed[0]


def test_a_trace_replays_only_for_the_client_that_recorded_it() -> None:
    # the walker and the VM count steps differently: one context does not share a trace
    # between them (through the API each client has its own contexts)
    from ndvm import _core

    backend = registry.get("native")
    prog = ndvm.compile("(let loop ((k 0) (s a)) (if (= k 3) s (loop (+ k 1) (* s a))))")
    low = backend.lowered(prog.compiled)
    ctx = _core.Context()
    walker, vm = _core.RunOptions(client=0), _core.RunOptions(client=1)
    out = []
    for k, opts in enumerate([walker, walker, vm, vm, walker]):
        theta = np.array([[1.0 + 0.1 * k]])
        out.append(ctx.run(low.core, theta, low.constraints, [], [], 1, opts, True))
    assert [r.replayed for r in out] == [False, True, False, True, False]
    assert out[0].steps == out[1].steps == out[4].steps != out[2].steps
    assert out[2].steps == out[3].steps


def test_straight_line_programs_replay_after_the_first_walk() -> None:
    src = (ROOT / "examples" / "damped.scm").read_text()
    x = np.linspace(0, 3, 40)
    n = len(ndvm.compile(src, inputs=("x",), backend="reference").params)
    thetas = [np.full(n, 0.5 + 0.01 * k) for k in range(6)]
    assert check(src, thetas, {"x": x}) == [False] + [True] * 5


def test_branch_outcome_guard_one_lane() -> None:
    src = "(if (> a 0) (* a a b) (- b a))"
    thetas = [[1, 2], [1.5, 2], [-1, 2], [-2, 3], [-3, 3], [4, 1]]
    assert check(src, thetas) == [False, True, False, True, True, False]


def test_lane_split_guard() -> None:
    src = "(if (> (* a x) 0.5) (* b x) (sin (* a x)))"
    x = np.linspace(0, 1, 5)
    base = np.array([[1.2, 2.0], [0.2, 1.0]])
    thetas = [base, base * 1.01, base * [[-1], [1]], base * [[-1.01], [1]]]
    assert check(src, thetas, {"x": x}) == [False, True, False, True]


def test_loop_whose_trip_count_changes() -> None:
    src = "(let loop ((k 0) (s a)) (if (> s 3) (+ s k) (loop (+ k 1) (+ (* (abs s) 1.5) 0.7))))"
    thetas = [[0.1], [0.11], [2.9], [2.95], [0.1]]
    assert check(src, thetas) == [False, True, False, True, False]


def test_index_read_guard() -> None:
    # the index is a parameter-dependent number: its value must repeat (floor 1.2 = floor 1.7)
    src = "(* b (ref (vec 1 2 3 4) (floor a)))"
    thetas = [[1.2, 1.0], [1.7, 2.0], [2.1, 2.0], [2.2, 2.0], [-9, 1]]
    assert check(src, thetas, params=("a", "b"))[:4] == [False, True, False, True]


def test_index_read_guard_on_lanes_that_diverge() -> None:
    src = "(* b (list-ref (list 1 2 3) (floor a)))"
    thetas = [[[0.5, 1.0], [2.5, 2.0]], [[0.6, 3.0], [2.4, 1.0]], [[1.5, 1.0], [2.5, 1.0]]]
    assert check(src, thetas, params=("a", "b")) == [False, True, False]


def test_structural_equality_guard() -> None:
    src = "(if (equal? (vec (floor a) 1) (vec 1 1)) (* a b) (- a b))"
    thetas = [[1.5, 2.0], [1.5, 3.0], [1.6, 3.0], [2.5, 3.0]]
    # equal? reads the parameter-dependent vector itself: any change of its values walks
    assert check(src, thetas) == [False, True, True, False]


def test_lane_errors_are_walked_every_time() -> None:
    src = '(if (> a 0) (* a b) (error "negative" a))'
    thetas = [[[1.0, 1.0], [-1.0, 1.0]], [[1.1, 1.0], [-1.0, 1.0]], [[1.0, 1.0], [2.0, 1.0]]]
    thetas.append([[1.1, 1.0], [2.0, 1.0]])
    assert check(src, thetas) == [False, False, False, True]


def test_new_inputs_shapes_and_lanes_are_walked() -> None:
    src = "(* a x (ref v 0) (ref v 1))"
    x1, x2 = np.linspace(0, 1, 4), np.linspace(0, 2, 4)
    v1, v2 = ndvm.const(np.array([1.0, 2.0])), ndvm.const(np.array([1.0, 2.0, 3.0]))
    inputs = [
        {"x": x1, "v": v1},
        {"x": x1, "v": v1},
        {"x": x2, "v": v1},
        {"x": x2, "v": v1},
        {"x": x2, "v": v2},
        {"x": x2, "v": v2},
    ]
    thetas = [[1.0], [2.0], [2.0], [3.0], [3.0], [4.0]]
    assert check(src, thetas, inputs) == [False, True, False, True, False, True]
    lanes = [[1.0], [[1.0], [2.0]], [[1.0], [3.0]]]
    assert check(src, lanes, {"x": x1, "v": v1}) == [False, False, True]


def test_replay_respects_other_limits_and_dialects() -> None:
    prog = ndvm.compile("(* a (sqrt (abs a)))", backend="native")
    other = prog.with_options(limits=ndvm.Limits(max_steps=1000))
    runs = [prog, prog, other, other, prog]
    assert [p.evaluate([1.0 + k]).stats["replayed"] for k, p in enumerate(runs)] == [
        False,
        True,
        False,
        True,
        False,
    ]
    assert check("(+ (log a) (modulo a 0.7))", [[1.5], [2.5]], dialect="dmci") == [False, True]


def test_turning_replay_off_walks_every_evaluation() -> None:
    prog = ndvm.compile("(* a a)", backend="native").with_options(replay=False)
    results = [prog.evaluate([float(k)], grad=True) for k in range(3)]
    assert [r.stats["replayed"] for r in results] == [False, False, False]
    on = prog.with_options(replay=True)
    assert [on.evaluate([float(k)]).stats["replayed"] for k in range(3)] == [False, True, True]


def test_the_context_reports_its_trace() -> None:
    ctx = registry.get("native")._context()
    prog = ndvm.compile("(if (< a 1) (* a a) a)", backend="native")
    prog.eval([0.5])
    prog.eval([0.6])
    trace = ctx.trace
    assert trace["valid"] and trace["guards"] == 1 and trace["replays"] >= 1


def test_float32_replays_bitwise() -> None:
    src = "(if (> a 0) (* (exp a) b) (sin (* a b)))"
    thetas = [[[0.5, 1.0], [-0.5, 2.0]], [[0.6, 1.0], [-0.4, 2.0]], [[0.6, 1.0], [0.4, 2.0]]]
    assert check(src, thetas, dtype="float32") == [False, True, False]


def test_the_in_runtime_optimizer_replays() -> None:
    src = (ROOT / "examples" / "damped.scm").read_text()
    x = np.linspace(0, 3, 30)
    truth = ndvm.compile(src, inputs=("x",), backend="native")
    y = truth.eval(truth.init_theta() * 1.1, x=x)
    fits = []
    for replay in (True, False):
        prog = ndvm.compile(src, inputs=("x",), backend="native", replay=replay)
        fit = ndvm.calibrate(prog, {"x": x}, y, optimizer="adam", steps=40, starts=4, seed=3)
        fits.append(fit)
    np.testing.assert_array_equal(fits[0].theta, fits[1].theta)
    assert fits[0].loss == fits[1].loss


GOLDENS = sorted(p.name[: -len(".expected.json")] for p in GOLDEN.glob("*.expected.json"))


@pytest.mark.parametrize("name", GOLDENS)
def test_replay_equals_walk_on_the_goldens(name: str, client: str) -> None:
    src, inputs, theta, options = golden_case(name)
    check(src, _perturbed(theta, 11), inputs, backend=client, **options)


def golden_case(name: str) -> tuple[str, dict[str, Any], np.ndarray, dict[str, Any]]:
    """Golden program ``name``: its source, inputs, theta ([B, P]) and compile options."""
    spec = json.loads((GOLDEN / f"{name}.expected.json").read_text())
    src = (GOLDEN / spec["source"]).read_text()
    inputs: dict[str, Any] = {}
    for key, item in spec["inputs"].items():
        arr = np.asarray(item["value"], dtype=np.float64)
        inputs[key] = ndvm.const(arr) if item["kind"] == "const" else arr
    theta = np.atleast_2d(np.asarray(spec["theta"], dtype=np.float64))
    options = {"dialect": spec["dialect"]} if spec.get("dialect") else {}
    return src, inputs, theta, options


@pytest.mark.parametrize("backend", NATIVE_CLIENTS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.integers(0, 2**31 - 1))
def test_replay_equals_walk_on_generated_programs(backend: str, src: str, seed: int) -> None:
    n = len(ndvm.compile(src, inputs=("x",), backend="reference").params)
    theta = np.random.default_rng(seed).normal(size=(3, n))
    x = np.linspace(-1, 1, 3)
    limits = ndvm.Limits(max_steps=200_000)
    check(src, _perturbed(theta, seed), {"x": x}, backend=backend, limits=limits)


def test_a_trace_is_bounded() -> None:
    # guards whose snapshots would exceed the bound: the walk records no trace (w depends on
    # the parameter but its values, zeros, repeat: under the bound the guards hold)
    v = ndvm.const(np.linspace(0.0, 1.0, 4096))
    src = (
        "(let ((w (* 0 a v))) (let loop ((k 0) (s 0)) "
        "(if (= k 1100) (* s a) (loop (+ k 1) (if (equal? w w) (+ s 1) s)))))"
    )
    assert check(src, [[1.0], [2.0], [3.0]], {"v": v}) == [False, False, False]
    # the same program under the bound replays
    few = src.replace("1100", "100")
    assert check(few, [[1.0], [2.0], [3.0]], {"v": v}) == [False, True, True]
    # inputs too big to keep a copy of
    big = ndvm.const(np.arange((1 << 22) + 1, dtype=np.float64))
    assert check("(* a (ref v 3))", [[1.0], [2.0]], {"v": big}) == [False, False]
