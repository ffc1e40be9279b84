"""Validation funnel run before calibration; every rejection carries its stage and reason.

Stages, in order: ``parse`` (the reader), ``size`` (three times the grammar's node budget),
``resolve`` (compile: unbound variables, bad forms), ``params`` (at least one parameter unless the
task scores parameter-free candidates as they are — ``SearchSpec.fixed``, data tasks; every
declared parameter used), ``finite`` (evaluating at the first start's initial parameters gives
one finite value per training point), ``duplicate`` (an earlier candidate of the same dedupe
scope had the same skeleton and was calibrated). The stages run in the worker on the one
compiled program (``ndvm.search.evaluate``); the driver makes the final duplicate decision in
index order, so it does not depend on how jobs were spread over workers.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ndvm.api import Program
from ndvm.errors import LimitExceeded, NdvmError
from ndvm.lang.datum import Datum, Num, SList, Sym, symbols_in
from ndvm.prims import PRIMS
from ndvm.prims.registry import Kind, Shape


@dataclass(frozen=True)
class Verdict:
    ok: bool
    stage: str = ""
    reason: str = ""
    skeleton: str = ""
    n_params: int = 0
    complexity: int = 0

    @property
    def info(self) -> dict[str, Any]:
        return {"skeleton": self.skeleton, "n_params": self.n_params, "complexity": self.complexity}

    @property
    def message(self) -> str:
        return f"{self.stage}: {self.reason}" if self.stage else ""


def complexity(data: Iterable[Datum]) -> int:
    """Number of nodes (atoms and lists) in the program's datum tree."""
    n = 0
    stack = list(data)
    while stack:
        d = stack.pop()
        n += 1
        if isinstance(d, SList):
            stack.extend(d.items)
            if d.tail is not None:
                stack.append(d.tail)
    return n


def check_source(data: tuple[Datum, ...] | list[Datum], grammar: Any) -> Verdict:
    """The ``size`` stage on the read program (before it is compiled)."""
    size = complexity(data)
    limit = (grammar.max_size if grammar is not None else 40) * 3
    if size > limit:
        return Verdict(False, "size", f"{size} nodes (limit {limit})", complexity=size)
    return Verdict(True, complexity=size)


def check_compiled(
    prog: Program, data: Iterable[Datum], task: Any, theta: np.ndarray, size: int
) -> Verdict:
    """The ``params`` and ``finite`` stages on the compiled candidate at ``theta`` [1, P]."""
    v = check_params(prog, data, task, size)
    return check_finite(prog, task, theta, v) if v.ok else v


def check_params(prog: Program, data: Iterable[Datum], task: Any, size: int) -> Verdict:
    """The ``params`` stage (no evaluation): at least one parameter unless the task scores
    parameter-free candidates, and every declared parameter used."""
    skel, n_params = prog.skeleton, len(prog.params)
    base = {"skeleton": skel, "n_params": n_params, "complexity": size}
    if n_params == 0 and not (task.search is not None and task.search.fixed):
        return Verdict(False, "params", "no parameters", **base)
    used = symbols_in(data)
    unused = [p for p in prog.params if p not in used]
    if unused:
        return Verdict(False, "params", f"declared but unused: {', '.join(unused)}", **base)
    return Verdict(True, **base)


def check_finite(prog: Program, task: Any, theta: np.ndarray, v: Verdict) -> Verdict:
    """The ``finite`` stage: one finite number per training point at ``theta`` [1, P] (a
    step limit or the deadline is stage ``limit``); ``v`` is the ``params`` stage's verdict."""
    base = v.info
    train = task.data().train_inputs
    try:
        value = prog.eval(theta, dict(train))
    except NdvmError as exc:
        return Verdict(False, "finite", f"{type(exc).__name__}: {exc}", **base)
    if value.errors:
        err = value.errors[0][1]
        stage = "limit" if isinstance(err, LimitExceeded) else "finite"  # limit: a timeout
        return Verdict(False, stage, f"{type(err).__name__}: {err}", **base)
    arr = np.asarray(value)
    n = _n_points(train)
    if arr.dtype == object or arr.shape != (theta.shape[0], n):
        names = ", ".join(task.inputs)
        return Verdict(False, "finite", f"output is not one number per point of {names}", **base)
    if not np.all(np.isfinite(arr)):
        return Verdict(False, "finite", "non-finite output at the initial parameters", **base)
    return Verdict(True, **base)


# What ``_Kinds`` infers for an expression: one number per point, one truth value per point,
# a ``recur`` (a jump back to its loop: no value of its own); None: anything else or unknown.
_NUM, _BOOL, _JUMP = "number", "truth", "jump"
_TYPED = (Kind.NUMERIC, Kind.PREDICATE)
MAX_ITERATIONS = 10_000  # loop iterations of a folded program's walk (nested loops multiply)


def scalar_valued(data: Sequence[Datum], names: Collection[str]) -> bool:
    """Whether the program provably gives one number per data point whatever its parameter
    values, in a bounded walk: one form built from numbers, ``names`` (its parameters and its
    one-number-per-point inputs), numeric primitives that map numbers to a number, predicates
    (in conditions), ``if``, and counted loops (``(loop ((k 0) ...) (if (= k 8) EXIT (recur
    ... (+ k 1) ...)))``, at most ``MAX_ITERATIONS`` iterations). Conservative: False for
    anything else. Such a program passes the ``finite`` stage exactly when its value at the
    first start is finite, which a least-squares fit's first loss tells (``evaluate`` folds
    the stage into the fit)."""
    return len(data) == 1 and _Kinds(names).of(data[0], {}, None, MAX_ITERATIONS) == _NUM


class _Kinds:
    def __init__(self, names: Collection[str]) -> None:
        self.names = names

    def of(self, d: Datum, env: dict[str, str], arity: int | None, room: int) -> str | None:
        """The kind of ``d`` with loop variables ``env``; ``arity``: the variables of the
        loop a ``recur`` here jumps to (None: no ``recur`` here); ``room``: the iterations
        a loop here may take."""
        if isinstance(d, Num):
            return _NUM
        if isinstance(d, Sym):
            return env.get(d.name) or (_NUM if d.name in self.names else None)
        if not isinstance(d, SList) or d.tail is not None or not d.items:
            return None
        head, args = d.items[0], d.items[1:]
        if not isinstance(head, Sym) or head.name in env or head.name in self.names:
            return None
        if head.name == "if":
            if len(args) != 3 or self.of(args[0], env, None, room) not in (_NUM, _BOOL):
                return None
            kinds = {self.of(x, env, arity, room) for x in args[1:]}
            return _JUMP if kinds == {_JUMP} else _NUM if kinds <= {_NUM, _JUMP} else None
        if head.name == "recur":
            ok = arity == len(args) and all(self.of(x, env, None, room) == _NUM for x in args)
            return _JUMP if ok else None
        if head.name == "loop":
            return self.loop(args, env, room)
        prim = PRIMS.get(head.name)
        if prim is None or prim.kind not in _TYPED or prim.shape == Shape.CUSTOM:
            return None
        if not all(self.of(x, env, None, room) == _NUM for x in args):
            return None
        return _NUM if prim.kind == Kind.NUMERIC else _BOOL

    def loop(self, args: Sequence[Datum], env: dict[str, str], room: int) -> str | None:
        """``(loop ((var init) ...) body)``: a number when every init is, the loop is counted
        within ``room`` iterations, and the body is a number (each ``recur`` passing numbers)."""
        if len(args) != 2 or not isinstance(args[0], SList) or args[0].tail is not None:
            return None
        inner, inits = dict(env), []
        for b in args[0].items:
            if not (isinstance(b, SList) and b.tail is None and len(b.items) == 2):
                return None
            var, init = b.items
            if not isinstance(var, Sym) or self.of(init, env, None, room) != _NUM:
                return None
            inner[var.name] = _NUM
            inits.append((var.name, init))
        n = _iterations(inits, args[1])
        if n is None or n > room:
            return None
        return _NUM if self.of(args[1], inner, len(inits), room // max(n, 1)) == _NUM else None


def _iterations(inits: list[tuple[str, Datum]], body: Datum) -> int | None:
    """The iterations of a counted loop: its body ``(if (= k N) EXIT NEXT)`` (or ``>=``, or
    ``(= N k)``), ``k`` a variable from an integer ``k0 <= N``, EXIT without a ``recur`` of
    this loop and each ``recur`` in NEXT passing ``(+ k 1)`` for ``k``; else None."""
    if not (isinstance(body, SList) and len(body.items) == 4 and _is(body.items[0], "if")):
        return None
    test, done, step = body.items[1:]
    if not (isinstance(test, SList) and len(test.items) == 3 and body.tail is None):
        return None
    op, lhs, rhs = test.items
    if isinstance(rhs, Sym) and isinstance(lhs, Num):  # (= N k), (<= N k)
        lhs, rhs, op = rhs, lhs, Sym(">=") if _is(op, "<=") else op
    if not (_is(op, "=") or _is(op, ">=")) or not isinstance(lhs, Sym) or not isinstance(rhs, Num):
        return None
    names = [v for v, _ in inits]
    if lhs.name not in names:
        return None
    k, init = names.index(lhs.name), inits[names.index(lhs.name)][1]
    if not isinstance(init, Num) or not (float(init.value).is_integer()):
        return None
    n = rhs.value - init.value
    if not (float(rhs.value).is_integer() and 0 <= n <= MAX_ITERATIONS):
        return None
    if _recurs(done) or not all(_adds_one(r.items[1 + k], lhs.name) for r in _recurs(step)):
        return None
    return int(n)


def _recurs(d: Datum) -> list[SList]:
    """The ``recur`` forms of the loop whose body holds ``d`` (not those of loops inside)."""
    if not isinstance(d, SList) or not d.items:
        return []
    if _is(d.items[0], "loop"):
        return [r for b in d.items[1:2] for r in _recurs(b)]  # inits only: bodies recur inward
    found = [d] if _is(d.items[0], "recur") else []
    return found + [r for x in d.items for r in _recurs(x)]


def _adds_one(d: Datum, var: str) -> bool:
    """``d`` is ``(+ var 1)`` or ``(+ 1 var)``."""
    if not (isinstance(d, SList) and len(d.items) == 3 and _is(d.items[0], "+")):
        return False
    a, b = d.items[1:]
    return (_is(a, var) and _is_one(b)) or (_is(b, var) and _is_one(a))


def _is(d: Datum, name: str) -> bool:
    return isinstance(d, Sym) and d.name == name


def _is_one(d: Datum) -> bool:
    return isinstance(d, Num) and d.value == 1


def _n_points(inputs: Any) -> int:
    for v in dict(inputs).values():
        if np.ndim(v) == 1:
            return int(np.shape(v)[0])
    return 1
