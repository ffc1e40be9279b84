"""The one translator from ndvm IR to array code: partial evaluation at trace time.

The tracer evaluates a program's IR in Python with its parameters and inputs bound to values of
an array namespace (torch tensors, JAX tracers, sympy symbols). Structure — lists, closures,
symbols, loop counters, shapes, branches whose test is a constant — is evaluated here, so loops
unroll and recursion inlines; only numbers that depend on parameters or inputs become framework
values. A branch whose test depends on them (lanes can differ) evaluates both arms and joins
them with an element-wise ``where``; the arms must produce the same structure.

Values: ``float`` (constants), ``Arr(val, struct)`` (a number, vector or matrix payload shaped
``(*lanes, *struct)``; ``val`` is a NumPy array when constant), ``Bool(val)`` (a per-lane
boolean), ``bool`` and the structural values of ``ndvm.values``, and closures/primitives.
Anything else raises ``ExportUnsupported`` with the form's line and column.
"""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Any

import numpy as np

from ndvm.baselines.kernels import numeric_impls, predicate_impls
from ndvm.errors import ExportUnsupported, NdvmError
from ndvm.export import bounded
from ndvm.export.structural import EXPORT
from ndvm.export.values import Arr, Bool, Closure, Prim
from ndvm.lang import ir
from ndvm.prims import PRIMS, Kind, Shape
from ndvm.values import VOID, Pair, String, Symbol, from_iterable, iter_list

MAX_STEPS = 200_000
MAX_OPS = 20_000
_RECURSION_LIMIT = 20_000


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


_FORMS = {ir.If: "if", ir.Or: "or", ir.Call: "call", ir.Assert: "assert", ir.Let: "let",
          ir.Letrec: "letrec", ir.Lambda: "lambda", ir.Seq: "begin"}  # fmt: skip


def unsupported(what: str, node: Any) -> ExportUnsupported:
    """``ExportUnsupported`` naming the form and what is outside the subset, at its position."""
    form = node.name if type(node) is ir.PrimCall else _FORMS.get(type(node), "form")
    line, col = getattr(node, "line", 0) or None, getattr(node, "column", 0) or None
    return ExportUnsupported(f"cannot export ({form} ...): {what}", line, col)


class Tracer:
    """Evaluates IR over namespace ``ns`` with ``params``/``inputs`` bound to traced values.

    ``max_steps`` bounds the IR nodes visited (unrolling), ``max_ops`` the framework
    operations emitted, ``deadline`` the seconds spent: past any of them the program is
    outside the subset (``ExportUnsupported``) rather than a hang. ``max_nodes`` (sympy) bounds
    the nodes of each expression built, counted as a tree (a shared subexpression once per
    use, as sympy's tree walks visit it); the deadline is also a timer (``bounded.deadline``)
    that interrupts the work inside a sympy call, not only between calls.
    """

    def __init__(
        self,
        ns: Any,
        params: list[Any],
        inputs: list[Any],
        *,
        max_steps: int = MAX_STEPS,
        max_ops: int = MAX_OPS,
        deadline: float | None = None,
        max_nodes: int | None = None,
    ) -> None:
        self.ns = ns
        self.impls = _impls(ns)
        self.predicates = predicate_impls(ns)
        if ns.scalar:  # sympy: comparisons as written (evaluation would fold a NaN test away)
            self.predicates = {c: ns.unevaluated(fn) for c, fn in self.predicates.items()}
        self.params = params
        self.inputs = inputs
        self.steps = 0
        self.ops = 0
        self.max_steps = max_steps
        self.max_ops = max_ops
        self.stop = None if deadline is None else time.perf_counter() + deadline
        self.max_nodes = max_nodes
        self.sizes: dict[int, tuple[int, Any]] = {}  # id -> (tree size, expression kept alive)
        self.node: Any = None  # the form being evaluated, for error positions
        self.branch: Any = None  # the last lane-dependent branch (a loop exit that cannot unroll)

    # -- evaluation ------------------------------------------------------------------------
    def run(self, body: Any) -> Any:
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old, _RECURSION_LIMIT))
        timer: Any = contextlib.nullcontext()
        if self.stop is not None:  # interrupts a sympy call too, not only the checks between
            timer = bounded.deadline(max(self.stop - time.perf_counter(), 1e-3))
        try:
            with timer:
                return self.value(body, None)
        except bounded.SympyTimeout:
            if time.perf_counter() < self.stop:  # type: ignore[operator] - an outer timer's
                raise
            raise self._unbounded("translation deadline passed") from None
        except RecursionError:
            raise self._unbounded("recursion too deep to inline at trace time") from None
        finally:
            sys.setrecursionlimit(old)

    def _unbounded(self, what: str) -> ExportUnsupported:
        if self.branch is not None:
            what = "a loop or recursion whose exit depends on parameters or inputs cannot unroll"
            return unsupported(what, self.branch)
        return unsupported(what, self.node)

    def value(self, node: Any, env: _Frame | None) -> Any:
        r = self.eval(node, env)
        return self.apply(r.fn, r.args, node) if type(r) is _Tail else r

    def eval(self, node: Any, env: _Frame | None) -> Any:  # noqa: C901 - dispatch on node
        self._count(node)
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
                raise unsupported(f"variable {node.name!r} used before its definition", node)
            return v
        if t is ir.Param:
            return self.params[node.index]
        if t is ir.Input:
            return self.inputs[node.index]
        if t is ir.PrimCall:
            return self.prim(node.code, [self.value(a, env) for a in node.args], node)
        if t is ir.If:
            test = self.value(node.test, env)
            if type(test) is Bool:
                self.branch = node
                then = self.value(node.then, env)
                return self.select(test, then, self.value(node.orelse, env), node)
            return self.eval(node.then if test is not False else node.orelse, env)
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
            return _Tail(fn, args) if node.tail else self.apply(fn, args, node)
        if t is ir.Lambda:
            return Closure(node, env)
        if t is ir.Seq:
            for e in node.exprs[:-1]:
                self.value(e, env)
            return self.eval(node.exprs[-1], env)
        if t is ir.Or:
            return self._or(node, env)
        if t is ir.PrimRef:
            return Prim(node.code)
        if t is ir.Assert:
            ok = self.value(node.expr, env)
            if type(ok) is Bool:
                raise unsupported(f"assert on a lane-dependent value: {node.text}", node)
            if ok is False:
                raise unsupported(f"assertion fails at trace time: {node.text}", node)
            return VOID
        raise unsupported(f"form {t.__name__}", node)

    def _count(self, node: Any) -> None:
        self.node = node
        self.steps += 1
        if self.steps > self.max_steps:
            raise self._unbounded(f"more than {self.max_steps} forms to unroll")
        if self.stop is not None and self.steps % 256 == 0 and time.perf_counter() > self.stop:
            raise self._unbounded("translation deadline passed")

    def _sized(self, val: Any) -> Any:
        """``val``, or ``ExportUnsupported`` when its tree has more than ``max_nodes`` nodes."""
        if self.max_nodes is not None and _tree_size(val, self.sizes) > self.max_nodes:
            raise unsupported(f"the expression grows past {self.max_nodes} nodes (shared "
                              "subexpressions counted once per use)", self.node)  # fmt: skip
        return val

    def _or(self, node: ir.Or, env: _Frame | None) -> Any:
        pending: list[Any] = []  # lane-dependent tests seen so far, innermost last
        result: Any = None
        for e in node.exprs:
            v = self.value(e, env)
            if type(v) is Bool:
                pending.append(v)
                continue
            result = v
            if v is not False:
                break
        else:
            if not pending:
                return result
            result = False if result is None else result
        for test in reversed(pending):
            result = self.select(test, test, result, node)
        return result

    def apply(self, fn: Any, args: list[Any], node: Any) -> Any:
        while True:
            if type(fn) is Prim:
                return self.prim(fn.code, args, node)
            if type(fn) is not Closure:
                raise unsupported(f"call of a non-procedure {fn!r}", node)
            lam = fn.lam
            if len(args) < lam.nreq or (len(args) > lam.nreq and not lam.rest):
                raise unsupported(f"{lam.name}: expected {lam.nreq} arguments, got {len(args)}",
                                  node)  # fmt: skip
            vals = args[: lam.nreq]
            if lam.rest:
                vals.append(from_iterable(args[lam.nreq :]))
            r = self.eval(lam.body, _Frame(vals, fn.env))
            if type(r) is not _Tail:
                return r
            fn, args = r.fn, r.args

    # -- primitives ------------------------------------------------------------------------
    def prim(self, code: int, args: list[Any], node: Any) -> Any:
        p = PRIMS.by_code(code)
        try:
            if p.kind is Kind.NUMERIC:
                return self.numeric(p, args)
            if p.kind is Kind.PREDICATE:
                return self.predicate(p, args)
            if p.name == "apply":
                return self.apply(args[0], args[1:-1] + list(iter_list(args[-1])), node)
            if p.code not in EXPORT:
                raise unsupported(f"primitive {p.name!r}", node)
            return EXPORT[p.code](self, *args)
        except (ExportUnsupported, RecursionError):
            raise
        except (NdvmError, TypeError, ValueError, IndexError, RuntimeError) as exc:
            raise unsupported(f"{p.name}: {exc}", node) from None

    def concrete(self, x: Any) -> bool:
        return not (type(x) is Arr and not isinstance(x.val, np.ndarray)) and type(x) is not Bool

    def lanes(self, x: Any) -> Any:
        if type(x) is Arr:
            return x.val
        if isinstance(x, float | int | np.floating) and not isinstance(x, bool):
            return float(x)
        raise ExportUnsupported(f"expected a number, got {type(x).__name__}")

    def numeric(self, p: Any, args: list[Any]) -> Any:
        structs = [x.struct if type(x) is Arr else () for x in args]
        if p.shape is Shape.CUSTOM:
            out_struct = p.shape_rule(*structs)
        else:
            out_struct = next((s for s in structs if s), ())
            if any(s and s != out_struct for s in structs):
                raise NdvmError(f"shapes {structs} do not match")
        vals = [self.lanes(a) for a in args]
        if all(self.concrete(a) for a in args):
            if all(type(a) is not Arr for a in args):
                return float(p.ref(*vals))
            impl = p.ref
            vals = [np.asarray(v, dtype=np.float64) for v in vals]
        else:
            self.ops += 1
            if self.ops > self.max_ops:
                raise self._unbounded(f"more than {self.max_ops} operations to unroll")
            if self.stop is not None and time.perf_counter() > self.stop:
                raise self._unbounded("translation deadline passed")
            impl = self.impls[p.code]
            vals = [self._framework(v) for v in vals]
        if p.shape is not Shape.CUSTOM and out_struct:
            pad = (1,) * len(out_struct)
            vals = [v if s else v.reshape(tuple(v.shape) + pad) for v, s in zip(vals, structs)]
        return Arr(self._sized(impl(*vals)), tuple(out_struct))

    def _framework(self, v: Any) -> Any:
        return v if self.ns.traced(v) else self.ns.asarray(v)

    def predicate(self, p: Any, args: list[Any]) -> Any:
        if all(self.concrete(a) for a in args):
            out = p.ref(*(a.val if type(a) is Arr else a for a in args))
            if np.ndim(out) == 0:
                return bool(out)
            raise NdvmError("a predicate on constant vectors")
        vals = [self._framework(self.lanes(a)) for a in args]
        return Bool(self.predicates[p.code](*vals))

    # -- joins -----------------------------------------------------------------------------
    def select(self, test: Bool, a: Any, b: Any, node: Any) -> Any:
        """Per-lane ``a if test else b`` for two values of the same structure."""
        if a is b:
            return a
        num = (float, int, Arr)
        if type(a) in num and type(b) in num:
            sa = a.struct if type(a) is Arr else ()
            sb = b.struct if type(b) is Arr else ()
            if sa != sb:
                raise unsupported(f"branch arms of different shapes {sa} and {sb}", node)
            c = test.val
            if sa and not self.ns.scalar:
                c = c.reshape(tuple(c.shape) + (1,) * len(sa))
            va, vb = (self._framework(self.lanes(x)) for x in (a, b))
            return Arr(self._sized(self.ns.where(c, va, vb)), sa)
        if type(a) in (bool, Bool) and type(b) in (bool, Bool):
            va, vb = (x.val if type(x) is Bool else x for x in (a, b))
            return Bool((test.val & va) | (~test.val & vb))
        if type(a) is Pair and type(b) is Pair:
            return Pair(
                self.select(test, a.car, b.car, node), self.select(test, a.cdr, b.cdr, node)
            )
        if type(a) is type(b) and type(a) in (Symbol, String) and a == b:
            return a
        raise unsupported("branch arms of different structure where lanes can differ", node)


def _tree_size(x: Any, sizes: dict[int, tuple[int, Any]]) -> int:
    """Nodes of sympy expression ``x`` as a tree, memoized by identity over one translation
    (linear in the new nodes, however much the tree repeats shared subexpressions)."""
    args = getattr(x, "args", None)
    if not args:
        return 1
    seen = sizes.get(id(x))
    if seen is None:
        seen = sizes[id(x)] = (1 + sum(_tree_size(a, sizes) for a in args), x)
    return seen[0]


def _impls(ns: Any) -> dict[int, Any]:
    impls = numeric_impls(ns)
    if ns.scalar:  # sympy: the closed forms of the extremal primitives, and no cancelling
        impls[PRIMS.by_name("min").code] = ns.min
        impls[PRIMS.by_name("max").code] = ns.max
        kept: dict[int, Any] = {}
        impls = {code: ns.keep(fn, kept) for code, fn in impls.items()}
    return impls
