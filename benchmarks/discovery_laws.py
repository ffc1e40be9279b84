"""The laws of ``bench_discovery.py``: name, sympy formula in the variable names, the data's
range per variable, and the formula in NumPy. Feynman-style laws of SRBench's set (the harder
ones with nested quotients and roots, or four to six variables) and laws at natural scales
(constants far from 1)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Law:
    name: str
    formula: str  # sympy text in the variable names
    variables: tuple[str, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]
    fn: Callable[..., np.ndarray]


def _gauss(t: np.ndarray) -> np.ndarray:
    return np.exp(-(t**2) / 2) / np.sqrt(2 * np.pi)


def _mm(s: np.ndarray) -> np.ndarray:
    return 2.5 * s / (0.8 + s)


LAWS = [
    Law("I.12.1", "mu*Nn", ("mu", "Nn"), (1, 1), (5, 5), lambda mu, n: mu * n),
    Law("I.14.4", "k*x**2/2", ("k", "x"), (1, 1), (5, 5), lambda k, x: k * x**2 / 2),
    Law("I.29.4", "omega/c", ("omega", "c"), (1, 1), (10, 10), lambda w, c: w / c),
    Law("I.6.2a", "exp(-angle**2/2)/sqrt(2*pi)", ("angle",), (-3,), (3,), lambda t: _gauss(t)),
    Law("michaelis-menten", "2.5*S/(0.8 + S)", ("S",), (0.1,), (5,), lambda s: _mm(s)),
    Law("decay", "3*exp(-0.7*t)", ("t",), (0,), (4,), lambda t: 3 * np.exp(-0.7 * t)),
    Law("I.39.1", "3*pr*V/2", ("pr", "V"), (1, 1), (5, 5), lambda p, v: 1.5 * p * v),
    Law("I.43.31", "mob*kb*T", ("mob", "kb", "T"), (1, 1, 1), (5, 5, 5), lambda a, b, t: a * b * t),
    Law(
        "II.38.14",
        "Y/(2*(1 + sigma))",
        ("Y", "sigma"),
        (1, 1),
        (5, 5),
        lambda Y, s: Y / (2 * (1 + s)),
    ),
    Law(
        "I.27.6",
        "1/(1/d1 + n/d2)",
        ("d1", "n", "d2"),
        (1, 1, 1),
        (5, 5, 5),
        lambda a, n, b: 1 / (1 / a + n / b),
    ),
    Law(
        "I.10.7",
        "m0/sqrt(1 - v**2/c**2)",
        ("m0", "v", "c"),
        (1, 1, 3),
        (5, 2, 10),
        lambda m, v, c: m / np.sqrt(1 - v**2 / c**2),
    ),
    Law(
        "I.34.27",
        "h*omega/(2*pi)",
        ("h", "omega"),
        (1, 1),
        (5, 5),
        lambda h, w: h * w / (2 * np.pi),
    ),
    Law(
        "II.3.24", "P/(4*pi*r**2)", ("P", "r"), (1, 1), (5, 5), lambda p, r: p / (4 * np.pi * r**2)
    ),
    Law(
        "I.18.12",
        "r*F*sin(theta)",
        ("r", "F", "theta"),
        (1, 1, 0),
        (5, 5, 5),
        lambda r, f, t: r * f * np.sin(t),
    ),
    Law(
        "I.47.23",
        "sqrt(gamma*pr/rho)",
        ("gamma", "pr", "rho"),
        (1, 1, 1),
        (5, 5, 5),
        lambda g, p, r: np.sqrt(g * p / r),
    ),
    Law("II.27.18", "eps*Ef**2", ("eps", "Ef"), (1, 1), (5, 5), lambda e, f: e * f**2),
    # harder Feynman laws: nested quotients and roots, four to six variables
    Law(
        "I.15.10",
        "m0*v/sqrt(1 - v**2/c**2)",
        ("m0", "v", "c"),
        (1, 1, 3),
        (5, 2, 10),
        lambda m, v, c: m * v / np.sqrt(1 - v**2 / c**2),
    ),
    Law(
        "I.48.2",
        "m*c**2/sqrt(1 - v**2/c**2)",
        ("m", "v", "c"),
        (1, 1, 3),
        (5, 2, 10),
        lambda m, v, c: m * c**2 / np.sqrt(1 - v**2 / c**2),
    ),
    Law(
        "I.8.14",
        "sqrt((x2 - x1)**2 + (y2 - y1)**2)",
        ("x1", "x2", "y1", "y2"),
        (1, 1, 1, 1),
        (5, 5, 5, 5),
        lambda x1, x2, y1, y2: np.sqrt((x2 - x1) ** 2 + (y2 - y1) ** 2),
    ),
    Law(
        "I.13.12",
        "G*m1*m2*(1/r2 - 1/r1)",
        ("m1", "m2", "r1", "r2", "G"),
        (1, 1, 1, 1, 1),
        (5, 5, 5, 5, 5),
        lambda m1, m2, r1, r2, g: g * m1 * m2 * (1 / r2 - 1 / r1),
    ),
    Law(
        "I.16.6",
        "(u + v)/(1 + u*v/c**2)",
        ("c", "v", "u"),
        (1, 1, 1),
        (5, 5, 5),
        lambda c, v, u: (u + v) / (1 + u * v / c**2),
    ),
    Law(
        "III.4.33",
        "(h/(2*pi))*omega/(exp((h/(2*pi))*omega/(kb*T)) - 1)",
        ("h", "omega", "kb", "T"),
        (1, 1, 1, 1),
        (5, 5, 5, 5),
        lambda h, w, k, t: (h / (2 * np.pi)) * w / np.expm1((h / (2 * np.pi)) * w / (k * t)),
    ),
    Law(
        "I.12.11",
        "q*(Ef + B*v*sin(theta))",
        ("q", "Ef", "B", "v", "theta"),
        (1, 1, 1, 1, 1),
        (5, 5, 5, 5, 5),
        lambda q, e, b, v, t: q * (e + b * v * np.sin(t)),
    ),
    Law(
        "I.37.4",
        "I1 + I2 + 2*sqrt(I1*I2)*cos(delta)",
        ("I1", "I2", "delta"),
        (1, 1, 1),
        (5, 5, 5),
        lambda a, b, d: a + b + 2 * np.sqrt(a * b) * np.cos(d),
    ),
    Law(
        "I.44.4",
        "n*kb*T*log(V2/V1)",
        ("n", "kb", "T", "V1", "V2"),
        (1, 1, 1, 1, 1),
        (5, 5, 5, 5, 5),
        lambda n, k, t, v1, v2: n * k * t * np.log(v2 / v1),
    ),
    Law(
        "I.24.6",
        "m*(omega**2 + omega0**2)*x**2/4",
        ("m", "omega", "omega0", "x"),
        (1, 1, 1, 1),
        (5, 5, 5, 5),
        lambda m, w, w0, x: m * (w**2 + w0**2) * x**2 / 4,
    ),
    Law(
        "I.11.19",
        "x1*y1 + x2*y2 + x3*y3",
        ("x1", "x2", "x3", "y1", "y2", "y3"),
        (1, 1, 1, 1, 1, 1),
        (5, 5, 5, 5, 5, 5),
        lambda x1, x2, x3, y1, y2, y3: x1 * y1 + x2 * y2 + x3 * y3,
    ),
    # natural scales: constants far from 1
    Law("logistic", "0.8*x*(1 - x/7)", ("x",), (0,), (10,), lambda x: 0.8 * x * (1 - x / 7)),
    Law(
        "arrhenius",
        "3.2e7*exp(-5400/T)",
        ("T",),
        (280,),
        (400,),
        lambda t: 3.2e7 * np.exp(-5400 / t),
    ),
    Law("line-big", "147.5 + 0.83*x", ("x",), (300,), (5000,), lambda x: 147.5 + 0.83 * x),
    Law("mm-big", "2300*S/(45 + S)", ("S",), (2,), (200,), lambda s: 2300 * s / (45 + s)),
    Law(
        "decay-big", "80000*exp(-0.046*t)", ("t",), (0,), (60,), lambda t: 8e4 * np.exp(-0.046 * t)
    ),
]
