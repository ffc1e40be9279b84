"""The calibration examples run as documented: examples/calibrate_damped.py (a subprocess, on
the native backend when it is built) and the snippet at the top of docs/calibration.md start
away from the truth and reach it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

import ndvm
from ndvm.backends import registry

ROOT = Path(__file__).resolve().parents[2]
TRUTH = {"a": 1.2, "k": 0.4, "w": 2.1, "phi": 0.3}


def test_calibrate_damped_example_moves_from_the_declared_start() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "calibrate_damped.py")],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    want = "native" if "native" in registry.available() else "reference"
    assert out.startswith(f"backend {want};")
    mse0 = float(re.search(r"declared start .*: mse (\S+)", out).group(1))
    loss = float(re.search(r"loss \(mse\) (\S+)", out).group(1))
    assert out.splitlines()[2].startswith("converged:")
    assert mse0 > 100 * loss  # the declared start is far from the optimum
    rows = dict(re.findall(r"^(a|k|w|phi)\s+(\S+)\s+\S+$", out, re.M))
    for name, value in TRUTH.items():  # within 0.05 of the generating values (noise 0.02)
        assert abs(float(rows[name]) - value) < 0.05, (name, rows)


def test_docs_calibration_snippet_output_is_real() -> None:
    text = (ROOT / "docs" / "calibration.md").read_text()
    shown = re.search(r"print\(cal\)\n# (Calibration\(.*?\))\n", text, re.S).group(1)
    p = ndvm.compile((ROOT / "examples" / "damped.scm").read_text(), inputs=("x",))
    x = np.linspace(0.1, 6.0, 44)
    rng = np.random.default_rng(0)
    y = 1.2 * np.exp(-0.4 * x) * np.cos(2.1 * x + 0.3) + 0.02 * rng.standard_normal(44)
    cal = ndvm.calibrate(p, {"x": x}, y, starts=256)
    assert " ".join(repr(cal).split()) == " ".join(shown.replace("#", " ").split())
