"""Every name the language takes as a symbol works as an input and as a parameter name on
every entry point: the Python API (mapping and keywords), calibration and prediction, tasks
and search, the CLI, the torch and JAX boundaries and the exports. The names collide with
the API's own arguments (``theta``, ``inputs``, ``cotangent``, ``self``, ``params`` of the JAX
export, ``program``), with primitives (a declared name shadows a primitive as a value; a call
still reaches the primitive), with Python keywords and ``torch.nn.Module`` attributes, or are
symbols like ``a.b`` or ``set!``; non-ASCII names are not symbols of the language and get a
typed error that says so. Expected values come from NumPy formulas, not from ndvm."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ndvm
from ndvm.errors import CompileError, NdvmError
from ndvm.lang.front import check_name
from ndvm.tasks.base import Task

NAMES = [
    "theta", "grad", "inputs", "self", "cotangent", "program", "named", "x", "training",
    "exp", "sin", "+", "max", "class", "None", "def", "import", "a.b", "set!", "->x", "x1",
    "with_options", "value", "loss", "target", "steps", "init",
]  # fmt: skip
SPECIAL = ["if", "lambda", "let", "params", "quote", "define"]
XS = np.array([0.5, 1.0, 2.0, 3.5])


def _input_program(name: str) -> ndvm.Program:
    return ndvm.compile(f"(* k {name})", params=["k"], inputs=[name])


def _param_program(name: str) -> ndvm.Program:
    other = "u" if name != "u" else "v"
    return ndvm.compile(f"(* {name} {other})", params=[name], inputs=[other])


@pytest.mark.parametrize("name", NAMES)
def test_input_name_on_every_api_call(name: str) -> None:
    prog = _input_program(name)
    assert prog.inputs == (name,)
    want = 2.0 * XS
    np.testing.assert_allclose(prog.eval(np.array([2.0]), {name: XS}), want, rtol=1e-15)
    np.testing.assert_allclose(prog.eval(np.array([2.0]), **{name: XS}), want, rtol=1e-15)
    value, grad = prog.value_and_grad(np.array([2.0]), None, {name: XS})
    np.testing.assert_allclose(value, want, rtol=1e-15)
    np.testing.assert_allclose(grad, [XS.sum()], rtol=1e-14)  # d sum(k x) / dk
    _, grad_kw = prog.value_and_grad(np.array([2.0]), **{name: XS})
    np.testing.assert_allclose(grad_kw, grad, rtol=1e-15)
    ct = np.array([1.0, 0.0, 2.0, 0.0])
    _, grad_ct = prog.value_and_grad(np.array([2.0]), ct, {name: XS})
    np.testing.assert_allclose(grad_ct, [ct @ XS], rtol=1e-14)
    jac = prog.jacobian(np.array([2.0]), {name: XS})
    np.testing.assert_allclose(jac[:, 0], XS, rtol=1e-14)
    res = prog.evaluate(np.array([2.0]), {name: XS}, grad=True)
    np.testing.assert_allclose(res.grad[0], [XS.sum()], rtol=1e-14)


@pytest.mark.parametrize("name", NAMES)
def test_parameter_name_evaluates_and_calibrates(name: str) -> None:
    prog = _param_program(name)
    other = prog.inputs[0]
    assert prog.params == (name,)
    np.testing.assert_allclose(prog.eval(np.array([3.0]), {other: XS}), 3.0 * XS, rtol=1e-15)
    cal = ndvm.calibrate(prog, {other: XS}, 1.7 * XS, starts=2)
    assert cal.success
    assert cal.params[name] == pytest.approx(1.7, rel=1e-8)
    np.testing.assert_allclose(cal.predict(), 1.7 * XS, rtol=1e-8)


@pytest.mark.parametrize("name", NAMES)
def test_input_name_calibrates_and_predicts(name: str) -> None:
    prog = _input_program(name)
    cal = ndvm.calibrate(prog, {name: XS}, -0.4 * XS, starts=2)
    assert cal.success and cal.params["k"] == pytest.approx(-0.4, rel=1e-8)
    np.testing.assert_allclose(cal.predict({name: XS[::-1]}), -0.4 * XS[::-1], rtol=1e-8)


def test_cotangent_keyword_when_no_input_has_its_name() -> None:
    prog = ndvm.compile("(* k x)", params=["k"], inputs=["x"])
    _, grad = prog.value_and_grad(np.array([2.0]), cotangent=np.array([0.0, 1.0, 0.0, 0.0]), x=XS)
    assert grad[0] == pytest.approx(XS[1])
    with pytest.raises(NdvmError, match="cotangent given twice"):
        prog.value_and_grad(np.array([2.0]), np.ones(4), cotangent=np.ones(4), x=XS)


def test_input_in_mapping_and_keywords_is_an_error() -> None:
    prog = _input_program("theta")
    with pytest.raises(NdvmError, match=r"\['theta'\] given both"):
        prog.eval(np.array([2.0]), {"theta": XS}, theta=XS)
    with pytest.raises(NdvmError, match="must be a mapping"):
        prog.eval(np.array([2.0]), XS)


def test_declared_name_shadows_a_primitive_only_as_a_value() -> None:
    # `exp` the input is data; `(exp exp)` still calls the primitive on it
    prog = ndvm.compile("(+ (exp exp) (* k exp))", params=["k"], inputs=["exp"])
    np.testing.assert_allclose(prog.eval(np.array([2.0]), {"exp": XS}), np.exp(XS) + 2 * XS)
    prog = ndvm.compile("(max (* sin 2) (sin sin))", params=["sin"])
    assert float(prog.eval(np.array([0.5]))) == pytest.approx(max(1.0, np.sin(0.5)))
    # a local binding shadows it everywhere, as before
    local = ndvm.compile("(let ((exp (lambda (v) (* 3 v)))) (exp x))", params=[], inputs=["x"])
    np.testing.assert_allclose(local.eval(None, x=XS), 3 * XS)


@pytest.mark.parametrize("name", SPECIAL)
def test_special_forms_cannot_name_data(name: str) -> None:
    with pytest.raises(CompileError, match=f"input name '{name}' cannot be used"):
        check_name(name)
    with pytest.raises(CompileError, match=f"input name '{name}' cannot be used"):
        Task.from_arrays(XS, XS, names=[name])


@pytest.mark.parametrize("bad", ["a b", "1.5", "(x)", "", "x;y", "#t", "θ", "x₀"])
def test_non_symbols_cannot_name_data(bad: str) -> None:
    with pytest.raises(CompileError, match="input name"):
        check_name(bad)


@pytest.mark.parametrize("name", ["theta", "inputs", "exp", "class"])
def test_task_from_arrays_and_search(name: str, tmp_path: Path) -> None:
    from ndvm.search import Budget, make_proposer, run_search

    x = np.linspace(0.5, 3.0, 40)
    task = Task.from_arrays(x, 2.5 * x, names=[name], name="names")
    state = run_search(task, make_proposer("evolve", task), tmp_path / "s.db",
                       budget=Budget(candidates=64))  # fmt: skip
    statuses = [r.evaluation.status for r in state.records if r.evaluation is not None]
    assert statuses.count("ok") > 0
    assert not any(
        r.evaluation.reason.startswith("internal error")
        for r in state.records
        if r.evaluation is not None
    )


def _ndvm(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ndvm", *args], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ), cwd=cwd)  # fmt: skip


@pytest.mark.parametrize("name", ["theta", "exp", "max"])
def test_cli_eval_fit_search(name: str, tmp_path: Path) -> None:
    x = np.linspace(0.5, 3.0, 30)
    y = 1.5 * x + 0.25
    rows = "".join(f"{a!r},{b!r}\n" for a, b in zip(x.tolist(), y.tolist()))
    (tmp_path / "d.csv").write_text(f"{name},y\n" + rows, encoding="utf-8")
    (tmp_path / "m.scm").write_text(f"(+ a (* b {name}))\n", encoding="utf-8")
    ev = _ndvm("eval", "m.scm", "--param", "a=1", "--param", "b=2", "--input",
               f"{name}=1,2", "--json", cwd=tmp_path)  # fmt: skip
    assert ev.returncode == 0, ev.stderr
    np.testing.assert_allclose(json.loads(ev.stdout)["value"], [3.0, 5.0])
    fit = _ndvm("fit", "m.scm", "--data", "d.csv", "--x", name, "--y", "y", "--json",
                cwd=tmp_path)  # fmt: skip
    assert fit.returncode == 0, fit.stderr
    values = json.loads(fit.stdout)["params"]
    assert values["a"] == pytest.approx(0.25, abs=1e-6)
    assert values["b"] == pytest.approx(1.5, rel=1e-6)
    s = _ndvm("search", "--data", "d.csv", "--x", name, "--y", "y", "--max-candidates", "128",
              "--db", "s.db", "--quiet", cwd=tmp_path)  # fmt: skip
    assert s.returncode == 0, s.stderr
    rep = _ndvm("report", "--db", "s.db", "--json", "--no-export", cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    data = json.loads(rep.stdout)
    assert data["best"] is not None and data["best"]["validation_r2"] > 0.999
    assert not any(k.startswith("internal error") for k in data["failures"])


@pytest.mark.parametrize(
    "name", ["theta", "exp", "a", "class", "inputs", "P", "C", "I", "E", "S", "N"]
)
def test_estimator_takes_any_symbol_as_a_variable(name: str, tmp_path: Path) -> None:
    from ndvm.search import SymbolicRegressor

    x = np.linspace(0.5, 3.0, 60)
    model = SymbolicRegressor(time_budget=None, max_candidates=192, variable_names=[name],
                              database=str(tmp_path / "sr.db"))  # fmt: skip
    model.fit(x[:, None], 2.5 * x + 1.0)
    np.testing.assert_allclose(model.predict(x[:, None]), 2.5 * x + 1.0, rtol=1e-6)


@pytest.mark.parametrize("bad", ["if", "a b", "3x"])
def test_estimator_and_tasks_reject_what_cannot_name_data(bad: str) -> None:
    from ndvm.search import SymbolicRegressor

    x = np.linspace(0.5, 3.0, 20)
    with pytest.raises(NdvmError, match="cannot be used|not a symbol|does not read"):
        SymbolicRegressor(max_candidates=8, variable_names=[bad]).fit(x[:, None], x)
    with pytest.raises(NdvmError):
        Task.from_arrays(x, x, names=[bad])
