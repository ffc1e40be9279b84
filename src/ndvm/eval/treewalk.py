"""The reference evaluator: a CEK machine over the resolved IR, batched over lanes.

Control lives in an explicit continuation stack (Python recursion is never used for program
recursion), calls push nothing (proper tail calls everywhere), and a divergent branch pushes a
join frame: each arm runs under its lane mask, and the join merges the arms per lane or, when
their results differ in structure, continues each lane group separately (a "thread" with a
copy of the stack). A runtime error fails only the lanes of the thread that raised it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ndvm.errors import (
    DeadlineExceeded,
    HeapLimitExceeded,
    LimitExceeded,
    NdvmError,
    ProgramError,
)
from ndvm.eval import lists as _lists  # noqa: F401  (registers its implementations)
from ndvm.eval import vectors as _vectors  # noqa: F401  (registers its implementations)
from ndvm.eval.branches import LaneTests
from ndvm.eval.clock import LaneClock
from ndvm.eval.export import error_message
from ndvm.eval.frames import (
    K_ASSERT,
    K_CALL,
    K_IF,
    K_JOIN,
    K_LET,
    K_LETREC,
    K_OR,
    K_PRIM,
    K_SEQ,
    JoinState,
    Outcome,
    Overrun,
)
from ndvm.eval.inline import make_inline
from ndvm.eval.limits import Limits
from ndvm.eval.merge import merge_groups
from ndvm.eval.runtime import (
    REFERENCE,
    Closure,
    Diverge,
    Env,
    PrimProc,
    Runtime,
    Unassigned,
    type_name,
)
from ndvm.lang import ir
from ndvm.prims import PRIMS, Kind, Prim
from ndvm.values import NIL

_APPLY = PRIMS.by_name("apply").code
_ERROR = PRIMS.by_name("error").code
_MISSING = object()
_CHECK_EVERY = 4096


class Machine(LaneTests):
    def __init__(self, rt: Runtime, params: list[Any], inputs: list[Any], limits: Limits) -> None:
        self.rt = rt
        self.params = params
        self.inputs = inputs
        self.limits = limits
        self.steps = 0
        self.check_at = _CHECK_EVERY
        self.clock = LaneClock(limits, rt.B, rt.Ng)
        self.t0 = self.clock.t0
        self.threads: list[tuple[list[Any], np.ndarray | None, Any]] = []
        self.outcome = Outcome(rt)
        self.all_lanes = np.ones((rt.B, rt.Ng), dtype=bool)
        self._inlined: dict[int, Any] = {}
        rt.spend = self._spend
        rt.tick = self._tick

    def run(self, body: ir.Node) -> Outcome:
        root = JoinState(self.all_lanes, [])
        self._thread([(K_JOIN, root)], None, body, None, None)
        while self.threads:
            kont, mask, value = self.threads.pop()
            self._thread(kont, mask, None, None, value)
        self.outcome.steps = self.steps
        return self.outcome

    # -- helpers --------------------------------------------------------------------------
    def _simple(self, a: ir.Node, env: Env | None) -> Any:
        t = type(a)
        if t is ir.Const:
            return a.value  # type: ignore[union-attr]
        if t is ir.Local:
            e = env
            for _ in range(a.depth):  # type: ignore[union-attr]
                e = e.parent  # type: ignore[union-attr]
            v = e.vals[a.index]  # type: ignore[union-attr]
            if type(v) is Unassigned:
                self.rt.node = a
                raise self.rt.error(f"variable {v.name!r} used before its definition")
            return v
        if t is ir.Param:
            return self.params[a.index]  # type: ignore[union-attr]
        return self.inputs[a.index]  # type: ignore[union-attr]

    def _count(self, mask: np.ndarray | None) -> int:
        return self.rt.B * self.rt.Ng if mask is None else int(mask.sum())

    def _set_mask(self, mask: np.ndarray | None) -> None:
        """Switch the running lanes; the steps so far are charged to the previous ones."""
        self.clock.charge(self.steps, self.rt.mask)
        self.rt.mask = mask

    def _spend(self, n: int) -> None:
        """Work inside a primitive (e.g. ``equal?`` on big structures) counts as steps."""
        self.steps += n
        if self.steps >= self.check_at:
            self.check_at = self.steps + _CHECK_EVERY
            err = self.clock.check(self.steps, self.rt.mask, 0)
            if err is None and self.clock.over(self.rt.mask) is not None:
                err = self.clock.step_error()
            if err is not None:
                raise err

    def _tick(self) -> None:
        if self.limits.deadline is not None:
            err = self.clock.check(self.steps, self.rt.mask, 0)
            if err is not None:
                raise err

    def _limit(self, kont: list[Any], expr: Any) -> NdvmError | Overrun | None:
        """At a check point: a limit error of the running lanes, an ``Overrun``, or None.

        Past the deadline, lanes that hold their value and only return it through pending
        frames (``expr`` is None) go on; the first expression left to evaluate fails them."""
        err = self.clock.check(self.steps, self.rt.mask, len(kont))
        if type(err) is DeadlineExceeded and expr is None:
            return None
        if err is not None:
            return err
        bad = self.clock.over(self.rt.mask)
        if bad is None:
            return None
        active = self.all_lanes if self.rt.mask is None else self.rt.mask
        if bool((bad == active).all()):
            return self.clock.step_error()
        return Overrun(active, bad)

    # -- the main loop -------------------------------------------------------------------
    def _thread(
        self, kont: list[Any], mask: np.ndarray | None, expr: Any, env: Env | None, val: Any
    ) -> None:
        """Run one thread until it finishes or waits on a join. A lane error, a divergence or
        a limit of the running lanes becomes ``pending`` and is handled as the next step,
        inside the same ``try`` (handling it may start another arm, which may fail too)."""
        self._set_mask(mask)
        max_depth = self.limits.max_depth
        pending: Any = None
        while True:
            self.steps += 1
            if pending is None and (self.steps >= self.check_at or len(kont) > max_depth):
                pending = self._limit(kont, expr)
                self.check_at = self.steps + (1 if self.clock.expired else _CHECK_EVERY)
            try:
                if pending is not None:
                    exc, pending = pending, None
                    nxt = self._recover(kont, exc, expr, env, val)
                    if nxt is None:
                        return
                    expr, env, val = nxt
                elif expr is not None:
                    expr, env, val = self._eval(kont, expr, env)
                else:
                    frame = kont.pop()
                    if frame[0] == K_JOIN:
                        nxt = self._deliver(kont, frame[1], val)
                        if nxt is None:
                            return
                        expr, env, val = nxt
                    else:
                        expr, env, val = self._resume(kont, frame, val)
            except Diverge as div:
                pending = div
            except HeapLimitExceeded:
                raise  # the heap is shared by every lane: the whole evaluation stops
            except (ProgramError, LimitExceeded) as exc:
                pending = exc

    def _recover(
        self, kont: list[Any], exc: Any, expr: Any, env: Env | None, val: Any
    ) -> tuple[Any, ...] | None:
        if type(exc) is Diverge:
            return self._split(kont, exc.groups, ("retry", self._pending, self._retry))
        if type(exc) is Overrun:
            arms = [(exc.ok, ("resume", expr, env, val)), (exc.bad, ("throw", None))]
            return self._split_masks(kont, exc.active, arms)
        return self._fail(kont, exc)

    def _inline(self, e: Any) -> Any:
        key = id(e)
        f = self._inlined.get(key, _MISSING)
        if f is _MISSING:
            f = self._inlined[key] = make_inline(self.rt, e, self.params, self.inputs)
        return f

    def _eval(self, kont: list[Any], e: Any, env: Env | None) -> tuple[Any, Any, Any]:
        f = self._inline(e)
        if f is not None:
            return None, env, f(env)
        t = type(e)
        if t is ir.If:
            tf = self._inline(e.test)
            if tf is not None:
                return self._branch(kont, e, env, tf(env))
            kont.append((K_IF, e, env))
            return e.test, env, None
        if t is ir.Call:
            ff = self._inline(e.fn)
            if ff is not None:
                getters = [self._inline(a) for a in e.args]
                if None not in getters:
                    return self._call(kont, ff(env), tuple(g(env) for g in getters), e)
            kont.append((K_CALL, e, -1, (), env))
            return e.fn, env, None
        if t is ir.PrimCall:
            getters = [self._inline(a) for a in e.args]
            if None not in getters:
                return self._apply_prim(
                    kont, PRIMS.by_code(e.code), tuple(g(env) for g in getters), e
                )
            kont.append((K_PRIM, e, 0, (), env))
            return e.args[0], env, None
        if t is ir.PrimRef:
            return None, env, self.rt.prim_proc(e.code)
        if t is ir.Lambda:
            self.rt.alloc()
            return None, env, Closure(e, env)
        if t is ir.Seq:
            if len(e.exprs) > 1:
                kont.append((K_SEQ, e, 1, env))
            return e.exprs[0], env, None
        if t is ir.Or:
            kont.append((K_OR, e, 1, env))
            return e.exprs[0], env, None
        if t is ir.Let:
            if not e.inits:
                self.rt.alloc()
                return e.body, Env([], env), None
            kont.append((K_LET, e, 0, (), env))
            return e.inits[0], env, None
        if t is ir.Letrec:
            self.rt.alloc()
            new = Env([Unassigned(n) for n in e.names] or [Unassigned("?")] * len(e.inits), env)
            if not e.inits:
                return e.body, new, None
            kont.append((K_LETREC, e, 0, new))
            return e.inits[0], new, None
        if t is ir.Assert:
            kont.append((K_ASSERT, e))
            return e.expr, env, None
        raise TypeError(f"unknown IR node {t.__name__}")

    def _resume(self, kont: list[Any], frame: tuple[Any, ...], val: Any) -> tuple[Any, Any, Any]:
        tag = frame[0]
        if tag == K_PRIM:
            _, e, i, vals, env = frame
            vals = (*vals, val)
            i += 1
            if i < len(e.args):
                kont.append((K_PRIM, e, i, vals, env))
                return e.args[i], env, None
            return self._apply_prim(kont, PRIMS.by_code(e.code), vals, e)
        if tag == K_CALL:
            _, e, i, vals, env = frame
            vals = (*vals, val)
            i += 1
            if i < len(e.args):
                kont.append((K_CALL, e, i, vals, env))
                return e.args[i], env, None
            return self._call(kont, vals[0], vals[1:], e)
        if tag == K_IF:
            return self._branch(kont, frame[1], frame[2], val)
        if tag == K_SEQ:
            _, e, i, env = frame
            if i + 1 < len(e.exprs):
                kont.append((K_SEQ, e, i + 1, env))
            return e.exprs[i], env, None
        if tag == K_OR:
            _, e, i, env = frame
            return self._or(kont, e, i, env, val)
        if tag == K_LET:
            _, e, i, vals, env = frame
            vals = (*vals, val)
            if i + 1 < len(e.inits):
                kont.append((K_LET, e, i + 1, vals, env))
                return e.inits[i + 1], env, None
            self.rt.alloc()
            return e.body, Env(list(vals), env), None
        if tag == K_LETREC:
            _, e, i, new = frame
            new.vals[i] = val
            if i + 1 < len(e.inits):
                kont.append((K_LETREC, e, i + 1, new))
                return e.inits[i + 1], new, None
            return e.body, new, None
        if tag == K_ASSERT:
            return self._assert(kont, frame[1], val)
        raise TypeError(f"bad continuation frame {tag}")

    # -- control ------------------------------------------------------------------------
    def _split_masks(
        self, kont: list[Any], active: np.ndarray, arms: list[tuple[np.ndarray, tuple[Any, ...]]]
    ) -> tuple[Any, ...]:
        js = JoinState(active, arms[1:][::-1])
        kont.append((K_JOIN, js))
        mask, action = arms[0]
        return self._start_arm(kont, mask, action)

    def _split(self, kont: list[Any], groups: list[np.ndarray], action: tuple[Any, ...]):  # type: ignore[no-untyped-def]
        active = self.all_lanes if self.rt.mask is None else self.rt.mask
        return self._split_masks(kont, active, [(g, action) for g in groups])

    def _start_arm(
        self, kont: list[Any], mask: np.ndarray, action: tuple[Any, ...]
    ) -> tuple[Any, ...]:
        self._set_mask(mask)
        kind = action[0]
        if kind == "eval":
            return action[1], action[2], None
        if kind == "value":
            return None, None, action[1]
        if kind == "raise":
            self.rt.node = action[2]
            raise self.rt.error(action[1])
        if kind == "resume":
            return action[1], action[2], action[3]
        if kind == "throw":
            raise self.clock.step_error()
        return action[2](kont, action[1])

    def _deliver(self, kont: list[Any], js: JoinState, val: Any) -> tuple[Any, ...] | None:
        mask = self.all_lanes if self.rt.mask is None else self.rt.mask
        js.results.append((mask, val))
        js.outstanding -= int(mask.sum())
        return self._service(kont, js)

    def _service(self, kont: list[Any], js: JoinState) -> tuple[Any, ...] | None:
        while True:
            if js.arms:
                kont.append((K_JOIN, js))
                mask, action = js.arms.pop()
                return self._start_arm(kont, mask, action)
            if js.outstanding > 0:
                return None  # siblings (forked threads) still owe lanes to this join
            if js.results:
                self._set_mask(js.mask)  # the merge itself runs on every lane of the join
                groups = merge_groups(self.rt, js.results)
                js.results = []
                if not kont:  # the root join: evaluation is complete
                    self.outcome.groups.extend(groups)
                    return None
                for mask, value in groups[1:]:
                    self.threads.append((list(kont), mask, value))
                mask, value = groups[0]
                self._set_mask(None if bool(mask.all()) else mask)
                return None, None, value
            # every lane of this join failed: keep unwinding to the next join
            while kont and kont[-1][0] != K_JOIN:
                kont.pop()
            if not kont:
                return None
            js = kont.pop()[1]

    def _fail(self, kont: list[Any], exc: NdvmError) -> tuple[Any, ...] | None:
        mask = self.all_lanes if self.rt.mask is None else self.rt.mask
        lanes = np.argwhere(mask)
        exc.lanes = tuple(int(b) for b in np.unique(lanes[:, 0]))
        self.outcome.errors.append((mask, exc))
        n = int(mask.sum())
        for frame in kont:
            if frame[0] == K_JOIN:
                frame[1].outstanding -= n
        while kont and kont[-1][0] != K_JOIN:
            kont.pop()
        if not kont:
            return None
        return self._service(kont, kont.pop()[1])

    # -- application ----------------------------------------------------------------------
    def _retry(self, kont: list[Any], pending: tuple[Any, ...]) -> tuple[Any, ...]:
        fn, args, e = pending
        return self._call(kont, fn, args, e)

    def _call(self, kont: list[Any], fn: Any, args: tuple[Any, ...], e: Any) -> tuple[Any, ...]:
        t = type(fn)
        if t is Closure:
            lam = fn.lam
            n = len(args)
            if n == lam.nreq and not lam.rest:
                vals = list(args)
            elif lam.rest and n >= lam.nreq:
                self.rt.alloc(n - lam.nreq)
                vals = [*args[: lam.nreq], self.rt.build(args[lam.nreq :])]
            else:
                self.rt.node = e
                want = f"at least {lam.nreq}" if lam.rest else str(lam.nreq)
                raise self.rt.error(f"{lam.name}: expects {want} argument(s), got {n}")
            self.rt.alloc()
            return lam.body, Env(vals, fn.env), None
        if t is PrimProc:
            prim = fn.prim
            if not prim.arity.accepts(len(args)):
                self.rt.node = e
                raise self.rt.error(
                    f"{prim.name} expects {prim.arity.describe()} argument(s), got {len(args)}"
                )
            return self._apply_prim(kont, prim, args, e)
        self.rt.node = e
        raise self.rt.error(f"cannot call {type_name(fn)}: it is not a procedure")

    def _apply_prim(
        self, kont: list[Any], prim: Prim, args: tuple[Any, ...], e: Any
    ) -> tuple[Any, ...]:
        rt = self.rt
        rt.node = e
        kind = prim.kind
        self._pending = (rt.prim_proc(prim.code), args, e)
        if kind is Kind.NUMERIC or kind is Kind.PREDICATE:
            return None, None, rt.numeric(prim, args)
        if kind is Kind.STRUCTURAL:
            return None, None, REFERENCE[prim.code](rt, *args)
        if prim.code == _APPLY:
            fn = args[0]
            tail, end = rt.walk(args[-1], "apply", cap=False)
            if end is not NIL:
                raise rt.error("apply: the last argument must be a proper list")
            return self._call(kont, fn, (*args[1:-1], *tail), e)
        if prim.code == _ERROR:
            raise rt.error(error_message(args))
        raise rt.error(f"primitive {prim.name} cannot be applied here")
