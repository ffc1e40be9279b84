"""Plots of a search (matplotlib, Agg backend): the discovery frontier, the Pareto front and
the best program against the data. Every curve ranks by validation loss."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ndvm.search.candidate import Record
from ndvm.search.frontier import Summary, selection_loss


def _plt() -> Any:
    from ndvm.extras import require

    require("search plots", "plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: str | Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _plt().close(fig)


def plot_frontier(summary: Summary, path: str | Path) -> None:
    """Best validation loss found so far against search time."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    if summary.trajectory:
        t, loss = zip(*summary.trajectory)
        ax.step(list(t) + [summary.elapsed], list(loss) + [loss[-1]], where="post")
        ax.set_yscale("log")
    ax.set_xlabel("search time (s)")
    ax.set_ylabel("best validation loss")
    ax.set_title("discovery frontier")
    _save(fig, path)


def plot_pareto(records: list[Record], summary: Summary, path: str | Path) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    pts = [(r.complexity, selection_loss(r)) for r in records if np.isfinite(selection_loss(r))]
    if pts:
        ax.scatter(*zip(*pts), s=6, alpha=0.3, label="calibrated")
    front = [(r.complexity, selection_loss(r)) for r in summary.pareto]
    if front:
        ax.step(*zip(*front), where="post", c="C3", marker="o", ms=3, label="Pareto front")
    ax.set_yscale("log")
    ax.set_xlabel("complexity (AST nodes)")
    ax.set_ylabel("validation loss")
    ax.legend()
    _save(fig, path)


def plot_best_fit(task: Any, rec: Record, path: str | Path) -> None:
    """The program at its calibrated parameters against every split of the first input."""
    from ndvm.api import compile as compile_program

    plt = _plt()
    data = task.data()
    assert rec.evaluation is not None
    x = task.inputs[0]
    S = task.series
    prog = compile_program(rec.candidate.src, rec.candidate.params, task.inputs, free_params=True)
    vals = [rec.evaluation.params[n] for n in prog.params]
    theta = np.asarray(rec.evaluation.extra.get("theta") or [list(prog.unconstrain(vals))])
    fig, ax = plt.subplots(figsize=(6, 4))
    splits = [("train", data.train_inputs, data.train_target, "."),
              ("validation", data.valid_inputs, data.valid_target, "+"),
              ("test", data.test_inputs, data.test_target, "x")]  # fmt: skip
    for k, (name, inputs, target, marker) in enumerate(splits):
        if inputs is None or target is None:
            continue
        xs = np.asarray(inputs[x])
        ys = np.asarray(target).reshape(S, -1)
        pred = np.asarray(prog.eval(theta, dict(inputs))).reshape(S, -1)
        order = np.argsort(xs)
        for lane in range(S):
            lab = lane == 0
            ax.plot(xs, ys[lane], marker, c=f"C{k}", ms=3, ls="", label=name if lab else None)
            if name == "train":
                ax.plot(xs[order], pred[lane][order], c="C3", lw=1,
                        label="model (train inputs)" if lab else None)  # fmt: skip
    ax.set_xlabel(x)
    ax.set_title(rec.candidate.src[:70], fontsize=8)
    ax.legend(fontsize=7)
    _save(fig, path)
