"""Structural results in Python on every backend: ``repr``/``str`` bounded and showing
sharing, ``==`` and pickling that do not expand a DAG, ``to_list`` with a limit; the CLI
prints through the same printer."""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any

import numpy as np
import pytest

import ndvm
from ndvm.backends import registry
from ndvm.cli import main
from ndvm.errors import ProgramError, ResultTooLarge
from ndvm.structure import PRINT_DEPTH, PRINT_LIMIT, StructList

BACKENDS = registry.available()


def dag(levels: int, leaf: str = "1") -> str:
    return f"(let loop ((l (list {leaf})) (k 0)) (if (= k {levels}) l (loop (cons l l) (+ k 1))))"


DEEP = "(let loop ((l '()) (k 0)) (if (= k 100000) l (loop (list l) (+ k 1))))"


def value(src: str, backend: str) -> Any:
    prog = ndvm.compile(src, backend=backend, limits=ndvm.Limits(deadline=30.0))
    return prog.evaluate().value[0, 0]


def tree(levels: int) -> list[Any]:
    """The DAG of ``dag(levels)`` built as an independent plain tree."""
    v: list[Any] = [1.0]
    for _ in range(levels):
        v = [v, *v]
    return v


@pytest.mark.parametrize("backend", BACKENDS)
def test_small_results_print_as_python_lists(backend: str) -> None:
    v = value('(list 1 (list 2.5 -3) \'a "s" #t (list))', backend)
    expect = [1.0, [2.5, -3.0], "a", "s", True, []]
    assert type(v) is StructList and v == expect and expect == v
    assert repr(v) == repr(expect) and str(v) == str(expect)
    shared = value("(let ((l (list 1 2))) (list l l 3))", backend)
    assert repr(shared) == "[#0=[1.0, 2.0], #0#, 3.0]"


@pytest.mark.parametrize("backend", BACKENDS)
def test_deep_result_prints_pickles_and_compares(backend: str) -> None:
    prog = ndvm.compile(DEEP, backend=backend, limits=ndvm.Limits(deadline=30.0))
    res = prog.evaluate()
    for text in (repr(res.value), str(res.value), repr(prog.eval()), str(prog.eval())):
        assert "[...]" in text and len(text) < 2 * PRINT_LIMIT
    v = res.value[0, 0]
    assert repr(v).count("[") == PRINT_DEPTH + 1
    back = pickle.loads(pickle.dumps(v))
    assert back == v and type(back) is StructList
    assert copy.deepcopy(v) == v
    with pytest.raises(ResultTooLarge):
        v.to_list(max_depth=1000)
    other = value(DEEP.replace("(list l)", "(list (list l))"), backend)
    assert other != v


@pytest.mark.parametrize("backend", BACKENDS)
def test_dag_result_prints_compares_and_pickles_without_expanding(backend: str) -> None:
    v = value(dag(60), backend)
    text = repr(v)
    assert text.startswith("[[#0=[#1=[#2=[") and len(text) <= PRINT_LIMIT + 20
    assert v == value(dag(60), backend)  # 2^60 paths: only the shared pairs are compared
    assert v != value(dag(60, "2"), backend)
    back = pickle.loads(pickle.dumps(v))
    assert back == v and back[0][0] is back[1]  # the sharing survives
    with pytest.raises(ResultTooLarge, match="more than 1000 elements"):
        v.to_list(limit=1000)
    small = value(dag(6), backend)
    plain = small.to_list()
    assert plain == tree(6) and type(plain) is list and type(plain[0]) is list
    assert plain[0] is not plain[1]  # a tree: one copy per path


@pytest.mark.parametrize("backend", BACKENDS)
def test_dag_irritant_and_assoc(backend: str) -> None:
    prog = ndvm.compile(f'(error "bad" {dag(60)})', backend=backend)
    with pytest.raises(ProgramError) as info:
        prog.eval()
    assert len(str(info.value)) < 400 and "#" in str(info.value)
    hit = value(f"(cdr (assoc 'k (list (cons 'k {dag(60)}))))", backend)
    assert hit == value(dag(60), backend) and len(repr(hit)) <= PRINT_LIMIT + 20


def test_struct_list_equality_is_structural() -> None:
    a = StructList([1.0, StructList([np.array([1.0, 2.0]), "x"])])
    assert a == [1.0, [np.array([1.0, 2.0]), "x"]]
    assert a != [1.0, [np.array([1.0, 3.0]), "x"]]
    assert a != [1.0, [np.array([1.0, 2.0]), "x", None]]
    assert StructList([True]) != [1.0] and StructList([1.0]) == [1]


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(args)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_prints_through_the_same_printer(tmp_path: Any, capsys: Any) -> None:
    src = tmp_path / "p.scm"
    src.write_text("(let ((l (list 1 2))) (list l l 'a #t))")
    rc, out, _ = _cli(["eval", str(src)], capsys)
    assert rc == 0 and out.strip() == "value: (#0=(1 2) #0# a #t)"
    rc, out, _ = _cli(["eval", str(src), "--json"], capsys)
    assert rc == 0 and json.loads(out)["value"] == [[1, 2], [1, 2], "a", True]
    src.write_text(dag(60))
    rc, out, _ = _cli(["eval", str(src)], capsys)
    assert rc == 0 and out.startswith("value: ((#0=(#1=(") and len(out) < 10_000
    rc, _, err = _cli(["eval", str(src), "--json"], capsys)
    assert rc == 1 and "ResultTooLarge" in err and "elements to print" in err
