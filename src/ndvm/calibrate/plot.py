"""Calibration plots (matplotlib, optional extra ``plot``): loss history of every start, and the
fitted curve over the data when the program has one 1-D data input and a target."""

from __future__ import annotations

from typing import Any

import numpy as np


def plot_calibration(
    cal: Any,
    path: str | None = None,
    *,
    x_name: str | None = None,
    extra: dict[str, Any] | None = None,
) -> Any:
    """Draw ``cal`` (a Calibration); save to ``path`` if given. Returns the figure.

    extra: optional held-out data ``{"x": array, "y": array}`` drawn as hollow markers.
    """
    from ndvm.extras import require

    require("plotting a calibration", "plot")
    import matplotlib

    if path is not None:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    data = {k: np.asarray(v) for k, v in cal.inputs.items() if np.ndim(v) == 1}
    if x_name is None and len(data) == 1:
        x_name = next(iter(data))
    show_fit = x_name is not None and cal.target is not None and np.ndim(cal.target) == 1
    fig, axes = plt.subplots(1, 2 if show_fit else 1, figsize=(10 if show_fit else 5, 4))
    ax = axes[0] if show_fit else axes
    shown = np.asarray(cal.history, dtype=float)
    for j in range(shown.shape[1]):
        lw, alpha = (2.0, 1.0) if j == cal.best else (0.6, 0.3)
        ax.plot(shown[:, j], lw=lw, alpha=alpha, color="C0" if j == cal.best else "C7")
    ax.set_xlabel("iterate")
    ax.set_ylabel(f"loss ({cal.loss_name})")
    if np.isfinite(shown).any() and np.nanmin(shown) > 0 and np.nanmax(shown) > 0:
        ax.set_yscale("log")
    ax.set_title(f"{shown.shape[1]} start(s), best {cal.loss:.4g}")
    if show_fit:
        ax2 = axes[1]
        x = data[x_name]
        order = np.argsort(x)
        ax2.plot(x, np.asarray(cal.target), "o", ms=3, label="train")
        if extra is not None:
            ax2.plot(extra["x"], extra["y"], "o", ms=3, mfc="none", label="held out")
        grid = np.linspace(float(x.min()), float(x.max()), 200)
        if extra is not None:
            allx = np.concatenate([x, np.asarray(extra["x"])])
            grid = np.linspace(float(allx.min()), float(allx.max()), 200)
        inputs = dict(cal.inputs)
        inputs[x_name] = grid
        try:
            ax2.plot(grid, np.asarray(cal.predict(inputs)), "-", label="fit")
        except Exception:  # noqa: BLE001 - a plot never fails a calibration
            ax2.plot(x[order], np.asarray(cal.predict())[order], "-", label="fit")
        ax2.set_xlabel(x_name)
        ax2.legend()
        ax2.set_title(", ".join(f"{k}={v:.4g}" for k, v in cal.params.items()))
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=100)
        plt.close(fig)
    return fig
