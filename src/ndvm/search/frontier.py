"""The discovery frontier of a search database: summary figures, Pareto front, exports, plots.

``summarize(records)`` gives time to first success, best held-out R² over search time,
calibrations per second, distinct successful skeletons and the complexity-vs-error Pareto
front. ``to_sympy``/``to_latex`` translate closed-form programs (grammar operators only) when
sympy is importable. ``plot_*`` write PNGs with matplotlib's Agg backend.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ndvm.lang.datum import Num, SList, Sym
from ndvm.lang.reader import read
from ndvm.search.candidate import Record


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
    best_r2: float
    best: Record | None
    trajectory: list[tuple[float, float]] = field(default_factory=list)  # (t, best R² so far)
    pareto: list[Record] = field(default_factory=list)
    rejections: dict[str, int] = field(default_factory=dict)


def _r2(r: Record) -> float:
    ev = r.evaluation
    return ev.heldout_r2 if ev is not None and math.isfinite(ev.heldout_r2) else -math.inf


def summarize(records: list[Record], elapsed: float | None = None) -> Summary:
    ev = [r for r in records if r.status in ("ok", "failed", "timeout")]
    ok = [r for r in ev if r.status == "ok"]
    succ = [r for r in ok if r.evaluation and r.evaluation.success]
    done_t = sorted(r.t_done for r in ev)
    total = elapsed if elapsed is not None else (done_t[-1] if done_t else 0.0)
    traj: list[tuple[float, float]] = []
    best = -math.inf
    for r in sorted(ok, key=lambda r: (r.t_done, r.idx)):
        if _r2(r) > best:
            best = _r2(r)
            traj.append((r.t_done, best))
    reasons: dict[str, int] = {}
    for r in records:
        if r.status == "rejected" and r.evaluation:
            stage = r.evaluation.reason.split(":", 1)[0]
            reasons[stage] = reasons.get(stage, 0) + 1
    top = max(ok, key=lambda r: (_r2(r), -r.idx), default=None)
    return Summary(
        proposed=len(records),
        evaluated=len(ev),
        rejected=sum(1 for r in records if r.status == "rejected"),
        failed=sum(1 for r in ev if r.status != "ok"),
        successes=len(succ),
        distinct_success_skeletons=len({r.skeleton for r in succ}),
        elapsed=total,
        calibrations_per_s=len(ev) / total if total > 0 else 0.0,
        lanes_per_s=sum(_lanes(r) for r in ev) / total if total > 0 else 0.0,
        time_to_first_success=min((r.t_done for r in succ), default=None),
        best_r2=_r2(top) if top else float("nan"),
        best=top,
        trajectory=traj,
        pareto=pareto_front(ok),
        rejections=reasons,
    )


def pareto_front(records: list[Record]) -> list[Record]:
    """Records not dominated in (complexity, held-out MSE), by increasing complexity."""
    pts = [
        r for r in records if r.evaluation is not None and math.isfinite(r.evaluation.heldout_mse)
    ]
    pts.sort(key=lambda r: (r.complexity, r.evaluation.heldout_mse, r.idx))  # type: ignore[union-attr]
    front: list[Record] = []
    best = math.inf
    for r in pts:
        assert r.evaluation is not None
        if r.evaluation.heldout_mse < best:
            front.append(r)
            best = r.evaluation.heldout_mse
    return front


_SYMPY_UNARY = {"exp": "exp", "log": "log", "sqrt": "sqrt", "sin": "sin", "cos": "cos"}


def _lanes(r: Record) -> int:
    ev = r.evaluation
    return 1 if ev is None else max(1, len(ev.extra.get("lane_losses", ())))


def to_sympy(src: str, values: dict[str, float] | None = None) -> Any:
    """A sympy expression for a closed-form program (None if it uses loops, let*, or other
    forms); parameters become symbols, or numbers rounded to 4 significant digits if given."""
    try:
        import sympy
    except ImportError:
        return None
    forms = read(src)
    if len(forms) != 1:
        return None

    def conv(d: Any) -> Any:
        if isinstance(d, Num):
            return sympy.Float(d.value) if d.value != int(d.value) else sympy.Integer(int(d.value))
        if isinstance(d, Sym):
            if values is not None and d.name in values:
                return sympy.Float(float(f"{values[d.name]:.4g}"))
            return sympy.Symbol(d.name)
        if not isinstance(d, SList) or not d.items or not isinstance(d.items[0], Sym):
            raise ValueError("not closed form")
        op, args = d.items[0].name, [conv(a) for a in d.items[1:]]
        if op == "+":
            return sympy.Add(*args)
        if op == "*":
            return sympy.Mul(*args)
        if op == "-":
            return -args[0] if len(args) == 1 else args[0] - sympy.Add(*args[1:])
        if op == "/":
            return 1 / args[0] if len(args) == 1 else args[0] / sympy.Mul(*args[1:])
        if op in _SYMPY_UNARY and len(args) == 1:
            return getattr(sympy, _SYMPY_UNARY[op])(args[0])
        if op == "abs" and len(args) == 1:
            return sympy.Abs(args[0])
        if op in ("min", "max"):
            return (sympy.Min if op == "min" else sympy.Max)(*args)
        if op in ("square",) and len(args) == 1:
            return args[0] ** 2
        raise ValueError(f"no sympy form for {op}")

    try:
        return conv(forms[0])
    except (ValueError, TypeError):
        return None


def to_latex(src: str, values: dict[str, float] | None = None) -> str | None:
    expr = to_sympy(src, values)
    if expr is None:
        return None
    import sympy

    return str(sympy.latex(expr))


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_frontier(summary: Summary, path: str | Path) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    if summary.trajectory:
        t, r2 = zip(*summary.trajectory)
        ax.step(list(t) + [summary.elapsed], list(r2) + [r2[-1]], where="post")
    ax.axhline(0.9, ls="--", c="gray", lw=0.8)
    ax.set_xlabel("search time (s)")
    ax.set_ylabel("best held-out R²")
    ax.set_ylim(max(-1.0, min([r for _, r in summary.trajectory] + [0.0])), 1.0)
    ax.set_title("discovery frontier")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_pareto(records: list[Record], summary: Summary, path: str | Path) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    pts = [
        (r.complexity, r.evaluation.heldout_mse)
        for r in records
        if r.status == "ok" and r.evaluation and math.isfinite(r.evaluation.heldout_mse)
    ]
    if pts:
        ax.scatter(*zip(*pts), s=6, alpha=0.3, label="calibrated")
    front = [(r.complexity, r.evaluation.heldout_mse) for r in summary.pareto if r.evaluation]
    if front:
        ax.step(*zip(*front), where="post", c="C3", marker="o", ms=3, label="Pareto front")
    ax.set_yscale("log")
    ax.set_xlabel("complexity (AST nodes)")
    ax.set_ylabel("held-out MSE")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_best_fit(task: str, rec: Record, path: str | Path) -> None:
    """The best program at its calibrated parameters against train and held-out data."""
    import numpy as np

    import ndvm
    from ndvm import tasks

    plt = _plt()
    t = tasks.get(task)
    data = t.data()
    assert rec.evaluation is not None and data.test_inputs is not None
    x = t.inputs[0]
    xtr, xte = np.asarray(data.train_inputs[x]), np.asarray(data.test_inputs[x])
    S = t.series
    prog = ndvm.compile(rec.candidate.src, rec.candidate.params, t.inputs)
    vals = [rec.evaluation.params[n] for n in prog.params]
    theta = rec.evaluation.extra.get("theta") or [list(prog.unconstrain(vals))]
    xs = np.linspace(min(xtr.min(), xte.min()), max(xtr.max(), xte.max()), 200)
    pred = np.asarray(prog.eval(np.asarray(theta), **{x: xs})).reshape(S, -1)
    fig, ax = plt.subplots(figsize=(6, 4))
    ytr = np.asarray(data.train_target).reshape(S, -1)
    yte = np.asarray(data.test_target).reshape(S, -1)
    for lane in range(S):
        lab = lane == 0
        ax.plot(xtr, ytr[lane], ".", c="C0", ms=3, label="train" if lab else None)
        ax.plot(xte, yte[lane], "x", c="C1", ms=3, label="held-out" if lab else None)
        ax.plot(xs, pred[lane], c="C3", lw=1, label="best" if lab else None)
    ax.set_title(rec.candidate.src[:70], fontsize=8)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
