"""``ndvm.meta`` under each dialect, with object names the evaluator itself uses, and with
procedures as results (docs/meta.md, "Dialects, names and procedure values"). Each value is
compared with direct evaluation under the same dialect on the same backend, and with the
value written out by hand."""

from __future__ import annotations

import numpy as np
import pytest

import ndvm
import ndvm.meta
from ndvm.backends import registry
from ndvm.errors import NdvmError

BACKENDS = registry.available()
DIALECTS = (None, "dmci")


def _both(src: str, backend: str, dialect: str | None, **kw: object) -> tuple[object, object]:
    meta = ndvm.meta.compile(src, backend=backend, dialect=dialect, **kw)  # type: ignore[arg-type]
    direct = ndvm.compile(src, backend=backend, dialect=dialect, **kw)  # type: ignore[arg-type]
    return meta, direct


@pytest.mark.parametrize("backend", BACKENDS)
def test_meta_honours_the_dmci_let(backend: str) -> None:
    src = "(let ((x 1.0) (y (+ x 1.0))) (* a y))"
    expected = {None: 18.0, "dmci": 6.0}  # a = 3, outer x = 5: y = 6 (parallel) or 2
    for dialect in DIALECTS:
        meta, direct = _both(src, backend, dialect, params=["a"], inputs=["x"])
        for prog in (meta, direct):
            value, grad = prog.value_and_grad(np.array([3.0]), x=5.0)  # type: ignore[attr-defined]
            assert float(value) == expected[dialect]
            assert grad.tolist() == [expected[dialect] / 3.0]
    # switching the dialect of a meta program recompiles it under the new one
    meta = ndvm.meta.compile(src, params=["a"], inputs=["x"], backend=backend)
    assert float(meta.with_options(dialect="dmci").eval([3.0], x=5.0)) == 6.0
    back = meta.with_options(dialect="dmci").with_options(dialect=None)
    assert float(back.eval([3.0], x=5.0)) == 18.0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dialect", DIALECTS)
def test_meta_equals_direct_under_each_dialect(backend: str, dialect: str | None) -> None:
    src = (
        "(let* ((s (sqrt (- a 1.0))) (l (log (* a 0.5))) (m (modulo -7.0 a))"
        " (n (remainder -7.0 a)) (k (let ((a 2.0) (b (* a 3.0))) b)))"
        " (+ s l m n k (if (< a 0.0) 1.0 2.0)))"
    )
    theta = np.array([[0.5], [1.0], [2.5], [-1.0]])
    meta, direct = _both(src, backend, dialect, params=["a"])
    mv, mg = meta.value_and_grad(theta)  # type: ignore[attr-defined]
    dv, dg = direct.value_and_grad(theta)  # type: ignore[attr-defined]
    np.testing.assert_array_equal(np.asarray(mv), np.asarray(dv))
    np.testing.assert_array_equal(mg, dg)


def test_meta_refuses_an_unknown_dialect() -> None:
    with pytest.raises(NdvmError, match="dialect"):
        ndvm.meta.compile("(* a 2.0)", params=["a"], dialect="scheme48")


# names the evaluator, its wrapper or the host use; any of them is an ordinary object name
NAMES = ["car", "cdr", "cons", "lookup", "meval", "env", "apply", "list", "map",
         "%meta-bindings", "%meta-0", "meta-run", "eq?", "null?", "global-environment"]  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_parameter_named_car_is_a_number(backend: str) -> None:
    meta, direct = _both("(* car 2)", backend, None, params=["car"])
    for prog in (meta, direct):
        value, grad = prog.value_and_grad(np.array([3.0]))  # type: ignore[attr-defined]
        assert float(value) == 6.0
        assert grad.tolist() == [2.0]
    assert meta.params == ("car",)  # type: ignore[attr-defined]


@pytest.mark.parametrize("backend", BACKENDS)
def test_any_symbol_names_parameters_and_inputs(backend: str) -> None:
    params, inputs = NAMES[::2], NAMES[1::2]
    terms = [f"(* {p} {float(k + 1)})" for k, p in enumerate(params)] + inputs
    src = f"(+ {' '.join(terms)})"
    meta = ndvm.meta.compile(src, params=params, inputs=inputs, backend=backend)
    assert meta.params == tuple(params)
    assert meta.inputs == tuple(inputs)
    theta = np.arange(1.0, len(params) + 1.0)
    data = {name: 10.0 * (k + 1) for k, name in enumerate(inputs)}
    expected = sum((k + 1.0) * t for k, t in enumerate(theta)) + sum(data.values())
    value, grad = meta.value_and_grad(theta, None, data)
    assert float(value) == expected
    assert grad.tolist() == [k + 1.0 for k in range(len(params))]
    if backend == BACKENDS[0]:  # the tower (slow on the reference): the default backend
        tower = ndvm.meta.compile(src, params=params, inputs=inputs, backend=backend, levels=2)
        assert float(tower.eval(theta, data)) == expected


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_closure_result_is_a_procedure(backend: str) -> None:
    src = "(lambda (x) (* a x))"
    direct = ndvm.compile(src, params=["a"], backend=backend).evaluate([2.0])
    for levels in (1, 2) if backend == BACKENDS[0] else (1,):
        meta = ndvm.meta.compile(src, params=["a"], backend=backend, levels=levels)
        result = meta.evaluate([2.0])
        assert result.status.tolist() == direct.status.tolist() == [[0]]
        assert result.value.tolist() == direct.value.tolist() == [["#<procedure lambda>"]]
