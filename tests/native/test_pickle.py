"""Compiled programs pickle (for worker processes): the unpickled program runs from its IR
records and gives the same values and gradients, bitwise, on every backend."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ndvm
from ndvm.calibrate.losses import TARGET, augmented

X = np.linspace(-1.0, 2.0, 7)
SOURCES = [
    ("(params (a 1.0) (k 0.5 positive))\n(* a (exp (- (* k x))))", None),
    ("(define (f t) (if (< t 0) (* a t) (* b (sqrt (+ t 1)))))\n(+ (f x) (f (- x 1)))", None),
    ("(let ((u (* a x)) (v (+ u b))) (* u v))", "dmci"),  # the dialect's sequential let
    ("(let loop ((i 0) (s 0)) (if (= i 4) (+ s x) (loop (+ i 1) (+ s (* a i)))))", None),
]


@pytest.mark.parametrize("backend", ["native", "vm", "reference"])
@pytest.mark.parametrize("source,dialect", SOURCES)
def test_a_program_pickles_and_runs_the_same(backend: str, source: str, dialect: str) -> None:
    program = ndvm.compile(source, inputs=("x",), backend=backend, dialect=dialect)
    theta = np.random.default_rng(3).uniform(0.2, 1.2, size=(3, len(program.params)))
    value, grad = program.value_and_grad(theta, x=X)  # lowered (and derived) before pickling
    copy = pickle.loads(pickle.dumps(program))
    assert copy == program and copy.compiled.front is None
    v2, g2 = copy.value_and_grad(theta, x=X)
    assert np.asarray(v2).tobytes() == np.asarray(value).tobytes()
    assert g2.tobytes() == grad.tobytes()


def test_an_augmented_program_pickles() -> None:
    """Built from IR records, with no source of its own: the records are what travel."""
    model = ndvm.compile("(* a (sin (* b x)))", inputs=("x",), backend="native")
    aug = augmented(model)
    copy = pickle.loads(pickle.dumps(aug))
    theta = np.array([[0.7, 1.3], [1.1, -0.4]])
    inputs = {"x": X, TARGET: np.cos(X)}
    assert copy.eval(theta, **inputs).tobytes() == aug.eval(theta, **inputs).tobytes()


def test_a_calibration_pickles_with_its_program() -> None:
    y = 2.0 * np.exp(-0.7 * X)
    fit = ndvm.calibrate("(* a (exp (- (* k x))))", {"x": X}, y, steps=60, backend="native")
    copy = pickle.loads(pickle.dumps(fit))
    assert copy.params == fit.params and copy.r2 == fit.r2
    np.testing.assert_allclose(copy.predict(), fit.predict(), rtol=0, atol=0)
    np.testing.assert_allclose(copy.cov, fit.cov, rtol=1e-9, atol=1e-15)  # recomputed there


def _number(f: float) -> str:
    if f != f:
        return "+nan.0"
    if f in (float("inf"), float("-inf")):
        return "+inf.0" if f > 0 else "-inf.0"
    return repr(f)


def _string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# every kind of datum the reader accepts, as source text: symbols, numbers (with the
# infinities, NaN and -0.0), booleans, strings with escapes, (), nested lists, [...] vectors
_atoms = st.one_of(
    st.sampled_from(["a", "b", "foo", "+", "x?", "->y", "list->vector"]),
    st.floats(width=64).map(_number),
    st.sampled_from(["#t", "#f", "#true", "#false", "()"]),
    st.text(alphabet='ab "\\', max_size=4).map(_string),
)
DATA = st.recursive(
    _atoms,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda xs: "(" + " ".join(xs) + ")"),
        st.lists(inner, min_size=1, max_size=3).map(lambda xs: "[" + " ".join(xs) + "]"),
    ),
    max_leaves=12,
)


def _round_trip(source: str, backend: str) -> None:
    program = ndvm.compile(source, inputs=("x",), backend=backend)
    value = program.eval([], x=X)
    copy = pickle.loads(pickle.dumps(program))
    assert repr(copy.compiled.body) == repr(program.compiled.body)  # symbols stay symbols
    assert repr(copy.eval([], x=X)) == repr(value)


@pytest.mark.parametrize("backend", ["native", "vm", "reference"])
@pytest.mark.parametrize(
    "source",
    ["(if (eq? 'a 'a) x 1.0)", "(if (eq? (car '(a b)) 'a) x 2.0)", "(if (null? '()) x 0.0)",
     "(list 'a \"b\" #t '(c [1 2]) x)", "(length '(1 2 (3 4) \"s\" #t #f () a))",
     "(if (equal? '(a (b)) (list 'a (list 'b))) x 0.0)",
     "(quote (" + " ".join(map(str, range(20_000))) + "))"],  # not one pickle level per cell
)  # fmt: skip
def test_quoted_data_pickle(backend: str, source: str) -> None:
    """Quoted symbols are unpickled interned (``eq?`` holds), ``()`` as the one empty list."""
    _round_trip(source, backend)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(datum=DATA, backend=st.sampled_from(["native", "vm", "reference"]))
def test_every_datum_the_reader_accepts_pickles(datum: str, backend: str) -> None:
    _round_trip(f"(list (quote {datum}) (eq? (quote {datum}) (quote {datum})) x)", backend)
