"""Shared helpers for the baseline tests: program cases and comparison with the reference."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

import ndvm
from ndvm.baselines.programs import PROGRAMS

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "programs"


def _golden_inputs(spec: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, item in spec["inputs"].items():
        arr = np.asarray(item["value"], dtype=np.float64)
        out[name] = ndvm.const(arr) if item["kind"] == "const" else arr
    return out


def cases() -> list[tuple[str, str, dict[str, Any], np.ndarray | None, dict[str, Any]]]:
    """(id, source, inputs, theta or None, spec) for the bench set, examples and goldens."""
    out: list[Any] = []
    for p in PROGRAMS:
        out.append((f"bench-{p.name}", p.source, p.inputs(), p.theta(3, seed=1), {}))
    rng = np.random.default_rng(0)
    example_inputs = {
        "kalman80.scm": {"Y": ndvm.const(rng.standard_normal((80, 2)))},
        "damped.scm": {"x": np.linspace(0.0, 3.0, 8)},
    }
    for path in sorted((ROOT / "examples").glob("*.scm")):
        if path.name in example_inputs:
            out.append((f"example-{path.stem}", path.read_text(), example_inputs[path.name],
                        None, {}))  # fmt: skip
    for path in sorted(GOLDEN.glob("*.expected.json")):
        spec = json.loads(path.read_text())
        theta = np.asarray(spec["theta"], dtype=np.float64).reshape(len(spec["theta"]), -1)
        source = (GOLDEN / spec["source"]).read_text()
        out.append((f"golden-{spec['source'][:-4]}", source, _golden_inputs(spec), theta, spec))
    return out


def reference_run(source: str, inputs: dict[str, Any], theta: np.ndarray | None) -> Any:
    prog = ndvm.compile(source, inputs=tuple(inputs), backend="reference", strict=False)
    th = prog.init_theta()[None, :] if theta is None else theta
    numeric = True
    try:
        result = prog.evaluate(th, inputs, grad=True)
    except ndvm.NdvmError:
        numeric = False
        result = prog.evaluate(th, inputs, grad=False)
    return prog, th, result, numeric


def assert_same(got: Any, want: Any, grad: bool) -> None:
    assert got.numeric == want.numeric
    if want.numeric:
        np.testing.assert_allclose(got.value, want.value, rtol=1e-9, atol=1e-12)
        if grad:
            np.testing.assert_allclose(got.grad, want.grad, rtol=1e-7, atol=1e-9)
    else:
        for g, w in zip(got.value.reshape(-1), want.value.reshape(-1)):
            if isinstance(w, np.ndarray):
                np.testing.assert_allclose(g, w, rtol=1e-9)
            else:
                assert g == w or (g != g and w != w), (g, w)
