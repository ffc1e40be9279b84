"""Unknown names: a free name in operator position is never a parameter, and every unknown
name comes with the closest known names ("did you mean"), at its line and column."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import ndvm
from ndvm.errors import CompileError
from ndvm.lang.suggest import did_you_mean, suggestions


def _error(src: str, **kw: object) -> CompileError:
    with pytest.raises(CompileError) as info:
        ndvm.compile(src, **kw)  # type: ignore[arg-type]
    return info.value


@pytest.mark.parametrize(
    "src,kw,where,message",
    [
        ("(+ (sqr x) 1)", {}, (1, 5), "unknown procedure 'sqr' (did you mean 'square'?)"),
        ("(+ (sqr x) 1)", {"inputs": ("x",)}, (1, 5),
         "unknown procedure 'sqr' (did you mean 'square'?)"),
        ("(lamda (x) (* x x))", {}, (1, 2), "unknown procedure 'lamda' (did you mean 'lambda'?)"),
        ("(defin k 2)\nk", {}, (1, 2), "unknown procedure 'defin' (did you mean 'define'?)"),
        ("(* a\n   (exq b))", {}, (2, 5), "unknown procedure 'exq' (did you mean 'eq?' or 'exp'?)"),
        ("(define (decay t) (exp (- t)))\n(* a (decy x))", {"inputs": ("x",)}, (2, 7),
         "unknown procedure 'decy' (did you mean 'decay'?)"),
        ("(qqqqq 1)", {}, (1, 2), "unknown procedure 'qqqqq' (not a primitive or a local binding)"),
        ("(+ a (f 1))", {"params": ["a", "f"]}, (1, 7),
         "cannot call parameter 'f': parameters are numbers, not procedures"),
        ("(+ f (f 1))", {}, (1, 7),
         "cannot call parameter 'f': parameters are numbers, not procedures"),
        ("(x 1)", {"inputs": ("x",)}, (1, 2),
         "cannot call input 'x': inputs are data, not procedures"),
        ("(apply + (map sqr (list a 2)))", {}, (1, 15),
         "unknown procedure 'sqr' (did you mean 'square'?)"),
        ("(fold-left f 0 (list a))", {"params": ["a", "f"]}, (1, 12),
         "cannot call parameter 'f': parameters are numbers, not procedures"),
        ("(+ rate\n   (* 2 rte))", {"params": ["rate"]}, (2, 9),
         "unbound variable 'rte' (not a parameter, input, primitive or local binding; "
         "did you mean 'rate'?)"),
    ],
)  # fmt: skip
def test_unknown_names_teach(src: str, kw: dict, where: tuple[int, int], message: str) -> None:
    exc = _error(src, **kw)
    assert (exc.line, exc.column) == where
    assert exc.message == message


@pytest.mark.parametrize(
    "src",
    [
        "(let ((sq (lambda (u) (* u u)))) (sq a))",
        "(define (f u) (* u a)) (f 2)",
        "((lambda (g) (g a)) sin)",
        "(let loop ((k 0)) (if (< k 3) (loop (+ k 1)) (* k a)))",
        "(letrec ((ev (lambda (n) (if (= n 0) a (od (- n 1))))) "
        "(od (lambda (n) (if (= n 0) 0 (ev (- n 1)))))) (ev 4))",
        "(apply + (map (lambda (u) (* u a)) (list 1 2)))",
        "(let ((g sin)) (apply + (map g (list a 2))))",
        "(define (map h l) (h l)) (map (lambda (u) (* u a)) 2)",
    ],
)
def test_locally_bound_operators_are_fine(src: str) -> None:
    prog = ndvm.compile(src)
    assert prog.params == ("a",)
    assert np.all(np.isfinite(np.asarray(prog.eval([1.5]), dtype=float)))


def test_calling_a_local_number_stays_a_runtime_error() -> None:
    with pytest.raises(ndvm.ProgramError, match="not a procedure"):
        ndvm.compile("(let ((f 2)) (f 1))").eval([])


def test_suggestions_rank_and_filter() -> None:
    assert suggestions("lamda", ["lambda", "clamp", "cadar"]) == ["lambda"]
    assert suggestions("zzz", ["lambda", "car"]) == []
    assert suggestions("mapp", ["map", "%map1", "#g0"]) == ["map"]  # internal names never
    assert did_you_mean("sqr", ["sqrt", "square"]) == "did you mean 'square'?"
    assert did_you_mean("sqr", ["sqrt"]) == "did you mean 'sqrt'?"


def test_cli_reports_unknown_procedure() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ndvm", "eval", "-"],
        input="(+ (sqr x) 1)",
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stdout == ""  # does not compile: an input error
    assert proc.stderr.strip() == (
        "<stdin>:1:5: CompileError: unknown procedure 'sqr' (did you mean 'square'?)"
    )


def test_constraint_typos_suggest() -> None:
    exc = _error("(params (a 1 postive)) a")
    assert (exc.line, exc.column) == (1, 14)
    assert exc.message == (
        "params: constraint must be one of free, positive, unit, signed-unit "
        "(did you mean 'positive'?)"
    )
    exc = _error("a", params={"a": (1.0, "unt")})
    assert exc.message == (
        "parameter 'a': unknown constraint 'unt' (did you mean 'unit'? one of free, positive, "
        "unit, signed-unit)"
    )
