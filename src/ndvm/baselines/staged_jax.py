"""Staged JAX baseline: translate a program's IR into one ``jax.jit`` function per candidate.

Translation is partial evaluation at trace time: structure (lists, closures, loop counters,
shapes) is evaluated in Python; only numbers that depend on parameters or data become traced JAX
arrays. So the straight-line and bounded-loop subset stages (loops unroll), and a branch whose
test depends on a parameter or a data value is refused (``StagingError``). Compile (trace + XLA)
and steady-state calls are timed separately. JAX runs with float64 inside ``jax.enable_x64``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any

import jax
import jax.numpy as jnp
import jax.scipy.special
import numpy as np

from ndvm.backends.base import STATUS_NONFINITE, RunResult
from ndvm.backends.inputs import classify_inputs
from ndvm.baselines.kernels import constraint_transform, numeric_impls
from ndvm.errors import NdvmError
from ndvm.lang import ir
from ndvm.lang.ir import CompiledProgram
from ndvm.prims import PRIMS, Kind, Shape
from ndvm.values import NIL, VOID, Pair, from_iterable, iter_list

_JaxOps = SimpleNamespace(
    exp=jnp.exp, log=jnp.log, log1p=jnp.log1p, expm1=jnp.expm1, sqrt=jnp.sqrt, abs=jnp.abs,
    sin=jnp.sin, cos=jnp.cos, tan=jnp.tan, asin=jnp.arcsin, acos=jnp.arccos, atan=jnp.arctan,
    atan2=jnp.arctan2, sinh=jnp.sinh, cosh=jnp.cosh, tanh=jnp.tanh, asinh=jnp.arcsinh,
    acosh=jnp.arccosh, atanh=jnp.arctanh, floor=jnp.floor, ceil=jnp.ceil, round=jnp.round,
    trunc=jnp.trunc, sign=jnp.sign, hypot=jnp.hypot, where=jnp.where, isnan=jnp.isnan,
    erf=jax.scipy.special.erf, sigmoid=jax.nn.sigmoid,
    softplus=lambda x: jnp.logaddexp(0.0, x), cbrt=jnp.cbrt, fmod=jnp.fmod, pow=jnp.power,
    matmul=jnp.matmul, swapaxes=jnp.swapaxes, inv=jnp.linalg.inv, det=jnp.linalg.det,
    logdet=lambda a: jnp.linalg.slogdet(a)[1], solve=jnp.linalg.solve,
    cholesky=jnp.linalg.cholesky, cross=jnp.cross,
    sum=lambda x, axis: jnp.sum(x, axis=axis),
    trace=lambda a: jnp.trace(a, axis1=-2, axis2=-1),
)  # fmt: skip
JAX_IMPLS = numeric_impls(_JaxOps)


class StagingError(NdvmError):
    """The program is outside the stageable subset (e.g. a branch on a parameter)."""


class Arr:
    """A number, vector or matrix payload: ``val`` is ``[lanes_b, lanes_n, *struct]``."""

    __slots__ = ("val", "struct")

    def __init__(self, val: Any, struct: tuple[int, ...]) -> None:
        self.val = val
        self.struct = struct


class _Closure:
    __slots__ = ("lam", "env")

    def __init__(self, lam: ir.Lambda, env: Any) -> None:
        self.lam = lam
        self.env = env


class _Prim:
    __slots__ = ("code",)

    def __init__(self, code: int) -> None:
        self.code = code


class _Tail:
    __slots__ = ("fn", "args")

    def __init__(self, fn: Any, args: list[Any]) -> None:
        self.fn = fn
        self.args = args


class _Frame:
    __slots__ = ("vals", "parent")

    def __init__(self, vals: list[Any], parent: _Frame | None) -> None:
        self.vals = vals
        self.parent = parent


_UNSET = object()
# Unrolling bounds: beyond them XLA compile time and memory explode (a 1000-op chain at B=2
# made XLA 0.10 CPU allocate > 20 GB); kalman80 stages about 1,300 numeric operations.
MAX_STEPS = 100_000
MAX_OPS = 1_500


def _concrete(x: Any) -> bool:
    return type(x) is not Arr or isinstance(x.val, np.ndarray)


def _lanes(x: Any) -> Any:
    """Payload with two lane axes (floats become ``[1, 1]``)."""
    if type(x) is Arr:
        return x.val
    if isinstance(x, (float, int, np.floating)) and not isinstance(x, bool):
        return np.full((1, 1), float(x))
    raise StagingError(f"expected a number, got {type(x).__name__}")


def _struct(x: Any) -> tuple[int, ...]:
    return x.struct if type(x) is Arr else ()


class Stager:
    """Evaluates the IR at trace time with ``params``/``inputs`` bound to traced payloads."""

    def __init__(self, params: list[Any], inputs: list[Any], max_steps: int = MAX_STEPS) -> None:
        self.params = params
        self.inputs = inputs
        self.steps = 0
        self.max_steps = max_steps
        self.ops = 0
        self.max_ops = MAX_OPS

    def value(self, node: Any, env: _Frame | None) -> Any:
        r = self.eval(node, env)
        return self.apply(r.fn, r.args) if type(r) is _Tail else r

    def eval(self, node: Any, env: _Frame | None) -> Any:  # noqa: C901 - dispatch on node
        self.steps += 1
        if self.steps > self.max_steps:
            raise StagingError(
                f"program too large to stage: more than {self.max_steps} IR steps to unroll"
            )
        t = type(node)
        if t is ir.Const:
            v = node.value
            return float(v) if type(v) is int else v
        if t is ir.Local:
            e = env
            for _ in range(node.depth):
                e = e.parent  # type: ignore[union-attr]
            v = e.vals[node.index]  # type: ignore[union-attr]
            if v is _UNSET:
                raise StagingError(f"variable {node.name!r} used before its definition")
            return v
        if t is ir.Param:
            return self.params[node.index]
        if t is ir.Input:
            return self.inputs[node.index]
        if t is ir.PrimCall:
            return self.prim(node.code, [self.value(a, env) for a in node.args])
        if t is ir.If:
            test = self.value(node.test, env)
            return self.eval(node.then if self.truthy(test, node) else node.orelse, env)
        if t is ir.Let:
            return self.eval(node.body, _Frame([self.value(i, env) for i in node.inits], env))
        if t is ir.Letrec:
            frame = _Frame([_UNSET] * len(node.inits), env)
            for i, init in enumerate(node.inits):
                frame.vals[i] = self.value(init, frame)
            return self.eval(node.body, frame)
        if t is ir.Call:
            fn = self.value(node.fn, env)
            args = [self.value(a, env) for a in node.args]
            return _Tail(fn, args) if node.tail else self.apply(fn, args)
        if t is ir.Lambda:
            return _Closure(node, env)
        if t is ir.Seq or t is ir.Or:
            for e in node.exprs[:-1]:
                v = self.value(e, env)
                if t is ir.Or and self.truthy(v, node):
                    return v
            return self.eval(node.exprs[-1], env)
        if t is ir.PrimRef:
            return _Prim(node.code)
        if t is ir.Assert:
            if not self.truthy(self.value(node.expr, env), node):
                raise StagingError(f"assertion failed: {node.text}")
            return VOID
        raise StagingError(f"cannot stage {t.__name__}")

    @staticmethod
    def truthy(v: Any, node: Any) -> bool:
        if v is False:
            return False
        if isinstance(v, np.ndarray) and v.dtype == bool:
            if v.all() or not v.any():
                return bool(v.all())
            raise StagingError(f"{node.line}:{node.column}: lanes disagree on a data branch")
        if type(v) is _Traced:
            raise StagingError(
                f"{node.line}:{node.column}: branch depends on a parameter or data value "
                "(staging needs control flow known at trace time)"
            )
        return True

    def apply(self, fn: Any, args: list[Any]) -> Any:
        while True:
            if type(fn) is _Prim:
                return self.prim(fn.code, args)
            if type(fn) is not _Closure:
                raise StagingError(f"attempt to call {fn!r}")
            lam = fn.lam
            if len(args) < lam.nreq or (len(args) > lam.nreq and not lam.rest):
                raise StagingError(f"{lam.name}: expected {lam.nreq} arguments, got {len(args)}")
            vals = args[: lam.nreq]
            if lam.rest:
                vals.append(from_iterable(args[lam.nreq :]))
            r = self.eval(lam.body, _Frame(vals, fn.env))
            if type(r) is not _Tail:
                return r
            fn, args = r.fn, r.args

    def prim(self, code: int, args: list[Any]) -> Any:
        p = PRIMS.by_code(code)
        if p.kind is Kind.NUMERIC:
            out = _numeric(p, args)
            if not _concrete(out):
                self.ops += 1
                if self.ops > self.max_ops:
                    raise StagingError(
                        f"program too large to stage: more than {self.max_ops} unrolled "
                        "numeric operations"
                    )
            return out
        if p.kind is Kind.PREDICATE:
            return _predicate(p, args)
        if p.name == "apply":
            return self.apply(args[0], args[1:-1] + list(iter_list(args[-1])))
        impl = _STRUCTURAL.get(p.name)
        if impl is None:
            raise StagingError(f"primitive {p.name!r} is not supported by the staged baseline")
        return impl(*args)


class _Traced:
    """A per-lane boolean computed from traced values: usable as data, never as a branch."""


def _numeric(p: Any, args: list[Any]) -> Any:
    structs = [_struct(a) for a in args]
    if p.shape is Shape.CUSTOM:
        out_struct = p.shape_rule(*structs)
    else:
        out_struct = next((s for s in structs if s), ())
        if any(s and s != out_struct for s in structs):
            raise StagingError(f"{p.name}: shapes {structs} do not match")
    if all(_concrete(a) for a in args):
        if all(type(a) is not Arr for a in args):
            return float(p.ref(*args))
        vals = [_lanes(a) for a in args]
        impl = p.ref
    else:
        vals = [_lanes(a) for a in args]
        impl = JAX_IMPLS[p.code]
    if p.shape is not Shape.CUSTOM and out_struct:
        pad = (1,) * len(out_struct)
        vals = [v.reshape(v.shape + pad) if not s else v for v, s in zip(vals, structs)]
    return Arr(impl(*vals), tuple(out_struct))


def _predicate(p: Any, args: list[Any]) -> Any:
    if all(_concrete(a) for a in args):
        out = p.ref(*(a.val if type(a) is Arr else a for a in args))
        return bool(out) if np.ndim(out) == 0 else np.asarray(out, dtype=bool)
    return _Traced()


def _index(x: Any) -> int:
    if type(x) is Arr or not float(x).is_integer():
        raise StagingError(f"expected a concrete integer index, got {x!r}")
    return int(x)


def _vec(*xs: Any) -> Arr:
    vals = [_lanes(x) for x in xs]
    lane = np.broadcast_shapes(*(v.shape for v in vals)) if vals else (1, 1)
    xp = np if all(isinstance(v, np.ndarray) for v in vals) else jnp
    stacked = (
        xp.stack([xp.broadcast_to(v, lane) for v in vals], axis=-1) if vals else np.zeros((1, 1, 0))
    )
    return Arr(stacked, (len(vals),))


def _mat(*rows: Any) -> Arr:
    vecs = [r if type(r) is Arr else _vec(*iter_list(r)) for r in rows]
    lane = np.broadcast_shapes(*(v.val.shape[:2] for v in vecs))
    xp = np if all(isinstance(v.val, np.ndarray) for v in vecs) else jnp
    val = xp.stack([xp.broadcast_to(v.val, lane + v.struct) for v in vecs], axis=-2)
    return Arr(val, (len(vecs), vecs[0].struct[0]))


def _ref(v: Arr, i: Any, j: Any = None) -> Any:
    ii = _index(i)
    if len(v.struct) == 1:
        return Arr(v.val[..., ii], ())
    if j is None:
        return Arr(v.val[..., ii, :], v.struct[1:])
    return Arr(v.val[..., ii, _index(j)], ())


def _not(x: Any) -> Any:
    if type(x) is _Traced:
        return x
    if isinstance(x, np.ndarray) and x.dtype == bool:
        return ~x
    return x is False


def _filled(value: float) -> Callable[..., Arr]:
    def impl(n: Any, m: Any = None) -> Arr:
        dims = (_index(n),) if m is None else (_index(n), _index(m))
        return Arr(np.full((1, 1, *dims), value), dims)

    return impl


def _cxr(path: str) -> Callable[[Any], Any]:
    def impl(x: Any) -> Any:
        for step in reversed(path):
            if type(x) is not Pair:
                raise StagingError(f"c{path}r: expected a pair")
            x = x.car if step == "a" else x.cdr
        return x

    return impl


_STRUCTURAL: dict[str, Callable[..., Any]] = {
    "cons": Pair,
    "list": lambda *xs: from_iterable(xs),
    "length": lambda x: float(len(list(iter_list(x)))),
    "append": lambda *xs: from_iterable(
        [e for x in xs[:-1] for e in iter_list(x)], xs[-1] if xs else NIL
    ),
    "reverse": lambda x: from_iterable(reversed(list(iter_list(x)))),
    "list-ref": lambda x, k: list(iter_list(x))[_index(k)],
    "list-tail": lambda x, k: _cxr("d" * _index(k))(x) if _index(k) else x,
    "iota": lambda n, s=0.0, d=1.0: from_iterable(
        [
            _numeric(PRIMS.by_name("+"), [s, _numeric(PRIMS.by_name("*"), [float(k), d])])
            for k in range(_index(n))
        ]
    ),  # fmt: skip
    "null?": lambda x: x is NIL,
    "pair?": lambda x: type(x) is Pair,
    "number?": lambda x: (type(x) is float) or (type(x) is Arr and not x.struct),
    "vector?": lambda x: type(x) is Arr and len(x.struct) == 1,
    "matrix?": lambda x: type(x) is Arr and len(x.struct) == 2,
    "procedure?": lambda x: type(x) in (_Closure, _Prim),
    "not": _not,
    "vec": _vec,
    "mat": _mat,
    "zeros": _filled(0.0),
    "ones": _filled(1.0),
    "eye": lambda n: Arr(np.eye(_index(n)).reshape(1, 1, _index(n), _index(n)), (_index(n),) * 2),
    "make-vector": lambda n, fill=0.0: _vec(*([fill] * _index(n))),
    "ref": _ref,
    "vlen": lambda v: float(v.struct[0]),
    "rows": lambda m: float(m.struct[0]),
    "cols": lambda m: float(m.struct[1]),
    "vector->list": lambda v: from_iterable(_ref(v, float(k)) for k in range(v.struct[0])),
    "list->vector": lambda x: _vec(*iter_list(x)),
    "void": lambda *xs: VOID,
}
for _path in ("a", "d", "aa", "ad", "da", "dd", "aaa", "aad", "ada", "add",
              "daa", "dad", "dda", "ddd"):  # fmt: skip
    _STRUCTURAL[f"c{_path}r"] = _cxr(_path)


def _build(
    program: CompiledProgram, kinds: list[tuple[str, np.ndarray]], B: int, Ng: int
) -> Callable[..., Any]:
    """The traceable function ``(theta [B, P], arrays) -> value [B, Ng, *struct]``."""

    def fn(theta: Any, arrays: tuple[Any, ...]) -> Any:
        params: list[Any] = []
        for i, spec in enumerate(program.params):
            col = theta[:, i][:, None]
            transform = constraint_transform(_JaxOps, spec.constraint)
            params.append(Arr(transform(col) if transform else col, ()))
        inputs: list[Any] = []
        it = iter(arrays)
        for kind, arr in kinds:
            if kind == "scalar":
                inputs.append(float(arr))
            elif kind == "data":
                inputs.append(Arr(next(it)[None, :], ()))
            else:
                inputs.append(Arr(next(it)[None, None], tuple(arr.shape)))
        out = Stager(params, inputs).value(program.body, None)
        if type(out) is not Arr and type(out) is not float:
            raise StagingError("the staged baseline needs a numeric result")
        struct = _struct(out)
        return jnp.broadcast_to(jnp.asarray(_lanes(out)), (B, Ng, *struct))

    return fn


class StagedProgram:
    """One candidate staged and compiled for a fixed lane count and input shapes.

    ``trace_seconds`` (Python translation) and ``compile_seconds`` (trace + XLA compile, the
    whole one-time cost) are measured when it is built; calling it is the steady state.
    """

    def __init__(
        self, program: CompiledProgram, B: int, inputs: Mapping[str, Any], *, grad: bool = True
    ) -> None:
        kinds, n_data = classify_inputs(program.inputs, inputs)
        self.B, self.Ng, self.grad = B, n_data or 1, grad
        self.data_lanes = n_data is not None
        fn = _build(program, kinds, self.B, self.Ng)
        P = len(program.params)

        def value_and_grad(theta: Any, arrays: tuple[Any, ...], ct: Any) -> Any:
            if not grad:
                return fn(theta, arrays), None

            def loss(th: Any) -> Any:
                val = fn(th, arrays)
                c = ct.reshape(ct.shape + (1,) * (val.ndim - ct.ndim))
                return jnp.sum(val * c), val

            (_, val), g = jax.value_and_grad(loss, has_aux=True)(theta)
            return val, g

        with jax.enable_x64(True):
            self.arrays = tuple(jnp.asarray(a) for k, a in kinds if k != "scalar")
            t0 = time.perf_counter()
            try:
                lowered = jax.jit(value_and_grad).lower(
                    jnp.zeros((B, P)), self.arrays, jnp.ones((B, self.Ng))
                )
            except RecursionError:
                raise StagingError("non-tail recursion too deep to unroll at trace time") from None
            t1 = time.perf_counter()
            self._compiled = lowered.compile()
            t2 = time.perf_counter()
        self._ones = np.ones((B, self.Ng))  # host arrays: no extra device op per call
        self.trace_seconds = t1 - t0
        self.compile_seconds = t2 - t0

    def __call__(self, theta: Any, cotangent: Any = None) -> tuple[np.ndarray, Any]:
        """Values ``[B, Ng, *struct]`` and (if staged with grad) d sum(ct * value)/d theta."""
        with jax.enable_x64(True):
            ct = self._ones if cotangent is None else np.asarray(cotangent, dtype=np.float64)
            val, g = self._compiled(np.asarray(theta, dtype=np.float64), self.arrays, ct)
            val = np.asarray(jax.block_until_ready(val))
            return val, (None if g is None else np.asarray(g))


class StagedJaxBackend:
    """Backend-shaped entry point: stage, compile and run once (for equality tests)."""

    name = "staged-jax"

    def run(
        self,
        program: CompiledProgram,
        theta: np.ndarray,
        inputs: Mapping[str, Any],
        *,
        grad: bool,
        cotangent: np.ndarray | None = None,
        **_: Any,
    ) -> RunResult:
        staged = StagedProgram(program, theta.shape[0], inputs, grad=grad)
        ct = None if cotangent is None else np.broadcast_to(cotangent, (staged.B, staged.Ng))
        val, g = staged(theta, ct)
        bad = ~np.isfinite(val.reshape(staged.B, staged.Ng, -1)).all(axis=2)
        status = np.where(bad, STATUS_NONFINITE, 0).astype(np.int8)
        return RunResult(val, status, [], g, staged.data_lanes, True)
