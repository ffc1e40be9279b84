"""A program's values on prepared inputs without the result's bookkeeping (the held-out
scores and the search funnel's ``finite`` stage evaluate the same data for every candidate)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ndvm.backends import registry
from ndvm.backends.inputs import Prepared
from ndvm.errors import NdvmError

Lean = tuple[np.ndarray, bool, list[tuple[np.ndarray, NdvmError]]]  # value, data lanes, errors


def values(program: Any, theta: np.ndarray, inputs: Any) -> Lean | None:
    """``program.evaluate(theta, inputs)``'s value (an ``ndvm.Program``), whether it has data
    lanes, and its lane errors (``[(mask, error)]``, empty when no lane failed), for a float64
    program on a backend with a lean path (the native one: its ``values``), a float64
    ``theta [B, P]`` and ``Prepared`` inputs, when the value is numeric; None otherwise
    (``evaluate`` then gives the full result). Unlike ``evaluate``, a failed lane never raises
    (whatever the program's ``strict``)."""
    lean = getattr(registry.get(program.backend), "values", None)
    compiled = program.compiled
    if (lean is None or program.dtype != "float64" or type(inputs) is not Prepared
            or type(theta) is not np.ndarray or theta.dtype != np.float64 or theta.ndim != 2
            or theta.shape[1] != len(compiled.params) or not theta.shape[0]):  # fmt: skip
        return None
    out: Lean | None = lean(
        compiled, theta, inputs, limits=program.limits, dialect=program.dialect,
        replay=program.replay,
    )  # fmt: skip
    return out
