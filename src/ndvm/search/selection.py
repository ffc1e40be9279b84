"""Which front entry is the reported model: cross-validated refits and a parsimony rule.

The Pareto front is built on the validation split, which also steers the evolutionary
tournament, so its losses favour what evolution kept, and on small data (a dozen rows) it
holds two or three rows. ``assess`` therefore scores each front entry on the selection rows
(training plus validation; never the test rows) by k-fold cross-validation: the entry is
refitted on k - 1 folds (Levenberg–Marquardt from its fitted values) and scored on the fold
it did not see. ``choose`` then applies the rule of ``model_selection``:

- ``"best"`` (default): the one-standard-error rule on paired fold losses. With ``m`` the
  entry of the lowest mean CV loss, the reported model is the simplest entry (lowest
  ``frontier.cost``) whose fold-by-fold excess over ``m`` is not significant: mean(d) <=
  SE(d), d_k = loss_k - loss_k(m). A larger program that only fits noise is never
  significantly better than the law, so the law is reported; a simpler program that misses
  structure is worse on (nearly) every fold, so it is not.
- ``"accuracy"``: the lowest mean CV loss.
- ``"score"``: the largest PySR score (``-Δ log loss / Δ cost``) on the CV losses.

Without the data (``frontier.select`` on stored records, ``ndvm report``) the same modes
read the validation losses, and ``"best"`` is an information criterion on the validation
rows: ``n log(loss) + cost log(n)`` (BIC with the program's cost — nodes plus fitted
constants — as its size), which a large program fitting noise cannot win either.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ndvm.errors import NdvmError
from ndvm.search.candidate import Record

MODES = ("best", "accuracy", "score")
LOO_ROWS = 30  # up to this many selection rows: leave-one-out; more: K_FOLDS folds
K_FOLDS = 5
EXACT = 1e-20  # fold losses below this fraction of the target's variance tie (round-off)


@dataclass(frozen=True)
class Assessment:
    """Cross-validated fold losses of the front's entries (rows: entries, columns: folds)."""

    front: tuple[Record, ...]
    folds: np.ndarray  # [entries, k]; inf where a refit failed
    scale: float = 0.0  # the selection rows' target variance (exact fits tie below EXACT x it)

    @property
    def losses(self) -> list[float]:
        return [float(np.mean(row)) if np.all(np.isfinite(row)) else math.inf
                for row in self.folds]  # fmt: skip


def fold_ids(n: int, seed: int = 0) -> np.ndarray:
    """The fold of each of ``n`` rows: leave-one-out up to ``LOO_ROWS`` rows, else
    ``K_FOLDS`` folds of a seeded permutation."""
    if n <= LOO_ROWS:
        return np.arange(n)
    perm = np.random.default_rng(seed).permutation(n)
    out = np.empty(n, dtype=np.int64)
    out[perm] = np.arange(n) % K_FOLDS
    return out


def assess(
    front: Sequence[Record], inputs: Mapping[str, np.ndarray], target: np.ndarray, *,
    seed: int = 0, steps: int = 100, starts: int = 2,
) -> Assessment:  # fmt: skip
    """k-fold CV losses of each entry of ``front`` on the rows ``inputs``/``target``."""
    y = np.asarray(target, dtype=np.float64).reshape(-1)
    cols = {k: np.asarray(v, dtype=np.float64).reshape(-1) for k, v in inputs.items()}
    ids = fold_ids(len(y), seed)
    k = int(ids.max()) + 1 if len(y) else 0
    out = np.full((len(front), k), math.inf)
    for i, r in enumerate(front):
        for f in range(k):
            out[i, f] = _fold_loss(r, cols, y, ids == f, steps, starts, seed + f)
    return Assessment(tuple(front), out, float(np.var(y)) if len(y) else 0.0)


def _fold_loss(
    r: Record, cols: Mapping[str, np.ndarray], y: np.ndarray, held: np.ndarray,
    steps: int, starts: int, seed: int,
) -> float:  # fmt: skip
    from ndvm.api import compile as compile_program
    from ndvm.calibrate import calibrate

    ev = r.evaluation
    if ev is None or not ev.params:
        return math.inf
    try:
        prog = compile_program(r.candidate.src, list(ev.params), tuple(cols), free_params=True)
        values = np.array([ev.params[n] for n in prog.params], dtype=np.float64)
        init = np.repeat(values[None, :], max(1, starts), axis=0)
        rng = np.random.default_rng(seed)
        init[1:] *= 1.0 + 0.1 * rng.standard_normal(init[1:].shape)
        train = {n: v[~held] for n, v in cols.items()}
        cal = calibrate(prog, train, y[~held], starts=len(init), init=init, steps=steps,
                        seed=rng, diagnostics=False, warn=False)  # fmt: skip
        pred = np.asarray(cal.predict({n: v[held] for n, v in cols.items()}), dtype=np.float64)
    except (NdvmError, ArithmeticError, ValueError):
        return math.inf
    pred = np.broadcast_to(pred.reshape(-1) if pred.size > 1 else pred, (int(held.sum()),))
    loss = float(np.mean((y[held] - pred) ** 2))
    return loss if math.isfinite(loss) else math.inf


def choose(front: Sequence[Record], losses: Sequence[float], mode: str = "best", *,
           folds: np.ndarray | None = None, n: int | None = None,
           scale: float = 0.0) -> Record | None:  # fmt: skip
    """The entry of ``front`` (by increasing cost) that ``mode`` selects on ``losses``:
    with ``folds`` (CV fold losses) "best" is the one-standard-error rule, else with ``n``
    (rows behind ``losses``) the information criterion, else PySR's "best". ``scale``: the
    target's variance (losses under ``EXACT * scale`` tie)."""
    from ndvm.search import frontier

    if mode not in MODES:
        raise NdvmError(f"model_selection must be one of {', '.join(MODES)}, got {mode!r}")
    floor = EXACT * scale
    entries = [(frontier.cost(r), max(v, floor), i, r) for i, (r, v) in
               enumerate(zip(front, losses)) if math.isfinite(v)]  # fmt: skip
    if not entries:
        return None
    entries.sort(key=lambda t: (t[0], t[2]))
    if mode == "accuracy":
        return min(entries, key=lambda t: (t[1], t[0]))[3]
    if mode == "score":
        sc = _scores([(c, v) for c, v, _, _ in entries])
        return max(zip(sc, entries), key=lambda t: (t[0], -t[1][0]))[1][3]
    if folds is not None:
        return _one_se(entries, np.maximum(np.asarray(folds, dtype=np.float64), floor))
    if n is not None and n > 1:
        return min(entries, key=lambda t: (n * math.log(max(t[1], 1e-300))
                                           + t[0] * math.log(n), t[0]))[3]  # fmt: skip
    sc = _scores([(c, v) for c, v, _, _ in entries])
    low = min(v for _, v, _, _ in entries)
    ok = [(s, e) for s, e in zip(sc, entries) if e[1] <= frontier.SCORE_TOLERANCE * low]
    return max(ok, key=lambda t: (t[0], -t[1][0]))[1][3]


def _scores(points: list[tuple[int, float]]) -> list[float]:
    out, prev = [], None
    for c, v in points:
        s = 0.0
        if prev is not None and c > prev[0]:
            s = -(math.log(max(v, 1e-300)) - math.log(max(prev[1], 1e-300))) / (c - prev[0])
        out.append(s)
        prev = (c, v)
    return out


def _one_se(entries: list[tuple[int, float, int, Record]], folds: np.ndarray) -> Record:
    best = min(entries, key=lambda t: (t[1], t[0]))
    ref = folds[best[2]]
    for _, _, i, r in entries:  # by increasing cost: the first not significantly worse
        d = folds[i] - ref
        if not np.all(np.isfinite(d)):
            continue
        se = float(np.std(d, ddof=1) / math.sqrt(len(d))) if len(d) > 1 else 0.0
        if float(np.mean(d)) <= se:
            return r
    return best[3]
