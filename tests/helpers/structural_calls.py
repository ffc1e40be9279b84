"""One example call per STRUCTURAL primitive, over the parameters ``a`` and ``b``.

Tests parametrize over the primitive table and look the example up here, so a structural
primitive added to the table without an example fails those tests (it is not skipped).
"""

from __future__ import annotations

from ndvm.prims import PRIMS, Kind

STRUCTURAL = [p for p in PRIMS if p.kind is Kind.STRUCTURAL]

_L = "(list a (list b 1) (vec a b) 3)"  # nested, so every c[ad]{2,4}r has a path to walk
_VL = "(list a (vec 1 2))"
_DEEP = "(list (list (list a b) 2) (list 3 (list b a)) (list 4 5) 6)"

CALLS: dict[str, str] = {
    "cons": "(cons a (cons b '()))",
    "list": "(list a b 'x \"s\")",
    "length": f"(length {_L})",
    "append": "(append (list a) (list b 1) (list))",
    "reverse": f"(reverse {_L})",
    "list-ref": f"(list-ref {_L} 2)",
    "list-tail": f"(list-tail {_L} 2)",
    "iota": "(iota 4 a b)",
    "number?": "(list (number? a) (number? (vec a)) (number? 'x))",
    "boolean?": "(list (boolean? (> a b)) (boolean? #f) (boolean? a))",
    "symbol?": "(list (symbol? 'x) (symbol? \"x\"))",
    "string?": "(list (string? \"x\") (string? 'x))",
    "pair?": "(list (pair? (list a)) (pair? '()))",
    "null?": "(list (null? '()) (null? (list a)))",
    "vector?": "(list (vector? (vec a b)) (vector? a) (vector? (eye 2)))",
    "matrix?": "(list (matrix? (eye 2)) (matrix? (vec a)))",
    "list?": "(list (list? (list a b)) (list? (cons a b)) (list? '()))",
    "procedure?": "(list (procedure? car) (procedure? (lambda (x) x)) (procedure? a))",
    "not": "(list (not (> a b)) (not #f) (not a))",
    "eq?": "(list (eq? a b) (eq? 'x 'x) (eq? (list 1) (list 1)))",
    "eqv?": "(list (eqv? a a) (eqv? a b) (eqv? #t (> a b)))",
    "equal?": f"(list (equal? (list a 1) (list b 1)) (equal? {_VL} {_VL}))",
    "void": "(list (void a b))",
    "vec": "(vec a b (* a b))",
    "mat": "(mat (vec a b) (list b a))",
    "make-vector": "(make-vector 3 a)",
    "zeros": "(list (zeros 2) (zeros 2 3))",
    "ones": "(list (ones 3) (ones 1 2))",
    "eye": "(eye 3)",
    "ref": "(let ((m (mat (vec a b) (vec b 1)))) (list (ref (vec a b) 1) (ref m 1) (ref m 0 1)))",
    "vlen": "(vlen (vec a b 1))",
    "rows": "(rows (mat (vec a b 1) (vec b a 2)))",
    "cols": "(cols (mat (vec a b 1) (vec b a 2)))",
    "vector->list": "(vector->list (vec a b))",
    "list->vector": "(list->vector (list a b 2))",
    **{f"c{p}r": f"(c{p}r {_DEEP})" for p in ("a", "d", "aa", "ad", "da", "dd", "aaa", "aad",
                                               "ada", "add", "daa", "dad", "dda", "ddd")},
}  # fmt: skip


def example(name: str) -> str:
    """The example program for the structural primitive ``name`` (KeyError if it has none)."""
    return "(params a b) " + CALLS[name]
