"""The front end's size limits (Limits.max_source_chars, Limits.max_forms) raise typed,
positioned errors, so huge programs fail without compiling them."""

from __future__ import annotations

import pytest

import ndvm
from ndvm.errors import CompileError, ReadError
from ndvm.lang.front import compile_source


def test_a_million_arguments_is_a_positioned_compile_error() -> None:
    src = "(+ a" + " 1" * 1_000_000 + ")"
    with pytest.raises(CompileError, match="Limits.max_forms") as info:
        ndvm.compile(src)
    # the first form past the default 50000: "(" and "a" are forms 1 and 2
    assert (info.value.line, info.value.column) == (1, 6 + 2 * (50_000 - 3))


@pytest.mark.parametrize("n,ok", [(9, True), (10, True), (11, False)])
def test_max_forms_counts_atoms_strings_and_lists(n: int, ok: bool) -> None:
    limits = ndvm.Limits(max_forms=10)
    src = "(list" + ' "s"' * (n - 2) + ")"  # the list, the symbol list, n - 2 strings
    if ok:
        assert len(ndvm.compile(src, limits=limits).eval()[()]) == n - 2
    else:
        with pytest.raises(CompileError, match="more than 10 forms"):
            ndvm.compile(src, limits=limits)


def test_quoted_data_counts_too() -> None:
    with pytest.raises(CompileError):
        compile_source("(length '(" + "1 " * 200 + "))", limits=ndvm.Limits(max_forms=100))


def test_max_source_chars() -> None:
    with pytest.raises(ReadError, match="max_source_chars"):
        ndvm.compile("(+ 1 2)" + " " * 100, limits=ndvm.Limits(max_source_chars=50))
    assert ndvm.compile("(+ 1 2)", limits=ndvm.Limits(max_source_chars=50)).eval() == 3.0


def test_bad_compile_limits_rejected() -> None:
    with pytest.raises(ValueError):
        ndvm.Limits(max_forms=0)


def test_params_header_names_a_parameter_once() -> None:
    with pytest.raises(CompileError, match="declared twice") as info:
        ndvm.compile("(params a a) a")
    assert (info.value.line, info.value.column) == (1, 11)


def _compile_on_thread(source: str, stack: int) -> object:
    import threading

    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(ndvm.compile(source))
        except CompileError as e:
            outcome.append(e)

    old = threading.stack_size(stack)
    try:
        t = threading.Thread(target=run)
        t.start()
        t.join()
    finally:
        threading.stack_size(old)
    (got,) = outcome
    return got


def test_deep_program_on_a_small_thread_stack_is_an_error_not_a_crash() -> None:
    """The expander and resolver watch the thread's own stack: 10,000 nested lets fit a
    64 MiB stack but not a 1 MiB one, where they are a CompileError, not an overflow."""
    source = "(let* (" + " ".join(f"(a{i} {i})" for i in range(9990)) + ") a1)"
    fits = _compile_on_thread(source, 64 << 20)
    assert isinstance(fits, ndvm.Program) and fits.params == ()
    err = _compile_on_thread(source, 1 << 20)
    assert isinstance(err, CompileError) and "nested too deeply" in err.message
    assert err.line is None
