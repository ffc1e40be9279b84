"""The native front end's tables are lowered without build_program's checks (they hold by
construction: docs/native.md, "Performance"). Here every recorded source that compiles
(18,751 sources: examples, golden and hostile programs, their mutations, token soups) has
its tables checked as build_program checks any other host tables, and hostile sources still
stop in the front end with typed, positioned errors, before any table exists."""

from __future__ import annotations

from typing import Any

import pytest
from tests.lang.test_front_recorded import CASES, EXTRA

from ndvm import _core
from ndvm.errors import CompileError, NativeError, NdvmError, ReadError
from ndvm.eval.limits import Limits
from ndvm.lang.front import compile_source

HOSTILE = (  # source, error class, line, column
    ("(+ " + "(f " * 20 + "x" + ")" * 20 + ")", CompileError, 1, 5),  # unknown f
    ("(let ((x 1) (x 2)) x)", CompileError, 1, 14),
    ("(lambda (a a) a)", CompileError, 1, 12),
    ("(if)", CompileError, 1, 1),
    ("(define x)", CompileError, 1, 1),
    ("(sqrt 1 2)", CompileError, 1, 1),
    ("(1 2)", CompileError, 1, 1),
    ("(quote)", CompileError, 1, 1),
    ("(begin)", CompileError, 1, 1),
    ("(letrec ((f (lambda () (g)))) (f))", CompileError, 1, 25),
    ("(+ a (* b x)", ReadError, 1, 1),
    ("(+ a ) )", ReadError, 1, 8),
    ("(+ 1 #z)", ReadError, 1, 6),
    ("(" * 3000 + ")" * 3000, ReadError, 1, 2001),
)


def _sources() -> list[tuple[str, tuple[str, ...], str | None]]:
    out = [(c["source"], tuple(c["inputs"]), None) for c in CASES]
    out += [(c["source"], tuple(c["inputs"]), "dmci") for c in CASES if "dmci" in c]
    out += [(c["source"], tuple(c["inputs"]), c["dialect"]) for c in EXTRA if "compile" in c]
    return out


SOURCES = _sources()


@pytest.mark.parametrize("chunk", range(4))
def test_front_end_tables_pass_every_build_program_check(chunk: int) -> None:
    lowered = 0
    for src, inputs, dialect in SOURCES[chunk::4]:
        try:
            c = compile_source(src, None, inputs, Limits(), dialect)
        except NdvmError:
            continue
        checked, strings = c.front.lower(checked=True)  # raises if a check fails
        trusted, strings2 = c.front.lower()
        assert (checked.n_nodes, strings) == (trusted.n_nodes, strings2)
        lowered += 1
    assert lowered > 500


@pytest.mark.parametrize(("src", "cls", "line", "column"), HOSTILE)
def test_hostile_sources_get_typed_positioned_errors(
    src: str, cls: type[NdvmError], line: int, column: int
) -> None:
    with pytest.raises(cls) as err:
        compile_source(src, None, ("x",), Limits(), None)
    assert (err.value.line, err.value.column) == (line, column)


def test_host_tables_are_still_checked() -> None:
    np = pytest.importorskip("numpy")
    fp: Any = compile_source("(+ a (* b x))", None, ("x",), Limits(), None).front
    assert fp.lower(checked=True)[0].n_nodes == fp.lower()[0].n_nodes
    # a child index out of range, a node shared by two parents: typed errors, not reads
    nodes = np.array([[12, 0, 0, 0, 0, 0, 2, 1, 1], [2, 0, 0, 0, 0, 0, 0, 1, 4]], np.int32)
    for kids in ([1, 7], [1, 1]):
        with pytest.raises(NativeError, match="malformed program table"):
            _core.Program(
                nodes, np.array(kids, np.int32), np.zeros(0, np.int32), np.zeros((0, 3), np.int32),
                np.zeros(0), [], 0, 1, 0,
            )  # fmt: skip
