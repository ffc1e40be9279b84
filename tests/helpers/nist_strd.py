"""NIST StRD nonlinear regression problems: data, starting values and certified results.

The 27 problems of NIST's Statistical Reference Datasets for nonlinear least squares
(https://www.itl.nist.gov/div898/strd/nls/nls_main.shtml; public-domain data, the files as NIST
publishes them, in ``tests/data/nist_strd``) with each model written as an ndvm program and as
a NumPy function (for scipy's ``curve_fit``). Each problem has two starting points, "Start 1"
far from the solution and "Start 2" near it, and certified parameters, standard deviations and
residual sum of squares to 11 significant digits, computed by NIST in 128-bit arithmetic.

``lre(value, certified)`` is the log relative error (McCullough's measure of the number of
correct significant digits) used to grade solvers on these problems.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent.parent / "data" / "nist_strd"
PI = "3.141592653589793"

# name -> (ndvm body over b1..bk and the inputs, numpy model f(X, *b), difficulty)
_EXP3 = "(+ (* b1 (exp (- (* b2 x)))) (* b3 (exp (- (* b4 x)))) (* b5 (exp (- (* b6 x)))))"
_GAUSS = ("(+ (* b1 (exp (- (* b2 x)))) (* b3 (exp (- (/ (square (- x b4)) (square b5)))))"
          " (* b6 (exp (- (/ (square (- x b7)) (square b8))))))")  # fmt: skip
_RAT33 = ("(/ (+ b1 (* b2 x) (* b3 x x) (* b4 x x x)) "
          "(+ 1 (* b5 x) (* b6 x x) (* b7 x x x)))")  # fmt: skip
_TWO_PI = f"(* 2 {PI} x)"
_ENSO = (f"(+ b1 (* b2 (cos (/ {_TWO_PI} 12))) (* b3 (sin (/ {_TWO_PI} 12)))"
         f" (* b5 (cos (/ {_TWO_PI} b4))) (* b6 (sin (/ {_TWO_PI} b4)))"
         f" (* b8 (cos (/ {_TWO_PI} b7))) (* b9 (sin (/ {_TWO_PI} b7))))")  # fmt: skip


def _exp3(x, b1, b2, b3, b4, b5, b6):  # type: ignore[no-untyped-def]
    return b1 * np.exp(-b2 * x) + b3 * np.exp(-b4 * x) + b5 * np.exp(-b6 * x)


def _gauss(x, b1, b2, b3, b4, b5, b6, b7, b8):  # type: ignore[no-untyped-def]
    return (b1 * np.exp(-b2 * x) + b3 * np.exp(-((x - b4) ** 2) / b5**2)
            + b6 * np.exp(-((x - b7) ** 2) / b8**2))  # fmt: skip


def _rat33(x, b1, b2, b3, b4, b5, b6, b7):  # type: ignore[no-untyped-def]
    return (b1 + b2 * x + b3 * x**2 + b4 * x**3) / (1 + b5 * x + b6 * x**2 + b7 * x**3)


def _enso(x, b1, b2, b3, b4, b5, b6, b7, b8, b9):  # type: ignore[no-untyped-def]
    w = 2 * np.pi * x
    return (b1 + b2 * np.cos(w / 12) + b3 * np.sin(w / 12) + b5 * np.cos(w / b4)
            + b6 * np.sin(w / b4) + b8 * np.cos(w / b7) + b9 * np.sin(w / b7))  # fmt: skip


MODELS: dict[str, tuple[str, Callable[..., np.ndarray], str]] = {
    "Misra1a": ("(* b1 (- 1 (exp (- (* b2 x)))))",
                lambda x, b1, b2: b1 * (1 - np.exp(-b2 * x)), "lower"),
    "Chwirut2": ("(/ (exp (- (* b1 x))) (+ b2 (* b3 x)))",
                 lambda x, b1, b2, b3: np.exp(-b1 * x) / (b2 + b3 * x), "lower"),
    "Chwirut1": ("(/ (exp (- (* b1 x))) (+ b2 (* b3 x)))",
                 lambda x, b1, b2, b3: np.exp(-b1 * x) / (b2 + b3 * x), "lower"),
    "Lanczos3": (_EXP3, _exp3, "lower"),
    "Gauss1": (_GAUSS, _gauss, "lower"),
    "Gauss2": (_GAUSS, _gauss, "lower"),
    "DanWood": ("(* b1 (expt x b2))", lambda x, b1, b2: b1 * x**b2, "lower"),
    "Misra1b": ("(* b1 (- 1 (expt (+ 1 (/ (* b2 x) 2)) -2)))",
                lambda x, b1, b2: b1 * (1 - (1 + b2 * x / 2) ** -2), "lower"),
    "Kirby2": ("(/ (+ b1 (* b2 x) (* b3 x x)) (+ 1 (* b4 x) (* b5 x x)))",
               lambda x, b1, b2, b3, b4, b5: (b1 + b2 * x + b3 * x**2)
               / (1 + b4 * x + b5 * x**2), "average"),
    "Hahn1": (_RAT33, _rat33, "average"),
    "Nelson": ("(- b1 (* b2 x1 (exp (- (* b3 x2)))))",
               lambda X, b1, b2, b3: b1 - b2 * X[0] * np.exp(-b3 * X[1]), "average"),
    "MGH17": ("(+ b1 (* b2 (exp (- (* x b4)))) (* b3 (exp (- (* x b5)))))",
              lambda x, b1, b2, b3, b4, b5: b1 + b2 * np.exp(-x * b4) + b3 * np.exp(-x * b5),
              "average"),
    "Lanczos1": (_EXP3, _exp3, "average"),
    "Lanczos2": (_EXP3, _exp3, "average"),
    "Gauss3": (_GAUSS, _gauss, "average"),
    "Misra1c": ("(* b1 (- 1 (expt (+ 1 (* 2 b2 x)) -0.5)))",
                lambda x, b1, b2: b1 * (1 - (1 + 2 * b2 * x) ** -0.5), "average"),
    "Misra1d": ("(/ (* b1 b2 x) (+ 1 (* b2 x)))",
                lambda x, b1, b2: b1 * b2 * x / (1 + b2 * x), "average"),
    "Roszman1": (f"(- b1 (* b2 x) (/ (atan (/ b3 (- x b4))) {PI}))",
                 lambda x, b1, b2, b3, b4: b1 - b2 * x - np.arctan(b3 / (x - b4)) / np.pi,
                 "average"),
    "ENSO": (_ENSO, _enso, "average"),
    "MGH09": ("(/ (* b1 (+ (* x x) (* x b2))) (+ (* x x) (* x b3) b4))",
              lambda x, b1, b2, b3, b4: b1 * (x**2 + x * b2) / (x**2 + x * b3 + b4), "higher"),
    "Thurber": (_RAT33, _rat33, "higher"),
    "BoxBOD": ("(* b1 (- 1 (exp (- (* b2 x)))))",
               lambda x, b1, b2: b1 * (1 - np.exp(-b2 * x)), "higher"),
    "Rat42": ("(/ b1 (+ 1 (exp (- b2 (* b3 x)))))",
              lambda x, b1, b2, b3: b1 / (1 + np.exp(b2 - b3 * x)), "higher"),
    "MGH10": ("(* b1 (exp (/ b2 (+ x b3))))",
              lambda x, b1, b2, b3: b1 * np.exp(b2 / (x + b3)), "higher"),
    "Eckerle4": ("(* (/ b1 b2) (exp (* -0.5 (square (/ (- x b3) b2)))))",
                 lambda x, b1, b2, b3: b1 / b2 * np.exp(-0.5 * ((x - b3) / b2) ** 2), "higher"),
    "Rat43": ("(/ b1 (expt (+ 1 (exp (- b2 (* b3 x)))) (/ 1 b4)))",
              lambda x, b1, b2, b3, b4: b1 / (1 + np.exp(b2 - b3 * x)) ** (1 / b4), "higher"),
    "Bennett5": ("(* b1 (expt (+ b2 x) (/ -1 b3)))",
                 lambda x, b1, b2, b3: b1 * (b2 + x) ** (-1 / b3), "higher"),
}  # fmt: skip


# models whose value is unchanged by swapping groups of parameters (two exponentials, peaks or
# cycles): a fit may find the certified solution with its terms in another order
PERMUTABLE = frozenset(
    {"Lanczos1", "Lanczos2", "Lanczos3", "Gauss1", "Gauss2", "Gauss3", "MGH17", "ENSO"}
)


@dataclass(frozen=True)
class Problem:
    """One StRD problem: ``x`` [N] (or [k, N] for k predictors), ``y`` [N] the fitted response
    (Nelson's is log y, as its model states), starts and certified results by parameter."""

    name: str
    source: str  # the ndvm program over b1..bk and ``inputs``
    inputs: tuple[str, ...]
    fn: Callable[..., np.ndarray]
    difficulty: str
    x: np.ndarray
    y: np.ndarray
    start1: tuple[float, ...]
    start2: tuple[float, ...]
    certified: tuple[float, ...]
    std_dev: tuple[float, ...]
    rss: float

    @property
    def params(self) -> tuple[str, ...]:
        return tuple(f"b{i + 1}" for i in range(len(self.certified)))

    def data(self) -> dict[str, np.ndarray]:
        """The inputs by name (ndvm's ``inputs``)."""
        if len(self.inputs) == 1:
            return {self.inputs[0]: self.x}
        return {name: self.x[i] for i, name in enumerate(self.inputs)}


_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


def load(name: str) -> Problem:
    """Problem ``name`` from its NIST file (the model from ``MODELS``)."""
    text = (DATA / f"{name}.dat").read_text()
    rows = re.findall(rf"^\s*b\d+\s*=\s*({_NUM})\s+({_NUM})\s+({_NUM})\s+({_NUM})\s*$", text,
                      re.MULTILINE)  # fmt: skip
    if not rows:
        raise ValueError(f"{name}: no parameter rows")
    s1, s2, cert, sd = (tuple(float(r[i]) for r in rows) for i in range(4))
    rss = float(re.search(rf"Residual Sum of Squares:\s*({_NUM})", text).group(1))  # type: ignore[union-attr]
    head = re.search(r"^Data:\s+y\s+(.*)$", text, re.MULTILINE)
    assert head is not None, name
    columns = head.group(1).split()
    values = [ln.split() for ln in text[head.end() :].splitlines() if ln.strip()]
    table = np.array(values, dtype=np.float64)
    y, x = table[:, 0], table[:, 1:].T
    inputs = ("x",) if len(columns) == 1 else ("x1", "x2")
    source, fn, difficulty = MODELS[name]
    if name == "Nelson":
        y = np.log(y)  # the model is of log[y]
    return Problem(name, source, inputs, fn, difficulty, x[0] if len(columns) == 1 else x, y,
                   s1, s2, cert, sd, rss)  # fmt: skip


def problems() -> list[Problem]:
    """Every problem, lower difficulty first (NIST's order within a level)."""
    return [load(n) for n in MODELS]


def lre(value: float, certified: float) -> float:
    """Log relative error: about the number of correct significant digits of ``value``
    (absolute when ``certified`` is 0), 0 below one digit, 11 at the certified precision."""
    if not math.isfinite(value):
        return 0.0
    err = abs(value - certified) / (abs(certified) if certified != 0 else 1.0)
    if err == 0.0:
        return 11.0
    return float(min(11.0, max(0.0, -math.log10(err))))
