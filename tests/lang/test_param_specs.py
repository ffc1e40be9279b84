"""The parameter specs of compiled programs: a program's variants (the same parameters, other
literals) share one ``ParamSpecs``, keyed by the front end's ``params_key``; a change to any
field of a parameter gives other specs; ``ParamSpecs`` behaves as the tuple it is."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import ndvm
from ndvm.lang.front import compile_source
from ndvm.lang.ir import ParamSpec, ParamSpecs

HEADER = "(params (a 1.0) (k 0.5 positive) (w 2.0))\n(* a k w x {lit})"


def test_variants_share_their_specs() -> None:
    one = compile_source(HEADER.format(lit="1.5"), inputs=("x",))
    two = compile_source(HEADER.format(lit="2.5"), inputs=("x",))
    assert one.front.params_key == two.front.params_key
    assert one.params is two.params
    assert one.params == (
        ParamSpec("a", 1.0, "free", 1, 9),
        ParamSpec("k", 0.5, "positive", 1, 17),
        ParamSpec("w", 2.0, "free", 1, 34),  # each at its "("
    )


@pytest.mark.parametrize(
    "other",
    [
        "(params (a 1.5) (k 0.5 positive) (w 2.0))\n(* a k w x 1)",  # an initial value
        "(params (a 1.0) (k 0.5 unit) (w 2.0))\n(* a k w x 1)",  # a constraint
        "(params (b 1.0) (k 0.5 positive) (w 2.0))\n(* b k w x 1)",  # a name
        "(params  (a 1.0) (k 0.5 positive) (w 2.0))\n(* a k w x 1)",  # a position
        "(params (a 1.0) (k 0.5 positive))\n(* a k x 1)",  # one parameter fewer
    ],
)
def test_any_field_changes_the_specs(other: str) -> None:
    base = compile_source(HEADER.format(lit="1"), inputs=("x",))
    prog = compile_source(other, inputs=("x",))
    assert prog.front.params_key != base.front.params_key
    assert prog.params != base.params
    want = [tuple(r) for r in prog.front.params]  # the front end's rows
    assert [(s.name, s.init, s.constraint, s.line, s.column) for s in prog.params] == want


def test_param_specs_is_its_tuple() -> None:
    specs = compile_source(HEADER.format(lit="3"), inputs=("x",)).params
    assert isinstance(specs, ParamSpecs)
    plain = tuple(specs)
    assert specs == plain and hash(specs) == hash(plain) and repr(specs) == repr(plain)
    back = pickle.loads(pickle.dumps(specs))
    assert type(back) is ParamSpecs and back == specs and hash(back) == hash(plain)


def test_shared_specs_give_each_program_its_initial_theta() -> None:
    progs = [ndvm.compile(HEADER.format(lit=repr(v)), inputs=("x",)) for v in (1.0, 2.0)]
    thetas = [p.init_theta() for p in progs]
    thetas[0][:] = 99.0  # a caller's theta is its own
    np.testing.assert_allclose(progs[1].constrain(thetas[1]), [1.0, 0.5, 2.0], rtol=1e-15)
    np.testing.assert_allclose(progs[0].constrain(progs[0].init_theta()), [1.0, 0.5, 2.0])


def test_what_the_specs_keep_is_what_the_functions_give() -> None:
    """The constraint codes, the initial theta and the free-name message kept with a
    ``ParamSpecs`` equal those computed from a plain tuple of the same specs."""
    from ndvm.api import free_name_message
    from ndvm.backends.native import NativeBackend
    from ndvm.backends.native_lower import constraint_codes
    from ndvm.prims import constraints

    srcs = (HEADER.format(lit="1"), "(params (u 0.25 unit) (s -0.5 signed-unit))\n(* u s x)")
    for src in srcs:
        prog = ndvm.compile(src, inputs=("x",), backend="native")
        plain = prog.compiled.replace(params=tuple(prog.compiled.params))
        assert type(plain.params) is tuple
        low = NativeBackend().lowered(prog.compiled)
        np.testing.assert_array_equal(low.constraints, constraint_codes(plain))
        np.testing.assert_array_equal(
            NativeBackend().lowered(plain).constraints, constraint_codes(plain)
        )
        want = constraints.init_theta(tuple(prog.compiled.params))
        for _ in range(2):  # a fresh, writable array each time
            theta = prog.init_theta()
            np.testing.assert_array_equal(theta, want)
            assert theta.flags.writeable
            theta[:] = 7.0
        np.testing.assert_array_equal(prog.with_options(compiled=plain).init_theta(), want)
    # the message is kept per inputs: the same specs, other inputs, another hint
    with pytest.warns(ndvm.FreeNameWarning) as near:
        one = ndvm.compile("(* xx 2)", inputs=("x",))
    with pytest.warns(ndvm.FreeNameWarning) as far:
        two = ndvm.compile("(* xx 2)", inputs=("q",))
    assert one.compiled.params is two.compiled.params
    assert str(near[0].message) == free_name_message(one.compiled) != str(far[0].message)
    assert str(far[0].message) == free_name_message(two.compiled)
    assert "did you mean" in str(near[0].message)


@pytest.mark.parametrize(
    "params",
    [
        {"a": 1.5, "k": 2, "w": True},  # numbers of each kind
        {"a": np.float64(0.25), "k": -0.0, "w": 1e300},
        ["w", "a", "k"],  # names: the header's specs, in this order
        ("k", "a", "w", "extra"),  # a name the header does not declare: free at 0.0
        ["a", "k"],
    ],
)
@pytest.mark.parametrize("header", [True, False])
def test_plain_params_give_the_records_specs(params: object, header: bool) -> None:
    """The rows of a dict of numbers or a list of names (built without the ``ParamSpec``
    records) are the rows the general normalizer gives, with and without a header."""
    from ndvm.lang import front

    body = "(* a k w x 1)" if "w" in params else "(* a k x 1)"  # type: ignore[operator]
    src = HEADER.split("\n")[0] + "\n" + body if header else body
    got = compile_source(src, params, inputs=("x",)).params
    given = compile_source(src, inputs=("x",)).params if header else ()
    want = front._param_specs(params, given)  # type: ignore[arg-type]
    assert [(s.name, s.init, s.constraint, s.line, s.column) for s in got] == [
        (s.name, float(s.init), s.constraint, s.line, s.column) for s in want
    ]
    assert [np.copysign(1.0, s.init) for s in got] == [np.copysign(1.0, s.init) for s in want]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (["a", "a", "k", "w"], "given twice"),
        ({"a": (1.0, "postive"), "k": 1.0, "w": 1.0}, "unknown constraint"),
        (["a", 3], "bad parameter spec"),
    ],
)
def test_params_errors_are_the_normalizers(params: object, message: str) -> None:
    with pytest.raises(ndvm.CompileError, match=message):
        compile_source("(* a k w x 1)", params, inputs=("x",))  # type: ignore[arg-type]


def _key(source: str) -> bytes:
    return compile_source(source, inputs=("x",)).front.params_key  # type: ignore[no-any-return]


def test_a_key_is_handed_out_again_only_for_equal_parameters() -> None:
    one, two = _key(HEADER.format(lit="1.5")), _key(HEADER.format(lit="2.5"))
    assert one is two  # in a row: the same bytes object (its hash kept)
    zero = "(params (a 0.0) (k 0.5 positive) (w 2.0))\n(* a k w x 1)"
    minus_zero = zero.replace("0.0", "-0.0", 1)  # equal floats, other bits: other keys
    keys = [_key(s) for s in (zero, minus_zero, zero, HEADER.format(lit="3.5"))]
    assert keys[0] != keys[1]
    assert keys[2] == keys[0]
    assert keys[3] == one
    assert [k is keys[0] for k in keys] == [True, False, False, False]
