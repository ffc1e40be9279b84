"""The goldens with a numeric, error-free, differentiable result: what export can cover."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

import ndvm
from ndvm.backends.inputs import Const

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "programs"
# Outside the subset for every target: arms of different structure where lanes can differ
# (011 or-result, 016 void arm, 031 filter, 033 assv, 051 list/number, 052 vector lengths) and
# loops whose exit depends on a parameter (049, 050).
OUTSIDE = {"011-cond-arrow", "016-when-unless", "031-higher-order", "033-assv-lanes",
           "049-divergent-loop", "050-newton-sqrt", "051-structural-divergence",
           "052-structural-vectors"}  # fmt: skip


def candidates() -> list[str]:
    out = []
    for path in sorted(GOLDEN.glob("*.expected.json")):
        spec = json.loads(path.read_text())
        if spec["grad"] is not None and not spec["errors"] and spec["numeric"]:
            out.append(path.name[: -len(".expected.json")])
    return out


def load(name: str) -> tuple[ndvm.Program, dict[str, Any], np.ndarray]:
    spec = json.loads((GOLDEN / f"{name}.expected.json").read_text())
    inputs: dict[str, Any] = {}
    for key, item in spec["inputs"].items():
        arr = np.asarray(item["value"], dtype=np.float64)
        inputs[key] = ndvm.const(arr) if item["kind"] == "const" else arr
    prog = ndvm.compile((GOLDEN / spec["source"]).read_text(), inputs=tuple(inputs), strict=False)
    theta = np.asarray(spec["theta"], dtype=np.float64).reshape(len(spec["theta"]), -1)
    return prog, inputs, theta


def as_framework(inputs: dict[str, Any], tensor: Any) -> dict[str, Any]:
    """Data inputs as framework arrays; ``ndvm.const`` inputs stay as they are."""
    return {k: v if isinstance(v, Const) else tensor(v) for k, v in inputs.items()}
