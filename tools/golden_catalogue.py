"""The golden programs and their oracles, independently of ndvm (``tools/regen_golden.py``
writes and checks the expected results from them).

Each golden holds the program text, the theta lanes (unconstrained, ``[B, P]``), the inputs and
an **oracle**: a plain Python/NumPy hand translation of the program. Oracle conventions:
``oracle(*params, **inputs)`` sees the *constrained* parameter values (softplus / sigmoid / tanh
of theta, computed here) in declaration order; a data input is passed one point at a time (a
float); raising ``Fail(kind)`` marks the lane as failing with that error class. Non-numeric
results are plain Python data: lists, floats, bools, ``str`` for symbols and strings, ``None``
for void.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


class Fail(Exception):
    """The lane fails at run time with the error class ``kind`` (e.g. ``ProgramError``)."""

    def __init__(self, kind: str = "ProgramError") -> None:
        super().__init__(kind)
        self.kind = kind


@dataclass
class Golden:
    name: str
    source: str
    params: list[str]
    theta: list[list[float]]
    oracle: Callable[..., Any]
    constraints: dict[str, str] = field(default_factory=dict)
    inputs: dict[str, tuple[str, Any]] = field(default_factory=dict)
    grad: bool = True  # False: a structural result (lists, symbols, booleans), no gradient
    grad_closed: Callable[..., Any] | None = None  # closed-form d value / d theta per lane
    rtol_value: float = 1e-9
    rtol_grad: float = 1e-6
    errors: list[dict[str, Any]] = field(default_factory=list)  # expected error details
    note: str = ""


GOLDENS: list[Golden] = []


def golden(name: str, source: str, params: str, theta: list[list[float]], **kw: Any) -> None:
    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        GOLDENS.append(
            Golden(name, source.strip() + "\n", params.split(), theta, fn, **kw)  # type: ignore[arg-type]
        )
        return fn

    return deco  # type: ignore[return-value]


# -- oracle helpers ---------------------------------------------------------------------
def softplus(t: float) -> float:
    return math.log1p(math.exp(-abs(t))) + max(t, 0.0)


def sigmoid(t: float) -> float:
    return 1.0 / (1.0 + math.exp(-t))


TRANSFORMS = {"free": lambda t: t, "positive": softplus, "unit": sigmoid, "signed-unit": math.tanh}


def car(x: Any) -> Any:
    if not isinstance(x, list) or not x:
        raise Fail()
    return x[0]


def r7_round(x: float) -> float:
    return float(np.round(x))  # round half to even, as R7RS


def sign(x: float) -> float:
    return float(np.sign(x))


# == special forms ======================================================================
golden(
    "001-arith",
    "(+ (* a b) (- a) (/ b 2) (- a b 1) (/ 2 a b) (*) (+) (/ a) (* 2 a b 0.5))",
    "a b",
    [[1.5, -0.7], [-2.0, 3.0], [0.3, 0.9]],
)(lambda a, b: a * b - a + b / 2 + (a - b - 1) + 2 / a / b + 1 + 0 + 1 / a + a * b)

golden(
    "002-transcendental",
    """
(+ (exp (* 0.1 a)) (log b) (log b 2) (sqrt b) (cbrt a) (square a) (expt b a) (pow b 0.5)
   (sin a) (cos a) (tan (* 0.1 a)))
""",
    "a b",
    [[1.2, 0.7], [-0.8, 2.5], [2.0, 1.3]],
)(
    lambda a, b: (
        math.exp(0.1 * a)
        + math.log(b)
        + math.log(b) / math.log(2)
        + math.sqrt(b)
        + np.cbrt(a)
        + a * a
        + b**a
        + b**0.5
        + math.sin(a)
        + math.cos(a)
        + math.tan(0.1 * a)
    )
)

golden(
    "003-transcendental-2",
    """
(+ (asin u) (acos u) (atan u) (atan u v) (sinh u) (cosh u) (tanh u) (asinh v)
   (acosh (+ 2 (square v))) (atanh u) (sigmoid v) (softplus v) (erf v) (hypot u v)
   (log1p (square u)) (expm1 u))
""",
    "u v",
    [[0.3, -1.2], [-0.6, 0.4], [0.8, 2.0]],
)(
    lambda u, v: (
        math.asin(u)
        + math.acos(u)
        + math.atan(u)
        + math.atan2(u, v)
        + math.sinh(u)
        + math.cosh(u)
        + math.tanh(u)
        + math.asinh(v)
        + math.acosh(2 + v * v)
        + math.atanh(u)
        + sigmoid(v)
        + softplus(v)
        + math.erf(v)
        + math.hypot(u, v)
        + math.log1p(u * u)
        + math.expm1(u)
    )
)

golden(
    "004-piecewise",
    """
(+ (* a (floor b)) (ceiling b) (round b) (truncate (- b)) (* a (sign b)) (quotient 7 2)
   (remainder b 2) (modulo (- b) 2) (abs a) (min a b 0.5) (max a b) (clamp a -1 1)
   (quotient (- 7) 2) (remainder (- 7) 2) (modulo 7 (- 2)))
""",
    "a b",
    [[1.5, 2.3], [-0.7, -3.6], [0.2, 4.3]],
)(
    lambda a, b: (
        a * math.floor(b)
        + math.ceil(b)
        + r7_round(b)
        + math.trunc(-b)
        + a * sign(b)
        + 3
        + math.fmod(b, 2)
        + (-b) % 2
        + abs(a)
        + min(a, b, 0.5)
        + max(a, b)
        + min(max(a, -1), 1)
        + (-3)
        + (-1)
        + (-1)
    )
)

golden(
    "005-comparisons",
    """
(list (= a b) (< a b) (> a b) (<= a a b) (>= b a) (< 1 2 3) (< 1 3 2) (= 1 1 1)
      (zero? (- a a)) (positive? a) (negative? a) (finite? (/ 1 a)) (nan? (log -1))
      (not (> a 0)) (not 0))
""",
    "a b",
    [[1.0, 2.0], [-1.0, -1.0], [0.0, 0.5]],
    grad=False,
)(
    lambda a, b: [
        a == b,
        a < b,
        a > b,
        a <= a <= b,
        b >= a,
        True,
        False,
        True,
        True,
        a > 0,
        a < 0,
        a != 0,
        True,
        not a > 0,
        False,
    ]
)

golden(
    "006-type-predicates",
    """
(list (number? 1) (number? 'x) (boolean? #f) (boolean? '()) (symbol? 'x) (string? "s")
      (pair? '(1)) (pair? '()) (null? '()) (null? '(1)) (list? '(1 2)) (list? (cons 1 2))
      (procedure? car) (procedure? (lambda (x) x)) (procedure? 1) (vector? [1 2])
      (vector? (eye 2)) (matrix? (eye 2)) (eq? 'a 'a) (eq? '() '()) (eqv? 1.5 1.5)
      (equal? '(1 (2 3)) (list 1 (list 2 3))) (equal? "ab" "ab") (equal? [1 2] [1 2])
      (equal? [1 2] [1 3]) (eqv? 'a 'b))
""",
    "",
    [[]],
    grad=False,
)(
    lambda: (
        [True, False, True, False, True, True, True, False, True, False, True, False]
        + [True, True, False, True, False, True, True, True, True, True, True, True, False, False]
    )
)

golden(
    "007-quote",
    """(list 'sym '(1 2 . 3) (quote (a b)) '#t '"str" '() ''x '[1 2])""",
    "",
    [[]],
    grad=False,
)(
    lambda: [
        "sym",
        [1.0, 2.0, ".", 3.0],
        ["a", "b"],
        True,
        "str",
        [],
        ["quote", "x"],
        ["vec", 1.0, 2.0],
    ]
)

golden(
    "008-if-arms",
    "(list (if (> a 0) 'pos 'neg) (if (> a 0) (* 2 a)) (if #f 1 2) (if '() 'true 'false))",
    "a",
    [[1.0], [-1.0]],
    grad=False,
)(lambda a: ["pos" if a > 0 else "neg", 2 * a if a > 0 else None, 2.0, "true"])

golden(
    "009-if-divergent-grad",
    "(if (> a 0) (* a a b) (* 3 b (sin a)))",
    "a b",
    [[1.0, 2.0], [-1.0, 2.0], [0.5, -1.0], [-2.5, 0.3]],
)(lambda a, b: a * a * b if a > 0 else 3 * b * math.sin(a))

golden(
    "010-cond",
    "(cond ((< a -1) (* 2 a)) ((< a 1) (square a) (* a a a)) (else (+ a 10)))",
    "a",
    [[-2.0], [0.5], [3.0], [-0.2]],
)(lambda a: 2 * a if a < -1 else (a**3 if a < 1 else a + 10))

golden(
    "011-cond-arrow",
    """
(cond ((> a 100))
      ((assv 2 '((1 . 10) (2 . 20))) => (lambda (p) (* a (cdr p))))
      (else (- a)))
""",
    "a",
    [[1.0], [2.5], [-3.0]],
)(lambda a: 20 * a)

golden(
    "012-cond-test-only",
    "(cond ((> a 100)) ((< a 0) 'neg) (else 'other))",
    "a",
    [[200.0], [-1.0], [3.0]],
    grad=False,
)(lambda a: True if a > 100 else ("neg" if a < 0 else "other"))

golden(
    "013-case-lanes",
    """
(case (floor a)
  ((0 1) (* b 10))
  ((2) (* b 20))
  ((x y) 'never)
  (else (* b 30)))
""",
    "a b",
    [[0.5, 1.0], [1.5, 2.0], [2.5, -1.0], [7.2, 0.5]],
)(lambda a, b: b * {0: 10, 1: 10, 2: 20}.get(math.floor(a), 30))

golden(
    "014-case-symbols",
    """
(define (kind s) (case s ((a e i o u) 'vowel) ((w y) 'semi) (else 'consonant)))
(list (map kind '(a b w)) (case 5 ((1 2) 'low) (else => (lambda (k) (* k 2)))))
""",
    "",
    [[]],
    grad=False,
)(lambda: [["vowel", "consonant", "semi"], 10.0])

golden(
    "015-and-or",
    """
(list (and) (and 1 2) (and #f (car 1)) (or) (or #f 3) (or (> a 0) 'neg)
      (and (> a 0) (* a 2)) (or #f #f))
""",
    "a",
    [[1.0], [-1.0]],
    grad=False,
)(
    lambda a: (
        [True, 2.0, False, False, 3.0, True if a > 0 else "neg", 2 * a if a > 0 else False]
        + [False]
    )
)

golden(
    "016-when-unless",
    """
(let ((w (when (> a 0) 'ignored (* a 2)))
      (u (unless (> a 0) (* a 3))))
  (if (number? w) w u))
""",
    "a",
    [[1.0], [-1.0], [0.25]],
)(lambda a: 2 * a if a > 0 else 3 * a)

golden(
    "017-begin",
    """
(define (f x) (begin (* x 2)))
(begin (f a) (begin (+ (f a) 1)))
(begin (define z 3) (* z (f b)))
""",
    "a b",
    [[1.0, 2.0], [-0.5, 0.25]],
)(lambda a, b: 6 * b)

golden(
    "018-let-parallel",
    "(let ((x a) (y b)) (let ((x y) (y x)) (- x (* 2 y))))",
    "a b",
    [[1.0, 5.0], [-2.0, 0.5]],
)(lambda a, b: b - 2 * a)

golden(
    "019-named-let",
    "(let loop ((i 0) (acc 1)) (if (= i 5) acc (loop (+ i 1) (* acc a))))",
    "a",
    [[1.1], [-0.9], [2.0]],
)(lambda a: a**5)

golden(
    "020-let-star",
    "(let* ((x (* a 2)) (y (+ x 1)) (x (* y y))) (- x a))",
    "a",
    [[1.0], [-0.3]],
)(lambda a: (2 * a + 1) ** 2 - a)


def _even_odd(a: float, b: float) -> float:
    n, acc, even = 7, 1.0, True
    while n != 0:
        acc = acc * a if even else acc + b
        n -= 1
        even = not even
    return acc if even else -acc


golden(
    "021-letrec-mutual",
    """
(letrec ((ev (lambda (n acc) (if (= n 0) acc (od (- n 1) (* acc a)))))
         (od (lambda (n acc) (if (= n 0) (- acc) (ev (- n 1) (+ acc b))))))
  (ev 7 1))
""",
    "a b",
    [[1.1, 0.5], [-0.7, 2.0]],
)(_even_odd)

golden(
    "022-letrec-star",
    "(letrec* ((p (* a 2)) (q (+ p 1)) (f (lambda (x) (* x q)))) (f b))",
    "a b",
    [[1.0, 2.0], [0.3, -1.5]],
)(lambda a, b: b * (2 * a + 1))

golden(
    "023-define-toplevel",
    "(define k 3)\n(define (sq x) (* x x))\n(define s (sq a))\n(+ (* k s) b)",
    "a b",
    [[1.5, 0.1], [-2.0, 1.0]],
)(lambda a, b: 3 * a * a + b)

golden(
    "024-define-internal",
    """
(define (f x)
  (define y (* x 2))
  (define (g z) (+ z y))
  (g (* y y)))
(f a)
""",
    "a",
    [[1.0], [-0.4]],
)(lambda a: 4 * a * a + 2 * a)

golden(
    "025-lambda-rest",
    """
(define (sum . xs) (fold-left + 0 xs))
(define (head-times-count h . rest) (* h (length rest)))
(+ (sum a b 1) (head-times-count b 1 2 3) ((lambda args (apply * args)) a b) (sum))
""",
    "a b",
    [[1.0, 2.0], [0.5, -3.0]],
)(lambda a, b: a + b + 1 + 3 * b + a * b)

golden(
    "026-do",
    "(do ((i 0 (+ i 1)) (s 0 (+ s (* a i))) (p 2)) ((= i 6) (* s p)))",
    "a",
    [[1.0], [-0.25]],
)(lambda a: 2 * a * 15)


def _loops(a: float) -> float:
    s = 0.0
    for k in range(10):
        s += a * math.sin(k)
    acc = 0.0
    for i in range(3):
        acc += sum(a * i * j for j in range(4))
    return s + acc


golden(
    "027-loop-recur",
    """
(+ (loop ((s 0) (k 0)) (if (= k 10) s (recur (+ s (* a (sin k))) (+ k 1))))
   (loop ((i 0) (acc 0))
     (if (= i 3)
         acc
         (recur (+ i 1)
                (+ acc (loop ((j 0) (t 0)) (if (= j 4) t (recur (+ j 1) (+ t (* a i j))))))))))
""",
    "a",
    [[1.0], [0.7]],
)(_loops)


def _assert_oracle(b: float, a: float) -> float:
    if not b > 0:
        raise Fail("ProgramError")
    return a * b


golden(
    "028-assert-lanes",
    "(begin (assert (> b 0)) (* a b))",
    "b a",
    [[2.0, 1.0], [-1.0, 1.0], [0.5, 3.0]],
    errors=[{"lanes": [1], "kind": "ProgramError", "line": 1, "column": 8, "contains": "(> b 0)"}],
)(_assert_oracle)

golden(
    "029-params-header",
    """
(params (a 1.0) (k 0.1 positive) (p 0.5 unit) (s 0.0 signed-unit) (f 0.0 free) g)
(+ a (* k 2) (* p 3) (* s 4) (* f 5) (* k p s) g)
""",
    "a k p s f g",
    [[1.0, 0.3, -0.2, 0.4, 0.7, 0.1], [-0.5, -2.0, 1.5, -1.0, 0.0, 2.0]],
    constraints={"k": "positive", "p": "unit", "s": "signed-unit", "f": "free"},
)(lambda a, k, p, s, f, g: a + 2 * k + 3 * p + 4 * s + 5 * f + k * p * s + g)

# == procedures =========================================================================
golden(
    "030-closures",
    """
(define (make-adder n) (lambda (x) (+ x n)))
(define (compose f g) (lambda (x) (f (g x))))
(define add-a (make-adder a))
(define fs (map (lambda (k) (lambda (x) (* x k a))) '(1 2 3)))
(+ ((compose add-a (lambda (x) (* x b))) 3) (fold-left + 0 (map (lambda (f) (f b)) fs)))
""",
    "a b",
    [[1.0, 2.0], [-0.5, 0.3]],
)(lambda a, b: 3 * b + a + 6 * a * b)


def _higher_order(a: float, b: float) -> float:
    xs = [1.0, 2.0, 3.0, 4.0]
    ys = [a * x for x in xs]
    zs = [x + y for x, y in zip(xs, ys)]
    big = [z for z in zs if z > 2]
    red = 0.0
    if big:  # SRFI-1 reduce: (f elem acc)
        red = big[0]
        for z in big[1:]:
            red = z + red
    fl = 0.0
    for y in ys:
        fl = fl * b + y
    fr = 0.0
    for z in reversed(zs):
        fr = z - fr
    return red + fl + fr + max(ys) + len(big)


golden(
    "031-higher-order",
    """
(let* ((xs (list 1 2 3 4))
       (ys (map (lambda (x) (* a x)) xs))
       (zs (map + xs ys))
       (big (filter (lambda (z) (> z 2)) zs)))
  (for-each (lambda (x) x) xs)
  (+ (reduce + 0 big)
     (fold-left (lambda (acc y) (+ (* acc b) y)) 0 ys)
     (fold-right (lambda (z acc) (- z acc)) 0 zs)
     (apply max ys)
     (length big)))
""",
    "a b",
    [[0.5, 1.1], [1.5, -0.5], [-3.0, 0.9]],
    note="filter keeps a different number of elements per lane: structural divergence",
)(_higher_order)

golden(
    "032-assoc-member",
    """
(list (assoc 2 '((1 . a) (2 . b))) (assq 'c '((a 1) (c 2))) (assv 3 '((1 . x)))
      (member '(1) '(0 (1) 2)) (memq 'c '(a b c d)) (memv 2 '(1 2 3)) (member 9 '(1 2))
      (assoc "k" '(("j" . 1) ("k" . 2))))
""",
    "",
    [[]],
    grad=False,
)(
    lambda: [
        [2.0, ".", "b"],
        ["c", 2.0],
        False,
        [[1.0], 2.0],
        ["c", "d"],
        [2.0, 3.0],
        False,
        ["k", ".", 2.0],
    ]
)

golden(
    "033-assv-lanes",
    "(* b (cdr (assv (floor a) '((1 . 10) (2 . 20) (3 . 30)))))",
    "b a",
    [[1.0, 1.5], [0.5, 2.2], [-2.0, 3.9]],
)(lambda b, a: b * {1: 10, 2: 20, 3: 30}[math.floor(a)])

golden(
    "034-cxr",
    """
(define t '(((1 2) 3 4) (5 6) 7 8))
(list (car t) (cdr t) (caar t) (cadr t) (cdar t) (cddr t) (caaar t) (caadr t) (cadar t)
      (caddr t) (cdaar t) (cdadr t) (cddar t) (cdddr t))
""",
    "",
    [[]],
    grad=False,
)(
    lambda: [
        [[1.0, 2.0], 3.0, 4.0],
        [[5.0, 6.0], 7.0, 8.0],
        [1.0, 2.0],
        [5.0, 6.0],
        [3.0, 4.0],
        [7.0, 8.0],
        1.0,
        5.0,
        3.0,
        7.0,
        [2.0],
        [6.0],
        [4.0],
        [8.0],
    ]
)

golden(
    "035-list-ops",
    """
(list (length '(1 2 3)) (append '(1) '(2 3) '() '(4)) (append) (append '(1) 2)
      (reverse '(1 2 3)) (list-ref '(a b c) 2) (list-tail '(1 2 3) 2) (list-tail '(1) 1)
      (iota 3) (iota 3 1) (iota 3 0 0.5) (cons 1 2) (list) (length '()))
""",
    "",
    [[]],
    grad=False,
)(
    lambda: [
        3.0,
        [1.0, 2.0, 3.0, 4.0],
        [],
        [1.0, ".", 2.0],
        [3.0, 2.0, 1.0],
        "c",
        [3.0],
        [],
        [0.0, 1.0, 2.0],
        [1.0, 2.0, 3.0],
        [0.0, 0.5, 1.0],
        [1.0, ".", 2.0],
        [],
        0.0,
    ]
)

golden(
    "036-lists-numeric",
    """
(let* ((l (list a b (* a b)))
       (r (reverse (append l (list 1)))))
  (+ (car r) (cadr r) (* 2 (list-ref r 3)) (length r) (apply + (iota 3 a b))
     (car (list-tail l 2))))
""",
    "a b",
    [[1.0, 2.0], [-0.5, 0.3]],
)(lambda a, b: 1 + a * b + 2 * a + 4 + (3 * a + 3 * b) + a * b)


def _vectors(a: float, b: float) -> float:
    v = np.array([a, b, 1.0])
    w = np.array([1.0, 2.0, 3.0])
    total = v @ w + np.sum(v + w) + np.mean(2 * v) + np.linalg.norm(v)
    total += np.sum(w / np.linalg.norm(w)) + np.sum(np.cross(v, w)) + np.sum(w * a)
    total += 3 + b + 1 + np.sum(v * v) + np.sum(v) + (a + b) + 3 * a + 0 + 3
    total += np.sum(-v) + np.sum(v / 2) + (1 + a) + np.sum(v * w - w)
    return float(total)


golden(
    "037-vectors",
    """
(let* ((v (vec a b 1)) (w [1 2 3]))
  (+ (dot v w) (vsum (+ v w)) (vmean (* 2 v)) (norm v) (vsum (normalize w))
     (vsum (cross v w)) (vsum (scale w a)) (vlen v) (ref v 1) (vector-ref w 0)
     (vsum (vector-map (lambda (x) (* x x)) v)) (apply + (vector->list v))
     (vsum (list->vector (list a b))) (vsum (make-vector 3 a)) (vsum (zeros 2))
     (vector-length (ones 3)) (vsum (- v)) (vsum (/ v 2)) (vsum (vector 1 a))
     (vsum (- (* v w) w))))
""",
    "a b",
    [[1.0, 2.0], [-0.5, 0.3]],
)(_vectors)


def _matrices(a: float, b: float) -> float:
    m = np.array([[a, 1.0], [2.0, b]])
    i2 = np.eye(2)
    n = m + 3 * i2
    total = np.trace(m) + np.linalg.det(m) + np.linalg.slogdet(m @ m.T + i2)[1]
    total += np.sum(m @ np.array([1.0, 2.0])) + np.trace(np.linalg.inv(n))
    total += np.sum(np.linalg.solve(n, np.array([1.0, 1.0])))
    total += np.trace(np.linalg.cholesky(m.T @ m + i2)) + 2 + 2 + 1.0 + np.sum(m[1])
    total += np.trace(np.outer([1.0, 2.0], [a, b])) + np.trace(np.ones((2, 2))) + 0
    total += np.trace(m.T @ m * 2 - m / 2)
    return float(total)


golden(
    "038-matrices",
    """
(let* ((m (mat (vec a 1) (list 2 b)))
       (i2 (eye 2))
       (n (+ m (* 3 i2))))
  (+ (trace m) (det m) (logdet (+ (matmul m (transpose m)) i2)) (vsum (matvec m [1 2]))
     (trace (inv n)) (vsum (solve n [1 1])) (trace (cholesky (+ (matmul (transpose m) m) i2)))
     (rows m) (cols m) (ref m 0 1) (vsum (ref m 1)) (trace (outer [1 2] (vec a b)))
     (trace (ones 2 2)) (trace (zeros 2 2)) (trace (- (* (matmul (transpose m) m) 2) (/ m 2)))))
""",
    "a b",
    [[1.0, 3.0], [-0.5, 0.3], [2.0, -1.0]],
)(_matrices)


def _linalg3(a: float, b: float, c: float) -> float:
    L = np.array([[1.0 + a * a, 0, 0], [b, 1.5, 0], [c, a * b, 2.0 + c * c]])
    A = L @ L.T + np.eye(3)
    y = np.array([a, 1.0, b])
    ch = np.linalg.cholesky(A)
    return float(
        np.linalg.slogdet(A)[1]
        + y @ np.linalg.solve(A, y)
        + np.trace(np.linalg.inv(A))
        + np.sum(np.diag(ch))
        + np.log(np.linalg.det(A))
    )


golden(
    "039-linalg-spd",
    """
(define L (mat (vec (+ 1 (* a a)) 0 0) (vec b 1.5 0) (vec c (* a b) (+ 2 (* c c)))))
(define A (+ (matmul L (transpose L)) (eye 3)))
(define y (vec a 1 b))
(define ch (cholesky A))
(+ (logdet A) (dot y (solve A y)) (trace (inv A)) (+ (ref ch 0 0) (ref ch 1 1) (ref ch 2 2))
   (log (det A)))
""",
    "a b c",
    [[0.5, -0.3, 0.8], [1.2, 0.7, -0.4]],
)(_linalg3)

golden(
    "040-apply-map-variants",
    """
(list (apply + '()) (apply max 1 '(5 3)) (map car '((1 2) (3 4)))
      (map (lambda (x y z) (+ x y z)) '(1 2) '(10 20) '(100 200 300))
      (fold-right list 'init '(1 2)) (fold-left list 'init '(1 2))
      (vector->list (vector-map + [1 2] [10 20])) (map (lambda (x) (* x x)) '()))
""",
    "",
    [[]],
    grad=False,
)(
    lambda: [
        0.0,
        5.0,
        [1.0, 3.0],
        [111.0, 222.0],
        [1.0, [2.0, "init"]],
        [["init", 1.0], 2.0],
        [11.0, 22.0],
        [],
    ]
)


def _mutual_tail(a: float) -> float:
    acc, n, which = 0.0, 1000, "f"
    while n != 0:
        acc = acc + a if which == "f" else acc * 0.999
        which = "g" if which == "f" else "f"
        n -= 1
    return acc


golden(
    "041-mutual-tail-calls",
    """
(letrec ((f (lambda (n acc) (if (= n 0) acc (g (- n 1) (+ acc a)))))
         (g (lambda (n acc) (if (= n 0) acc (f (- n 1) (* acc 0.999))))))
  (f 1000 0))
""",
    "a",
    [[1.0], [-0.3]],
)(_mutual_tail)


def _sum_to(a: float) -> float:
    return sum(a * n for n in range(1, 201))


golden(
    "042-non-tail-recursion",
    "(define (sum-to n) (if (= n 0) 0 (+ (* a n) (sum-to (- n 1)))))\n(sum-to 200)",
    "a",
    [[1.0], [0.01]],
)(_sum_to)

# == models ============================================================================
_Y = np.random.default_rng(0).standard_normal((80, 2))


def _kalman(q: float, r: float, Y: np.ndarray) -> float:
    Q, R = np.eye(2) * q * q, np.eye(2) * r * r
    m, P, nll = np.zeros(2), np.eye(2), 0.0
    for t in range(Y.shape[0]):
        Pp = P + Q
        v = Y[t] - m
        S = Pp + R
        Si = np.linalg.inv(S)
        K = Pp @ Si
        m = m + K @ v
        P = Pp - K @ Pp
        nll += 0.5 * (np.linalg.slogdet(S)[1] + v @ Si @ v + 2 * 1.8378770664093453)
    return float(nll)


golden(
    "043-kalman80",
    (ROOT / "examples" / "kalman80.scm").read_text(),
    "q r",
    [[-1.0, 0.2], [0.5, -0.5], [0.0, 1.0]],
    constraints={"q": "positive", "r": "positive"},
    inputs={"Y": ("const", _Y)},
)(_kalman)


def _logistic(r: float, x0: float) -> float:
    x = x0
    for _ in range(16):
        x = r * x * (1 - x)
    return x


golden(
    "044-logistic-map",
    """
(params (r 3.2) (x0 0.3 unit))
(let loop ((i 0) (x x0))
  (if (= i 16) x (loop (+ i 1) (* r x (- 1 x)))))
""",
    "r x0",
    [[2.5, -0.8], [3.2, 0.0], [3.5, 0.4]],
    constraints={"x0": "unit"},
    rtol_grad=1e-5,
)(_logistic)

golden(
    "045-damped-oscillator",
    (ROOT / "examples" / "damped.scm").read_text(),
    "a k w phi",
    [[1.0, -1.0, 2.0, 0.0], [0.5, 0.3, 1.0, 0.4]],
    constraints={"k": "positive"},
    inputs={"x": ("data", [0.0, 0.5, 1.0, 2.0, 3.5])},
)(lambda a, k, w, phi, x: a * math.exp(-k * x) * math.cos(w * x + phi))

golden(
    "046-sr-expression",
    "(* a (sin (+ (* b x) c)))",
    "a b c",
    [[1.0, 2.0, 3.0], [2.0, -1.0, 0.5], [0.3, 0.1, -2.0]],
    inputs={"x": ("data", [-1.0, 0.0, 0.7, 2.0])},
)(lambda a, b, c, x: a * math.sin(b * x + c))

golden(
    "047-gaussian-bump",
    "(+ (* a (exp (* -0.5 (square (/ (- x b) c))))) (* 0.1 (tanh x)))",
    "a b c",
    [[1.0, 0.5, 0.8], [2.0, -1.0, 1.5]],
    inputs={"x": ("data", [-2.0, -0.5, 0.0, 0.5, 1.0, 3.0])},
)(lambda a, b, c, x: a * math.exp(-0.5 * ((x - b) / c) ** 2) + 0.1 * math.tanh(x))

# == lanes and divergence =============================================================


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
