"""Dust pruning: fitted constants that do nothing are removed and the smaller program refitted.

A fit can drive a constant to (numerically) zero or one, leaving it in the reported law:
``0.1767 (0.4502 q + 2.1e-19) / (ε r)``, ``(β + 2.7e-17)(α cos(θ - 1.7e-17) + 1)``. A
parameter is dust when replacing its value by 0 or 1 changes the program's values on the
training rows by at most ``DUST`` times the target's standard deviation (relative to the data
scale: a constant of 1e-19 is not dust where the target is of that order). Every dust
parameter is replaced by its literal, the identities of ``simplify`` remove it
(``(+ e 0)``, ``(* 1 e)``, ``(- e 0)``), the smaller program is refitted from the remaining
values with the task's protocol, and it replaces the original only when its validation loss
is no worse (within ``LOSS_RTOL``).
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Any

import numpy as np

from ndvm.errors import NdvmError
from ndvm.lang.datum import Datum, Num, SList, Sym, symbols_in, to_source
from ndvm.lang.reader import read
from ndvm.search.candidate import Candidate, Record
from ndvm.search.simplify import simplify

DUST = 1e-6  # largest change of the values, in target standard deviations, of a dust constant
LOSS_RTOL = 1e-6  # the pruned program may lose this much (relative) validation loss
REPLACEMENTS = (0.0, 1.0)


def _values(prog: Any, values: dict[str, float], cols: dict[str, np.ndarray], n: int) -> Any:
    theta = prog.unconstrain([values[p] for p in prog.params])
    out = np.asarray(prog.eval(theta, **cols), dtype=np.float64)
    return np.broadcast_to(out.reshape(-1) if out.size > 1 else out, (n,))


def dust(prog: Any, values: dict[str, float], cols: dict[str, np.ndarray],
         target: np.ndarray) -> dict[str, float]:  # fmt: skip
    """``{parameter: 0.0 or 1.0}`` for each dust parameter of ``prog`` at ``values``."""
    y = np.asarray(target, dtype=np.float64).reshape(-1)
    scale = float(np.std(y)) if y.size > 1 else 0.0
    if not (math.isfinite(scale) and scale > 0):
        return {}
    base = _values(prog, values, cols, len(y))
    out: dict[str, float] = {}
    for p in prog.params:
        for r in REPLACEMENTS:
            if values[p] == r:
                continue
            try:
                moved = _values(prog, {**values, p: r}, cols, len(y))
            except (NdvmError, ArithmeticError, ValueError):
                continue
            change = np.abs(moved - base)
            if np.all(np.isfinite(moved)) and float(np.max(change)) <= DUST * scale:
                out[p] = r
                break
    return out


def _substitute(d: Datum, names: dict[str, float]) -> Datum:
    if isinstance(d, Sym) and d.name in names:
        v = names[d.name]
        return Num(v, f"{v:g}")
    if isinstance(d, SList) and d.items and not (isinstance(d.items[0], Sym)
                                                   and d.items[0].name == "quote"):  # fmt: skip
        tail = None if d.tail is None else _substitute(d.tail, names)
        return SList(tuple(_substitute(x, names) for x in d.items), tail, d.line, d.column)
    return d


def prune(task: Any, r: Record) -> Record:
    """``r`` with its dust constants removed and refitted (the module's rule), or ``r``."""
    from ndvm.api import compile as compile_program
    from ndvm.search.evaluate import evaluation
    from ndvm.search.funnel import complexity

    ev = r.evaluation
    if ev is None or r.status != "ok" or not ev.params or task.series != 1:
        return r
    data = task.data()
    cols = {k: np.asarray(v) for k, v in data.train_inputs.items()}
    try:
        prog = compile_program(r.candidate.src, list(ev.params), task.inputs, free_params=True)
        gone = dust(prog, dict(ev.params), cols, np.asarray(data.train_target))
        if not gone:
            return r
        pruned = tuple(simplify(_substitute(d, gone)) for d in read(r.candidate.src))
        used = symbols_in(pruned)
        params = [p for p in prog.params if p not in gone and p in used]
        if not params:
            return r
        src = " ".join(to_source(d) for d in pruned)
        small = compile_program(src, params, task.inputs, free_params=True)
        t0 = time.perf_counter()
        init = np.array([[ev.params[p] for p in small.params]], dtype=np.float64)
        cal = task.calibrate(small, starts=1, init=init, diagnostics=False)
        new = evaluation(task, cal, task.score(cal, data), t0)
    except (NdvmError, ArithmeticError, ValueError):
        return r
    if new.status != "ok" or not new.selection_loss <= ev.selection_loss * (1 + LOSS_RTOL):
        return r
    new = replace(new, extra={**new.extra, "pruned_from": r.candidate.src})
    cand = Candidate(src, tuple(small.params), f"prune:{r.candidate.origin}")
    return replace(r, candidate=cand, skeleton=small.skeleton, n_params=len(small.params),
                   complexity=complexity(pruned), evaluation=new)  # fmt: skip
