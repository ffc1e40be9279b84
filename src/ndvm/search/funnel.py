"""Validation funnel run before calibration; every rejection carries its stage and reason.

Stages, in order: ``parse`` (the reader), ``size`` (three times the grammar's node budget),
``resolve`` (compile: unbound variables, bad forms), ``params`` (at least one parameter unless the
task scores parameter-free candidates as they are — ``SearchSpec.fixed``, data tasks; every
declared parameter used), ``finite`` (evaluating at the initial parameters of one start at least
gives one finite value per training point), ``duplicate`` (an earlier candidate of the same dedupe
scope had the same skeleton and was calibrated). The stages run in the worker on the one
compiled program (``ndvm.search.evaluate``); the driver makes the final duplicate decision in
index order, so it does not depend on how jobs were spread over workers.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ndvm.api import Program
from ndvm.backends import lean
from ndvm.backends.inputs import prepared
from ndvm.errors import LimitExceeded, NdvmError
from ndvm.identity import ByIdentity
from ndvm.lang.datum import Datum, Num, SList, Sym, symbols_in
from ndvm.lang.front import skeleton_of
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
    pop, extend = stack.pop, stack.extend
    while stack:
        d = pop()
        n += 1
        if type(d) is SList:  # (the datum classes have no subclasses)
            extend(d.items)
            if d.tail is not None:
                stack.append(d.tail)
    return n


def check_source(data: tuple[Datum, ...] | list[Datum] | int, grammar: Any) -> Verdict:
    """The ``size`` stage on the read program (before it is compiled), or on its node count
    (``complexity``, ``facts.Facts.complexity``)."""
    size = data if type(data) is int else complexity(data)  # type: ignore[arg-type]
    limit = (grammar.max_size if grammar is not None else 40) * 3
    if size > limit:
        return Verdict(False, "size", f"{size} nodes (limit {limit})", complexity=size)
    return Verdict(True, complexity=size)


def check_params(
    prog: Program, data: Iterable[Datum], task: Any, size: int,
    used: Collection[str] | None = None, skeleton: str | None = None,
) -> Verdict:  # fmt: skip
    """The ``params`` stage (no evaluation): at least one parameter unless the task scores
    parameter-free candidates, and every declared parameter used (``used``: the symbols of
    ``data`` when the reader gave them, ``reader.read_with_symbols``); the skeleton is the
    program's (``Program.skeleton``; ``skeleton`` when the caller has it), computed from
    ``data`` when it is not known yet."""
    if skeleton is None:
        data = data if isinstance(data, tuple | list) else tuple(data)
        skeleton = skeleton_of(prog.compiled, data)  # (not read again)
    names = prog.params
    n_params = len(names)
    if n_params == 0 and not (task.search is not None and task.search.fixed):
        return Verdict(False, "params", "no parameters", skeleton, n_params, size)
    if used is None:
        used = symbols_in(data)
    unused = [p for p in names if p not in used]
    if unused:
        why = f"declared but unused: {', '.join(unused)}"
        return Verdict(False, "params", why, skeleton, n_params, size)
    return Verdict(True, "", "", skeleton, n_params, size)


def check_finite(prog: Program, task: Any, theta: np.ndarray, v: Verdict) -> Verdict:
    """The ``finite`` stage: one finite number per training point at one of the starts
    ``theta`` [K, P] at least (a step limit or the deadline is stage ``limit``); ``v`` is the
    ``params`` stage's verdict. A start that fails or is not finite is the calibration's to
    drop. When no start passes, the reason is the first error (every start failed) or the
    non-finite output. The first start is walked alone first (it passes as a rule)."""
    if theta.shape[0] > 1:
        first = check_finite(prog, task, theta[:1], v)
        if first.ok or first.stage == "limit":
            return first
    data = task.data()
    try:
        arr, errors = _values(prog, theta, _train_inputs(data, prog.inputs))
    except LimitExceeded as exc:  # a limit of the whole run (its heap): too big, as a timeout
        return Verdict(False, "limit", f"{type(exc).__name__}: {exc}", **v.info)
    except NdvmError as exc:
        return Verdict(False, "finite", f"{type(exc).__name__}: {exc}", **v.info)
    B = theta.shape[0]
    failed = None  # the starts with a lane error (None: none has)
    for mask, err in errors:
        if isinstance(err, LimitExceeded):  # a timeout: the candidate is too slow
            return Verdict(False, "limit", f"{type(err).__name__}: {err}", **v.info)
        lanes = np.asarray(mask, dtype=bool).reshape(B, -1).any(axis=1)
        failed = lanes if failed is None else failed | lanes
    if failed is not None and failed.all():
        err = errors[0][1]
        return Verdict(False, "finite", f"{type(err).__name__}: {err}", **v.info)
    if arr.dtype == object or arr.shape != (B, _points(data)):
        names = ", ".join(task.inputs)
        return Verdict(False, "finite", f"output is not one number per point of {names}", **v.info)
    if failed is None and B == 1:  # (one start: every point finite)
        ok = bool(np.isfinite(arr).all())
    else:
        passed = np.isfinite(arr).all(axis=1)
        ok = bool((passed if failed is None else passed & ~failed).any())
    if not ok:
        return Verdict(False, "finite", "non-finite output at the initial parameters", **v.info)
    if v.ok and not v.stage and not v.reason:
        return v  # (a passed verdict with v's facts: v itself)
    return Verdict(True, "", "", v.skeleton, v.n_params, v.complexity)


_TRAIN = ByIdentity(64)  # task data -> its prepared training inputs (per program inputs), points


def _memo(data: Any) -> dict[Any, Any]:
    memo = _TRAIN.get(data)
    return memo if memo is not None else _TRAIN.put(data, {})  # type: ignore[no-any-return]


def _train_inputs(data: Any, names: tuple[str, ...]) -> Mapping[str, Any]:
    """The training inputs checked and laid out once per data object (``Prepared``)."""
    return prepared(_memo(data), names, data.train_inputs)


def _points(data: Any) -> int:
    """The training points (``_n_points``), once per data object."""
    memo = _memo(data)
    n = memo.get("points")
    if n is None:
        n = memo["points"] = _n_points(data.train_inputs)
    return n  # type: ignore[no-any-return]


def _values(
    prog: Program, theta: np.ndarray, inputs: Mapping[str, Any]
) -> tuple[np.ndarray, Any]:
    """``np.asarray(prog.eval(theta, inputs))`` for ``theta [B, P]`` and its lane errors; a
    float64 program's from the raw result (``backends.lean.values``, one evaluation even when
    lanes fail, for a program that does not raise on them; else ``Program.evaluate``: the lane
    grid without its data-lane axis when there are no data lanes, as ``eval`` gives it)."""
    if prog.dtype != "float64":
        value = prog.eval(theta, dict(inputs))
        return np.asarray(value), value.errors
    got = lean.values(prog, theta, inputs)
    if got is not None and (not got[2] or prog.strict is False):
        return (got[0] if got[1] else got[0][:, 0]), got[2]
    res = prog.evaluate(theta, inputs)
    return (res.value if res.data_lanes else res.value[:, 0]), res.errors


NUM, BOOL = "number", "truth"  # what ``_kind`` infers: one number / truth value per point
_TYPED = (Kind.NUMERIC, Kind.PREDICATE)


def scalar_valued(data: Sequence[Datum], names: Collection[str]) -> bool:
    """Whether the program provably gives one number per data point whatever its parameter
    values: one form built from numbers, ``names`` (its parameters and its one-number-per-point
    inputs), elementwise numeric primitives, predicates (in conditions) and ``if``.
    Conservative: False for anything else (loops, bindings, vectors, ...). Such a program
    passes the ``finite`` stage exactly when its value at one start at least is finite, which a
    least-squares fit's first loss tells (``evaluate`` folds the stage into the fit)."""
    try:
        return len(data) == 1 and _kind(data[0], names) == NUM
    except RecursionError:
        return False


def _kind(d: Datum, names: Collection[str]) -> str | None:
    t = type(d)  # (the datum classes have no subclasses)
    if t is Num:
        return NUM
    if t is Sym:
        return NUM if d.name in names else None
    if t is not SList or d.tail is not None or not d.items:
        return None
    items = d.items
    head = items[0]
    if type(head) is not Sym or head.name in names:
        return None
    if head.name == "if":
        if len(items) != 4 or _kind(items[1], names) not in (NUM, BOOL):
            return None
        return NUM if _kind(items[2], names) == _kind(items[3], names) == NUM else None
    out = _HEADS.get(head.name, _UNSEEN)
    if out is _UNSEEN:
        out = head_kind(head.name)
    if out is None:
        return None
    for x in items[1:]:
        if _kind(x, names) != NUM:
            return None
    return out


_HEADS: dict[str, str | None] = {}  # primitive name -> what it gives (``head_kind``)
_UNSEEN = object()


def head_kind(name: str) -> str | None:
    """What a call of the primitive ``name`` on numbers gives: one number (numeric), one truth
    value (predicate), or None (no such primitive, or one of another kind or shape)."""
    out = _HEADS.get(name, _UNSEEN)
    if out is _UNSEEN:
        prim = PRIMS.get(name)
        if prim is None or prim.kind not in _TYPED or prim.shape == Shape.CUSTOM:
            out = None
        else:
            out = NUM if prim.kind == Kind.NUMERIC else BOOL
        _HEADS[name] = out
    return out  # type: ignore[return-value]


def _n_points(inputs: Any) -> int:
    for v in dict(inputs).values():
        if np.ndim(v) == 1:
            return int(np.shape(v)[0])
    return 1
