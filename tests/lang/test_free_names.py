"""Named constants (``pi``) and what free names become: parameters with a warning by
default, silently with ``free_params=True``, a positioned ``CompileError`` with a "did you
mean" with ``free_params=False``; the CLI prints the warning as one line."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pytest

import ndvm
import ndvm.meta
from ndvm.backends import registry
from ndvm.cli import main
from ndvm.errors import CompileError, FreeNameWarning

BACKENDS = registry.available()


@pytest.mark.parametrize("backend", BACKENDS)
def test_pi_is_a_constant(backend: str) -> None:
    prog = ndvm.compile("(* amp (sin (* 2 pi t)))", ["amp"], ["t"], backend=backend)
    assert prog.params == ("amp",)
    t = np.array([0.1, 0.25, 0.4])
    value, grad = prog.value_and_grad(np.array([2.0]), t=t)
    np.testing.assert_allclose(value, 2.0 * np.sin(2 * math.pi * t), rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(grad, [np.sin(2 * math.pi * t).sum()], rtol=1e-14)
    assert float(ndvm.compile("pi", backend=backend).eval()) == math.pi


@pytest.mark.parametrize(
    "source,params,inputs,want",
    [
        ("(let ((pi 3)) pi)", None, (), 3.0),
        ("(params (pi 3.5)) pi", None, (), 3.5),
        ("(* 1 pi)", {"pi": 1.5}, (), 1.5),  # a declared parameter named pi wins
        ("(* 2 pi)", None, ("pi",), 8.0),  # so does an input named pi
    ],
)
def test_a_binding_named_pi_wins(source: str, params: Any, inputs: Any, want: float) -> None:
    prog = ndvm.compile(source, params, inputs, free_params=True)
    got = prog.eval(prog.init_theta(), **({"pi": 4.0} if inputs else {}))
    assert float(got) == want


def test_e_is_not_a_constant() -> None:
    prog = ndvm.compile("(* e x)", inputs=["x"], free_params=True)
    assert prog.params == ("e",)


def test_pi_through_the_metacircular_evaluator() -> None:
    prog = ndvm.meta.compile("(* a pi)", free_params=True)
    assert float(prog.eval(np.array([2.0]))) == pytest.approx(2 * math.pi, rel=1e-15)


def test_free_names_warn_by_default_naming_them() -> None:
    with pytest.warns(FreeNameWarning) as record:
        prog = ndvm.compile("(* amp (sin (* 2 pi tme)))", inputs=["time"])
    assert prog.params == ("amp", "tme")
    (w,) = record
    text = str(w.message)
    assert "amp, tme" in text and "did you mean 'time'" in text and "\n" not in text


def test_the_warning_follows_each_programs_inputs() -> None:
    """The message is kept per free names and inputs: the same names beside other inputs
    get their own "did you mean", and variants of a program share specs without sharing
    state (each has its own parameters' values)."""
    texts = []
    for inputs in (["time"], ["amp2"], ["time"]):
        with pytest.warns(FreeNameWarning) as record:
            ndvm.compile("(* amp (sin tme))", inputs=inputs)
        texts.append(str(record[0].message))
    assert "did you mean 'time'" in texts[0] and texts[2] == texts[0]
    assert "did you mean 'amp2'" in texts[1] and "'time'" not in texts[1]
    one = ndvm.compile("(params (a 1.0)) (* a x)", inputs=["x"])
    two = ndvm.compile("(params (a 2.0)) (* a x)", inputs=["x"])
    again = ndvm.compile("(params (a 1.0)) (+ a x)", inputs=["x"])
    assert one.compiled.params is again.compiled.params  # shared, immutable in use
    np.testing.assert_array_equal(one.init_theta(), [1.0])
    np.testing.assert_array_equal(two.init_theta(), [2.0])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"free_params": True},
        {"params": ["a"]},
        {"params": ["a"], "free_params": False},
        {"params": {"a": 1.0}},
    ],
)
def test_no_warning_when_the_names_are_declared_or_accepted(kwargs: dict[str, Any]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prog = ndvm.compile("(* a x)", inputs=["x"], **kwargs)
        assert prog.params == ("a",)
        ndvm.compile("(params (a 1.0)) (* a x)", inputs=["x"], free_params=False)


def test_free_names_are_errors_when_asked() -> None:
    with pytest.raises(CompileError, match=r"unbound variable 'pie'.*did you mean 'pi'") as info:
        ndvm.compile("(+ 1\n   (* 2 pie))", free_params=False)
    assert (info.value.line, info.value.column) == (2, 9)
    with pytest.raises(CompileError, match="did you mean 'time'"):
        ndvm.compile("(* 2 tme)", inputs=["time"], free_params=False)


def test_cli_warns_in_one_line(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "m.scm"
    src.write_text("(* amp (sin (* 2 pi t)))")
    assert main(["eval", str(src), "--input", "t=0.25"]) == 0  # amp: its initial value, 0
    out = capsys.readouterr()
    assert out.out.strip() == "value: 0"
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ndvm: warning: free name(s) amp taken")
    assert main(["eval", str(src), "--input", "t=0.25", "--param", "amp=2"]) == 0
    out = capsys.readouterr()  # a value given by --param is no guess
    assert out.out.strip() == "value: 2" and out.err == ""
    src.write_text("(params (amp 1.0)) (* amp (sin (* 2 pi t)))")
    assert main(["eval", str(src), "--input", "t=0.25"]) == 0
    assert capsys.readouterr().err == ""
