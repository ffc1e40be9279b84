"""What a search shows while it runs and when it ends (``ndvm search``, ``SymbolicRegressor``).

On a terminal the line is rewritten in place (every 0.2 s at most); elsewhere (a log file, a
pipe, a notebook's captured stderr) one plain line is printed every ``every`` seconds. The
line shows counts, rejections by funnel stage, rates and the best validation R² so far with
its program (the live best-so-far of a hall of fame). ``front_lines`` is the hall of fame
printed at the end, with the chosen law.
"""

from __future__ import annotations

import math
import sys
from typing import Any, TextIO

SHOWN_PROGRAM = 60  # characters of the best program on the line


class ProgressLine:
    """A callable for ``run_search(progress=...)``; ``end()`` finishes the line."""

    def __init__(
        self, quiet: bool = False, stream: TextIO | None = None, every: float = 5.0
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.quiet, self.every = quiet, every
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.last, self.shown = -math.inf, False

    def __call__(self, pr: Any) -> None:
        if self.quiet or pr.elapsed - self.last < (0.2 if self.tty else self.every):
            return
        self.last = pr.elapsed
        self.shown = True
        line = format_progress(pr)
        if self.tty:
            print("\r\033[K" + line, end="", file=self.stream, flush=True)
        else:
            print(line, file=self.stream, flush=True)

    def end(self) -> None:
        if self.tty and self.shown:
            print(file=self.stream)
            self.shown = False


def format_progress(pr: Any) -> str:
    """One line: elapsed, counts, rejections by stage, best validation R² and its program."""
    r2 = "-" if math.isnan(pr.best_r2) else f"{pr.best_r2:.4f}"
    stages = " ".join(f"{k} {v}" for k, v in sorted(pr.rejections.items()))
    best = getattr(pr, "best_src", "")
    if len(best) > SHOWN_PROGRAM:
        best = best[: SHOWN_PROGRAM - 3] + "..."
    return (
        f"[{pr.elapsed:7.1f}s] proposed {pr.proposed}  calibrated {pr.evaluated}  "
        f"rejected {pr.rejected}{f' ({stages})' if stages else ''}  successes "
        f"{pr.successes}  best val R² {r2}{f' {best}' if best else ''}  "
        f"{pr.rate:.0f} cal/s  {pr.lanes_rate:.0f} lanes/s"
    )


def front_lines(
    records: list[Any], inputs: tuple[str, ...], chosen: int | None = None
) -> list[str]:
    """The hall of fame (the Pareto front, simplest first; ``*`` marks the chosen law: record
    ``chosen``, by default the one ``frontier.select`` reports) and the chosen law with its
    fitted values and scores."""
    from ndvm.search.frontier import hall_of_fame

    rows = hall_of_fame(records, tuple(inputs), export=False)
    if not rows:
        return ["no calibrated program: no hall of fame"]
    out = [
        "hall of fame (validation loss; * = the chosen law):",
        f"  {'':1} {'cx':>3} {'valid loss':>11} {'val R²':>8} {'score':>7}  program",
    ]
    pick = [r["selected"] if chosen is None else r["idx"] == chosen for r in rows]
    for r, chose in zip(rows, pick):
        mark = "*" if chose else " "
        cells = _g(r["validation_loss"]), _g(r["validation_r2"], ".4f"), _g(r["score"], ".3f")
        out.append(f"  {mark} {r['complexity']:3d} {cells[0]:>11} {cells[1]:>8} {cells[2]:>7}  "
                   f"{r['src']}")  # fmt: skip
    law = next((r for r, chose in zip(rows, pick) if chose), rows[-1])
    params = ", ".join(f"{k} = {v:.6g}" for k, v in law["params"].items())
    out.append(f"chosen law: {law['src']}{f'  with {params}' if params else ''}")
    out.append(f"  validation R² {_g(law['validation_r2'], '.6f')}, test R² "
               f"{_g(law['test_r2'], '.6f')}, score {_g(law['score'], '.3f')}")  # fmt: skip
    return out


def _g(x: Any, spec: str = ".4g") -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)
