"""A program per NUMERIC primitive and arity, built from the table, with valid random lanes.

Each operand is made of parameters (a scalar is one, a vector ``(vec ...)`` of 3, a matrix
``(mat ...)`` of 3x3), so the gradient reaches every element. Operand ranks come from the
table (``in_ranks`` for ``Shape.CUSTOM``; scalars otherwise); values are drawn inside each
primitive's domain (``DOMAINS``: intervals for the primitives that need one; the others
draw from [-2, 2]).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ndvm.prims import PRIMS, Prim, Shape

N = 3  # vector length and matrix size
DEFAULT = (-2.0, 2.0)
DOMAINS: dict[str, tuple[float, float]] = {
    "log": (0.2, 3.0),
    "log1p": (-0.8, 2.0),
    "sqrt": (0.2, 3.0),
    "acosh": (1.2, 3.0),
    "atanh": (-0.8, 0.8),
    "asin": (-0.8, 0.8),
    "acos": (-0.8, 0.8),
    "expt": (0.3, 2.0),
    "pow": (0.3, 2.0),
    "/": (0.5, 2.0),
    "quotient": (0.3, 2.0),
    "remainder": (0.3, 2.0),
    "modulo": (0.3, 2.0),
    "cbrt": (0.2, 2.0),  # away from 0, where the derivative is unbounded
}
# Matrix operands that must be well conditioned (inv, solve, det, logdet) or symmetric
# positive definite (cholesky, logdet): drawn as 3 I + small noise, symmetric where needed.
SPD = {"cholesky", "logdet"}
# Primitives that read one triangle of a symmetric input: their gradient is the symmetric one
# (a tangent must be symmetric to compare it with finite differences).
SYMMETRIC_INPUT = {"cholesky"}


@dataclass(frozen=True)
class Case:
    prim: Prim
    nargs: int
    source: str
    n_params: int
    ranks: tuple[int, ...]

    @property
    def id(self) -> str:
        return f"{self.prim.name}/{self.nargs}"


def _ranks(prim: Prim, nargs: int) -> tuple[int, ...]:
    if prim.shape is Shape.CUSTOM and prim.in_ranks:
        want = prim.in_ranks
        return tuple(want[min(i, len(want) - 1)] for i in range(nargs))
    return (0,) * nargs


def _operand(rank: int, first: int) -> tuple[str, int]:
    names = [f"p{first + k}" for k in range(N**rank)]
    if rank == 0:
        return names[0], 1
    if rank == 1:
        return f"(vec {' '.join(names)})", N
    rows = [f"(vec {' '.join(names[r * N : (r + 1) * N])})" for r in range(N)]
    return f"(mat {' '.join(rows)})", N * N


def cases() -> list[Case]:
    """One case per NUMERIC primitive of the table and each arity it accepts (up to 3)."""
    out = []
    for prim in PRIMS.numeric():
        hi = prim.arity.max_args if prim.arity.max_args is not None else 3
        for nargs in range(max(prim.arity.min_args, 1), min(hi, 3) + 1):
            ranks = _ranks(prim, nargs)
            parts, used = [], 0
            for r in ranks:
                text, k = _operand(r, used)
                parts.append(text)
                used += k
            params = " ".join(f"p{k}" for k in range(used))
            src = f"(params {params}) ({prim.name} {' '.join(parts)})"
            out.append(Case(prim, nargs, src, used, ranks))
    return out


def theta(case: Case, lanes: int, rng: np.random.Generator) -> np.ndarray:
    """``[lanes, n_params]`` parameter lanes inside the primitive's domain."""
    name = case.prim.name
    lo, hi = DOMAINS.get(name, DEFAULT)
    cols = []
    for r in case.ranks:
        if r < 2:
            cols.append(rng.uniform(lo, hi, (lanes, N**r)))
            continue
        m = 0.4 * rng.standard_normal((lanes, N, N))
        if name in SPD:
            m = 0.5 * (m + np.swapaxes(m, 1, 2))
        cols.append((m + 3.0 * np.eye(N)).reshape(lanes, N * N))
    return np.concatenate(cols, axis=1)


def tangents(case: Case, lanes: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """``[k, lanes, n_params]`` random directions (symmetric matrix blocks where needed)."""
    u = rng.standard_normal((k, lanes, case.n_params))
    if case.prim.name in SYMMETRIC_INPUT:
        at = 0
        for r in case.ranks:
            if r == 2:
                block = u[..., at : at + N * N].reshape(k, lanes, N, N)
                sym = 0.5 * (block + np.swapaxes(block, -1, -2))
                u[..., at : at + N * N] = sym.reshape(k, lanes, N * N)
            at += N**r
    return u
