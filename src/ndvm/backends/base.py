"""Backend protocol and the result record every backend returns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ndvm.errors import NdvmError
from ndvm.eval.limits import Limits
from ndvm.lang.ir import CompiledProgram

STATUS_OK = 0
STATUS_NONFINITE = 1
STATUS_ERROR = 2


@dataclass
class RunResult:
    """What one evaluation produced, on the full lane grid.

    value: ``[B, Ng, *struct]`` float array for numeric results, else an object array
    ``[B, Ng]`` of per-lane Python values. status: ``[B, Ng]`` int8 codes (0 ok,
    1 non-finite, 2 error). errors: one ``(lane_mask, error)`` per failing lane group.
    grad: ``[B, P]`` when requested.
    """

    value: np.ndarray
    status: np.ndarray
    errors: list[tuple[np.ndarray, NdvmError]]
    grad: np.ndarray | None = None
    data_lanes: bool = False
    numeric: bool = True
    stats: dict[str, Any] = field(default_factory=dict)


class Backend(Protocol):
    name: str

    def run(
        self,
        program: CompiledProgram,
        theta: np.ndarray,
        inputs: Mapping[str, Any],
        *,
        grad: bool,
        cotangent: np.ndarray | None,
        limits: Limits,
        dialect: str | None,
        dtype: str = "float64",
        replay: bool = True,  # trace replay, where the backend has it (native)
    ) -> RunResult: ...
