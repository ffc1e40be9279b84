"""The golden programs and their oracles, independently of ndvm (``tools/regen_golden.py``
writes and checks the expected results from them).

Each golden holds the program text, the theta lanes (unconstrained, ``[B, P]``), the inputs and
an **oracle**: a plain Python/NumPy hand translation of the program. Oracle conventions:
``oracle(*params, **inputs)`` sees the *constrained* parameter values (softplus / sigmoid / tanh
of theta, computed here) in declaration order; a data input is passed one point at a time (a
float); raising ``Fail(kind)`` marks the lane as failing with that error class. Non-numeric
results are plain Python data: lists, floats, bools, ``str`` for symbols and strings, ``None``
for void. The cases live in one module per part of the language, imported here in order.
"""

from __future__ import annotations

from . import forms, lanes, models, procedures  # noqa: F401  (each registers its cases)
from .base import GOLDENS, TRANSFORMS, Fail, Golden

__all__ = ["GOLDENS", "TRANSFORMS", "Fail", "Golden"]
