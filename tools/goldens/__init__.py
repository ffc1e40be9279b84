"""The golden programs and their oracles, independently of ndvm (``tools/regen_golden.py``
writes and checks the expected results from them).

Each golden holds the program text, the theta lanes, the inputs and an oracle (a plain
Python/NumPy hand translation of the program; its conventions are in ``base.py``). The cases
live in one module per part of the language, imported here in order.
"""

from __future__ import annotations

from . import forms, lanes, models, procedures  # noqa: F401  (each registers its cases)
from .base import GOLDENS, TRANSFORMS, Fail, Golden

__all__ = ["GOLDENS", "TRANSFORMS", "Fail", "Golden"]
