"""The bytecode VM client (backend="vm"): the walker's values and gradients bit for bit, proper
tail calls, lane-divergent control in every position, superinstructions, errors with their
positions and per-lane failure, against the reference backend and the tree walker."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.helpers.fd import directional_fd
from tests.helpers.genprog import programs
from tests.native.test_differential import PROGRAMS, _evaluate

import ndvm
from ndvm import errors
from ndvm.backends import registry
from ndvm.eval.limits import Limits

pytestmark = pytest.mark.native


def _ops(prog: ndvm.Program) -> list[str]:
    return list(registry.get("vm").lowered(prog.compiled).core.vm_ops)


def _errs(res: Any) -> list[tuple[str, Any, Any, str, Any]]:
    return sorted((type(e).__name__, e.line, e.column, e.message, e.lanes) for _, e in res.errors)


DEFAULT = Limits()
# runaway generated loops stop here; no generated program comes near it otherwise
HOSTILE = Limits(max_steps=20_000, deadline=5.0)


def _three(source: str, theta: np.ndarray, limits: Limits = DEFAULT, **inputs: Any) -> dict:
    out = {}
    for backend in ("reference", "native", "vm"):
        prog = ndvm.compile(source, inputs=tuple(inputs), backend=backend, limits=limits,
                            strict=False)  # fmt: skip
        out[backend] = prog.evaluate(theta, inputs, grad=True)
    return out


@pytest.mark.parametrize("name,source,inputs", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_vm_equals_walker_bit_for_bit(name: str, source: str, inputs: dict[str, Any]) -> None:
    """The same kernels run in the same order on the same tape: identical values, gradients,
    statuses and errors (NaN where the walker has NaN)."""
    theta = np.random.default_rng(len(name) + 11).normal(size=(7, 4))
    prog = ndvm.compile(source, inputs=tuple(inputs), backend="reference", strict=False)
    theta = theta[:, : len(prog.params)]
    walk = _evaluate(source, inputs, theta, "native")
    vm = _evaluate(source, inputs, theta, "vm")
    np.testing.assert_array_equal(vm.status, walk.status)
    assert _errs(vm) == _errs(walk)
    if walk.numeric:
        np.testing.assert_array_equal(vm.value, walk.value)
        np.testing.assert_array_equal(vm.grad, walk.grad)
    else:
        assert repr(vm.value.tolist()) == repr(walk.value.tolist())


def test_vm_tail_calls_run_in_constant_stack() -> None:
    """Named-let loops, mutual recursion and apply in tail position: 300 000 iterations under
    a depth limit of 100 frames."""
    limits = Limits(max_depth=100, max_steps=10**8)
    cases = [
        ("(let loop ((k 0) (s 0)) (if (= k 300000) s (loop (+ k 1) (+ s a))))", 150000.0),
        (
            "(define (ev? n) (if (= n 0) 1 (od? (- n 1)))) (define (od? n) (if (= n 0) 0 "
            "(ev? (- n 1)))) (* a (ev? 300000))",
            0.5,
        ),
        ("(define (f k s) (if (= k 0) s (apply f (list (- k 1) (+ s a))))) (f 300000 0)", 150000.0),
        ("(let loop ((k 0)) (cond ((= k 300000) (* a k)) (else (loop (+ k 1)))))", 150000.0),
    ]
    for source, want in cases:
        prog = ndvm.compile(source, backend="vm", limits=limits)
        value, grad = prog.value_and_grad(np.array([0.5]))
        assert float(value) == want
        assert float(grad[0]) == pytest.approx(want / 0.5, rel=1e-12)
    with pytest.raises(errors.DepthLimitExceeded):  # non-tail recursion does use the stack
        ndvm.compile("(define (f n) (if (= n 0) a (+ 1 (f (- n 1))))) (f 1000)", backend="vm",
                     limits=limits).eval(np.array([0.5]))  # fmt: skip


DIVERGENT = [
    # loops whose trip count differs per lane, in tail and non-tail position
    "(let loop ((k 0) (s a)) (if (> s 3) (+ s k) (loop (+ k 1) (+ (* (abs s) 1.5) 0.7))))",
    "(* 2 (let loop ((k 0) (s a)) (if (> s 3) (+ s k) (loop (+ k 1) (+ (abs s) 0.5)))))",
    # a non-tail if whose arms call functions that branch again
    "(define (g x) (if (> x 0.5) (* x x) (- x))) (+ 1 (if (> a 0) (g a) (g (* 2 a))) (g a))",
    # non-tail or / and with per-lane values, and an or in tail position
    "(* 2 (or (and (> a 0.5) a) (and (> a -0.5) (* 3 a)) 7))",
    "(define (f x) (or (and (> x 0) x) (* x x))) (+ (f a) (f (- a)))",
    # a structural argument that differs across lanes (retry), non-tail, inside a function
    "(define (pick v) (+ 1 (ref v (if (> a 0) 0 2)))) (* a (pick (vec a 2 3)))",
    # arms whose values differ in structure: the join continues each group as a thread
    "(let ((r (if (> a 0) (list a 2) (* a 3)))) (+ 1 (if (pair? r) (car r) r)))",
    # an assertion that fails some lanes, in non-tail position
    "(+ 1 (begin (assert (> a -0.5)) (* a a)))",
]


@pytest.mark.parametrize("source", DIVERGENT)
def test_vm_divergent_control_matches_reference_and_walker(source: str) -> None:
    theta = np.array([[0.7], [-1.2], [2.5], [-0.25], [0.1], [0.0]])
    out = _three(source, theta)
    ref, walk, vm = out["reference"], out["native"], out["vm"]
    np.testing.assert_array_equal(vm.status, ref.status)
    np.testing.assert_allclose(vm.value, ref.value, rtol=1e-13, equal_nan=True)
    np.testing.assert_allclose(vm.grad, ref.grad, rtol=1e-12, atol=1e-14, equal_nan=True)
    assert _errs(vm) == _errs(ref)
    np.testing.assert_array_equal(vm.value, walk.value)
    np.testing.assert_array_equal(vm.grad, walk.grad)


def test_vm_superinstructions_match_reference_and_finite_differences() -> None:
    """A scientific expression of numeric primitives on leaves compiles to PRIMK (operands read
    in place, no stack traffic) and computes the reference's values and gradients."""
    source = (
        "(define (f t) (let ((u (* a t)) (w (exp (- (* b t))))) (+ (* u w) (sin (* c t)) "
        "(/ a (+ 2 (square b)))))) (+ (f x) (* 0.5 (f (+ x 1))))"
    )
    x = np.linspace(-1.0, 2.0, 9)
    prog = ndvm.compile(source, inputs=("x",), backend="vm")
    ops = _ops(prog)
    assert ops.count("PRIMK") >= 6, ops
    theta = np.array([[0.3, 0.8, -1.1], [1.5, -0.2, 0.4]])
    out = _three(source, theta, x=x)
    np.testing.assert_allclose(out["vm"].value, out["reference"].value, rtol=1e-13)
    np.testing.assert_allclose(out["vm"].grad, out["reference"].grad, rtol=1e-12)
    np.testing.assert_array_equal(out["vm"].grad, out["native"].grad)

    def total(th: np.ndarray) -> float:
        return float(np.sum(prog.evaluate(th[None, :], {"x": x}).value))

    for b in range(2):
        fd = [float(directional_fd(total, [theta[b]], [e])) for e in np.eye(3)]
        np.testing.assert_allclose(out["vm"].grad[b], fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize(
    "source,pushed",
    [
        ("(letrec ((f (+ g (car a))) (g 2)) f)", True),  # g is read before (car a) fails
        ("(define (h) (* 2 (+ u (car a)))) (define v (h)) (define u 3) v", True),
        ("(let ((u 1)) (+ u (car a)))", False),  # a let's variable cannot fail: read late
        ("(+ (* a 2) (sin a) a 1)", False),
    ],
)
def test_vm_superinstructions_read_operands_in_the_walkers_order(source: str, pushed: bool) -> None:
    """A numeric primitive on some leaves and some nested calls is one PRIMK: leaves are read
    in place after the calls, except a letrec variable before a call (it may still be
    unassigned, and the walker reports that first), which is pushed in its turn."""
    ops = _ops(ndvm.compile(source, backend="vm", strict=False))
    assert "PRIMK" in ops and ops.count("PRIM") == source.count("(car")
    assert ("LOCAL" in ops) == pushed, ops
    out = _three(source, np.array([[1.0], [-2.0]]))
    assert _errs(out["vm"]) == _errs(out["reference"]) == _errs(out["native"])
    np.testing.assert_array_equal(out["vm"].status, out["reference"].status)
    np.testing.assert_array_equal(out["vm"].value, out["native"].value)


LET_CHAINS = [
    # shadowing, a lane-divergent if inside the chain, a chain in non-tail position
    (
        "(let* ((u (* a 2)) (v (if (> u 0) (* u u) (- u))) (u (+ u v))) (* 2 (let* ((w u) "
        "(u (- w))) (* u w v))))",
        3,
    ),
    # a loop whose body is a chain
    (
        "(let loop ((k 0) (s a)) (if (> k 4) s (let* ((d (if (> s 0) (* s 0.5) (- s))) "
        "(e (+ d k)) (s2 (+ s e))) (loop (+ k 1) s2))))",
        2,
    ),
    # a closure inside: the lets keep their own frames
    (
        "(let* ((u a)) (let () (let ((v (* u u))) (letrec ((h (lambda (n) (if (< n 1) v "
        "(* u (h (- n 1))))))) (h 3)))))",
        0,
    ),
    # closures over a chain's frame: lanes fork in an init (list or number), an outer join
    # merges the groups' closures, and each calls its own later: mk's lets keep their frames
    # (the let of h and r, without closures, is one)
    (
        "(define (mk x) (let* ((u x) (v (if (> x 1) (list x) (* 2 x))) (g (lambda () v))) g)) "
        "(let ((h (if (> a 0.5) (mk a) (mk (- a 1))))) (let ((r (h))) (if (pair? r) (car r) r)))",
        1,
    ),
]


@pytest.mark.parametrize("source,joined", LET_CHAINS)
def test_vm_let_chains_share_one_frame(source: str, joined: int) -> None:
    """A let whose body is a let (let*) without closures inside adds its slots to the
    enclosing let's frame (LETX): variables resolve to the shared frame, and each let still
    counts one heap cell."""
    assert _ops(ndvm.compile(source, backend="vm", strict=False)).count("LETX") == joined
    theta = np.array([[0.7], [-1.2], [2.5], [0.0], [0.3]])
    out = _three(source, theta)
    np.testing.assert_allclose(out["vm"].value, out["reference"].value, rtol=1e-13)
    np.testing.assert_allclose(out["vm"].grad, out["reference"].grad, rtol=1e-12)
    np.testing.assert_array_equal(out["vm"].value, out["native"].value)
    np.testing.assert_array_equal(out["vm"].grad, out["native"].grad)
    assert out["vm"].stats["heap"] == out["native"].stats["heap"]


def test_vm_errors_carry_positions_and_fail_their_lanes_alone() -> None:
    source = "(define (f x)\n  (if (> x 0)\n      (car x)\n      (* x 2)))\n(+ 1 (f a))"
    theta = np.array([[1.0], [-1.0], [2.0], [-3.0]])
    out = _three(source, theta)
    vm = out["vm"]
    assert vm.status.reshape(-1).tolist() == out["reference"].status.reshape(-1).tolist()
    assert vm.status.reshape(-1).tolist()[1::2] == [0, 0]
    assert vm.value.reshape(-1)[1::2].tolist() == [-1.0, -5.0]
    assert _errs(vm) == _errs(out["reference"]) == _errs(out["native"])
    (_, err), = vm.errors  # fmt: skip
    assert isinstance(err, errors.ProgramError) and (err.line, err.column) == (3, 7)
    assert err.lanes == (0, 2)
    with pytest.raises(errors.ProgramError) as info:  # strict: every lane fails
        ndvm.compile("(let ((v (vec a 2)))\n  (ref v 5))", backend="vm").eval(np.array([1.0]))
    assert (info.value.line, info.value.column) == (2, 3)


def test_vm_runaway_lane_fails_alone_past_the_step_limit() -> None:
    source = "(+ 1 (let loop ((k 0)) (if (> k (if (> a 1) 1e12 (* 100 a))) k (loop (+ k 1)))))"
    theta = np.array([[0.5], [2.0], [0.25], [3.0]])
    out = _three(source, theta, Limits(max_steps=50_000))
    vm = out["vm"]
    np.testing.assert_array_equal(vm.status, out["reference"].status)
    assert vm.status.reshape(-1).tolist()[::2] == [0, 0]
    assert vm.value.reshape(-1)[::2].tolist() == [52.0, 27.0]
    assert [(type(e).__name__, e.lanes) for _, e in vm.errors] == [("StepLimitExceeded", (1, 3))]


def test_vm_float32_core_runs_the_same_bytecode() -> None:
    source = "(let loop ((k 0) (s 0)) (if (= k 50) s (loop (+ k 1) (+ s (* a (sin k))))))"
    theta = np.array([[0.5], [-1.5]])
    got = {}
    for backend in ("native", "vm"):
        prog = ndvm.compile(source, backend=backend, dtype="float32")
        got[backend] = prog.value_and_grad(theta.astype(np.float32))
    np.testing.assert_array_equal(got["vm"][0], got["native"][0])
    np.testing.assert_array_equal(got["vm"][1], got["native"][1])


def test_vm_bytecode_compiled_once_and_shared_by_threads() -> None:
    """Threads evaluating one program race to compile its bytecode on first use; one copy is
    kept and every thread's results equal the serial run's, bit for bit."""
    source = "(let loop ((k 0) (s a)) (if (> (abs s) 3) (+ s k) (loop (+ k 1) (+ (* s 1.7) b))))"
    theta = np.random.default_rng(2).normal(size=(16, 2))
    serial = ndvm.compile(source, backend="vm").evaluate(theta, {}, grad=True)
    for _ in range(3):
        prog = ndvm.compile(source, backend="vm")  # a new program: bytecode not built yet
        got: list[Any] = []

        def work(p: ndvm.Program = prog, out: list[Any] = got) -> None:
            out.append(p.evaluate(theta, {}, grad=True))

        threads = [threading.Thread(target=work) for _ in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert len(got) == 4
        for res in got:
            np.testing.assert_array_equal(res.value, serial.value)
            np.testing.assert_array_equal(res.grad, serial.grad)


def test_vm_runs_the_in_runtime_optimizer_like_the_walker() -> None:
    """Context.optimize evaluates through the client of its options: the VM's Adam path
    (loss, gradient, iterates) is the walker's, bit for bit, and lowers the loss."""
    source = "(params (a 1.0) (k 0.3 positive)) (square (- (* a (exp (- (* k x)))) 0.5))"
    prog = ndvm.compile(source, inputs=("x",), backend="native")
    theta0 = np.array([[1.0, 0.3], [2.0, -1.0], [0.5, 0.1]])
    got = {}
    for client in ("native", "vm"):
        got[client] = registry.get(client).optimize(
            prog.compiled,
            theta0,
            {"x": np.linspace(0.1, 3.0, 12)},
            weight=1.0,
            method="adam",
            steps=25,
            options={"lr": 0.05},
            lower=None,
            upper=None,
            early_stop=None,
            limits=prog.limits,
            dialect=None,
        )
    for name in ("theta", "best_theta", "best_loss", "history", "state"):
        np.testing.assert_array_equal(got["vm"][name], got["native"][name], err_msg=name)
    history = got["vm"]["history"]
    assert np.all(history[-1] < history[0])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    programs(hostile=True),
    st.lists(
        st.lists(st.sampled_from([0.0, 0.4, -1.3, 2.2, -0.05]), min_size=3, max_size=3),
        min_size=1,
        max_size=5,
    ),  # fmt: skip
)
def test_vm_equals_walker_on_generated_hostile_programs(src: str, theta: list) -> None:
    """Generated programs with lane-divergent control, lanes failing by type errors, bad
    indices, failed asserts, error calls and runaway loops: the VM's statuses, errors (class,
    message, position, lanes), values and gradients are the walker's, bit for bit."""
    th = np.asarray(theta)
    x = np.array([0.3, -0.7, 1.9])
    got = []
    for backend in ("native", "vm"):
        prog = ndvm.compile(src, inputs=("x",), backend=backend, limits=HOSTILE, strict=False)
        try:
            got.append(prog.evaluate(th, {"x": x}, grad=True))
        except ndvm.NdvmError as exc:  # the whole run failed (a non-numeric result, ...)
            got.append((type(exc).__name__, exc.message))
    walk, vm = got
    if isinstance(walk, tuple) or isinstance(vm, tuple):
        assert vm == walk
        return
    np.testing.assert_array_equal(vm.status, walk.status)
    assert _errs(vm) == _errs(walk)
    np.testing.assert_array_equal(vm.value, walk.value)
    np.testing.assert_array_equal(vm.grad, walk.grad)


def test_vm_client_option_is_validated() -> None:
    from ndvm import _core, _core32

    for core in (_core, _core32):
        assert core.RunOptions().client == 0 and core.RunOptions(client=1).client == 1
        with pytest.raises(errors.NativeError, match="client"):
            core.RunOptions(client=2)
    with pytest.raises(errors.NdvmError, match="unknown native client"):
        from ndvm.backends.native import NativeBackend

        NativeBackend(client="jit")


def _replay_keys(source: str, inputs: dict[str, Any], backend: str, replay: bool) -> list:
    prog = ndvm.compile(source, inputs=tuple(inputs), backend=backend, strict=False, replay=replay)
    n = len(prog.params)
    rng = np.random.default_rng(n)
    theta = rng.normal(size=(3, n))
    out = []
    for th in (theta, theta + 1e-3 * rng.normal(size=theta.shape), theta, 1.7 * theta):
        try:
            r = prog.evaluate(th, inputs, grad=True)
        except ndvm.NdvmError as exc:
            out.append((type(exc).__name__, str(exc)))
            continue
        value = np.asarray(r.value).tobytes() if r.numeric else repr(r.value.tolist())
        grad = None if r.grad is None else r.grad.tobytes()
        out.append((value, grad, r.status.tobytes(), _errs(r), bool(r.stats["replayed"])))
    return out


@pytest.mark.parametrize("name,source,inputs", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_vm_runs_record_and_replay_traces_like_the_walker(
    name: str, source: str, inputs: dict[str, Any]
) -> None:
    """A VM run records the walker's trace (same tape, same guards), so the next evaluation
    with the same key replays it: bitwise the VM without replay, and the walker with it."""
    vm = _replay_keys(source, inputs, "vm", True)
    walk = _replay_keys(source, inputs, "native", True)
    plain = _replay_keys(source, inputs, "vm", False)
    assert vm == walk
    assert [k[:-1] if len(k) == 5 else k for k in vm] == [
        k[:-1] if len(k) == 5 else k for k in plain
    ]
    assert not any(len(k) == 5 and k[-1] for k in plain)
    if name in ("arith", "sr", "kalman80"):
        assert [k[-1] for k in vm] == [False, True, True, True]
