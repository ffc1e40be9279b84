"""Fit the damped oscillator (examples/damped.scm) to noisy data from 256 starts in one batch.

The data come from a = 1.2, k = 0.4, w = 2.1, phi = 0.3; the program declares a = 1, k = 0.3,
w = 2, phi = 0, so the fit has ground to cover. Runs on the native backend when it is built.

PYTHONPATH=src python examples/calibrate_damped.py [out.png]
"""

import sys
from pathlib import Path

import numpy as np

import ndvm
from ndvm.backends import registry

TRUTH = {"a": 1.2, "k": 0.4, "w": 2.1, "phi": 0.3}

backend = "native" if "native" in registry.available() else "reference"
source = (Path(__file__).parent / "damped.scm").read_text()
program = ndvm.compile(source, inputs=("x",), backend=backend)
x = np.linspace(0.1, 6.0, 44)
a, k, w, phi = TRUTH.values()
y = a * np.exp(-k * x) * np.cos(w * x + phi) + np.random.default_rng(0).normal(0, 0.02, x.shape)

init = program.init_theta()
declared = {n: round(float(v), 4) for n, v in zip(program.params, program.constrain(init))}
mse0 = float(np.mean((program.eval(init, x=x) - y) ** 2))
print(f"backend {program.backend}; truth {TRUTH}")
print(f"declared start {declared}: mse {mse0:.3g}")
cal = ndvm.calibrate(program, {"x": x}, y, starts=256)
print(cal.summary())
if len(sys.argv) > 1:
    cal.plot(sys.argv[1])
