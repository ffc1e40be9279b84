"""A program's values on prepared inputs without the result's bookkeeping (the held-out
scores and the search funnel's ``finite`` stage evaluate the same data for every candidate)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ndvm.backends import registry
from ndvm.backends.inputs import Prepared


def values(program: Any, theta: np.ndarray, inputs: Any) -> tuple[np.ndarray, bool] | None:
    """``program.evaluate(theta, inputs).value`` (an ``ndvm.Program``) and whether it has
    data lanes, for a float64 program on a backend with a lean path (the native one: its
    ``values``), a float64 ``theta [B, P]`` and ``Prepared`` inputs, when no lane failed and
    the value is numeric; None otherwise (``evaluate`` then gives the full result)."""
    lean = getattr(registry.get(program.backend), "values", None)
    compiled = program.compiled
    if (lean is None or program.dtype != "float64" or type(inputs) is not Prepared
            or type(theta) is not np.ndarray or theta.dtype != np.float64 or theta.ndim != 2
            or theta.shape[1] != len(compiled.params) or not theta.shape[0]):  # fmt: skip
        return None
    out: tuple[np.ndarray, bool] | None = lean(
        compiled, theta, inputs, limits=program.limits, dialect=program.dialect,
        replay=program.replay,
    )  # fmt: skip
    return out
