"""Validation funnel run before calibration; every rejection carries its stage and reason.

Stages, in order: ``parse`` (the reader), ``size`` (the grammar's node budget), ``resolve``
(compile: unbound variables, bad forms), ``params`` (at least one parameter, every declared
parameter used), ``finite`` (evaluating at the initial parameters gives a finite value for
every training point, and the value depends on the input), ``duplicate`` (skeleton already
seen in this search).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

import ndvm
from ndvm.errors import NdvmError
from ndvm.lang.datum import Datum, SList, Sym
from ndvm.lang.reader import read
from ndvm.search.calib import initial_theta
from ndvm.search.candidate import Candidate, skeleton_hash
from ndvm.search.problems import Problem


@dataclass(frozen=True)
class Verdict:
    ok: bool
    stage: str = ""
    reason: str = ""
    skeleton: str = ""
    n_params: int = 0
    complexity: int = 0

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


def symbols(data: Iterable[Datum]) -> set[str]:
    out: set[str] = set()
    stack = list(data)
    while stack:
        d = stack.pop()
        if isinstance(d, Sym):
            out.add(d.name)
        elif isinstance(d, SList):
            stack.extend(d.items)
    return out


def check(
    cand: Candidate,
    problem: Problem,
    seed: int,
    seen: set[str] | frozenset[str] = frozenset(),
    backend: str | None = None,
    max_steps: int = 200_000,
    deadline: float = 1.0,
) -> Verdict:
    """Run the funnel on one candidate; ``seen`` holds skeleton hashes already evaluated."""
    try:
        data = read(cand.src)
    except NdvmError as exc:
        return Verdict(False, "parse", str(exc))
    size = complexity(data)
    if size > problem.grammar.max_size * 3:
        return Verdict(False, "size", f"{size} nodes (limit {problem.grammar.max_size * 3})")
    x = problem.input_name
    try:
        prog = ndvm.compile(
            cand.src,
            cand.params,
            (x,),
            backend=backend,
            strict=False,
            limits=ndvm.Limits(max_steps=max_steps, deadline=deadline),
        )
    except NdvmError as exc:
        return Verdict(False, "resolve", f"{type(exc).__name__}: {exc}")
    skel, n_params = prog.skeleton, len(prog.params)
    base = {"skeleton": skel, "n_params": n_params, "complexity": size}
    if n_params == 0:
        return Verdict(False, "params", "no parameters", **base)
    unused = [p for p in prog.params if p not in symbols(data)]
    if unused:
        return Verdict(False, "params", f"declared but unused: {', '.join(unused)}", **base)
    theta = initial_theta(n_params, problem.lanes, seed, problem.init_scale)
    try:
        value = prog.eval(theta, **{x: problem.x_train})
    except NdvmError as exc:
        return Verdict(False, "finite", f"{type(exc).__name__}: {exc}", **base)
    if value.errors:
        err = value.errors[0][1]
        return Verdict(False, "finite", f"{type(err).__name__}: {err}", **base)
    arr = np.asarray(value)
    if arr.dtype == object or arr.shape != (problem.lanes, problem.x_train.shape[0]):
        return Verdict(False, "finite", f"output is not one number per point of {x}", **base)
    if not np.all(np.isfinite(arr)):
        return Verdict(False, "finite", "non-finite output at the initial parameters", **base)
    h = skeleton_hash(skel)
    if h in seen:
        return Verdict(False, "duplicate", f"skeleton already evaluated: {skel}", **base)
    return Verdict(True, **base)
