"""The hostile corpus: programs and inputs that have broken (or could break) a promise of
docs/language.md, each with the outcome it must have on every backend.

A case runs under ``LIMITS`` (a small deadline) unless it names its own limits. ``expect`` is
``"value"`` (the evaluation returns; ``status`` then gives the per-lane statuses and
``lane_errors`` the classes of the lane errors, in order) or the name of the ``NdvmError``
subclass it must raise (``strict=None``: it raises when every lane failed); ``"A|B"`` allows
either. ``positioned`` requires a line and column on the raised error or the lane errors.
``cli`` cases run ``ndvm`` in process and must exit non-zero (2 for bad input, 1 for a run
that failed) with a one-line message (or 0 when ``expect`` is ``"value"``). The supervisor
(``supervisor.py``) runs every case in a worker process and reports crashes and hangs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DEADLINE = 0.5
LIMITS: dict[str, Any] = {"deadline": DEADLINE}


@dataclass(frozen=True)
class Case:
    name: str
    category: str
    source: str = ""
    expect: str = "value"
    theta: Any = None  # None: one lane at the initial theta
    inputs: dict[str, Any] = field(default_factory=dict)
    limits: dict[str, Any] = field(default_factory=dict)
    status: tuple[int, ...] | None = None
    lane_errors: tuple[str, ...] | None = None
    positioned: bool = False
    cli: tuple[str, ...] = ()  # ndvm arguments; "{src}" / "{csv}" are temporary files
    csv: str = ""  # contents of the temporary CSV file of a cli case
    grad: bool = True
    params: tuple[Any, ...] | None = None  # ndvm.compile(params=...)
    hang_after: float | None = None  # seconds before it counts as a hang (default: see supervisor)


DAG = "(let loop ((l '()) (k 0)) (if (= k 60) l (loop (cons l l) (+ k 1))))"
DEEP = "(let loop ((l '()) (k 0)) (if (= k 20000) l (loop (list l) (+ k 1))))"
RUNAWAY = "(let loop ((i 0)) (loop (+ i 1)))"
LANES3 = [[0.0], [5.0], [6.0]]
SMALL_STEPS = {"max_steps": 5_000, "deadline": 5.0}
# Runaway lanes that must end at the deadline: no step or heap limit can come first (a loop
# allocates a frame each turn: the default 20M-cell heap is reached in about a second here,
# sooner on a faster machine). Memory stays bounded by what 0.2 s can allocate.
AT_DEADLINE = {"max_steps": 10**12, "max_heap": 10**12, "deadline": 0.2}


def _fit(y: str = "y", *extra: str) -> tuple[str, ...]:
    return ("fit", "{src}", "--data", "{csv}", "--x", "x", "--y", y, *extra)


BULK_LIMITS = {"deadline": 1.0}
BULK_END = "DeadlineExceeded|HeapLimitExceeded|StepLimitExceeded|value"
DOUBLED = (
    "(let loop ((v (vec a)) (k 0)) (if (= k 40) (vlen v) "
    "(loop (list->vector (append (vector->list v) (vector->list v))) (+ k 1))))"
)


def _bulk(name: str, source: str, expect: str = BULK_END) -> Case:
    """Bulk list/vector work under a 1 s deadline: it must end, typed, within 6 s."""
    return Case(name, "bulk", source, expect, limits=BULK_LIMITS, hang_after=6.0, grad=False)


def _many(n: int) -> str:
    return "(+ a" + " 1" * n + ")"


CASES: list[Case] = [
    # 1. shared structure and deep results
    Case("dag-result", "sharing", DAG),
    Case("dag-car-apply", "sharing", f"(apply car (list {DAG}))"),
    Case("dag-equal-self", "sharing", f"(equal? {DAG} {DAG})"),
    Case("dag-assoc", "sharing", f"(assoc {DAG} (list (cons {DAG} 1)))"),
    Case("dag-member", "sharing", f"(member {DAG} (list 1 {DAG}))"),
    Case("dag-length", "sharing", f"(length {DAG})"),
    Case("dag-list-of", "sharing", f"(let ((d {DAG})) (list d d d))"),
    Case("dag-error-irritant", "sharing", f'(error "bad" {DAG})', "ProgramError", positioned=True),
    Case("dag-assoc-value", "sharing", f"(cdr (assoc 'k (list (cons 'k {DAG}))))"),
    Case(
        "dag-error-lanes", "sharing", f'(if (> a 0) (error "bad" {DAG}) a)', theta=[[1.0], [-1.0]]
    ),
    # the reference backend builds it in about 1.7 s here: 20 s leaves room for a loaded machine
    Case("deep-100k", "sharing", DEEP.replace("20000", "100000"), limits={"deadline": 20.0}),
    Case("dag-lane-split", "sharing", f"(if (> a 0) {DAG} (list a))", theta=[[1.0], [-1.0]]),
    Case("deep-result", "sharing", DEEP, limits={"deadline": 5.0}),
    Case("deep-equal", "sharing", f"(let ((d {DEEP})) (equal? d d))", limits={"deadline": 5.0}),
    Case(
        "deep-vector-list",
        "sharing",
        "(let loop ((l '()) (k 0)) (if (= k 3000) l (loop (cons (vec k a) l) (+ k 1))))",
        limits={"deadline": 5.0},
    ),
    Case("dag-eval-text", "sharing", DAG, cli=("eval", "{src}")),  # printed with #n= labels
    Case("dag-eval-json", "sharing", DAG, cli=("eval", "{src}", "--json"), expect="NdvmError"),
    Case("deep-eval-text", "sharing", DEEP, cli=("eval", "{src}")),
    Case("deep-eval-json", "sharing", DEEP, cli=("eval", "{src}", "--json")),
    # 1b. bulk primitives under a deadline
    _bulk("bulk-apply-iota", "(length (apply list (iota 3000000)))"),
    _bulk("bulk-iota", "(+ a (length (iota 3000000)))"),
    _bulk("bulk-iota-param", "(length (iota 3000000 a))"),
    _bulk("bulk-make-vector", "(vlen (make-vector 3000000 a))"),
    _bulk("bulk-reduce", "(reduce + 0 (iota 3000000))"),
    _bulk("bulk-fold", "(fold-left + a (iota 3000000))"),
    _bulk("bulk-error-irritant", "(error (make-vector 10000000 1))", "ProgramError|Deadline"),
    _bulk("bulk-vector-doubling", DOUBLED),
    _bulk("bulk-apply-vec", "(vlen (apply vec (iota 3000000)))"),
    _bulk("bulk-reverse-append", "(let ((l (iota 3000000))) (length (append l (reverse l))))"),
    _bulk("bulk-vector-list", "(length (vector->list (make-vector 3000000 a)))"),
    _bulk("bulk-rest-args", "(apply (lambda xs (length xs)) (iota 3000000))"),
    # 2. compilation size and big kernels
    Case("many-args", "size", _many(1_000_000), "CompileError", positioned=True),
    Case(
        "many-forms-quoted",
        "size",
        "(length '(" + "1 " * 200_000 + "))",
        "CompileError",
        positioned=True,
    ),
    Case("huge-source", "size", " " * 6_000_000 + "1", "ReadError"),
    Case("deep-nesting", "size", "(" * 100_000 + "1" + ")" * 100_000, "ReadError"),
    Case(
        "det-matmul",
        "size",
        "(+ a (det (matmul (ones 700 700) (ones 700 700))))",
        "DeadlineExceeded|value",
        limits={"deadline": 0.2},
    ),
    Case(
        "inv-eye",
        "size",
        "(+ a (trace (inv (eye 700))))",
        "DeadlineExceeded|value",
        limits={"deadline": 0.2},
    ),
    Case(
        "matmul-loop",
        "size",
        "(let loop ((k 0) (m (eye 200))) (if (= k 1000000) (trace m) (loop (+ k 1) (matmul m m))))",
        "DeadlineExceeded",
    ),
    # 3. lane-divergent indices
    Case(
        "ref-out-of-range",
        "index",
        "(ref (vec 1 2 3) (floor a))",
        theta=LANES3,
        status=(0, 2, 2),
        lane_errors=("ProgramError", "ProgramError"),
        positioned=True,
    ),
    Case(
        "list-ref-out-of-range",
        "index",
        "(list-ref (list 1 2 3) (floor a))",
        theta=LANES3,
        status=(0, 2, 2),
        lane_errors=("ProgramError", "ProgramError"),
        positioned=True,
    ),
    Case(
        "list-tail-negative",
        "index",
        "(length (list-tail (list 1 2 3) (- (floor a) 1)))",
        theta=[[1.0], [0.0], [5.0]],
        status=(0, 2, 2),
        positioned=True,
    ),
    Case(
        "ref-non-integer",
        "index",
        "(ref (vec 1 2 3) a)",
        theta=[[0.5], [1.0], [1.5]],
        status=(2, 0, 2),
    ),
    Case(
        "list-ref-non-integer",
        "index",
        "(list-ref (list 1 2 3) a)",
        theta=[[0.5], [1.5], [2.5]],
        expect="ProgramError",
        positioned=True,
    ),
    Case(
        "ref-two-indices",
        "index",
        "(ref (mat (vec 1 2) (vec 3 4)) (floor a) (floor b))",
        theta=[[0, 0], [1, 0], [0, 1], [1, 5]],
        status=(0, 0, 0, 2),
    ),
    Case(
        "ref-nan-index", "index", "(ref (vec 1 2 3) (/ 0 a))", theta=[[0.0], [1.0]], status=(2, 0)
    ),
    Case(
        "make-vector-divergent",
        "index",
        "(vsum (make-vector (floor a) 1))",
        theta=[[2.0], [-1.0], [3.0]],
        status=(0, 2, 0),
    ),
    Case(
        "iota-huge",
        "index",
        "(length (iota (* a 1e12)))",
        "HeapLimitExceeded",
        theta=[[1.0], [0.0]],
        limits={"max_heap": 1_000_000, "deadline": DEADLINE},
    ),
    # 4. runaway lanes
    Case(
        "runaway-one-lane",
        "runaway",
        f"(if (> a 0) {RUNAWAY} a)",
        theta=[[1.0], [-1.0]],
        limits=SMALL_STEPS,
        status=(2, 0),
        lane_errors=("StepLimitExceeded",),
    ),
    Case(
        "runaway-divergent-loop",
        "runaway",
        "(let loop ((i 0)) (if (< i (* 10 a)) (loop (+ i 1)) i))",
        theta=[[1.0], [1e12]],
        limits=SMALL_STEPS,
        status=(0, 2),
        lane_errors=("StepLimitExceeded",),
    ),
    Case(
        "runaway-every-lane",
        "runaway",
        "(let loop ((i a)) (loop (+ i 1)))",
        "StepLimitExceeded",
        theta=[[1.0], [2.0]],
        limits=SMALL_STEPS,
    ),
    Case(
        "deep-recursion-one-lane",
        "runaway",
        "(define (f n) (if (> n 0) (+ 1 (f n)) 0)) (f a)",
        theta=[[1.0], [-1.0]],
        limits={"max_depth": 2_000, "deadline": 5.0},
        status=(2, 0),
        lane_errors=("DepthLimitExceeded",),
    ),
    Case(
        "runaway-deadline",
        "runaway",
        RUNAWAY,
        "DeadlineExceeded",
        limits=AT_DEADLINE,
    ),
    Case(
        "runaway-deadline-lanes",
        "runaway",
        f"(if (> a 0) {RUNAWAY} a)",
        theta=[[1.0], [-1.0]],
        limits=AT_DEADLINE,
        status=(2, 0),
        lane_errors=("DeadlineExceeded",),
    ),
    Case(
        "runaway-deadline-all",
        "runaway",
        f"(if (> a 0) {RUNAWAY} (begin a {RUNAWAY}))",
        "DeadlineExceeded",
        theta=[[1.0], [-1.0]],
        limits=AT_DEADLINE,
    ),
    Case(
        "deadline-after-finished",
        "runaway",
        f"(if (> a 0) (* 2 a) {RUNAWAY})",
        theta=[[1.0], [-1.0]],
        limits=AT_DEADLINE,
        status=(0, 2),
        lane_errors=("DeadlineExceeded",),
    ),
    Case(
        "deadline-divergent-loop",
        "runaway",
        "(let loop ((i 0)) (if (< i (* 10 a)) (loop (+ i 1)) i))",
        theta=[[1.0], [1e12], [0.5]],
        limits=AT_DEADLINE,
        status=(0, 2, 0),
        lane_errors=("DeadlineExceeded",),
    ),
    Case(
        "heap-runaway",
        "runaway",
        "(let loop ((l '())) (loop (cons a l)))",
        "HeapLimitExceeded",
        limits={"max_heap": 50_000, "deadline": 5.0},
    ),
    Case(
        "closure-runaway",
        "runaway",
        "(let loop ((f (lambda () 1))) (loop (lambda () f)))",
        "HeapLimitExceeded|StepLimitExceeded|DeadlineExceeded",
        limits={"max_heap": 50_000, "deadline": 2.0},
    ),
    # 5. untyped errors: payload cap, ragged inputs, parameter constraints
    Case("zeros-huge", "payload", "(zeros 100000 100000)", "ProgramError", positioned=True),
    Case("outer-huge", "payload", "(outer (ones 65536) (ones 65536))", "HeapLimitExceeded"),
    Case("eye-huge", "payload", "(eye 100000)", "ProgramError", positioned=True),
    Case(
        "vector-growth",
        "payload",
        "(let loop ((k 0) (v (ones 10000000))) (if (= k 100) k (loop (+ k 1) (+ v 1))))",
        "HeapLimitExceeded|DeadlineExceeded",
    ),
    Case(
        "make-vector-too-long",
        "payload",
        "(make-vector 100000000 a)",
        "ProgramError",
        positioned=True,
    ),
    Case(
        "ragged-input",
        "payload",
        "(* a x)",
        "NdvmError",
        inputs={"x": [[1, 2], [3]]},
        positioned=True,
    ),
    Case("string-input", "payload", "(* a x)", "NdvmError", inputs={"x": "abc"}, positioned=True),
    Case(
        "rank3-input",
        "payload",
        "(* a x)",
        "NdvmError",
        inputs={"x": [[[1.0]], [[2.0]]]},
        positioned=True,
    ),
    Case("ragged-theta", "payload", "(* a b)", "NdvmError", theta=[[1.0, 2.0], [3.0]]),
    Case(
        "params-positive",
        "payload",
        "(params (a -1.0 positive)) a",
        "CompileError",
        positioned=True,
    ),
    Case("params-unit", "payload", "(params (p 1.0 unit)) p", "CompileError", positioned=True),
    Case(
        "params-signed", "payload", "(params (s -3 signed-unit)) s", "CompileError", positioned=True
    ),
    Case("params-api-positive", "payload", "a", "CompileError", params=(("a", -1.0, "positive"),)),
    # 6. files given to the CLI
    Case("csv-header-only", "files", "(* a x)", "NdvmError", cli=_fit(), csv="x,y\n"),
    Case("csv-empty", "files", "(* a x)", "NdvmError", cli=_fit(), csv=""),
    Case("csv-nul", "files", "(* a x)", "NdvmError", cli=_fit(), csv="x,y\n1,\x002\n"),
    Case("csv-short-row", "files", "(* a x)", "NdvmError", cli=_fit(), csv="x,y\n1\n2,3\n"),
    Case("csv-missing-column", "files", "(* a x)", "NdvmError", cli=_fit("z"), csv="x,y\n1,2\n"),
    Case("csv-text", "files", "(* a x)", "NdvmError", cli=_fit(), csv="x,y\na,b\n"),
    Case(
        "csv-ok", "files", "(* a x)", "value", cli=_fit("y", "--steps", "3"), csv="x,y\n1,2\n2,4\n"
    ),
    Case("eval-garbage", "files", "(((", cli=("eval", "{src}"), expect="NdvmError"),
    Case(
        "eval-bad-param",
        "files",
        "(* a 2)",
        cli=("eval", "{src}", "--param", "zz=1"),
        expect="NdvmError",
    ),
    # already covered elsewhere, kept here so every backend meets them under the supervisor
    Case(
        "unbound", "covered", "(+ a undefined-name)", "CompileError", params=("a",), positioned=True
    ),
    Case("set-bang", "covered", "(set! a 1)", "UnsupportedForm", positioned=True),
    Case("call-cc", "covered", "(call/cc (lambda (k) (k 1)))", "UnsupportedForm", positioned=True),
    Case("car-number", "covered", "(car a)", "ProgramError", positioned=True),
    Case("arity", "covered", "((lambda (x) x) a a)", "ProgramError", positioned=True),
    Case("prim-arity", "covered", "(cons a)", "CompileError", positioned=True),
    Case("call-number", "covered", "(a 1)", "CompileError", positioned=True),  # never a param
    Case("call-local-number", "covered", "(let ((f 2)) (f 1))", "ProgramError", positioned=True),
    Case("apply-improper", "covered", "(apply + (cons 1 a))", "ProgramError", positioned=True),
    Case(
        "assert-lanes",
        "covered",
        "(begin (assert (> a 0)) a)",
        theta=[[1.0], [-1.0]],
        status=(0, 2),
        lane_errors=("ProgramError",),
    ),
    Case(
        "error-lanes",
        "covered",
        '(if (> a 0) (error "neg" a) a)',
        theta=[[1.0], [-1.0]],
        status=(2, 0),
    ),
    Case("shape-mismatch", "covered", "(+ (vec a 1) (vec 1 2 3))", "ShapeError", positioned=True),
    Case("inv-singular", "covered", "(det (inv (mat (vec a 0) (vec 0 0))))", status=(1,)),
    # the gradient of det at a matrix with an infinite entry (LAPACK's SVD may not return)
    Case(
        "det-grad-inf",
        "covered",
        "(det (mat (vec a 0 (* 1e300 1e300)) (vec a 1.5 0) (vec 1 a 2)))",
        theta=[[0.5], [-1.0]],
        status=(1, 1),
    ),
    Case("nan-inf", "covered", "(list (/ a 0) (log (- a)) +nan.0 1e400)", grad=False),
    Case("huge-literal", "covered", "(* a 1e400)"),
    Case("unicode", "covered", '(begin "λé\\n\\t" a)'),
    Case("nul-char", "covered", "(+ a \0 1)", "ReadError|CompileError"),
    Case("unterminated-string", "covered", '(+ a "abc', "ReadError", positioned=True),
    Case("unterminated-comment", "covered", "#| (+ a 1)", "ReadError", positioned=True),
    Case("quasiquote", "covered", "`(a ,a)", "ReadError", positioned=True),
    Case(
        "mutual-recursion",
        "covered",
        "(define (ev n) (if (= n 0) #t (od (- n 1)))) "
        "(define (od n) (if (= n 0) #f (ev (- n 1)))) (if (ev 1000) a 0)",
    ),
    Case(
        "tail-loop-long",
        "covered",
        "(let loop ((k 0)) (if (= k 5000) (* a k) (loop (+ k 1))))",
        limits={"deadline": 5.0},
    ),
    Case(
        "divergent-structure",
        "covered",
        "(let ((u (if (> a 0) (list a) a))) (if (pair? u) (car u) (* 2 u)))",
        theta=[[1.0], [-1.0]],
    ),
    Case("empty-program", "covered", "  ; nothing\n", "ReadError"),
    Case("params-twice", "covered", "(params a a) a", "CompileError", positioned=True),
    Case("recur-outside", "covered", "(recur 1)", "CompileError", positioned=True),
    Case("vector-of-lists", "covered", "(vec (list a) 1)", "ProgramError", positioned=True),
    Case("mat-ragged", "covered", "(mat (vec a 1) (vec 1))", "ShapeError", positioned=True),
    Case("string-arith", "covered", '(+ a "s")', "ProgramError", positioned=True),
]
