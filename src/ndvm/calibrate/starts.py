"""Starts from the data: a parameter that shifts an input starts inside the input's range.

A fit's jittered starts are drawn around the declared initial values (``N(0, 1)`` for a
parameter declared at 0), which cannot reach a location such as the centre of a peak at
wavelength 520 or an onset at t = 45: from there the model is flat (``exp`` of a large
negative number) and no gradient leads to it. A *shift* is a free parameter ``p`` that
appears as ``(- x p)``, ``(- p x)``, ``(+ x p)`` or ``(+ p x)`` with ``x`` an input; its
natural values are the input's own (``x - p`` is zero at ``p = x``; ``x + p`` at
``p = -x``). ``place_shifts`` sets a shift to a uniform draw over the input's observed range
(with the sign of its role) in every other start, the odd ones, so half of the starts keep
the jitter and programs without shifts draw exactly the random numbers they drew before.
Programs with binding forms (``let``, ``lambda``, ``define``, ...) are left alone: an input's
name there may be rebound.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

Shift = tuple[int, str, float]  # (parameter index, input name, sign of the draw)

_BINDER = re.compile(r"\(\s*(?:let\*?|letrec\*?|lambda|define|do|loop)[\s()]")
_PAIR = re.compile(r"\(\s*([-+])\s+([^\s()\[\]\"';]+)\s+([^\s()\[\]\"';]+)\s*\)")


def shifts(source: str, inputs: Collection[str], params: Sequence[str]) -> tuple[Shift, ...]:
    """The shifts of a program's source text (one per parameter: its first role in the
    text); none when the program binds names (``let``, ``lambda``, ``define``, ``do``,
    ``loop`` and their variants)."""
    if _BINDER.search(source):
        return ()
    index = {name: i for i, name in enumerate(params)}
    found: dict[int, Shift] = {}
    for op, a, b in _PAIR.findall(source):
        for x, p in ((a, b), (b, a)):
            i = index.get(p)
            if i is not None and i not in found and x in inputs:
                found[i] = (i, x, 1.0 if op == "-" else -1.0)
    return tuple(found[i] for i in sorted(found))


def input_range(values: Any) -> tuple[float, float] | None:
    """``(min, max)`` of the finite entries of a real input array; None for anything else
    (a scalar, a complex or non-numeric array, no finite entry). Not cached: a cache would
    keep the caller's arrays alive, and one pass over the data is small beside a fit."""
    if not (isinstance(values, np.ndarray) and values.ndim >= 1 and values.dtype.kind in "fiu"):
        return None
    v = values[np.isfinite(values)] if values.dtype.kind == "f" else values
    if not v.size:
        return None
    lo, hi = float(v.min()), float(v.max())
    return (lo, hi) if np.isfinite(lo) and np.isfinite(hi) else None


def place_shifts(
    theta: np.ndarray, K: int, found: Sequence[Shift], inputs: Mapping[str, Any],
    rng: np.random.Generator,
) -> np.ndarray:  # fmt: skip
    """Set each shift in the odd starts of ``theta [series * K, P]`` (series-major, in
    place) to ``sign * U(lo, hi)`` over its input's range; unchanged when ``K < 2``, without
    shifts, or where an input's range is unknown."""
    if K < 2 or not found:
        return theta
    rows = np.arange(theta.shape[0])
    rows = rows[rows % K % 2 == 1]
    for i, x, sign in found:
        rng_x = input_range(inputs.get(x))
        if rng_x is None:
            continue
        lo, hi = rng_x
        theta[rows, i] = sign * (lo + (hi - lo) * rng.random(rows.size))
    return theta


def program_shifts(program: Any) -> tuple[Shift, ...]:
    """The shifts of ``program`` (an ``ndvm.Program``) among its free (unconstrained)
    parameters (a scan of its source text, about a microsecond: not cached)."""
    specs = program.param_specs
    found = shifts(program.source, program.inputs, program.params)
    return tuple(s for s in found if specs[s[0]].constraint == "free")
