"""Writing one benchmark's results: a printed table, CSV, JSON, a plot and the manifest."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

Column = tuple[str, str, Callable[[Any], str]]


def table(rows: Sequence[dict[str, Any]], columns: Sequence[Column]) -> str:
    """A fixed-width text table of ``rows`` (key, header, formatter per column)."""
    cells = [[h for _, h, _ in columns]]
    for row in rows:
        cells.append([fmt(row.get(key)) if row.get(key) is not None else "-"
                      for key, _, fmt in columns])  # fmt: skip
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def ratio(x: Any) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.1f}x"


def _jsonable(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x


def write(
    out: Path,
    name: str,
    rows: list[dict[str, Any]],
    manifest: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write ``<out>/<name>/{results.csv,results.json,manifest.json}``; returns the folder."""
    folder = Path(out) / name
    folder.mkdir(parents=True, exist_ok=True)
    keys: list[str] = []
    for row in rows:
        keys += [k for k in row if k not in keys]
    with open(folder / "results.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)
    payload = {"benchmark": name, "rows": rows, **(extra or {})}
    (folder / "results.json").write_text(json.dumps(_jsonable(payload), indent=2))
    (folder / "manifest.json").write_text(json.dumps(_jsonable(manifest), indent=2))
    return folder


def figure() -> Any:
    """A matplotlib (Agg) figure and axes; matplotlib is imported only when plotting."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(7, 4.5))


def save(fig: Any, folder: Path, name: str = "plot.png") -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(folder / name, dpi=120)
    plt.close(fig)
