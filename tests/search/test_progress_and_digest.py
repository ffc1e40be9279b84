"""The live progress line (terminal and log forms), the printed hall of fame, and the data
digest a resumed run must match."""

from __future__ import annotations

import io

import numpy as np

from ndvm.search.driver import Progress, data_digest
from ndvm.search.progress import ProgressLine, front_lines
from ndvm.tasks.base import from_arrays


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _progress(t: float, src: str = "(* a x)") -> Progress:
    return Progress(t, 10, 8, 2, 1, 0.98765, 40.0, 640.0, {"duplicate": 2}, best_src=src)


def test_progress_line_rewrites_in_place_on_a_terminal_and_prints_lines_in_a_log() -> None:
    tty = _Terminal()
    line = ProgressLine(stream=tty)
    line(_progress(0.0))
    line(_progress(0.1))  # within 0.2 s: not redrawn
    line(_progress(0.5, "(+ a (* b x))"))
    line.end()
    text = tty.getvalue()
    assert text.count("\r\033[K") == 2 and text.endswith("\n") and text.count("\n") == 1
    assert "best val R² 0.9877 (+ a (* b x))" in text and "(duplicate 2)" in text
    log = io.StringIO()
    plain = ProgressLine(stream=log, every=5.0)
    for t in (0.0, 1.0, 4.9, 5.0, 9.0, 10.5):
        plain(_progress(t))
    plain.end()
    assert log.getvalue().count("\n") == 3 and "\r" not in log.getvalue()  # 0, 5, 10.5
    quiet = io.StringIO()
    ProgressLine(quiet=True, stream=quiet)(_progress(0.0))
    assert quiet.getvalue() == ""
    long = io.StringIO()
    ProgressLine(stream=long)(_progress(0.0, "(+ " * 40 + "x" + ")" * 40))
    assert "..." in long.getvalue() and len(long.getvalue()) < 250


def test_front_lines_without_programs_say_so() -> None:
    assert front_lines([], ("x",)) == ["no calibrated program: no hall of fame"]


def test_data_digest_tells_data_apart() -> None:
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 2)), rng.normal(size=30)

    def digest(X: np.ndarray, y: np.ndarray, **kw) -> str:
        return data_digest(from_arrays(X, y, **kw))

    base = digest(X, y)
    assert digest(X.copy(), y.copy()) == base and len(base) == 64
    y2 = y.copy()
    y2[7] += 1e-12  # one target, one ulp-scale change
    assert digest(X, y2) != base
    assert digest(X, y, names=["u", "v"]) != base  # the same numbers under other names
    assert digest(X, y, seed=1) != base  # another split of the same rows
    assert digest(X[:, ::-1], y) != base
