"""The typed native boundary: option structs, named export tags, one-crossing gradients."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest

import ndvm
from ndvm import errors
from ndvm.backends import native, registry
from ndvm.eval.limits import Limits

pytestmark = pytest.mark.native
RNG = np.random.default_rng(7)
X = np.linspace(0.1, 2.0, 5)

# every tag but OTHER (a value without an export form: an unassigned letrec slot)
EXPORTS_EVERY_TAG = """\
(define (sq x) (* x x))
(define shared (list 1 2))
(list a (* a (vec 1 2)) #t (> a 0) '() (if #f #f) 'sym "str" sq car shared shared)
"""


def _cores() -> list[Any]:
    return [m for m in (native._core, native._core32) if m is not None]


@pytest.mark.parametrize("core", _cores(), ids=lambda m: m.__name__)
def test_every_export_tag_of_the_core_has_a_decoder(core: Any) -> None:
    names = {tag.name for tag in core.ExportTag}
    assert names == set(native._LEAVES) | {"PAIR"}
    assert {t.name: t.value for t in core.ExportTag} == {
        t.name: t.value for t in native._core.ExportTag
    }


def test_a_value_with_every_export_tag_decodes_like_the_reference() -> None:
    theta = np.array([[0.5], [-1.0]])
    ref, nat = (
        ndvm.compile(EXPORTS_EVERY_TAG, backend=b).evaluate(theta) for b in ("reference", "native")
    )
    assert repr(nat.value.tolist()) == repr(ref.value.tolist())
    backend = registry.get("native")
    low = backend.lowered(ndvm.compile(EXPORTS_EVERY_TAG, backend="native").compiled)
    raw = backend._context().run(
        low.core, theta, low.constraints, [], [], 1, native._run_options(Limits(), None)
    )
    seen = {int(t) for _, (enc, _arrays) in raw.groups for t in enc[:, 0]}
    tags = native._core.ExportTag
    assert seen == {t.value for t in tags} - {tags.OTHER.value}
    value = native._decode(raw.groups[0][1], low.strings)[0]
    tail = value
    for _ in range(10):
        tail = tail.cdr
    assert tail.car is tail.cdr.car  # SHARED: the same pair object, not a copy


# a run's result: the core's Run, a named tuple of these fields in this order
RUN_FIELDS = (
    "numeric", "value", "status", "grad", "grad_needs_numeric", "errors", "groups",
    "steps", "tape", "heap", "replayed", "blocks", "chains", "pairs", "updates",
)  # fmt: skip


def _run_result(run: Any, core: Any) -> None:
    assert type(run) is core.Run and isinstance(run, tuple) and len(run) == len(RUN_FIELDS)
    assert run.__match_args__ == RUN_FIELDS
    assert tuple(run) == tuple(getattr(run, f) for f in RUN_FIELDS)
    assert type(run.errors) is list and type(run.groups) is list
    for name in RUN_FIELDS[RUN_FIELDS.index("steps") :]:
        assert type(getattr(run, name)) is (bool if name == "replayed" else int)
    assert dict(zip(native._STATS, run[native._STATS_AT :], strict=True)) == {
        k: getattr(run, k) for k in native._STATS
    }


def _owned_array(a: Any, dtype: Any, shape: tuple[int, ...]) -> None:
    assert type(a) is np.ndarray and a.dtype == dtype and a.shape == shape
    assert a.flags.c_contiguous and a.flags.writeable and not a.flags.owndata
    assert type(a.base).__name__ == "PyCapsule"  # the elements' owner, freed with the array


@pytest.mark.parametrize("core", _cores(), ids=lambda m: m.__name__)
def test_a_runs_arrays_are_numpy_arrays_that_own_their_elements(core: Any) -> None:
    core_module = core
    dtype = "float32" if core is native._core32 else "float64"
    backend = registry.get("native")
    ctx = backend._context(dtype)
    opts = native._run_options(Limits(), None, dtype)
    num = ndvm.compile("(params (a 1.0) (k 0.3)) (* a (exp (- (* k x))))", inputs=("x",)).compiled
    low = backend.lowered(num)
    theta = np.ascontiguousarray(RNG.normal(size=(3, 2)))
    kinds, arrays, n_data = native._input_arrays(num, {"x": X})
    core = low.program(dtype, num)
    run = ctx.run(core, theta, low.constraints, kinds, arrays, n_data, opts, True)
    _run_result(run, core_module)
    assert run.numeric is True
    _owned_array(run.value, np.float64, (3, 5))
    _owned_array(run.status, np.int8, (3, 5))
    _owned_array(run.grad, np.float64, (3, 2))
    expect = theta[:, :1] * np.exp(-theta[:, 1:] * X)
    np.testing.assert_allclose(run.value, expect, rtol=1e-6 if dtype == "float32" else 1e-14)
    kept = run.value.copy()
    run.value[:] = -1.0  # the caller's to change: the next run's arrays are new
    again = ctx.run(core, theta, low.constraints, kinds, arrays, n_data, opts)
    assert again.value.tobytes() == kept.tobytes() and again.grad is None
    structural = ndvm.compile(EXPORTS_EVERY_TAG, backend="native").compiled
    low = backend.lowered(structural)
    theta = np.array([[0.5], [-1.0]])
    raw = ctx.run(low.program(dtype, structural), theta, low.constraints, [], [], 1, opts)
    _run_result(raw, core_module)
    assert raw.numeric is False and raw.value is None and raw.grad is None
    for mask, (enc, exported) in raw.groups:
        _owned_array(mask, np.uint8, (2, 1))
        _owned_array(enc, np.int64, (len(enc), 4))
        for a in exported:
            assert type(a.base).__name__ == "PyCapsule" and a.dtype == np.float64
    del raw, run, again
    gc.collect()  # the capsules free the elements; nothing else holds them


class _Sub(np.ndarray):
    """An ndarray subclass: the core reads it through nanobind's caster, not in place."""


def _layouts(a: np.ndarray) -> list[Any]:
    """``a`` (C-contiguous) in layouts a run reads in place and in layouts nanobind converts:
    a strided view, Fortran order, a subclass, a read-only view."""
    strided = np.empty((*a.shape[:-1], 2 * a.shape[-1]), dtype=a.dtype)[..., ::2]
    strided[...] = a
    readonly = a.copy()
    readonly.flags.writeable = False
    return [a, strided, np.asfortranarray(a), a.view(_Sub), readonly]


@pytest.mark.parametrize("core", _cores(), ids=lambda m: m.__name__)
def test_a_run_reads_each_array_alike_in_place_or_converted(core: Any) -> None:
    """theta, constraints and inputs: a C-contiguous NumPy array is read in place, anything
    else through nanobind's conversion; the results are bitwise the same, and what the run
    refuses (a wrong layout, type or shape) is a typed error, never a crash."""
    dtype = "float32" if core is native._core32 else "float64"
    backend = registry.get("native")
    ctx = backend._context(dtype)
    opts = native._run_options(Limits(), None, dtype)
    src = "(params (a 1.0) (k 0.3 positive)) (+ (* a (exp (- (* k x)))) (ref m 1 0))"
    prog = ndvm.compile(src, inputs=("x", "m"), backend="native").compiled
    low = backend.lowered(prog)
    program = low.program(dtype, prog)
    theta = np.ascontiguousarray(RNG.normal(size=(4, 2)))
    m = np.arange(6.0).reshape(3, 2)
    kinds, arrays, n_data = native._input_arrays(prog, {"x": X, "m": ndvm.const(m)})
    cons = np.asarray(low.constraints)
    assert cons.dtype == np.int32 and cons.flags.c_contiguous  # what the API passes
    base = ctx.run(program, theta, cons, kinds, arrays, n_data, opts, True)
    want = (base.value.tobytes(), base.grad.tobytes())
    ref = ndvm.compile(src, inputs=("x", "m"), backend="reference")
    expect = ref.evaluate(theta, {"x": X, "m": ndvm.const(m)}).value
    tol = {"rtol": 1e-5, "atol": 1e-6} if dtype == "float32" else {"rtol": 1e-13}
    np.testing.assert_allclose(base.value, expect, **tol)
    variants = [(t, cons, arrays) for t in _layouts(theta)]
    variants += [(theta, c, arrays) for c in _layouts(cons)]
    variants += [(theta, cons, [x, arrays[1]]) for x in _layouts(arrays[0])]
    variants += [(theta, cons, [arrays[0], c]) for c in _layouts(arrays[1])]
    for th, c, arr in variants:
        got = ctx.run(program, th, c, kinds, arr, n_data, opts, True)
        assert (got.value.tobytes(), got.grad.tobytes()) == want
    bad = [
        (theta.astype(theta.dtype.newbyteorder()), cons, arrays),  # no byte swap
        (theta, cons.astype(cons.dtype.newbyteorder()), arrays),
        (theta, cons, [arrays[0].astype(">f8"), arrays[1]]),
        (theta.tolist(), cons, arrays),  # nor a list (the API makes arrays of them)
        (theta[:, :1].copy(), cons, arrays),  # one parameter short
        (theta, cons[:1].copy(), arrays),
        (theta, cons, [arrays[0][:2].copy(), arrays[1]]),  # fewer data lanes than n_data
        (theta, cons, [arrays[0], "m"]),
        ("theta", cons, arrays),
    ]
    for th, c, arr in bad:
        try:
            ctx.run(program, th, c, kinds, arr, n_data, opts, True)
        except (TypeError, ValueError, errors.NativeError):
            continue
        raise AssertionError(f"a run accepted {th!r}, {c!r}, {arr!r}")


# (source, inputs, cotangent maker from the value's shape)
ONE_CROSSING = [
    (
        "(params (a 1.0) (k 0.3 positive)) (* a (exp (- (* k x))))",
        {"x": X},
        lambda shape: RNG.normal(size=shape),
    ),
    (
        "(params (a 1.0) (k 0.3 positive)) (* a (exp (- (* k x))))",
        {"x": X},
        lambda shape: RNG.normal(size=shape[1:]),  # [Ng]: broadcast over lanes
    ),
    ("(params (a 1.0) (b 2.0)) (* (vec a b) (vec 3 (sin a)))", {}, lambda shape: None),
    (
        "(params (a 1.0) (b 2.0)) (* (vec a b) (vec 3 (sin a)))",
        {},
        lambda shape: RNG.normal(size=shape[-1:]),  # [2]: one weight per element
    ),
    (
        "(params (a 0.5) (b 1.0)) (matmul (mat (list a b) (list b 1)) (mat (list 1 a) (list 2 b)))",
        {},
        lambda shape: RNG.normal(size=shape),
    ),
    (
        "(params (a 0.5) (b 1.0)) (if (> a 0) (* a a b) (sin (* a b)))",
        {},
        lambda shape: RNG.normal(size=(shape[0], 1)),
    ),
    (
        "(params (a 0.9) (b 0.1)) (define (f n acc) (if (= n 0) acc (f (- n 1) (+ b (* acc a)))))"
        " (f 6 1)",
        {},
        lambda shape: np.float64(2.5),
    ),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", range(len(ONE_CROSSING)))
def test_one_crossing_gradient_equals_run_then_gradient_bitwise(case: int, dtype: str) -> None:
    src, inputs, make_ct = ONE_CROSSING[case]
    if dtype == "float32" and native._core32 is None:
        pytest.skip("the float32 core is not built")
    program = ndvm.compile(src, inputs=tuple(inputs), backend="native").compiled
    backend = registry.get("native")
    low = backend.lowered(program)
    P = len(program.params)
    theta = np.ascontiguousarray(RNG.normal(size=(4, P)))
    kinds, arrays, n_data = native._input_arrays(program, inputs)
    ctx, core = backend._context(dtype), low.program(dtype, program)
    opts = native._run_options(Limits(), None, dtype)
    first = ctx.run(core, theta, low.constraints, kinds, arrays, n_data or 1, opts)
    ct = make_ct(first.value.shape)
    full = None if ct is None else np.ascontiguousarray(np.broadcast_to(ct, first.value.shape))
    two = ctx.gradient(full, P)
    one = backend.run(
        program, theta, inputs, grad=True, cotangent=ct, limits=Limits(), dialect=None, dtype=dtype
    )
    np.testing.assert_array_equal(one.value, first.value)
    assert one.grad.tobytes() == two.tobytes()
    assert np.isfinite(two).all()


@pytest.mark.parametrize("backend", ["reference", "native"])
def test_a_cotangent_that_does_not_broadcast_is_a_value_error(backend: str) -> None:
    program = ndvm.compile("(params (a 1.0)) (* a x)", inputs=("x",), backend=backend).compiled
    with pytest.raises(ValueError, match="broadcast"):
        registry.get(backend).run(
            program,
            np.ones((2, 1)),
            {"x": X},
            grad=True,
            cotangent=np.ones(3),
            limits=Limits(),
            dialect=None,
        )


def test_run_options_are_validated_and_named() -> None:
    core = native._core
    opts = core.RunOptions(max_steps=7, deadline=1.5, dmci=True)
    assert (opts.max_steps, opts.deadline, opts.dmci) == (7, 1.5, True)
    with pytest.raises(errors.NativeError, match="must be positive"):
        core.RunOptions(max_depth=0)
    with pytest.raises(TypeError):
        core.RunOptions(max_steps=-1)
    assert native._run_options(Limits(), "dmci") is native._run_options(Limits(), "dmci")


def test_run_options_are_those_of_each_limits_object_and_call() -> None:
    """Options cached per Limits object (by identity) are the ones its fields and the call's
    dialect, dtype, client and replay give, whichever object or call came first."""
    few, many = Limits(max_steps=3), Limits(max_steps=5000, deadline=2.0)
    for _ in range(2):
        for lim in (few, many, Limits(max_steps=3)):
            for dialect, client, replay in (("dmci", 0, True), (None, 1, False)):
                opts = native._run_options(lim, dialect, "float64", client, replay)
                assert (opts.max_steps, opts.deadline) == (lim.max_steps, lim.deadline or 0.0)
                assert (opts.dmci, opts.client, opts.replay) == (dialect == "dmci", client, replay)
    assert native._run_options(few, None) is native._run_options(Limits(max_steps=3), None)
    src = "(loop ((i 0)) (if (< i 10) (recur (+ i 1)) i))"
    for lim in (few, many):  # the fields, not the first object's options
        native._run_options(lim, None)
    assert ndvm.compile(src, limits=many).evaluate().value[0, 0] == 10
    with pytest.raises(errors.StepLimitExceeded):
        ndvm.compile(src, limits=few).evaluate()


def test_adam_options_refuse_an_array_of_the_wrong_type() -> None:
    program = ndvm.compile("(params (a 1.0)) (* a a)", backend="native").compiled
    backend = registry.get("native")
    low = backend.lowered(program)
    adam = native._core.AdamOptions()
    adam.steps = 2
    adam.lower = np.zeros(1, dtype=np.int64)
    with pytest.raises(errors.NativeError, match="AdamOptions.lower"):
        backend._context().optimize(
            low.core, np.ones((1, 1)), low.constraints, [], [], 1,
            native._run_options(Limits(), None), adam,
        )  # fmt: skip


def test_inputs_are_read_afresh_on_every_call_and_validated() -> None:
    """No input array is kept between calls: in-place changes and new arrays are seen."""
    src = "(params (a 1.0)) (+ (* a x) (ref m 1) y)"
    prog = ndvm.compile(src, inputs=("x", "m", "y"), backend="native")
    x, m = X.copy(), ndvm.const(np.array([1.0, 2.0]))
    given = {"x": x, "m": m, "y": np.array(0.5)}
    theta = np.array([[2.0]])
    first = prog.evaluate(theta, given).value.copy()
    x *= 3.0  # in place: same layout, new contents
    m.array[1] = -1.0
    again = prog.evaluate(theta, given).value
    np.testing.assert_array_equal(again, 2.0 * x[None, :] - 1.0 + 0.5)
    assert not np.array_equal(first, again)
    other = prog.evaluate(theta, {**given, "x": x + 1.0}).value  # another array, same layout
    np.testing.assert_array_equal(other, again + 2.0)
    with pytest.raises(errors.NdvmError, match="is empty"):
        prog.evaluate(theta, {**given, "x": np.zeros(0)})
    with pytest.raises(errors.NdvmError, match="unknown input"):
        prog.evaluate(theta, {**given, "z": x})
    with pytest.raises(errors.NdvmError, match="data lanes"):
        prog.evaluate(theta, {**given, "y": np.ones(3)})
    lists = prog.evaluate(theta, {**given, "x": x.tolist(), "y": 0.5}).value  # not cached
    np.testing.assert_array_equal(lists, again)
