"""A search whose calibrations all fail with an internal error (a bug, simulated here by a
worker whose ``run_job`` raises) stops with the reason and exit status 1 instead of ending as
a search result; ``ndvm report`` lists the failures by reason with counts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from ndvm.commands.report import failure_reasons
from ndvm.search.candidate import Evaluation

BROKEN = """
import sys
import ndvm.search.scheduler as scheduler
from ndvm import cli

def broken(task, job, limits, seen):
    raise TypeError("simulated bug: got multiple values for argument 'theta'")

scheduler.run_job = broken
sys.exit(cli.main(sys.argv[1:]))
"""


def _run(args: list[str], cwd: Path, script: str | None = None) -> subprocess.CompletedProcess:
    head = ["-c", script] if script else ["-m", "ndvm"]
    return subprocess.run([sys.executable, *head, *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env=dict(os.environ))  # fmt: skip


def test_repeated_internal_error_stops_the_search(tmp_path: Path) -> None:
    x = np.linspace(0.0, 2.0, 40)
    rows = "".join(f"{a!r},{b!r}\n" for a, b in zip(x.tolist(), (3 * x).tolist()))
    (tmp_path / "d.csv").write_text("theta,y\n" + rows)
    args = ["search", "--data", "d.csv", "--x", "theta", "--y", "y", "--budget", "600",
            "--db", "s.db", "--quiet"]  # fmt: skip
    proc = _run(args, tmp_path, BROKEN)
    assert proc.returncode == 1, proc.stderr
    assert "3 calibrations failed with the same internal error" in proc.stderr
    assert "simulated bug" in proc.stderr and "bug in ndvm" in proc.stderr
    rep = _run(["report", "--db", "s.db", "--json", "--no-export"], tmp_path)
    assert rep.returncode == 0, rep.stderr
    data = json.loads(rep.stdout)
    (reason, count), = data["failures"].items()
    assert reason.startswith("internal error: TypeError: simulated bug")
    # stopped within the chunk of results that held the third (serial chunks hold 8)
    assert 3 <= count <= 8 and data["failed"] == count and data["proposed"] <= 64
    text = _run(["report", "--db", "s.db", "--no-export"], tmp_path)
    assert "failed calibrations by reason:" in text.stdout
    assert f"{count:8d}  internal error: TypeError: simulated bug" in text.stdout


class _Rec:
    def __init__(self, ev: Evaluation | None) -> None:
        self.evaluation = ev


def test_failure_reasons_counts_and_order() -> None:
    recs = [_Rec(Evaluation("failed", reason="b")), _Rec(Evaluation("failed", reason="a")),
            _Rec(Evaluation("failed", reason="b")), _Rec(Evaluation("ok")), _Rec(None),
            _Rec(Evaluation("rejected", reason="params: x"))]  # fmt: skip
    assert failure_reasons(recs) == {"b": 2, "a": 1}
    assert list(failure_reasons(recs, most=1)) == ["b"]
