"""Golden cases: lanes and divergence (registered in order by ``golden``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .base import Fail, golden


def _piecewise3(a: float, b: float) -> float:
    def f(x: float) -> float:
        if x < -1:
            return a * x * x
        if x < 1:
            return math.sin(b * x)
        return math.exp(0.1 * a * x)

    return f(a) + f(b)


golden(
    "048-divergent-branches",
    """
(define (f x)
  (cond ((< x -1) (* a x x))
        ((< x 1) (sin (* b x)))
        (else (exp (* 0.1 a x)))))
(+ (f a) (f b))
""",
    "a b",
    [[-2.0, 0.5], [0.3, 2.0], [1.5, -1.5], [0.2, 0.4], [-3.0, -3.0]],
)(_piecewise3)


def _divergent_loop(a: float, b: float) -> float:
    s, i = 0.0, 0
    while i < 3 * a:
        s += b * math.cos(i)
        i += 1
    return s


golden(
    "049-divergent-loop",
    "(let loop ((i 0) (s 0)) (if (< i (* 3 a)) (loop (+ i 1) (+ s (* b (cos i)))) s))",
    "a b",
    [[0.5, 1.0], [1.2, 2.0], [2.7, -0.5], [-0.5, 3.0]],
    note="trip counts 2, 4, 9 and 0 on the four lanes",
)(_divergent_loop)

golden(
    "050-newton-sqrt",
    """
(let loop ((x 1) (n 0))
  (if (or (< (abs (- (* x x) a)) 1e-12) (> n 60))
      x
      (loop (* 0.5 (+ x (/ a x))) (+ n 1))))
""",
    "a",
    [[2.0], [0.25], [100.0], [9.0]],
    grad_closed=lambda a: [0.5 / math.sqrt(a)],
    note="per-lane convergence: a different trip count on each lane",
)(lambda a: math.sqrt(a))

golden(
    "051-structural-divergence",
    """
(define (mk a) (if (> a 0) (list a (* 2 a)) (* 3 a)))
(define v (mk a))
(if (pair? v) (+ (car v) (cadr v) b) (* v b))
""",
    "a b",
    [[1.0, 2.0], [-1.0, 2.0], [0.5, -1.0], [-0.2, 0.7]],
)(lambda a, b: 3 * a + b if a > 0 else 3 * a * b)

golden(
    "052-structural-vectors",
    """
(define v (if (> a 0) (vec a b) (vec a b (* a b))))
(* (vlen v) (vsum v))
""",
    "a b",
    [[1.0, 2.0], [-1.0, 2.0], [0.5, 0.5]],
)(lambda a, b: 2 * (a + b) if a > 0 else 3 * (a + b + a * b))

golden(
    "053-data-divergent",
    "(if (> x a) (* b (- x a)) (* c (square (- x a))))",
    "a b c",
    [[0.1, 1.0, 2.0], [1.7, -0.5, 0.3]],
    inputs={"x": ("data", [-1.0, 0.0, 0.5, 1.0, 2.0, 3.0])},
)(lambda a, b, c, x: b * (x - a) if x > a else c * (x - a) ** 2)


def _lane_errors(a: float, b: float) -> float:
    if a > 0:
        return a + b
    raise Fail("ProgramError")


golden(
    "054-lane-errors",
    "(define l (if (> a 0) (list a) a))\n(+ (car l) b)",
    "a b",
    [[1.0, 1.0], [-1.0, 1.0], [2.0, -3.0]],
    errors=[{"lanes": [1], "kind": "ProgramError", "line": 2, "column": 4, "contains": "car"}],
)(_lane_errors)


def _error_call(a: float) -> float:
    if a < 0:
        raise Fail("ProgramError")
    return math.sqrt(a)


golden(
    "055-error-call",
    '(if (< a 0) (error "negative a:" a) (sqrt a))',
    "a",
    [[4.0], [-1.0], [-2.0], [0.25]],
    errors=[
        {
            "lanes": [1, 2],
            "kind": "ProgramError",
            "line": 1,
            "column": 13,
            "contains": "negative a:",
        }
    ],
)(_error_call)


def _ref_error(a: float, b: float) -> float:
    if a > 0:
        return b
    raise Fail("ProgramError")


golden(
    "056-index-error-lanes",
    "(ref (vec a b) (if (> a 0) 1 5))",
    "a b",
    [[1.0, 2.0], [-1.0, 3.0]],
    errors=[
        {"lanes": [1], "kind": "ProgramError", "line": 1, "column": 1, "contains": "out of range"}
    ],
)(_ref_error)


def _shape_error(a: float) -> Any:
    if a > 0:
        return [a, a]
    raise Fail("ShapeError")


golden(
    "057-shape-error-lanes",
    "(+ (vec a a) (if (> a 0) [0 0] [1 2 3]))",
    "a",
    [[1.0], [-1.0]],
    errors=[{"lanes": [1], "kind": "ShapeError", "line": 1, "column": 1, "contains": "+"}],
)(_shape_error)

golden(
    "058-nonfinite-status",
    "(+ (/ b a) (log b))",
    "b a",
    [[1.0, 0.0], [-1.0, 2.0], [3.0, 2.0]],
)(lambda b, a: (math.inf if a == 0 else b / a) + (math.log(b) if b > 0 else math.nan))

golden(
    "059-reader-syntax",
    """
; a line comment
#| a block #| nested |# comment |#
(+ #;(ignored form) (vsum [a 1e-3 .5 -2.]) (if #true 1 0) (if #false 1 0) (min +inf.0 2)
   (* -2.5E1 b) (if (nan? +nan.0) 1 0) (max -inf.0 b))  ; trailing
""",
    "a b",
    [[1.0, 2.0], [-0.5, 0.3]],
)(lambda a, b: a + 1e-3 + 0.5 - 2.0 + 1 + 0 + 2 - 25 * b + 1 + b)

golden(
    "060-vector-results",
    "(list->vector (map (lambda (k) (* a k)) (list 1 2 b)))",
    "a b",
    [[1.0, 3.0], [-2.0, 0.5]],
)(lambda a, b: [a, 2 * a, a * b])

golden(
    "061-matrix-result",
    "(matmul (mat (vec a 1) (vec 0 b)) (mat [1 2] [3 4]))",
    "a b",
    [[1.0, 3.0], [-2.0, 0.5]],
)(lambda a, b: (np.array([[a, 1.0], [0.0, b]]) @ np.array([[1.0, 2.0], [3.0, 4.0]])).tolist())

golden(
    "062-scalar-input",
    "(+ (* a s) (ref v 2) (vsum v))",
    "a",
    [[1.0], [2.0]],
    inputs={"s": ("scalar", 2.5), "v": ("const", [1.0, 2.0, 4.0])},
)(lambda a, s, v: a * s + v[2] + sum(v))


golden(
    "063-scale-orders",
    "(+ (trace (matmul (scale a (eye 2)) (mat (vec 1 2) (vec 3 4))))\n"
    "   (vsum (scale (vec a b) b)) (det (scale (mat (vec a 1) (vec b 2)) b))\n"
    "   (vsum (scale 2 (vec a b))))",
    "a b",
    [[0.5, -1.0], [1.5, 0.25], [-2.0, 3.0]],
)(lambda a, b: 5 * a + (a + b) * b + b * b * (2 * a - b) + 2 * (a + b))
