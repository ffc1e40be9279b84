"""Prelude primitives: higher-order procedures defined in ndvm source.

They run on the evaluator like user code (so a procedure argument may be any closure or
primitive, recursion stays on the explicit stack, and per-lane predicates split lanes as
usual). The front end binds only the ones a program names, plus their dependencies.
"""

from __future__ import annotations

from ndvm.prims.registry import Kind, Prim, between, fixed, variadic
from ndvm.prims.table import PRIMS


def _add(
    name: str,
    code: int,
    arity: object,
    src: str,
    doc: str,
    deps: tuple[str, ...] = (),
    family: str = "higher-order",
) -> None:
    PRIMS.add(
        Prim(
            name,
            code,
            arity,
            Kind.PRELUDE,
            prelude=src,
            doc=doc,  # type: ignore
            deps=deps,
            family=family,
        )
    )


_add(
    "map",
    300,
    variadic(2),
    """
(lambda (f lst . more)
  (if (null? more)
      (let loop ((l lst) (acc '()))
        (if (null? l) (reverse acc) (loop (cdr l) (cons (f (car l)) acc))))
      (let loop ((ls (cons lst more)) (acc '()))
        (if (any-null ls) (reverse acc)
            (loop (map1 cdr ls) (cons (apply f (map1 car ls)) acc))))))
""".replace("any-null", "%any-null").replace("map1", "%map1"),
    "(map f l1 l2 ...): lists of f applied elementwise (stops at the shortest).",
    deps=("%any-null", "%map1"),
)
_add(
    "%map1",
    301,
    fixed(2),
    """
(lambda (f lst)
  (let loop ((l lst) (acc '()))
    (if (null? l) (reverse acc) (loop (cdr l) (cons (f (car l)) acc)))))
""",
    "Internal: single-list map.",
)
_add(
    "%any-null",
    302,
    fixed(1),
    """
(lambda (ls) (if (null? ls) #f (if (null? (car ls)) #t (%any-null (cdr ls)))))
""",
    "Internal: whether any list is empty.",
)
_add(
    "for-each",
    303,
    variadic(2),
    """
(lambda (f lst . more)
  (let loop ((ls (cons lst more)))
    (if (%any-null ls) (void)
        (begin (apply f (%map1 car ls)) (loop (%map1 cdr ls))))))
""",
    "(for-each f l1 ...): apply f for its effects; returns void.",
    deps=("%any-null", "%map1"),
)
_add(
    "filter",
    304,
    fixed(2),
    """
(lambda (pred lst)
  (let loop ((l lst) (acc '()))
    (if (null? l) (reverse acc)
        (loop (cdr l) (if (pred (car l)) (cons (car l) acc) acc)))))
""",
    "(filter pred l): the elements for which pred is true (per lane).",
)
_add(
    "fold-left",
    305,
    variadic(3),
    """
(lambda (f init lst . more)
  (let loop ((acc init) (ls (cons lst more)))
    (if (%any-null ls) acc
        (loop (apply f acc (%map1 car ls)) (%map1 cdr ls)))))
""",
    "(fold-left f init l1 ...): (f (f init x0) x1)...",
    deps=("%any-null", "%map1"),
)
_add(
    "fold-right",
    306,
    variadic(3),
    """
(lambda (f init lst . more)
  (let loop ((acc init) (ls (%map1 reverse (cons lst more))))
    (if (%any-null ls) acc
        (loop (apply f (append (%map1 car ls) (list acc))) (%map1 cdr ls)))))
""",
    "(fold-right f init l1 ...): (f x0 (f x1 ... init)).",
    deps=("%any-null", "%map1"),
)
_add(
    "reduce",
    307,
    fixed(3),
    """
(lambda (f init lst)
  (if (null? lst) init
      (let loop ((acc (car lst)) (l (cdr lst)))
        (if (null? l) acc (loop (f (car l) acc) (cdr l))))))
""",
    "(reduce f init l): SRFI-1 reduce; init only for the empty list.",
)
_add(
    "assoc",
    308,
    fixed(2),
    """
(lambda (key alist)
  (let loop ((l alist))
    (if (null? l) #f (if (equal? key (car (car l))) (car l) (loop (cdr l))))))
""",
    "(assoc key alist): first pair whose car is equal? to key, else #f.",
)
_add(
    "assq",
    309,
    fixed(2),
    """
(lambda (key alist)
  (let loop ((l alist))
    (if (null? l) #f (if (eq? key (car (car l))) (car l) (loop (cdr l))))))
""",
    "(assq key alist): first pair whose car is eq? to key, else #f.",
)
_add(
    "assv",
    310,
    fixed(2),
    """
(lambda (key alist)
  (let loop ((l alist))
    (if (null? l) #f (if (eqv? key (car (car l))) (car l) (loop (cdr l))))))
""",
    "(assv key alist): first pair whose car is eqv? to key, else #f.",
)
_add(
    "member",
    311,
    fixed(2),
    """
(lambda (x lst)
  (let loop ((l lst)) (if (null? l) #f (if (equal? x (car l)) l (loop (cdr l))))))
""",
    "(member x l): the sublist starting at the first element equal? to x, else #f.",
)
_add(
    "memq",
    312,
    fixed(2),
    """
(lambda (x lst)
  (let loop ((l lst)) (if (null? l) #f (if (eq? x (car l)) l (loop (cdr l))))))
""",
    "(memq x l): like member with eq?.",
)
_add(
    "memv",
    313,
    fixed(2),
    """
(lambda (x lst)
  (let loop ((l lst)) (if (null? l) #f (if (eqv? x (car l)) l (loop (cdr l))))))
""",
    "(memv x l): like member with eqv?.",
)
_add(
    "vector-map",
    314,
    variadic(2),
    """
(lambda (f v . more)
  (list->vector (apply map f (vector->list v) (%map1 vector->list more))))
""",
    "(vector-map f v ...): a vector of f applied elementwise.",
    deps=("map", "%map1"),
    family="vectors",
)
_ = between
