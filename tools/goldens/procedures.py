"""Golden cases: procedures (registered in order by ``golden``)."""

from __future__ import annotations

import math

import numpy as np

from .base import golden

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
