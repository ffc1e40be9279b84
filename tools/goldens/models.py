"""Golden cases: models (registered in order by ``golden``)."""

from __future__ import annotations

import math

import numpy as np

from .base import ROOT, golden

_Y = np.random.default_rng(0).standard_normal((80, 2))


def _kalman(q: float, r: float, Y: np.ndarray) -> float:
    Q, R = np.eye(2) * q * q, np.eye(2) * r * r
    m, P, nll = np.zeros(2), np.eye(2), 0.0
    for t in range(Y.shape[0]):
        Pp = P + Q
        v = Y[t] - m
        S = Pp + R
        Si = np.linalg.inv(S)
        K = Pp @ Si
        m = m + K @ v
        P = Pp - K @ Pp
        nll += 0.5 * (np.linalg.slogdet(S)[1] + v @ Si @ v + 2 * 1.8378770664093453)
    return float(nll)


golden(
    "043-kalman80",
    (ROOT / "examples" / "kalman80.scm").read_text(),
    "q r",
    [[-1.0, 0.2], [0.5, -0.5], [0.0, 1.0]],
    constraints={"q": "positive", "r": "positive"},
    inputs={"Y": ("const", _Y)},
)(_kalman)


def _logistic(r: float, x0: float) -> float:
    x = x0
    for _ in range(16):
        x = r * x * (1 - x)
    return x


golden(
    "044-logistic-map",
    """
(params (r 3.2) (x0 0.3 unit))
(let loop ((i 0) (x x0))
  (if (= i 16) x (loop (+ i 1) (* r x (- 1 x)))))
""",
    "r x0",
    [[2.5, -0.8], [3.2, 0.0], [3.5, 0.4]],
    constraints={"x0": "unit"},
    rtol_grad=1e-5,
)(_logistic)

golden(
    "045-damped-oscillator",
    (ROOT / "examples" / "damped.scm").read_text(),
    "a k w phi",
    [[1.0, -1.0, 2.0, 0.0], [0.5, 0.3, 1.0, 0.4]],
    constraints={"k": "positive"},
    inputs={"x": ("data", [0.0, 0.5, 1.0, 2.0, 3.5])},
)(lambda a, k, w, phi, x: a * math.exp(-k * x) * math.cos(w * x + phi))

golden(
    "046-sr-expression",
    "(* a (sin (+ (* b x) c)))",
    "a b c",
    [[1.0, 2.0, 3.0], [2.0, -1.0, 0.5], [0.3, 0.1, -2.0]],
    inputs={"x": ("data", [-1.0, 0.0, 0.7, 2.0])},
)(lambda a, b, c, x: a * math.sin(b * x + c))

golden(
    "047-gaussian-bump",
    "(+ (* a (exp (* -0.5 (square (/ (- x b) c))))) (* 0.1 (tanh x)))",
    "a b c",
    [[1.0, 0.5, 0.8], [2.0, -1.0, 1.5]],
    inputs={"x": ("data", [-2.0, -0.5, 0.0, 0.5, 1.0, 3.0])},
)(lambda a, b, c, x: a * math.exp(-0.5 * ((x - b) / c) ** 2) + 0.1 * math.tanh(x))
