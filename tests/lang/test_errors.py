"""Every error class of docs/language.md with its exact position; malformed input never crashes or
hangs; limits raise promptly and leave the program reusable."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import ndvm
from ndvm.backends import registry
from ndvm.errors import (
    CompileError,
    DeadlineExceeded,
    DepthLimitExceeded,
    HeapLimitExceeded,
    LimitExceeded,
    NdvmError,
    ProgramError,
    ReadError,
    ShapeError,
    StepLimitExceeded,
    UnsupportedForm,
)


@pytest.fixture(autouse=True)
def _no_hang() -> Iterator[None]:
    def boom(signum: int, frame: Any) -> None:
        raise TimeoutError("test took longer than 30 s: a hang")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(30)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def run(src: str, params: Any = None, **kw: Any) -> Any:
    """Compile and evaluate on one lane at zero theta, raising lane errors (strict)."""
    prog = ndvm.compile(src, params, backend="reference", strict=True, **kw)
    return prog.eval(np.zeros(len(prog.params)))


def raises(src: str, cls: type[NdvmError], line: int, col: int, text: str = "", **kw: Any) -> None:
    with pytest.raises(NdvmError) as info:
        run(src, **kw)
    exc = info.value
    assert type(exc) is cls, f"{src!r}: {type(exc).__name__}: {exc}"
    assert (exc.line, exc.column) == (line, col), f"{src!r}: {exc}"
    assert text in exc.message


# -- the corpus: (source, class, line, column, message fragment) -----------------------
CORPUS = [
    # reader
    ("(+ 1 2", ReadError, 1, 1, "unbalanced '('"),
    ("(+ 1\n  (* 2 3)", ReadError, 1, 1, "missing ')'"),
    (")", ReadError, 1, 1, "unexpected ')'"),
    ("(+ 1 2))", ReadError, 1, 8, "unexpected ')'"),
    ("[1 2)", ReadError, 1, 5, "does not match"),
    ("#(1 2)", ReadError, 1, 1, "bad token '#'"),
    ("", ReadError, 1, 1, "empty program"),
    ("   ; only a comment\n", ReadError, 1, 1, "empty program"),
    ("#| only a block |#\n", ReadError, 1, 1, "empty program"),
    ("#;(a datum comment)", ReadError, 1, 1, "empty program"),
    ("(+ 1 #z)", ReadError, 1, 6, "bad token"),
    ("1.2.3", ReadError, 1, 1, "bad token"),
    ("(+ 1\n   2..5)", ReadError, 2, 4, "bad"),
    ('"abc', ReadError, 1, 1, "unterminated string"),
    ('"a\\qb"', ReadError, 1, 3, "escape"),
    ("(+ 1 #| open", ReadError, 1, 6, "unterminated block comment"),
    ("(a . )", ReadError, 1, 4, "after '.'"),
    ("( . a)", ReadError, 1, 3, "misplaced '.'"),
    ("(a . b c)", ReadError, 1, 8, "more than one datum"),
    (". a", ReadError, 1, 1, "outside a list"),
    ("'", ReadError, 1, 1, "quote"),
    ("(+ 1 ')", ReadError, 1, 7, "quote"),
    ("#;", ReadError, 1, 1, "#;"),
    ("(+ 1 `x)", ReadError, 1, 6, "quasiquote"),
    ("(+ 1 ,x)", ReadError, 1, 6, "quasiquote"),
    ("(+ 1 \0)", ReadError, 1, 6, "bad token"),
    ("(+ 1 λ)", ReadError, 1, 6, "bad token"),
    ("(+ 1 #\\a)", ReadError, 1, 6, "bad token"),
    ("(" * 100_000, ReadError, 1, 2001, "nesting"),
    ("(" * 100_000 + ")" * 100_000, ReadError, 1, 2001, "nesting"),
    ("'" * 100_000 + "1", ReadError, 1, 2001, "nesting"),
    # compile time
    ("(sin)", CompileError, 1, 1, "sin expects exactly 1"),
    ("(+ 1 (sin 1 2))", CompileError, 1, 6, "sin expects exactly 1"),
    ("(cons 1)", CompileError, 1, 1, "cons expects exactly 2"),
    ("(if)", CompileError, 1, 1, "bad if form"),
    ("(if 1 2 3 4)", CompileError, 1, 1, "bad if form"),
    ("(define)", CompileError, 1, 1, "define"),
    ("(+ 1 (define x 2))", CompileError, 1, 6, "define is only allowed"),
    ("(+ 0 (begin 1 (define x 2)))", CompileError, 1, 15, "define is only allowed"),
    ("(cond)", CompileError, 1, 1, "cond"),
    ("(cond (else 1) (#t 2))", CompileError, 1, 7, "else must be the last"),
    ("(case)", CompileError, 1, 1, "bad case form"),
    ("(quote)", CompileError, 1, 1, "quote"),
    ("(else)", CompileError, 1, 1, "else outside"),
    ("(lambda)", CompileError, 1, 1, "lambda"),
    ("(lambda (x x) x)", CompileError, 1, 12, "duplicate parameter"),
    ("(lambda (1) 1)", CompileError, 1, 10, "expected a variable name"),
    ("(let ((x 1) (x 2)) x)", CompileError, 1, 14, "duplicate binding"),
    ("(let ((x)) x)", CompileError, 1, 7, "binding"),
    ("(let loop)", CompileError, 1, 1, "let"),
    ("(do)", CompileError, 1, 1, "do"),
    ("(5 1)", CompileError, 1, 1, "cannot call a constant"),
    ("()", CompileError, 1, 1, "empty application"),
    ("(1 . 2)", CompileError, 1, 1, "dotted list"),
    ("(+ if 1)", CompileError, 1, 4, "special form 'if' used as a value"),
    ("(loop ((i 0))\n  (+ 1 (recur i)))", CompileError, 2, 8, "not in tail position"),
    ("(recur 1)", CompileError, 1, 1, "recur outside of a loop"),
    ("(loop ((i 0)) (recur 1 2))", CompileError, 1, 15, "binds 1 variable(s) but recur got 2"),
    ("(loop ((i 0)) (lambda () (recur 1)))", CompileError, 1, 26, "recur outside"),
    ("(+ 1 recur)", CompileError, 1, 6, "recur used as a value"),
    ("(params (a 1) (a 2)) a", CompileError, 1, 15, "declared twice"),
    ("(+ a 1)\n(params (a 1))", CompileError, 2, 1, "params header"),
    ("(params (a 1 bogus)) a", CompileError, 1, 14, "constraint"),
    ("(params (a 1 free 2)) a", CompileError, 1, 9, "each entry"),
    ("(params (a 1 2)) a", CompileError, 1, 14, "constraint"),
    ("(params (a 1))", CompileError, 1, 1, "no expression"),
    ("(+ 1 (params (a 1)))", CompileError, 1, 6, "params header"),
    # unsupported forms
    ("(set! x 1)", UnsupportedForm, 1, 1, "write-once"),
    ("(+ 1\n  (vector-set! v 0 1))", UnsupportedForm, 2, 3, "write-once"),
    ("(set-car! p 1)", UnsupportedForm, 1, 1, "write-once"),
    ("(call/cc (lambda (k) k))", UnsupportedForm, 1, 1, "continuations"),
    ("(dynamic-wind 1 2 3)", UnsupportedForm, 1, 1, "dynamic-wind"),
    ("(define-syntax m 1)", UnsupportedForm, 1, 1, "macros"),
    # run time
    ("(car 5)", ProgramError, 1, 1, "car: expected a pair, got a number"),
    ("(+ 1\n   (cdr '()))", ProgramError, 2, 4, "cdr"),
    ("((lambda (x) x))", ProgramError, 1, 1, "expects 1 argument(s), got 0"),
    ("(define (f x) x)\n(f 1 2)", ProgramError, 2, 1, "f: expects 1 argument(s), got 2"),
    ("(let ((f car)) (f 1 2))", ProgramError, 1, 16, "car expects exactly 1"),
    ("(+ 'a 1)", ProgramError, 1, 1, "must be a number"),
    ("(vec 'a)", ProgramError, 1, 1, "must be numbers"),
    ("(ref [1 2] 1.5)", ProgramError, 1, 1, "integer"),
    ("(ref [1 2] 2)", ProgramError, 1, 1, "out of range"),
    ("(list-ref '(1 2) 5)", ProgramError, 1, 1, "out of range"),
    ("(length 5)", ProgramError, 1, 1, "proper list"),
    ("(apply + 1)", ProgramError, 1, 1, "proper list"),
    ("('() 1)", CompileError, 1, 1, "cannot call a constant"),
    ("(let ((f 2)) (f 1))", ProgramError, 1, 14, "not a procedure"),
    ("(assert (= 1 2))", ProgramError, 1, 1, "assertion failed: (= 1 2)"),
    ('(error "bad value:" 42)', ProgramError, 1, 1, "bad value: 42"),
    ("(letrec ((a b) (b 1)) a)", ProgramError, 1, 13, "before its definition"),
    ("(iota -1)", ProgramError, 1, 1, "non-negative"),
    # shapes
    ("(dot [1 2] [1 2 3])", ShapeError, 1, 1, "dot"),
    ("(+ [1 2]\n   [1 2 3])", ShapeError, 1, 1, "+: shapes (2,) and (3,)"),
    ("(inv [1 2])", ShapeError, 1, 1, "inv"),
    ("(matmul (mat [1 2]) (mat [1 2]))", ShapeError, 1, 1, "matmul"),
    ("(mat [1 2] [1 2 3])", ShapeError, 1, 1, "mat"),
    ("(expt [1 2] [1 2 3])", ShapeError, 1, 1, "expt"),
    ("(inv (mat [1 2 3] [4 5 6]))", ShapeError, 1, 1, "inv"),
]


@pytest.mark.parametrize(("src", "cls", "line", "col", "text"), CORPUS)
def test_error_corpus(src: str, cls: type[NdvmError], line: int, col: int, text: str) -> None:
    raises(src, cls, line, col, text)


def test_every_error_class_is_covered() -> None:
    covered = {c for _, c, *_ in CORPUS}
    assert {ReadError, CompileError, UnsupportedForm, ProgramError, ShapeError} <= covered
    for cls in (ReadError, CompileError, ProgramError, LimitExceeded):
        assert issubclass(cls, NdvmError)
    assert issubclass(UnsupportedForm, CompileError)
    assert issubclass(ShapeError, ProgramError)
    for cls in (StepLimitExceeded, HeapLimitExceeded, DepthLimitExceeded, DeadlineExceeded):
        assert issubclass(cls, LimitExceeded)


def test_unbound_variable_with_explicit_params() -> None:
    raises("(+ a\n   (* 2 zz))", CompileError, 2, 9, "unbound variable 'zz'", params=["a"])
    raises("(+ a x)", CompileError, 1, 6, "unbound variable 'x'", params=["a"])


def test_header_makes_other_free_names_unbound() -> None:
    raises("(params (a 1))\n(+ a b)", CompileError, 2, 6, "unbound variable 'b'")


def test_param_and_input_clash() -> None:
    with pytest.raises(CompileError):
        ndvm.compile("(+ a x)", ["a", "x"], inputs=("x",))
    with pytest.raises(CompileError):
        ndvm.compile("(+ a x)", ["a", "a"])


def test_huge_and_special_numbers_are_not_errors() -> None:
    assert run("1e400") == np.inf
    assert run("(- 1e400)") == -np.inf
    assert np.isnan(run("+nan.0"))
    assert run("123456789012345678901234567890") == 1.2345678901234568e29


def test_error_lanes_and_message() -> None:
    prog = ndvm.compile("(if (> a 0) a\n    (car a))", strict=False)
    r = prog.evaluate(np.array([[1.0], [-1.0], [-2.0]]))
    assert r.status.ravel().tolist() == [0, 2, 2]
    ((mask, exc),) = r.errors
    assert mask[:, 0].tolist() == [False, True, True]
    assert (exc.line, exc.column, exc.lanes) == (2, 5, (1, 2))
    assert exc.located("m.scm") == "m.scm:2:5: ProgramError: car: expected a pair, got a number"


# -- limits ----------------------------------------------------------------------------
def _limited(src: str, **limits: Any) -> ndvm.Program:
    return ndvm.compile(src, backend="reference", limits=ndvm.Limits(**limits))


def _reusable(prog: ndvm.Program, cls: type[LimitExceeded]) -> None:
    t0 = time.monotonic()
    with pytest.raises(cls):
        prog.eval(np.zeros(len(prog.params)))
    assert time.monotonic() - t0 < 20
    with pytest.raises(cls):  # again: the program and the runtime are still usable
        prog.eval(np.zeros(len(prog.params)))


def test_step_limit() -> None:
    prog = _limited("(let loop ((i 0)) (loop (+ i 1)))", max_steps=100_000)
    _reusable(prog, StepLimitExceeded)
    ok = prog.with_options(limits=ndvm.Limits())
    small = ndvm.compile("(let loop ((i 0)) (if (< i 10) (loop (+ i 1)) i))", limits=prog.limits)
    assert small.eval() == 10.0
    assert ok.limits.max_steps > prog.limits.max_steps


def test_heap_limit() -> None:
    src = "(let loop ((i 0) (acc '())) (loop (+ i 1) (cons i acc)))"
    _reusable(_limited(src, max_heap=10_000), HeapLimitExceeded)
    big = _limited("(length (iota 1000))", max_heap=10_000)
    assert big.eval() == 1000.0


def test_depth_limit_on_deep_non_tail_recursion() -> None:
    src = "(define (f n) (if (= n 0) 0 (+ 1 (f (- n 1)))))\n(f 1000000)"
    prog = ndvm.compile(src, backend="reference")  # default limits
    _reusable(prog, DepthLimitExceeded)
    shallow = _limited(src.replace("1000000", "100"), max_depth=1000)
    assert shallow.eval() == 100.0


def test_deadline() -> None:
    # no step or heap limit can come first (a loop allocates a frame each turn)
    prog = _limited("(let loop ((i 0)) (loop (+ i 1)))", deadline=0.3, max_steps=10**12,
                    max_heap=10**12)  # fmt: skip
    t0 = time.monotonic()
    _reusable(prog, DeadlineExceeded)
    assert time.monotonic() - t0 < 5


@pytest.mark.parametrize("backend", registry.available())
def test_runaway_lane_fails_alone(backend: str) -> None:
    """At the step limit only the lanes still running fail; the finished lanes keep values."""
    prog = ndvm.compile(
        "(if (> a 0) (let loop ((i 0)) (loop (+ i 1))) a)",
        strict=False,
        backend=backend,
        limits=ndvm.Limits(max_steps=50_000),
    )
    out = prog.eval(np.array([[1.0], [-1.0]]))
    assert out.status.tolist() == [2, 0]
    assert np.isnan(out[0]) and out[1] == -1.0
    ((mask, err),) = out.errors
    assert isinstance(err, StepLimitExceeded) and err.lanes == (0,)
    assert mask.tolist() == [[True], [False]]
    with pytest.raises(StepLimitExceeded):  # every lane failed: the default raises
        prog.with_options(strict=None).eval(np.array([[1.0], [2.0]]))
    assert prog.eval(np.array([[-1.0], [-2.0]])).tolist() == [-1.0, -2.0]


def test_bad_limits_rejected() -> None:
    with pytest.raises(ValueError):
        ndvm.Limits(max_steps=0)
    with pytest.raises(ValueError):
        ndvm.Limits(deadline=-1)


def test_api_misuse_is_ndvm_error() -> None:
    prog = ndvm.compile("(* a x)", inputs=("x",))
    with pytest.raises(NdvmError, match="missing input"):
        prog.eval(np.zeros(1))
    with pytest.raises(NdvmError, match="unknown input"):
        prog.eval(np.zeros(1), x=1.0, y=2.0)
    with pytest.raises(NdvmError, match="theta must have shape"):
        prog.eval(np.zeros(3), x=1.0)
    with pytest.raises(NdvmError, match="data lanes"):
        ndvm.compile("(* x y)", [], inputs=("x", "y")).eval(None, x=[1, 2], y=[1, 2, 3])
    with pytest.raises(NdvmError):
        ndvm.compile("1", dtype="float16")
    with pytest.raises(NdvmError):
        ndvm.compile("1", dialect="nope")
    with pytest.raises(NdvmError):
        ndvm.compile("1", backend="nope")
    with pytest.raises(ReadError):
        ndvm.compile(b"(+ 1 2)")  # type: ignore[arg-type]
