"""Evaluator semantics through the public API: control, closures, constraints, inference,
skeletons, dialects, dtypes, inputs, result shapes, per-lane status and strictness."""

from __future__ import annotations

import numpy as np
import pytest

import ndvm
from ndvm.backends import registry


@pytest.fixture(autouse=True, params=registry.available())
def default_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs once per backend: ``ndvm.compile`` picks the patched default."""
    monkeypatch.setattr(registry, "available", lambda: (request.param,))
    return str(request.param)


def test_million_iteration_tail_loop() -> None:
    prog = ndvm.compile("(let loop ((i 0)) (if (< i 1000000) (loop (+ i 1)) i))")
    assert prog.eval() == 1_000_000.0


def test_deep_non_tail_recursion() -> None:
    src = "(define (f n) (if (= n 0) 0 (+ a (f (- n 1)))))\n(f 10000)"
    value, grad = ndvm.compile(src).value_and_grad(np.array([0.5]))
    assert value == 5000.0 and grad.tolist() == [10000.0]


def test_mutual_tail_calls_run_in_constant_stack() -> None:
    src = """
(define (ev? n) (if (= n 0) #t (od? (- n 1))))
(define (od? n) (if (= n 0) #f (ev? (- n 1))))
(list (ev? 100001) (od? 100001))
"""
    prog = ndvm.compile(src, limits=ndvm.Limits(max_depth=100))
    assert prog.eval().tolist() == [False, True]


def test_closures_capture_their_environment() -> None:
    src = """
(define (counter start) (lambda (k) (+ start k)))
(define c1 (counter a))
(define c2 (counter 100))
(let ((a 1000)) (list (c1 1) (c2 1) a))
"""
    assert ndvm.compile(src).eval(np.array([5.0])).tolist() == [6.0, 101.0, 1000.0]


def test_rest_arguments() -> None:
    src = (
        "(list ((lambda args args)) ((lambda (a . r) r) 1) ((lambda (a b . r) (list a b r)) 1 2 3))"
    )
    assert ndvm.compile(src, []).eval().tolist() == [[], [], [1.0, 2.0, [3.0]]]


def test_constraints_are_differentiable_transforms() -> None:
    src = (
        "(params (k 0.5 positive) (p 0.25 unit) (s -0.5 signed-unit) (f 2.0 free))\n(list k p s f)"
    )
    prog = ndvm.compile(src)
    assert [s.constraint for s in prog.param_specs] == ["positive", "unit", "signed-unit", "free"]
    theta = prog.init_theta()
    np.testing.assert_allclose(prog.constrain(theta), [0.5, 0.25, -0.5, 2.0])
    np.testing.assert_allclose(prog.unconstrain(prog.constrain(theta)), theta)
    np.testing.assert_allclose(
        ndvm.compile(src.replace("(list k p s f)", "(+ k p s f)")).eval(theta), 2.25
    )
    t = np.array([0.3, -0.4, 0.2, 1.5])
    _, grad = ndvm.compile(src.replace("(list k p s f)", "(+ k p s f)")).value_and_grad(t)
    sig = 1 / (1 + np.exp(-t))
    np.testing.assert_allclose(
        grad, [sig[0], sig[1] * (1 - sig[1]), 1 - np.tanh(t[2]) ** 2, 1.0], rtol=1e-12
    )
    with pytest.raises(ValueError):
        prog.unconstrain([-1.0, 0.5, 0.0, 0.0])


def test_param_inference_order_is_first_appearance() -> None:
    prog = ndvm.compile("(+ (* c (sin b)) (let ((z a)) (* z c x)) d)", inputs=("x",))
    assert prog.params == ("c", "b", "a", "d") and prog.inputs == ("x",)
    assert ndvm.compile("(define (f u) (* u q)) (f p)").params == ("q", "p")


def test_explicit_params_and_header() -> None:
    prog = ndvm.compile("(* a b)", ["b", "a"])
    assert prog.params == ("b", "a")
    assert prog.eval(np.array([2.0, 3.0])) == 6.0
    spec = ndvm.compile("(* a b)", {"a": (1.0, "positive"), "b": 2.0})
    assert [(s.name, s.init, s.constraint) for s in spec.param_specs] == [
        ("a", 1.0, "positive"),
        ("b", 2.0, "free"),
    ]
    head = ndvm.compile("(params (b 2.0) (a 3.0 positive))\n(* a b)")
    assert head.params == ("b", "a") and head.eval() == pytest.approx(6.0)
    reordered = ndvm.compile("(params (b 2.0) (a 3.0 positive))\n(* a b)", ["a", "b"])
    assert reordered.params == ("a", "b")
    assert reordered.param_specs[0].constraint == "positive"


@pytest.mark.parametrize(
    ("src", "skeleton"),
    [
        ("(* a (sin (+ (* b x) c)))", "(* P (sin (+ (* P x) P)))"),
        ("(+ a 2.5)", "(+ P C)"),
        ("(+   a\n   ; comment\n   b)", "(+ P P)"),
    ],
)
def test_skeleton(src: str, skeleton: str) -> None:
    assert ndvm.compile(src, inputs=("x",)).skeleton == skeleton


def test_inputs_spelled_like_skeleton_markers_stay_apart() -> None:
    """An input named P or C (pressure, a concentration) is not a parameter or a literal in
    the skeleton: each program keeps its own."""
    srcs = ["(* a P)", "(* a b)", "(* a C)", "(* a 2.0)", "(* a P*)", "(* a C**)", "(* a Pa)"]
    inputs = ("P", "C", "P*", "C**", "Pa")
    skels = [ndvm.compile(s, inputs=inputs).skeleton for s in srcs]
    assert skels == ["(* P P*)", "(* P P)", "(* P C*)", "(* P C)", "(* P P**)", "(* P C***)",
                     "(* P Pa)"]  # fmt: skip


def test_dmci_dialect_protects_sqrt_and_log() -> None:
    src = "(+ (sqrt a) (log b))"
    theta = np.array([-4.0, 0.0])
    plain = ndvm.compile(src).eval(theta)
    assert np.isnan(plain)
    prog = ndvm.compile(src, dialect="dmci")
    value, grad = prog.value_and_grad(theta)
    np.testing.assert_allclose(value, np.sqrt(1e-8) + np.log(1e-8))
    assert grad.tolist() == [0.0, 0.0]
    np.testing.assert_allclose(prog.eval(np.array([4.0, 1.0])), 2.0)


def test_float32_dtype() -> None:
    prog = ndvm.compile("(* a (sin x))", inputs=("x",), dtype="float32")
    value, grad = prog.value_and_grad(np.array([[1.0], [2.0]]), x=np.array([0.5, 1.0]))
    assert value.dtype == np.float32 and grad.dtype == np.float32
    np.testing.assert_allclose(
        value, [[np.sin(0.5), np.sin(1.0)], [2 * np.sin(0.5), 2 * np.sin(1.0)]], rtol=1e-6
    )


def test_const_inputs() -> None:
    Y = np.arange(6.0).reshape(3, 2)
    prog = ndvm.compile("(+ (ref Y 2 1) (vsum v) s)", inputs=("Y", "v", "s"))
    out = prog.eval(np.zeros(0), Y=Y, v=ndvm.const([1.0, 2.0]), s=10.0)
    assert out == 5.0 + 3.0 + 10.0
    assert ndvm.compile("(rows Y)", [], inputs=("Y",)).eval(None, Y=ndvm.const(Y)) == 3.0
    # a 1-D plain array is data lanes; const makes it a vector
    assert ndvm.compile("(vlen v)", [], inputs=("v",)).eval(None, v=ndvm.const([1, 2, 3])) == 3.0


def test_result_shapes() -> None:
    prog = ndvm.compile("(* a x)", inputs=("x",))
    assert np.shape(prog.eval(np.array([2.0]), x=3.0)) == ()
    assert prog.eval(np.array([[2.0], [3.0]]), x=3.0).shape == (2,)
    assert prog.eval(np.array([2.0]), x=np.array([1.0, 2.0, 3.0])).shape == (3,)
    assert prog.eval(np.array([[2.0], [3.0]]), x=np.array([1.0, 2.0, 3.0])).shape == (2, 3)
    vec = ndvm.compile("(vec a (* 2 a) 0)")
    assert vec.eval(np.array([1.0])).shape == (3,)
    assert vec.eval(np.array([[1.0], [2.0]])).shape == (2, 3)
    v, g = prog.value_and_grad(np.array([[2.0], [3.0]]), x=np.array([1.0, 2.0, 3.0]))
    assert v.shape == (2, 3) and g.shape == (2, 1) and g[:, 0].tolist() == [6.0, 6.0]
    _, g1 = prog.value_and_grad(
        np.array([2.0]), cotangent=np.array([1.0, 0.0, 2.0]), x=np.array([1.0, 2.0, 3.0])
    )
    assert g1.tolist() == [7.0]
    r = prog.evaluate(np.array([[2.0]]), {"x": np.array([1.0, 2.0])})
    assert r.value.shape == (1, 2) and r.data_lanes and r.stats["steps"] > 0


def test_per_lane_status_codes() -> None:
    prog = ndvm.compile("(if (> a 1) (car a) (/ 1 a))", strict=False)
    out = prog.eval(np.array([[0.0], [0.5], [2.0], [np.nan]]))
    assert out.status.tolist() == [1, 0, 2, 1]
    assert out[1] == 2.0 and np.isnan(out[2])
    assert not out.ok and len(out.errors) == 1
    _, grad = prog.value_and_grad(np.array([[0.5], [2.0]]))
    assert grad[0, 0] == -4.0 and np.isnan(grad[1, 0])


def test_strict_modes() -> None:
    src = "(if (> a 0) a (car a))"
    some = np.array([[1.0], [-1.0]])
    every = np.array([[-1.0], [-2.0]])
    default = ndvm.compile(src)  # strict=None: raise only when every lane failed
    assert default.eval(some).status.tolist() == [0, 2]
    with pytest.raises(ndvm.ProgramError):
        default.eval(every)
    with pytest.raises(ndvm.ProgramError):
        ndvm.compile(src, strict=True).eval(some)
    lenient = ndvm.compile(src, strict=False)
    assert lenient.eval(every).status.tolist() == [2, 2]
    assert default.with_options(strict=True).strict is True


def test_theta_none_uses_initial_values() -> None:
    prog = ndvm.compile("(params (a 2.0) (k 3.0 positive))\n(* a k)")
    assert prog.eval() == pytest.approx(6.0)


def test_structural_results() -> None:
    prog = ndvm.compile("(if (> a 0) (list 'pos a) 'neg)")
    out = prog.eval(np.array([[1.0], [-1.0]]))
    assert out.tolist() == [["pos", 1.0], "neg"]
    with pytest.raises(ndvm.NdvmError, match="numeric result"):
        prog.value_and_grad(np.array([[1.0], [-1.0]]))


def test_lanes_never_contaminate_each_other() -> None:
    prog = ndvm.compile("(+ (log a) (sqrt a) (/ 1 a))")
    value, grad = prog.value_and_grad(np.array([[-1.0], [0.0], [4.0]]))
    assert np.isfinite(value[2]) and np.isfinite(grad[2]).all()
    np.testing.assert_allclose(grad[2], [0.25 + 0.25 - 1 / 16])


def test_divergent_branch_runs_each_arm_on_its_lanes() -> None:
    src = "(define (f x) (if (> x 0) (* x x) (- x)))\n(+ (f a) (f (- a)))"
    value, grad = ndvm.compile(src).value_and_grad(np.array([[2.0], [-3.0]]))
    assert value.tolist() == [6.0, 12.0] and grad[:, 0].tolist() == [5.0, -7.0]


def test_stats_report_steps() -> None:
    r = ndvm.compile("(let loop ((i 0)) (if (< i 100) (loop (+ i 1)) i))").evaluate()
    assert r.stats["steps"] >= 100 and r.stats["heap"] > 0
