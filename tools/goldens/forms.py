"""Golden cases: special forms (registered in order by ``golden``)."""

from __future__ import annotations

import math

import numpy as np

from .base import Fail, golden, r7_round, sigmoid, sign, softplus

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
