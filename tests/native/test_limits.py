"""Native limits raise the same LimitExceeded subclasses as the reference, and the context
stays reusable afterwards; malformed tables are typed errors."""

from __future__ import annotations

import numpy as np
import pytest

import ndvm
from ndvm import errors
from ndvm.eval.limits import Limits

pytestmark = pytest.mark.native

# Only the limit a case names can fire: the runaway loops under a deadline have no step or heap
# limit (a loop allocates a frame each turn; the default 10M steps and 20M cells take under a
# second here, less on a faster machine), and memory stays bounded by what the deadline allows.
AT_DEADLINE = {"max_steps": 10**12, "max_heap": 10**12}
CASES = [
    ("(let loop ((k 0)) (loop (+ k 1)))", Limits(max_steps=20_000), errors.StepLimitExceeded),
    ("(define (f n) (+ 1 (f n))) (f a)", Limits(max_depth=2_000), errors.DepthLimitExceeded),
    ("(let loop ((l '())) (loop (cons a l)))", Limits(max_heap=5_000), errors.HeapLimitExceeded),
    ("(let loop ((k 0)) (loop (+ k 1)))", Limits(**AT_DEADLINE, deadline=0.05),
     errors.DeadlineExceeded),
]


@pytest.mark.parametrize("source,limits,cls", CASES)
def test_native_limits_raise_like_reference(
    source: str, limits: Limits, cls: type, client: str
) -> None:
    for backend in ("reference", client):
        prog = ndvm.compile(source, backend=backend, limits=limits)
        with pytest.raises(cls):
            prog.evaluate(np.zeros((2, len(prog.params))), {}, grad=True)
    ok = ndvm.compile("(* a 2)", backend=client)
    assert float(ok.eval(np.array([1.5]))) == 3.0


def test_native_tail_loop_runs_in_constant_stack(client: str) -> None:
    prog = ndvm.compile(
        "(let loop ((k 0) (s 0)) (if (= k 200000) s (loop (+ k 1) (+ s a))))", backend=client
    )
    assert float(prog.eval(np.array([0.5]))) == 100000.0


def test_native_malformed_table_is_typed_error() -> None:
    from ndvm import _core

    nodes = np.array([[0, 0, 5, 0, 0, 0, 0, 1, 1]], dtype=np.int32)  # CONST index out of range
    empty = np.zeros(0, dtype=np.int32)
    with pytest.raises(errors.NativeError):
        _core.Program(nodes, empty, empty, np.zeros((0, 3), np.int32), np.zeros(0), [], 0, 0, 0)


@pytest.mark.parametrize("transform", [9999, -1, 150, 201])  # unknown, negative, dot, car
def test_native_constraint_that_is_not_a_unary_opcode_is_refused(transform: int) -> None:
    """A parameter's constraint reaches the core as the opcode of a unary NUMERIC elementwise
    primitive (softplus, ...); anything else is refused before the run starts."""
    from ndvm.backends import registry

    prog = ndvm.compile("(* 2 a)", backend="native")
    backend = registry.get("native")
    low = backend.lowered(prog.compiled)
    from ndvm import _core

    args = ([], [], 1, _core.RunOptions(max_steps=10**6, max_heap=10**6, max_depth=10**4))
    bad = np.array([transform], dtype=np.int32)
    with pytest.raises(errors.NativeError, match="not a unary opcode"):
        backend._context().run(low.core, np.ones((1, 1)), bad, *args)
    ok = low.constraints  # free: 0
    assert backend._context().run(low.core, np.ones((1, 1)), ok, *args).value.tolist() == [[2.0]]


LANE_CASES = [
    ("(if (> a 0) (let loop ((k 0)) (loop (+ k 1))) (* 2 a))", Limits(max_steps=20_000)),
    ("(define (f n) (if (> n 0) (+ 1 (f n)) 0)) (+ (f a) a)", Limits(max_depth=2_000)),
    (
        "(if (> a 0) (let loop ((k 0)) (loop (+ k 1))) (* 2 a))",
        Limits(**AT_DEADLINE, deadline=0.1),
    ),
    ("(ref (vec 1 2) (floor (+ a 1)))", Limits()),
]


@pytest.mark.parametrize("source,limits", LANE_CASES)
def test_native_lane_limits_match_reference(source: str, limits: Limits, client: str) -> None:
    """Limits and errors of some lanes: same statuses, values, error classes and lanes."""
    theta = np.array([[0.5], [-1.0], [2.0], [-0.25]])
    got = {}
    for backend in ("reference", client):
        prog = ndvm.compile(source, backend=backend, limits=limits, strict=False)
        res = prog.evaluate(theta, {}, grad=True)
        errs = sorted((type(e).__name__, e.lanes) for _, e in res.errors)
        got[backend] = (res.status.tolist(), res.value.tolist(), errs, res.grad.tolist())
    np.testing.assert_equal(got[client], got["reference"])
    ok = ndvm.compile("(* a 2)", backend=client)  # the thread's context is still good
    assert float(ok.eval(np.array([1.5]))) == 3.0
