"""The native front end reuses one arena per thread from one compile to the next: a compile
after any other (a large one, one that failed while reading or resolving, one inside another
through the host's params function) gives the tables a compile in a fresh process gives."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ndvm
from ndvm import _core
from ndvm.errors import CompileError, ReadError
from ndvm.eval.limits import Limits

LIM = Limits()
PROGRAMS = (
    "(* a (exp (- (* b x 3.25))) (cos (+ (* c x) d)))",
    "(params (a 1.0) (k 0.5 positive) (w 2.0))\n"
    "(let* ((u (* k x)) (v (sin (+ (* w x) 1.5))))\n  (+ (* a (exp (- u))) (* v v)))",
    "(define (f t) (if (< t 0) (* a t) (* b (sqrt (+ t 0.5)))))\n"
    "(cond ((> x 2) (f (- x 2))) ((> x 1) (+ (f x) c)) (else (* d (f (abs x)))))",
    '(fold-left (lambda (acc v) (+ acc (* w v))) 0 (list x \'q "s" #t))',
)
# many distinct names and data: past what the arena keeps between compiles
LARGE = "(+ " + " ".join(f"(* p{i} x {i}.5)" for i in range(1500)) + ")"
FAILING = ("(+ a (* b x)", "(lambda)", "(+ a ) )", "(let ((x 1) (x 2)) x)", "(if)")


def _compile(source: str, params: Any = None) -> Any:
    return _core.front_compile(source, params, ["x"], LIM.max_source_chars, LIM.max_forms, False)


def _tables(fp: Any) -> tuple[Any, ...]:
    """Everything a FrontProgram gives: its fields, parameter rows, IR records and strings."""
    _, strings = fp.lower()
    return (fp.fields, fp.params, fp.n_nodes, fp.body(), tuple(strings))


def test_fields_are_the_properties() -> None:
    for src in PROGRAMS:
        fp = _compile(src)
        assert fp.fields == (fp.params_key, fp.has_header, fp.prelude, fp.input_positions)


def test_tables_do_not_depend_on_earlier_compiles() -> None:
    first = [_tables(_compile(src)) for src in PROGRAMS]
    assert _compile(LARGE).n_nodes > 4500
    for bad in FAILING:
        with pytest.raises((ReadError, CompileError)):
            _compile(bad)
    again = [_tables(_compile(src)) for src in reversed(PROGRAMS)][::-1]
    assert again == first
    for bad in FAILING:  # the same errors, at the same places, after the reuse
        with pytest.raises((ReadError, CompileError)) as one:
            _compile(bad)
        with pytest.raises((ReadError, CompileError)) as two:
            _compile(bad)
        assert (type(one.value), str(one.value)) == (type(two.value), str(two.value))


def test_a_compile_inside_a_compile_has_its_own_arena() -> None:
    want_outer = _tables(_compile(PROGRAMS[1]))
    want_inner = [_tables(_compile(src)) for src in PROGRAMS]
    inner: list[Any] = []

    def specs(header: tuple[tuple[Any, ...], ...]) -> list[tuple[Any, ...]]:
        # the host's params function runs while the outer compile holds the arena
        inner.extend(_tables(_compile(src)) for src in PROGRAMS)
        with pytest.raises(ReadError):
            _compile(FAILING[0])
        return list(header)

    got = _tables(_compile(PROGRAMS[1], specs))
    assert inner == want_inner
    assert got == want_outer
    assert _tables(_compile(PROGRAMS[1])) == want_outer


@pytest.mark.parametrize("n", [3, 16, 17, 40])
@pytest.mark.parametrize("header", [True, False])
def test_parameter_and_input_names_at_any_count(n: int, header: bool) -> None:
    """The resolver finds names by a scan up to 16 and by a map beyond: each parameter and
    input is the one its name says, declared or inferred, at counts on both sides."""
    terms = " ".join(f"(* {i + 1} p{i} u{n - 1 - i})" for i in range(n))
    src = f"(+ {terms})"
    if header:
        src = "(params " + " ".join(f"(p{i} 0.0)" for i in range(n)) + ")\n" + src
    inputs = tuple(f"u{i}" for i in range(n))
    prog = ndvm.compile(src, inputs=inputs, backend="native", free_params=True)
    assert prog.params == tuple(f"p{i}" for i in range(n))
    rng = np.random.default_rng(n)
    theta, data = rng.normal(size=n), rng.normal(size=n)
    got = prog.eval(theta, {f"u{i}": data[i] for i in range(n)})
    want = sum((i + 1) * theta[i] * data[n - 1 - i] for i in range(n))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    ref = prog.with_options(backend="reference")
    np.testing.assert_array_equal(got, ref.eval(theta, {f"u{i}": data[i] for i in range(n)}))


def _name_hash(name: str) -> int:
    """The arena's hash of a name (FNV-1a, low bit set: ``name_hash`` in ndvm/front.hpp)."""
    h = 2166136261
    for byte in name.encode():
        h = ((h ^ byte) * 16777619) & 0xFFFFFFFF
    return h | 1


def test_names_of_one_hash_stay_distinct() -> None:
    # two names of one length and one hash: the look-up tells them apart by their text
    a, b = "afgyb", "cbcdh"
    assert _name_hash(a) == _name_hash(b)
    prog = ndvm.compile(f"(+ (* {a} x) {b} {a} '{b})", inputs=("x",), free_params=True)
    assert prog.params == (a, b)
    prog = ndvm.compile(f"(+ (* {a} x) {b} {a})", inputs=("x",), free_params=True)
    value = prog.eval(np.array([2.0, 3.0]), x=1.5)
    assert float(value) == 2.0 * 1.5 + 3.0 + 2.0
