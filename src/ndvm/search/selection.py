"""Which front entry is the reported model: cross-validated refits and a parsimony criterion.

The Pareto front is built on the validation split, which also steers the evolutionary
tournament, so its losses favour what evolution kept, and on small data (a dozen rows) it
holds two or three rows. ``for_task`` therefore scores each front entry on rows that did not
steer it: on the task's selection split (``from_arrays(holdout=...)``, rows the search never
reads) at its fitted values (``holdout``), or, on small data without one, by k-fold
cross-validation on training plus validation rows, never the test rows (``assess``: the
entry is refitted on k - 1 folds, Levenberg–Marquardt from its fitted values, and scored on
the fold it did not see), stopping at a deadline (then the records' validation losses,
``validation``). ``search_seconds`` keeps a share of a time budget for this. ``choose`` then
applies the rule of ``model_selection``:

- ``"best"`` (default): the information criterion ``n log(loss) + cost log(n)`` (BIC with
  the program's ``frontier.cost`` — nodes plus fitted constants — as its size, n the rows
  behind the losses), smallest wins. A larger program that only fits noise lowers the loss by
  a few percent, worth far less than its extra cost; a simpler program that misses structure
  loses a factor in the loss, worth more than the cost it saves.
- ``"accuracy"``: the lowest loss.
- ``"score"``: the largest PySR score (``-Δ log loss / Δ cost``).

The losses are those of ``for_task`` where the data is at hand (``SymbolicRegressor``, ``ndvm
search --data``; ``save`` stores the choice in the run and ``ndvm report`` shows it), else the
validation losses of stored records (``frontier.select``: ``Summary.selected``, ``ndvm
report``; n is then the validation rows, recorded as ``n_valid``; without it "best" is PySR's
rule, the largest score within 1.5x of the lowest loss).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ndvm.errors import NdvmError
from ndvm.search.candidate import Record

MODES = ("best", "accuracy", "score")
LOO_ROWS = 30  # up to this many selection rows: leave-one-out; more: K_FOLDS folds
K_FOLDS = 5
EXACT = 1e-20  # losses below this fraction of the target's variance tie (round-off)
LOSS_FLOOR = 1e-300  # a zero loss counts as this (log of 0 is undefined)
SCORE_TOLERANCE = 1.5  # PySR's "best": the top score among losses within 1.5x the lowest
CV_SHARE = 0.15  # of a time budget kept for dust pruning and cross-validation after search
HOLDOUT_SHARE = 0.05  # ... with a selection split (no refits: one evaluation per entry)
PARAM_COST = 1  # what a fitted parameter costs for selection on top of its node


def selection_loss(r: Record) -> float:
    """A record's validation loss for selection (inf when it failed or is not finite)."""
    ev = r.evaluation
    if ev is None or r.status != "ok":
        return math.inf
    x = ev.selection_loss
    return x if math.isfinite(x) else math.inf


def cost(r: Record) -> int:
    """A program's size for selection: its nodes (``complexity``) plus ``PARAM_COST`` per
    fitted parameter, so that of two programs of as many nodes the one that fits fewer
    constants is the simpler (``a S / (b + S)`` before ``a - b / (S + c)``): a constant is a
    node and a value chosen to fit the data, an input only a node."""
    return r.complexity + PARAM_COST * r.n_params


@dataclass(frozen=True, eq=False)
class Assessment:
    """Cross-validated fold losses of the front's entries (rows: entries, columns: folds)."""

    front: tuple[Record, ...]
    folds: np.ndarray  # [entries, k]; inf where a refit failed
    scale: float = 0.0  # the selection rows' target variance (exact fits tie below EXACT x it)
    rows: int = 0  # selection rows (the n of the information criterion)
    method: str = "cv"  # "cv", "holdout" (one column: the selection split) or "validation"

    def choose(self, mode: str = "best") -> Record | None:
        """``choose`` on the mean CV losses, n the selection rows."""
        return choose(self.front, self.losses, mode, n=self.rows, scale=self.scale)

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
    seed: int = 0, steps: int = 100, starts: int = 2, deadline: float | None = None,
) -> Assessment | None:  # fmt: skip
    """k-fold CV losses of each entry of ``front`` on the rows ``inputs``/``target``; None
    when ``time.perf_counter()`` passes ``deadline`` before every refit is done (the caller
    falls back to ``validation``)."""
    y, cols = _rows(inputs, target)
    ids = fold_ids(len(y), seed)
    k = int(ids.max()) + 1 if len(y) else 0
    out = np.full((len(front), k), math.inf)
    for i, r in enumerate(front):
        for f in range(k):
            if deadline is not None and time.perf_counter() > deadline:
                return None
            out[i, f] = _fold_loss(r, cols, y, ids == f, steps, starts, seed + f)
    return Assessment(tuple(front), out, float(np.var(y)) if len(y) else 0.0, len(y))


def for_task(
    task: Any, front: Sequence[Record], seed: int, deadline: float | None = None
) -> Assessment:
    """The losses that choose among ``front``: on the selection split at the fitted values
    when the task has one (``holdout``); else cross-validated on the training and validation
    rows (never test), or, when that does not finish by ``deadline``, the records' own
    validation losses."""
    data = task.data()
    if data.select_inputs is not None and data.select_target is not None:
        return holdout(front, data.select_inputs, data.select_target)
    cols = {k: np.asarray(v) for k, v in data.train_inputs.items()}
    target = np.asarray(data.train_target)
    if data.valid_inputs is not None and data.valid_target is not None:
        cols = {k: np.concatenate([v, np.asarray(data.valid_inputs[k])]) for k, v in cols.items()}
        target = np.concatenate([target, np.asarray(data.valid_target)])
    cv = assess(front, cols, target, seed=seed, deadline=deadline)
    if cv is not None:
        return cv
    valid = data.valid_target
    rows = 0 if valid is None else len(valid)
    return validation(front, rows, float(np.var(valid)) if rows else 0.0)


def search_seconds(task: Any, seconds: float) -> float:
    """The search's share of a budget of ``seconds`` that also covers dust pruning and the
    choice (``for_task``): ``HOLDOUT_SHARE`` kept with a selection split (one evaluation per
    entry), ``CV_SHARE`` for cross-validation (refits; it stops at the deadline)."""
    held = task.data().select_target is not None
    return seconds * (1.0 - (HOLDOUT_SHARE if held else CV_SHARE))


def holdout(
    front: Sequence[Record], inputs: Mapping[str, np.ndarray], target: np.ndarray
) -> Assessment:
    """The losses of each entry of ``front`` at its fitted values (fitted on the train rows)
    on selection rows ``inputs``/``target`` that the search never read: no refit."""
    y, cols = _rows(inputs, target)
    everything = np.ones(len(y), dtype=bool)
    out = np.array([[_fold_loss(r, cols, y, everything, 0, 0, 0)] for r in front])
    return Assessment(tuple(front), out.reshape(len(front), 1), float(np.var(y)), len(y),
                      "holdout")  # fmt: skip


def validation(front: Sequence[Record], rows: int, scale: float = 0.0) -> Assessment:
    """The records' own validation losses as a one-column assessment (``rows`` validation
    rows): the choice when cross-validation ran out of time, as ``frontier.select`` makes it."""

    losses = np.array([[selection_loss(r)] for r in front], dtype=np.float64)
    return Assessment(tuple(front), losses.reshape(len(front), 1), scale, rows, "validation")


def _rows(
    inputs: Mapping[str, np.ndarray], target: np.ndarray
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    y = np.asarray(target, dtype=np.float64).reshape(-1)
    return y, {k: np.asarray(v, dtype=np.float64).reshape(-1) for k, v in inputs.items()}


def _fold_loss(
    r: Record, cols: Mapping[str, np.ndarray], y: np.ndarray, held: np.ndarray,
    steps: int, starts: int, seed: int,
) -> float:  # fmt: skip
    from ndvm.api import compile as compile_program
    from ndvm.calibrate import calibrate

    ev = r.evaluation
    if ev is None:
        return math.inf
    test = {n: v[held] for n, v in cols.items()}
    try:
        prog = compile_program(r.candidate.src, list(ev.params), tuple(cols), free_params=True)
        if not prog.params or steps == 0:  # nothing to refit, or scored at the fitted values
            theta = prog.unconstrain([ev.params[n] for n in prog.params])
            pred = np.asarray(prog.eval(np.asarray(theta, dtype=np.float64), **test),
                              dtype=np.float64)  # fmt: skip
        else:
            values = np.array([ev.params[n] for n in prog.params], dtype=np.float64)
            init = np.repeat(values[None, :], max(1, starts), axis=0)
            rng = np.random.default_rng(seed)
            init[1:] *= 1.0 + 0.1 * rng.standard_normal(init[1:].shape)
            train = {n: v[~held] for n, v in cols.items()}
            cal = calibrate(prog, train, y[~held], starts=len(init), init=init, steps=steps,
                            seed=rng, diagnostics=False, warn=False)  # fmt: skip
            pred = np.asarray(cal.predict(test), dtype=np.float64)
    except (NdvmError, ArithmeticError, ValueError):
        return math.inf
    pred = np.broadcast_to(pred.reshape(-1) if pred.size > 1 else pred, (int(held.sum()),))
    loss = float(np.mean((y[held] - pred) ** 2))
    return loss if math.isfinite(loss) else math.inf


def save(db: str, assessment: Assessment, mode: str) -> None:
    """Store in the latest run of ``db`` (its config's ``"selection"``) how ``assessment``
    chose: the method, the rows, each entry's loss by record idx, the idx that each mode
    picks and ``mode``, the one in use; ``ndvm report`` marks that choice (``stored``)."""
    from ndvm.search.store import Store

    picks = {m: assessment.choose(m) for m in MODES}
    store = Store(db)
    try:
        info = store.latest_run()
        if info is None:
            return
        info["config"]["selection"] = {
            "method": assessment.method, "rows": assessment.rows, "mode": mode,
            "losses": {str(r.idx): (v if math.isfinite(v) else None)
                       for r, v in zip(assessment.front, assessment.losses)},
            "chosen": {m: (None if r is None else r.idx) for m, r in picks.items()},
            "src": {m: (None if r is None else r.candidate.src) for m, r in picks.items()},
        }  # fmt: skip
        store.set_config(info["run"], info["config"])
    finally:
        store.close()


def stored(config: Mapping[str, object]) -> tuple[int | None, str, str] | None:
    """``(record idx, program, method)`` of the choice ``save`` stored in a run's config
    under the mode the estimator used, or None (a run of ``ndvm search``)."""
    sel = config.get("selection")
    if not isinstance(sel, dict) or sel.get("mode") not in MODES:
        return None
    mode = sel["mode"]
    return sel["chosen"].get(mode), str(sel["src"].get(mode)), str(sel["method"])


def choose(front: Sequence[Record], losses: Sequence[float], mode: str = "best", *,
           n: int | None = None, scale: float = 0.0) -> Record | None:  # fmt: skip
    """The entry of ``front`` that ``mode`` selects on ``losses``: "best" is the information
    criterion with ``n`` rows behind the losses (PySR's "best" without ``n``); ``scale`` is
    the target's variance (losses under ``EXACT * scale`` tie: round-off is not evidence)."""
    if mode not in MODES:
        raise NdvmError(f"model_selection must be one of {', '.join(MODES)}, got {mode!r}")
    floor = max(EXACT * scale, LOSS_FLOOR)
    entries = [(cost(r), max(v, floor), i, r) for i, (r, v) in
               enumerate(zip(front, losses)) if math.isfinite(v)]  # fmt: skip
    if not entries:
        return None
    entries.sort(key=lambda t: (t[0], t[2]))
    if mode == "accuracy":
        return min(entries, key=lambda t: (t[1], t[0]))[3]
    sc = pysr_scores([(c, v) for c, v, _, _ in entries])
    if mode == "score":
        return max(zip(sc, entries), key=lambda t: (t[0], -t[1][0]))[1][3]
    if n is not None and n > 1:
        return min(entries, key=lambda t: (criterion(t[1], t[0], n), t[0]))[3]
    low = min(v for _, v, _, _ in entries)
    ok = [(s, e) for s, e in zip(sc, entries) if e[1] <= SCORE_TOLERANCE * low]
    return max(ok, key=lambda t: (t[0], -t[1][0]))[1][3]


def criterion(loss: float, cost: int, n: int) -> float:
    """``n log(loss) + cost log(n)``: the information criterion "best" minimizes."""
    return n * math.log(max(loss, LOSS_FLOOR)) + cost * math.log(n)


def pysr_scores(points: list[tuple[int, float]]) -> list[float]:
    """PySR's score of each (cost, loss) point against the previous one (0 for the first)."""
    out: list[float] = []
    prev: tuple[int, float] | None = None
    for c, v in points:
        s = 0.0
        if prev is not None and c > prev[0]:
            s = -(math.log(v) - math.log(prev[1])) / (c - prev[0])
        out.append(s)
        prev = (c, v)
    return out
