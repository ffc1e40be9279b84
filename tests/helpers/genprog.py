"""Hypothesis strategies for random ndvm programs (a typed grammar of numeric expressions).

Every generated program is a numeric expression over parameters ``a b c`` and the input
``x``. Binding forms introduce the local ``u`` (shadowing is fine); ``if`` tests compare
lane-dependent values, so lanes diverge; the bounded named-let has a lane-dependent trip
count (at most 5); one form makes lanes produce a list or a number and then continue. Domains
are guarded loosely (``log``/``sqrt`` of ``abs``); non-finite results are allowed.
``hostile=True`` adds forms that fail on some lanes (type errors, out-of-range and
non-integer indices, failed asserts, ``error``) and forms whose loop never ends on some lanes
(run them under a small ``Limits.max_steps``).
"""

from __future__ import annotations

from hypothesis import strategies as st

PARAMS = ("a", "b", "c")
INPUTS = ("x",)
LITERALS = ("0", "1", "2", "-1.5", "0.5", "3")
UNARY = ("-", "exp", "sin", "cos", "tanh", "abs", "square")
GUARDED = ("log", "sqrt")
BINARY = ("+", "-", "*", "/")
COMPARE = ("<", ">", "<=", ">=", "=")

Expr = st.SearchStrategy[str]


def _extend(kids: Expr) -> Expr:
    two = st.tuples(kids, kids)
    three = st.tuples(kids, kids, kids)
    return st.one_of(
        st.builds(lambda op, e: f"({op} {e})", st.sampled_from(UNARY), kids),
        st.builds(lambda op, e: f"({op} (abs {e}))", st.sampled_from(GUARDED), kids),
        st.builds(lambda op, es: f"({op} {' '.join(es)})", st.sampled_from(BINARY), two | three),
        st.builds(
            lambda op, t, e: f"(if ({op} {t[0]} {t[1]}) {e[0]} {e[1]})",
            st.sampled_from(COMPARE),
            two,
            two,
        ),
        two.map(lambda e: f"(let ((u {e[0]})) (* u (+ u {e[1]})))"),
        three.map(lambda e: f"(let* ((u {e[0]}) (u (+ u {e[1]}))) (- u {e[2]}))"),
        two.map(
            lambda e: (
                f"(let loop ((i 0) (s 0)) (if (< i (min 5 (abs {e[0]}))) "
                f"(loop (+ i 1) (+ (* 0.5 s) {e[1]})) s))"
            )
        ),
        two.map(lambda e: f"((lambda (u) (+ u {e[0]})) {e[1]})"),
        three.map(lambda e: f"(car (cdr (list {e[0]} {e[1]} {e[2]})))"),
        three.map(lambda e: f"(apply + (map (lambda (u) (* u {e[0]})) (list {e[1]} {e[2]})))"),
        three.map(lambda e: f"(dot (vec {e[0]} {e[1]}) (vec {e[2]} 1))"),
        two.map(lambda e: f"(ref (vec {e[0]} {e[1]}) 1)"),
        three.map(
            lambda e: (
                f"(let ((u (if (> {e[0]} 0) (list {e[1]}) {e[2]}))) (if (pair? u) (car u) (* 2 u)))"
            )
        ),
    )


RUNAWAY = "(let loop ((i 0)) (loop (+ i 1)))"


def _hostile(kids: Expr) -> Expr:
    """Forms that fail (or never end) on the lanes where a generated test holds."""
    two = st.tuples(kids, kids)
    three = st.tuples(kids, kids, kids)
    return st.one_of(
        _extend(kids),
        two.map(lambda e: f"(if (> {e[0]} 0.5) (car {e[1]}) {e[1]})"),
        three.map(lambda e: f"(ref (vec {e[0]} {e[1]}) (floor (abs {e[2]})))"),
        three.map(lambda e: f"(list-ref (list {e[0]} {e[1]}) (min 3 (abs {e[2]})))"),
        two.map(lambda e: f"(begin (assert (< {e[0]} 1)) {e[1]})"),
        two.map(lambda e: f'(if (< {e[0]} -1) (error "low" {e[0]}) {e[1]})'),
        two.map(lambda e: f"(if (> {e[0]} 0) {RUNAWAY} {e[1]})"),
        two.map(lambda e: f"(if (< {e[0]} 0) (+ {e[1]} {RUNAWAY}) {e[1]})"),
        two.map(
            lambda e: f"(let loop ((i 0)) (if (< i (* 3 (abs {e[0]}))) (loop (+ i 1)) {e[1]}))"
        ),
    )


def leaves(with_input: bool = True) -> Expr:
    names = PARAMS + (INPUTS if with_input else ())
    return st.sampled_from(names) | st.sampled_from(LITERALS)


def expressions(max_leaves: int = 10, with_input: bool = True, hostile: bool = False) -> Expr:
    """Numeric expressions; every parameter is mentioned so the parameter order is fixed."""
    body = st.recursive(leaves(with_input), _hostile if hostile else _extend, max_leaves=max_leaves)
    return body.map(lambda e: f"(+ (* 0 a b c) {e})")


def programs(max_leaves: int = 10, hostile: bool = False) -> Expr:
    """Whole programs, sometimes with a define prelude (a top-level letrec*)."""
    plain = expressions(max_leaves, hostile=hostile)
    defined = st.tuples(expressions(4), expressions(max_leaves, hostile=hostile)).map(
        lambda e: f"(define (f u) (+ u {e[0]}))\n(f {e[1]})"
    )
    return st.one_of(plain, defined)


TOKENS = (
    "(", "(", ")", ")", "[", "]", "'", "#;", "#|", "|#", ";", "\n", " ", ".", "#", "#(",
    "a", "b", "x", "u", "1", "-2.5", "1e400", "+inf.0", "+nan.0", "#t", "#f", '"s"', '"',
    "if", "let", "let*", "lambda", "define", "loop", "recur", "cond", "else", "=>", "case",
    "do", "begin", "quote", "set!", "call/cc", "params", "car", "cdr", "+", "-", "*", "/",
    "list", "vec", "ref", "map", "apply", "error", "assert", "\0", "λ", "é", "#\\a", "`", ",",
)  # fmt: skip


def token_soup() -> Expr:
    return st.lists(st.sampled_from(TOKENS), max_size=40).map(" ".join)


EXTREMES = (0.0, -0.0, 1.0, -2.5, 1e308, -1e308, 1e-308, -1e-308, 5e-324,
            float("inf"), float("-inf"), float("nan"))  # fmt: skip
EXPORT_BINARY = ("remainder", "modulo", "quotient", "logaddexp", "hypot", "atan", "max", "min",
                 "/", "-", "*", "+")  # fmt: skip
EXPORT_UNARY = ("exp", "log", "sqrt", "sigmoid", "softplus", "tanh", "abs", "-", "floor",
                "truncate", "sign", "square", "expm1", "log1p", "sin", "atan")  # fmt: skip
EXPORT_TESTS = ("nan?", "finite?", "zero?", "positive?", "negative?")


def _extend_export(kids: Expr) -> Expr:
    """Closed-form forms whose exported formulas must hold over the whole float range."""
    two = st.tuples(kids, kids)
    return st.one_of(
        st.builds(lambda op, e: f"({op} {e})", st.sampled_from(EXPORT_UNARY), kids),
        st.builds(lambda op, e: f"({op} {e[0]} {e[1]})", st.sampled_from(EXPORT_BINARY), two),
        st.builds(
            lambda op, e: f"(if ({op} {e[0]}) {e[0]} {e[1]})", st.sampled_from(EXPORT_TESTS), two
        ),  # fmt: skip
        st.builds(
            lambda op, e: f"(if ({op} {e[0]} {e[1]}) {e[0]} {e[1]})", st.sampled_from(COMPARE), two
        ),  # fmt: skip
        kids.map(lambda e: f"(/ {e} {e})"),
        kids.map(lambda e: f"(- {e} {e})"),
        kids.map(lambda e: f"(exp (log {e}))"),
    )


def export_expressions(max_leaves: int = 6) -> Expr:
    """Closed-form numeric expressions over ``a b`` and the input ``x`` for the exporters'
    differential tests (every parameter mentioned, so the parameter order is fixed)."""
    lits = st.sampled_from(("0", "1", "-1.5", "0.5", "2", "1e10", "-1e10"))
    body = st.recursive(st.sampled_from(("a", "b", "x")) | lits, _extend_export,
                        max_leaves=max_leaves)  # fmt: skip
    return body.map(lambda e: f"(params a b) (+ (* 0 a b) {e})")


def extremes(size: int = 6) -> st.SearchStrategy[list[float]]:
    """Input vectors drawn from the float range's edges (±inf, ±0, NaN, 1e±308, subnormals)."""
    return st.lists(st.sampled_from(EXTREMES), min_size=size, max_size=size)
