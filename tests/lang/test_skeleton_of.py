"""A program's skeleton is the same whether it is computed from the source read again or
from the data its caller read already (``front.skeleton_of(program, data)``, what the
search funnel passes)."""

from __future__ import annotations

import pytest

import ndvm
from ndvm.lang import front
from ndvm.lang.reader import read_with_symbols

SOURCES = [
    "(* a (exp (* b x)))",
    "(params (a 1.0) (k 0.1 positive))\n(+ a (* k (sin x)) 2.5)",
    "(+ P (* C x) a)",  # names spelled like the markers
    "(let ((u (* a x))) (+ u (expt u 2)))",
]


@pytest.mark.parametrize("src", SOURCES)
def test_skeleton_from_the_read_data_equals_the_reread_source(src):
    prog = ndvm.compile(src, inputs=("x",), free_params=True)
    front._SKELETONS.clear()
    reread = front.skeleton_of(prog.compiled)  # reads the source itself
    front._SKELETONS.clear()
    data, _ = read_with_symbols(src)
    assert front.skeleton_of(prog.compiled, data) == reread == prog.skeleton
    assert "P" in reread


def test_skeletons_kept_are_bounded(monkeypatch):
    monkeypatch.setattr(front, "_SKELETONS_KEPT", 3)
    front._SKELETONS.clear()
    for k in range(6):
        prog = ndvm.compile(f"(* a (expt x {k + 2}))", inputs=("x",), free_params=True)
        assert prog.skeleton == "(* P (expt x C))"
    assert len(front._SKELETONS) == 3
