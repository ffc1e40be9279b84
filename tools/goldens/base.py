"""The golden record, its registration and the oracles' helpers (the cases are in the sibling
modules, one per part of the language).

Each golden holds the program text, the theta lanes (unconstrained, ``[B, P]``), the inputs and
an **oracle**: a plain Python/NumPy hand translation of the program. Oracle conventions:
``oracle(*params, **inputs)`` sees the *constrained* parameter values (softplus / sigmoid / tanh
of theta, computed here) in declaration order; a data input is passed one point at a time (a
float); raising ``Fail(kind)`` marks the lane as failing with that error class. Non-numeric
results are plain Python data: lists, floats, bools, ``str`` for symbols and strings, ``None``
for void.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


class Fail(Exception):
    """The lane fails at run time with the error class ``kind`` (e.g. ``ProgramError``)."""

    def __init__(self, kind: str = "ProgramError") -> None:
        super().__init__(kind)
        self.kind = kind


@dataclass
class Golden:
    name: str
    source: str
    params: list[str]
    theta: list[list[float]]
    oracle: Callable[..., Any]
    constraints: dict[str, str] = field(default_factory=dict)
    inputs: dict[str, tuple[str, Any]] = field(default_factory=dict)
    grad: bool = True  # False: a structural result (lists, symbols, booleans), no gradient
    grad_closed: Callable[..., Any] | None = None  # closed-form d value / d theta per lane
    rtol_value: float = 1e-9
    rtol_grad: float = 1e-6
    errors: list[dict[str, Any]] = field(default_factory=list)  # expected error details
    note: str = ""


GOLDENS: list[Golden] = []


def golden(name: str, source: str, params: str, theta: list[list[float]], **kw: Any) -> None:
    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        GOLDENS.append(
            Golden(name, source.strip() + "\n", params.split(), theta, fn, **kw)  # type: ignore[arg-type]
        )
        return fn

    return deco  # type: ignore[return-value]


# -- oracle helpers ---------------------------------------------------------------------
def softplus(t: float) -> float:
    return math.log1p(math.exp(-abs(t))) + max(t, 0.0)


def sigmoid(t: float) -> float:
    return 1.0 / (1.0 + math.exp(-t))


TRANSFORMS = {"free": lambda t: t, "positive": softplus, "unit": sigmoid, "signed-unit": math.tanh}


def car(x: Any) -> Any:
    if not isinstance(x, list) or not x:
        raise Fail()
    return x[0]


def r7_round(x: float) -> float:
    return float(np.round(x))  # round half to even, as R7RS


def sign(x: float) -> float:
    return float(np.sign(x))
