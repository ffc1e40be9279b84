"""The benchmark program set, ordered by depth: name, source, inputs, and a theta at B lanes.

scalar (straight-line), Michaelis-Menten (rational rate law over data lanes), damped oscillator
(as ``examples/damped.scm``, over data lanes), a 16-step logistic map (named-let loop) and the
80-step 2-D Kalman NLL (``examples/kalman80.scm``, a loop of 2x2 linear algebra).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ndvm.backends.inputs import const
from ndvm.lang.front import compile_source
from ndvm.lang.ir import CompiledProgram
from ndvm.tasks.kalman80 import PROGRAM as _KALMAN80_TASK_PROGRAM

SCALAR = """
(params (a 0.5) (b 1.2))
(+ (* a a) (* 3 (sin b)) (/ a (+ 1 (* b b))))
"""

MICHAELIS_MENTEN = """
(params (vmax 1.5 positive) (km 0.4 positive))
(/ (* vmax s) (+ km s))
"""

DAMPED = """
(params (a 1.0) (k 0.3 positive) (w 2.0) (phi 0.0))
(* a (exp (- (* k x))) (cos (+ (* w x) phi)))
"""

LOGISTIC16 = """
(params (r 3.7) (x0 0.3 unit))
(let loop ((k 0) (x x0))
  (if (= k 16) x (loop (+ k 1) (* r x (- 1 x)))))
"""

KALMAN80 = _KALMAN80_TASK_PROGRAM  # the kalman-80 task's program, one source of truth


@dataclass(frozen=True)
class BenchProgram:
    """One benchmark program with the inputs it is measured on."""

    name: str
    source: str
    input_names: tuple[str, ...]
    depth: str  # what makes it deep: a one-line description for tables

    def inputs(self) -> dict[str, Any]:
        rng = np.random.default_rng(0)
        if self.name == "mm":
            return {"s": np.linspace(0.1, 4.0, 16)}
        if self.name == "damped":
            return {"x": np.linspace(0.0, 6.0, 32)}
        if self.name == "kalman80":
            return {"Y": const(rng.standard_normal((80, 2)))}
        return {}

    def compiled(self) -> CompiledProgram:
        return compile_source(self.source, None, self.input_names)

    def theta(self, B: int, seed: int = 0) -> np.ndarray:
        """``[B, P]``: the declared initial theta plus small per-lane jitter."""
        from ndvm.api import Program

        prog = Program(self.compiled(), "reference")
        base = prog.init_theta()
        jitter = 0.05 * np.random.default_rng(seed).standard_normal((B, base.shape[0]))
        return base[None, :] + jitter


PROGRAMS: tuple[BenchProgram, ...] = (
    BenchProgram("scalar", SCALAR, (), "straight-line, 7 ops"),
    BenchProgram("mm", MICHAELIS_MENTEN, ("s",), "rate law, 16 data lanes"),
    BenchProgram("damped", DAMPED, ("x",), "oscillator, 32 data lanes"),
    BenchProgram("logistic16", LOGISTIC16, (), "16-step named-let loop"),
    BenchProgram("kalman80", KALMAN80, ("Y",), "80-step 2x2 Kalman NLL"),
)


def by_name(name: str) -> BenchProgram:
    for p in PROGRAMS:
        if p.name == name:
            return p
    raise KeyError(f"unknown benchmark program {name!r} (have: {[p.name for p in PROGRAMS]})")
