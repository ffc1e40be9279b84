"""Issue 17 on every backend: shared and deep results, lane-divergent bad indices, runaway
lanes, the payload cap and bad inputs: only the bad lanes fail, with typed errors."""

from __future__ import annotations

import numpy as np
import pytest

import ndvm
from ndvm.backends import registry
from ndvm.errors import (
    CompileError,
    DeadlineExceeded,
    DepthLimitExceeded,
    HeapLimitExceeded,
    NdvmError,
    ProgramError,
    StepLimitExceeded,
)

BACKENDS = registry.available()
DAG = "(let loop ((l '()) (k 0)) (if (= k 60) l (loop (cons l l) (+ k 1))))"
RUNAWAY = "(let loop ((i 0)) (loop (+ i 1)))"
# runaway lanes that must end at the deadline: no step or heap limit first (a loop allocates a
# frame each turn; the default 20M-cell heap takes about a second here, less on a faster
# machine); memory stays bounded by what the deadline allows
AT_DEADLINE = {"max_steps": 10**12, "max_heap": 10**12}


def _prog(src: str, backend: str, **limits: object) -> ndvm.Program:
    lim = ndvm.Limits(**{"deadline": 10.0, **limits})  # type: ignore[arg-type]
    return ndvm.compile(src, backend=backend, limits=lim, strict=False)


def _lanes(res: object) -> list[tuple[str, tuple[int, ...], int | None]]:
    return [(type(e).__name__, e.lanes, e.line) for _, e in res.errors]  # type: ignore[attr-defined]


@pytest.mark.parametrize("backend", BACKENDS)
def test_dag_result_keeps_its_sharing(backend: str) -> None:
    out = _prog(DAG, backend, deadline=1.0).eval()
    v = out[()]  # level k is (l . l) of level k-1: the list [level k-1, level k-2, ..., []]
    depth = 0
    while v:
        assert len(v) == 60 - depth
        assert not v[1:] or not v[1] or v[1] is v[0][0]  # one Python list per pair, shared
        v, depth = v[0], depth + 1
    assert depth == 60
    assert len(repr(out)) < 20_000  # printing is bounded, never 2^60 paths


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "src,want",
    [
        (f"(equal? {DAG} {DAG})", True),
        (f"(equal? {DAG} (cons 1 {DAG}))", False),
        (f"(length (apply car (list {DAG})))", 59.0),
        (f"(cdr (assoc {DAG} (list (cons 1 2) (cons {DAG} 3))))", 3.0),
    ],
)
def test_structural_primitives_on_shared_structure(backend: str, src: str, want: object) -> None:
    assert _prog(src, backend, deadline=2.0).eval()[()] == want


@pytest.mark.parametrize("backend", BACKENDS)
def test_export_counts_cells_against_the_heap_limit(backend: str) -> None:
    prog = _prog("(iota 1000)", backend, max_heap=20_000)
    assert len(prog.eval(np.zeros((10, 0)))[9]) == 1000  # 10 lanes x 1000 cells: fits
    with pytest.raises(HeapLimitExceeded, match="result export"):
        prog.eval(np.zeros((30, 0)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_deep_result_prints_without_recursion(backend: str) -> None:
    src = "(let loop ((l '()) (k 0)) (if (= k 50000) l (loop (list l) (+ k 1))))"
    out = _prog(src, backend, deadline=60.0).eval()
    text = repr(out)
    assert text.startswith("LaneArray([[[[") and "..." in text


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "src,theta,status,message",
    [
        ("(ref (vec 1 2 3) (floor a))", [0, 5, 6], [0, 2, 2], "out of range for length 3"),
        ("(list-ref (list 1 2 3) (floor a))", [0, 5, 6], [0, 2, 2], "out of range"),
        ("(list-ref (list 1 2 3) a)", [0.5, 1.0, 2.5], [2, 0, 2], "expected an integer"),
        ("(ref (mat (vec 1 2) (vec 3 4)) 1 (floor a))", [0, 1, 3], [0, 0, 2], "out of range"),
    ],
)
def test_divergent_bad_index_fails_only_its_lanes(
    backend: str, src: str, theta: list[float], status: list[int], message: str
) -> None:
    res = _prog(src, backend).evaluate(np.asarray(theta).reshape(-1, 1))
    assert res.status.reshape(-1).tolist() == status
    good = [k for k, s in enumerate(status) if s == 0]
    assert np.isfinite(res.value.reshape(-1)[good]).all()
    for mask, err in res.errors:
        assert isinstance(err, ProgramError) and message in err.message
        assert (err.line, err.column) == (1, 1)
        assert list(err.lanes) == list(np.flatnonzero(mask[:, 0]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_divergent_indices(backend: str) -> None:
    prog = _prog("(ref (mat (vec 1 2) (vec 3 4)) (floor a) (floor b))", backend)
    out = prog.eval(np.array([[0, 0], [1, 0], [0, 1], [1, 1]]))
    assert out.tolist() == [1.0, 3.0, 2.0, 4.0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_runaway_lane_alone_and_in_batch(backend: str) -> None:
    prog = _prog(
        "(let loop ((i 0)) (if (< i (* 10 a)) (loop (+ i 1)) i))", backend, max_steps=20_000
    )
    res = prog.evaluate(np.array([[1.0], [1e12], [0.3]]), grad=True)
    assert res.status.reshape(-1).tolist() == [0, 2, 0]
    assert res.value.reshape(-1)[[0, 2]].tolist() == [10.0, 3.0]
    assert _lanes(res) == [("StepLimitExceeded", (1,), None)]
    assert np.isnan(res.grad[1]).all() and np.isfinite(res.grad[[0, 2]]).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_lanes_over_the_step_limit_split_from_the_rest(backend: str) -> None:
    """Two lanes in one thread with different step counts: only the one over fails (limits
    are checked every 4096 steps, so the counts differ by more than that)."""
    src = (
        "(let ((s (if (> a 0) (let loop ((i 0)) (if (< i 3000) (loop (+ i 1)) 0)) 0)))"
        " (let loop ((i 0)) (if (< i 3000) (loop (+ i 1)) (+ s a))))"
    )
    steps = [_prog(src, backend).evaluate(np.array([[t]])).stats["steps"] for t in (1.0, -1.0)]
    prog = _prog(src, backend, max_steps=steps[1] + 100)  # lane 1 fits, lane 0 by > 4096
    alone = [prog.evaluate(np.array([[t]])) for t in (1.0, -1.0)]
    assert [int(r.status[0, 0]) for r in alone] == [2, 0]
    res = prog.evaluate(np.array([[1.0], [-1.0]]))
    assert res.status.reshape(-1).tolist() == [2, 0] and res.value[1, 0] == -1.0
    assert _lanes(res) == [("StepLimitExceeded", (0,), None)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_depth_limit_fails_its_lanes(backend: str) -> None:
    prog = _prog("(define (f n) (if (> n 0) (+ 1 (f n)) 0)) (f a)", backend, max_depth=2_000)
    res = prog.evaluate(np.array([[1.0], [-1.0]]))
    assert res.status.reshape(-1).tolist() == [2, 0]
    assert _lanes(res) == [("DepthLimitExceeded", (0,), None)]
    with pytest.raises(DepthLimitExceeded):
        prog.with_options(strict=None).eval(np.array([[1.0], [2.0]]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_deadline_keeps_finished_lanes(backend: str) -> None:
    prog = _prog(f"(if (> a 0) (* 2 a) {RUNAWAY})", backend, **AT_DEADLINE, deadline=0.2)
    res = prog.evaluate(np.array([[1.5], [-1.0]]))
    assert res.status.reshape(-1).tolist() == [0, 2] and res.value[0, 0] == 3.0
    assert _lanes(res) == [("DeadlineExceeded", (1,), None)]
    with pytest.raises(DeadlineExceeded):
        prog.with_options(strict=None).eval(np.array([[-1.0], [-2.0]]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_deadline_keeps_lanes_that_left_a_runaway_loop(backend: str) -> None:
    """The arm that is a value runs first, so exited lanes are done before the deadline."""
    src = "(let loop ((i 0)) (if (< i (* 10 a)) (loop (+ i 1)) i))"
    prog = _prog(src, backend, **AT_DEADLINE, deadline=0.2)
    res = prog.evaluate(np.array([[1.0], [1e12], [0.5]]))
    assert res.status.reshape(-1).tolist() == [0, 2, 0]
    assert res.value.reshape(-1)[[0, 2]].tolist() == [10.0, 5.0]
    assert _lanes(res) == [("DeadlineExceeded", (1,), None)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "src,cls",
    [
        ("(zeros 100000 100000)", ProgramError),
        ("(eye 100000)", ProgramError),
        ("(outer (ones 65536) (ones 65536))", HeapLimitExceeded),
        (
            "(let loop ((k 0) (v (ones 10000000))) (if (= k 100) k (loop (+ k 1) (+ v 1))))",
            HeapLimitExceeded,
        ),
    ],
)
def test_payload_cap_is_a_typed_error(backend: str, src: str, cls: type) -> None:
    with pytest.raises(cls):
        ndvm.compile(src, backend=backend, limits=ndvm.Limits(deadline=30.0)).eval()


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_inputs_are_typed_and_positioned(backend: str) -> None:
    prog = ndvm.compile("(+ 1\n   (* a x))", inputs=("x",), backend=backend)
    for bad in ([[1, 2], [3]], "abc", np.zeros((2, 2, 2))):
        with pytest.raises(NdvmError) as info:
            prog.eval(np.zeros(1), x=bad)
        assert (info.value.line, info.value.column) == (2, 9), info.value
    with pytest.raises(NdvmError, match="ragged"):
        prog.eval(np.zeros(1), x=ndvm.const([[1, 2], [3]]))
    with pytest.raises(NdvmError, match="theta"):
        prog.eval([[0.0], [1.0, 2.0]], x=1.0)


@pytest.mark.parametrize(
    "src,params",
    [
        ("(params (a -1.0 positive)) a", None),
        ("(params (a 0.5) (p 1.0 unit)) p", None),
        ("(params (s -3 signed-unit)) s", None),
        ("a", {"a": (0.0, "positive")}),
    ],
)
def test_params_initial_value_outside_its_constraint(src: str, params: object) -> None:
    with pytest.raises(CompileError, match="outside its constraint") as info:
        ndvm.compile(src, params)  # type: ignore[arg-type]
    if params is None:
        assert info.value.line == 1 and info.value.column is not None


def test_limit_errors_leave_the_program_reusable() -> None:
    for backend in BACKENDS:
        prog = _prog(f"(if (> a 0) {RUNAWAY} a)", backend, max_steps=5_000)
        for _ in range(3):
            res = prog.evaluate(np.array([[1.0], [-1.0]]))
            assert res.status.reshape(-1).tolist() == [2, 0]
        assert isinstance(res.errors[0][1], StepLimitExceeded)
