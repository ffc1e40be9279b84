"""Fit the damped oscillator (examples/damped.scm) to noisy data from 256 starts in one batch.

PYTHONPATH=src python examples/calibrate_damped.py [out.png]
"""

import sys
from pathlib import Path

import numpy as np

import ndvm

source = (Path(__file__).parent / "damped.scm").read_text()
program = ndvm.compile(source, inputs=("x",))
x = np.linspace(0.1, 6.0, 44)
y = np.exp(-0.3 * x) * np.cos(2.0 * x) + np.random.default_rng(0).normal(0, 0.02, x.shape)
cal = ndvm.calibrate(program, {"x": x}, y, starts=256, steps=50, lr=0.05)
print(f"best loss {cal.loss:.3g} from start {cal.best}; {cal.n_failed} start(s) failed")
print({k: round(v, 4) for k, v in cal.params.items()})
if len(sys.argv) > 1:
    cal.plot(sys.argv[1])
