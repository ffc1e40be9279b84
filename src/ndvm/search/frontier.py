"""What a search found: summary figures, the Pareto front and the hall of fame, and exports.

Every choice here ranks by the validation split (``Evaluation.selection_loss``: validation MSE,
or the training loss for a task without one); test (held-out) scores are reported next to the
chosen programs and never used to choose them. The hall of fame is PySR's: for each cost (nodes
plus one per fitted parameter, ``cost``) the best program by validation loss, kept when it beats
every simpler one, with score = -Δ log(loss) / Δ cost against the previous entry. Equations come
from ``ndvm.export.to_sympy`` with the full-precision calibrated parameters; a program outside
the closed-form subset gets the one-line reason instead.

The reported model (``select``, ``Summary.selected``) is chosen by ``selection.choose``: on
stored records (no data to cross-validate) "best" is an information criterion on the
validation rows, ``n log(loss) + cost log(n)``, which a larger program fitting noise cannot
win (``SymbolicRegressor`` cross-validates refits instead, ``ndvm.search.selection``); the
lowest-loss entry stays ``Summary.best`` and the last row of the hall of fame. Validation
losses below ``EXACT`` (1e-20) times the validation target's variance are exact fits and tie
(round-off is not evidence): the simplest exact program ends the front.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ndvm.search.candidate import Record
from ndvm.search.selection import (  # noqa: F401 (cost and the constants are frontier's API too)
    LOSS_FLOOR,
    PARAM_COST,
    SCORE_TOLERANCE,
    choose,
    cost,
    pysr_scores,
    selection_loss,
)


@dataclass(frozen=True)
class Summary:
    proposed: int
    evaluated: int
    rejected: int
    failed: int
    successes: int
    distinct_success_skeletons: int
    elapsed: float
    calibrations_per_s: float
    lanes_per_s: float
    time_to_first_success: float | None
    best_r2: float  # validation R² of ``best`` (NaN when the task has no validation split)
    best: Record | None  # lowest validation loss
    selected: Record | None = None  # the reported model: by score (``select``)
    trajectory: list[tuple[float, float]] = field(default_factory=list)  # (t, best val loss)
    pareto: list[Record] = field(default_factory=list)
    rejections: dict[str, int] = field(default_factory=dict)  # by funnel stage
    pending: int = 0  # proposed, never evaluated (a search stopped before their results)


def rejections(records: list[Record]) -> dict[str, int]:
    """Rejected candidates by funnel stage (``parse``, ``resolve``, ``duplicate``, ...)."""
    out: dict[str, int] = {}
    for r in records:
        if r.status == "rejected" and r.evaluation:
            stage = r.evaluation.reason.split(":", 1)[0]
            out[stage] = out.get(stage, 0) + 1
    return out


def summarize(records: list[Record], elapsed: float | None = None) -> Summary:
    ev = [r for r in records if r.status in ("ok", "failed", "timeout")]
    ok = [r for r in ev if r.status == "ok"]
    succ = [r for r in ok if r.evaluation and r.evaluation.success]
    done_t = sorted(r.t_done for r in ev)
    total = elapsed if elapsed is not None else (done_t[-1] if done_t else 0.0)
    traj: list[tuple[float, float]] = []
    best = math.inf
    for r in sorted(ok, key=lambda r: (r.t_done, r.idx)):
        if selection_loss(r) < best:
            best = selection_loss(r)
            traj.append((r.t_done, best))
    top = min(ok, key=lambda r: (selection_loss(r), r.idx), default=None)
    if top is not None and not math.isfinite(selection_loss(top)):
        top = None
    return Summary(
        proposed=len(records),
        evaluated=len(ev),
        rejected=sum(1 for r in records if r.status == "rejected"),
        failed=sum(1 for r in ev if r.status != "ok"),
        successes=len(succ),
        distinct_success_skeletons=len({r.skeleton for r in succ}),
        elapsed=total,
        calibrations_per_s=len(ev) / total if total > 0 else 0.0,
        lanes_per_s=sum(r.evaluation.lanes for r in ev if r.evaluation) / total if total else 0.0,
        time_to_first_success=min((r.t_done for r in succ), default=None),
        best_r2=top.evaluation.validation_r2 if top and top.evaluation else float("nan"),
        best=top,
        selected=select(ok),
        trajectory=traj,
        pareto=pareto_front(ok),
        rejections=rejections(records),
        pending=sum(1 for r in records if r.status == "pending"),
    )


EXACT = 1e-20  # validation losses below this fraction of the target's variance: exact fits


def exact_floor(records: list[Record]) -> float:
    """The validation loss under which a fit is exact — round-off, not structure: ``EXACT``
    times the validation target's variance (``mse / (1 - R²)`` of the evaluated record
    farthest from exact); 0 when no record tells it (no validation split)."""
    ratio, worst = 0.0, 1.0 - 1e-6
    for r in records:
        ev = r.evaluation
        if ev is None or r.status != "ok":
            continue
        r2, v = ev.validation_r2, ev.validation_mse
        if r2 == r2 and v == v and r2 < worst and v > 0:
            ratio, worst = v / (1.0 - r2), r2
    return EXACT * ratio


def ranked_loss(r: Record, floor: float) -> float:
    """``selection_loss`` with exact fits tied at ``floor`` (their round-off differences are
    not evidence, so the simplest exact program keeps its place)."""
    return max(selection_loss(r), floor)


def pareto_front(records: list[Record], floor: float | None = None) -> list[Record]:
    """Records not dominated in (``cost``, validation loss), by increasing cost; losses under
    ``floor`` (default ``exact_floor(records)``) tie."""
    floor = exact_floor(records) if floor is None else floor
    pts = [r for r in records if math.isfinite(selection_loss(r))]
    pts.sort(key=lambda r: (cost(r), selection_loss(r), r.idx))
    front: list[Record] = []
    best = math.inf
    for r in pts:
        if ranked_loss(r, floor) < best:
            front.append(r)
            best = ranked_loss(r, floor)
    return front




def scores(front: list[Record], floor: float | None = None) -> list[float]:
    """PySR's score of each Pareto-front entry: ``-Δ log(loss) / Δ cost`` against the
    previous (simpler) entry; 0 for the first. A large score marks a complexity step that
    buys a large drop in validation loss: where the law's structure appears. Losses under
    ``floor`` (default ``exact_floor(front)``) count as ``floor``."""

    floor = exact_floor(front) if floor is None else floor
    return pysr_scores([(cost(r), max(ranked_loss(r, floor), LOSS_FLOOR)) for r in front])


def select(records: list[Record], mode: str = "best") -> Record | None:
    """The reported model from stored records (``selection.choose`` on the validation
    losses): ``"best"`` is the information criterion ``n log(loss) + cost log(n)`` over the
    front with ``n`` the validation rows (recorded by the worker as ``n_valid``), PySR's
    "best" (the largest score within ``SCORE_TOLERANCE`` of the lowest loss) for records
    without it; ``"accuracy"`` the lowest loss; ``"score"`` the largest score."""

    exact = exact_floor(records)
    front = pareto_front(records, exact)
    ns = {r.evaluation.extra.get("n_valid") for r in front if r.evaluation is not None}
    n = ns.pop() if len(ns) == 1 else None
    losses = [ranked_loss(r, exact) for r in front]
    return choose(front, losses, mode, n=n if isinstance(n, int) else None)


def hall_of_fame(
    records: list[Record], inputs: tuple[str, ...] = ("x",), export: bool = True
) -> list[dict[str, Any]]:
    """The Pareto front as rows: complexity (nodes), n_params, cost, losses, score, test
    metrics, the equation, and
    ``selected`` (the entry ``select`` reports) / ``lowest_loss`` flags."""
    rows: list[dict[str, Any]] = []
    exact = exact_floor(records)
    front = pareto_front(records, exact)
    chosen = select(records)
    for r, score in zip(front, scores(front, exact)):
        ev = r.evaluation
        assert ev is not None
        row: dict[str, Any] = {
            "idx": r.idx,
            "complexity": r.complexity,
            "n_params": r.n_params,
            "cost": cost(r),
            "src": r.candidate.src,
            "skeleton": r.skeleton,
            "train_loss": ev.train_loss,
            "validation_loss": ev.validation_mse,
            "validation_r2": ev.validation_r2,
            "score": score,
            "test_mse": ev.heldout_mse,
            "test_r2": ev.heldout_r2,
            "params": dict(ev.params),
            "selected": chosen is not None and r.idx == chosen.idx,
            "lowest_loss": r is front[-1],
        }
        if export:
            row.update(equation(r.candidate.src, ev.params, inputs))
        rows.append(row)
    return rows


def equation(src: str, params: dict[str, float], inputs: tuple[str, ...]) -> dict[str, Any]:
    """``{"equation", "equation_symbolic", "latex"}`` of a closed-form program (full-precision
    parameters; the symbolic form simplified by sympy within ``export.bounded.SECONDS``, as
    exported past it), or ``{"export_error": reason}``."""
    from ndvm.errors import NdvmError
    from ndvm.extras import missing

    if missing("sympy"):
        return {"export_error": "sympy is not installed (pip install 'ndvm[sympy]')"}
    import sympy

    from ndvm.api import compile as compile_program
    from ndvm.export import to_sympy
    from ndvm.export.bounded import simplified

    try:  # a candidate's free names are its parameters (docs/tasks.md): no warning
        prog = compile_program(src, inputs=inputs, backend="reference", free_params=True)
        symbolic = to_sympy(prog)
        exact = to_sympy(prog, {k: float(v) for k, v in params.items()})
    except NdvmError as exc:
        return {"export_error": f"{type(exc).__name__}: {exc}"}
    symbolic = simplified(symbolic)  # time-bounded: unsimplified past it (export/bounded.py)
    return {
        "equation": str(exact),
        "equation_symbolic": str(symbolic),
        "latex": sympy.latex(exact),
        "latex_symbolic": sympy.latex(symbolic),
    }


def to_latex(
    src: str, values: dict[str, float] | None = None, inputs: tuple[str, ...] = ("x",)
) -> str | None:
    """LaTeX of a closed-form program (None when it cannot be exported or sympy is missing)."""
    out = equation(src, values or {}, inputs)
    latex = out.get("latex")
    if values or latex is None:
        return latex
    return out.get("latex_symbolic", latex)
