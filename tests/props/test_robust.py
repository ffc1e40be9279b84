"""Printing round-trips, and the front end / evaluator only ever raise NdvmError."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.helpers.genprog import TOKENS, programs, token_soup

import ndvm
from ndvm.lang.datum import SList, to_source
from ndvm.lang.reader import read

LIMITS = ndvm.Limits(max_steps=100_000, max_heap=100_000, max_depth=5_000, deadline=2.0)
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))


@contextmanager
def time_limit(seconds: int = 10) -> Iterator[None]:
    def boom(signum: int, frame: Any) -> None:
        raise TimeoutError(f"no answer within {seconds} s: a hang")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def strip(d: Any) -> Any:
    """A datum without source positions, for comparison."""
    if isinstance(d, SList):
        return ("list", tuple(strip(x) for x in d.items), strip(d.tail) if d.tail else None)
    return (type(d).__name__, str(d))


def run_any(src: str) -> None:
    """Compile and run; only NdvmError may escape."""
    with time_limit():
        try:
            prog = ndvm.compile(src, inputs=("x",), backend="reference", limits=LIMITS)
            theta = np.zeros((2, len(prog.params))) + np.array([[0.5], [-1.5]])
            prog.evaluate(theta, {"x": 0.25}, grad=True)
        except ndvm.NdvmError:
            pass


@SETTINGS
@given(programs())
def test_print_read_round_trip(src: str) -> None:
    data = read(src)
    printed = " ".join(to_source(d) for d in data)
    again = read(printed)
    assert [strip(d) for d in again] == [strip(d) for d in data]
    a = ndvm.compile(src, inputs=("x",))
    b = ndvm.compile(printed, inputs=("x",))
    assert (a.params, a.skeleton) == (b.params, b.skeleton)
    th = np.array([[0.3, -0.7, 1.1]])
    np.testing.assert_array_equal(
        a.evaluate(th, {"x": 0.5}).value, b.evaluate(th, {"x": 0.5}).value
    )


@SETTINGS
@given(programs())
def test_generated_programs_raise_only_ndvm_errors(src: str) -> None:
    run_any(src)


@SETTINGS
@given(token_soup())
def test_token_soup_raises_only_ndvm_errors(src: str) -> None:
    run_any(src)


@SETTINGS
@given(programs(), st.data())
def test_mutated_programs_raise_only_ndvm_errors(src: str, data: st.DataObject) -> None:
    cut = data.draw(st.integers(0, len(src)))
    token = data.draw(st.sampled_from(TOKENS))
    where = data.draw(st.integers(0, len(src)))
    run_any(src[:cut])  # truncation
    run_any(src[:where] + token + src[where:])  # insertion
    run_any(src[:where] + src[where + 1 :])  # deletion


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 200_000), st.sampled_from(["(", "[", "'", "#;", "(lambda (a) ", "(car "]))
def test_deep_nesting_raises_only_ndvm_errors(depth: int, opener: str) -> None:
    closer = {"(": ")", "[": "]", "'": "", "#;": "", "(lambda (a) ": ")", "(car ": ")"}[opener]
    run_any(opener * depth + "1" + closer * depth)
    run_any(opener * depth)
