"""Golden programs: ndvm against independent oracles (``tools/regen_golden.py``).

Each ``NNN-name.scm`` has an ``NNN-name.expected.json`` with the theta lanes, inputs, the
expected value and status per lane, the expected gradient (finite differences of a NumPy
hand translation, never ndvm) and the expected lane errors. The same goldens run on every
available backend.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ndvm
import ndvm.errors
from ndvm.backends import registry

HERE = Path(__file__).parent / "programs"
GOLDENS = sorted(p.name[: -len(".expected.json")] for p in HERE.glob("*.expected.json"))
BACKENDS = registry.available()


def load(name: str) -> tuple[str, dict[str, Any]]:
    spec = json.loads((HERE / f"{name}.expected.json").read_text())
    return (HERE / spec["source"]).read_text(), spec


def host_inputs(spec: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, item in spec["inputs"].items():
        arr = np.asarray(item["value"], dtype=np.float64)
        out[name] = ndvm.const(arr) if item["kind"] == "const" else arr
    return out


def close(got: Any, want: Any, rtol: float) -> bool:
    """Structural comparison of plain per-lane data; numbers within ``rtol``."""
    if isinstance(want, bool) or want is None or isinstance(want, str):
        return got is want or got == want and type(got) is type(want)
    if isinstance(want, float):
        if not isinstance(got, float) or isinstance(got, bool):
            return False
        return math.isclose(got, want, rel_tol=rtol, abs_tol=rtol) or (
            math.isnan(got) and math.isnan(want)
        )
    if isinstance(want, list):
        if isinstance(got, np.ndarray):
            got = got.tolist()
        return (
            isinstance(got, list)
            and len(got) == len(want)
            and all(close(g, w, rtol) for g, w in zip(got, want))
        )
    raise TypeError(f"unexpected expected value {want!r}")


def test_enough_goldens() -> None:
    assert len(GOLDENS) >= 45
    for name in GOLDENS:
        assert (HERE / f"{name}.scm").exists()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", GOLDENS)
def test_golden(name: str, backend: str) -> None:
    source, spec = load(name)
    inputs = host_inputs(spec)
    prog = ndvm.compile(source, inputs=tuple(inputs), backend=backend, strict=False)
    assert list(prog.params) == spec["params"]
    theta = np.asarray(spec["theta"], dtype=np.float64).reshape(len(spec["theta"]), -1)
    result = prog.evaluate(theta, inputs, grad=spec["grad"] is not None)
    B = theta.shape[0]
    status = np.asarray(spec["status"]).reshape(B, -1)
    np.testing.assert_array_equal(result.status, status, err_msg="per-lane status")
    assert result.data_lanes == spec["data_lanes"]
    assert result.numeric == spec["numeric"]
    check_values(result, spec, status)
    check_errors(result, spec)
    if spec["grad"] is not None:
        check_grads(result.grad, spec)


def check_values(result: Any, spec: dict[str, Any], status: np.ndarray) -> None:
    B = status.shape[0]
    for b in range(B):
        want_lane = spec["value"][b] if spec["data_lanes"] else [spec["value"][b]]
        for n, want in enumerate(want_lane):
            if status[b, n] == 2:
                continue
            got = result.value[b, n]
            if result.numeric:
                got = float(got) if np.ndim(got) == 0 else np.asarray(got).tolist()
                want = want if isinstance(want, list) else float(want)
            assert close(got, want, spec["rtol_value"]), f"lane ({b}, {n}): {got!r} != {want!r}"


def check_errors(result: Any, spec: dict[str, Any]) -> None:
    failing = sorted({int(b) for b, _ in np.argwhere(result.status == 2)})
    want_lanes = sorted(lane for e in spec["errors"] for lane in e["lanes"])
    assert failing == want_lanes
    for want in spec["errors"]:
        match = [
            exc
            for mask, exc in result.errors
            if set(np.flatnonzero(mask.any(axis=1))) & set(want["lanes"])
        ]
        assert match, f"no error reported for lanes {want['lanes']}"
        for exc in match:
            assert type(exc) is getattr(ndvm.errors, want["kind"])
            assert (exc.line, exc.column) == (want["line"], want["column"])
            assert want["contains"] in exc.message
            assert set(exc.lanes or ()) <= set(want["lanes"])


def check_grads(grad: np.ndarray, spec: dict[str, Any]) -> None:
    for b, want in enumerate(spec["grad"]):
        if want is None:
            if spec["status"][b] == 2:
                assert np.isnan(grad[b]).all(), "failed lanes have NaN gradients"
            continue
        np.testing.assert_allclose(
            grad[b], want, rtol=spec["rtol_grad"], atol=1e-7, err_msg=f"gradient, lane {b}"
        )


@pytest.mark.parametrize("name", [g for g in GOLDENS if json.loads(
    (HERE / f"{g}.expected.json").read_text())["grad"] is not None][:12])  # fmt: skip
def test_golden_single_lanes_match_batch(name: str) -> None:
    """Each lane run alone equals the same lane of the batched run."""
    source, spec = load(name)
    inputs = host_inputs(spec)
    prog = ndvm.compile(source, inputs=tuple(inputs), backend="reference", strict=False)
    theta = np.asarray(spec["theta"], dtype=np.float64)
    batch = prog.evaluate(theta, inputs, grad=True)
    for b in range(theta.shape[0]):
        one = prog.evaluate(theta[b : b + 1], inputs, grad=True)
        np.testing.assert_array_equal(one.status[0], batch.status[b])
        np.testing.assert_allclose(one.value[0], batch.value[b], rtol=1e-12, equal_nan=True)
        np.testing.assert_allclose(one.grad[0], batch.grad[b], rtol=1e-12, equal_nan=True)


def test_goldens_are_fresh() -> None:
    """The committed goldens are what ``tools/regen_golden.py`` writes (no hand edits)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, str(root / "tools" / "regen_golden.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=root,
    )
    assert proc.returncode == 0, proc.stderr


def test_staleness_check_uses_tolerances(tmp_path: Path) -> None:
    """``--check`` accepts last-bit noise in values/gradients, rejects real changes."""
    import importlib.util
    import json
    import sys

    root = Path(__file__).resolve().parents[2]
    path = root / "tools" / "regen_golden.py"
    spec = importlib.util.spec_from_file_location("regen_golden", path)
    assert spec is not None and spec.loader is not None
    regen = importlib.util.module_from_spec(spec)
    sys.modules["regen_golden"] = regen  # dataclasses look their module up by name
    try:
        spec.loader.exec_module(regen)
    finally:
        del sys.modules["regen_golden"]
    want = {"value": [1.0, [2.0, float("nan")]], "grad": [[0.5, 0.0]], "status": [0, 1]}
    text = json.dumps(want)
    path = tmp_path / "g.expected.json"

    def check(have: dict) -> bool:
        path.write_text(json.dumps(have))
        return regen._same(path, text)

    assert check(want)
    assert check({**want, "value": [1.0 + 1e-15, [2.0, float("nan")]]})
    assert check({**want, "grad": [[0.5 * (1 + 1e-9), 1e-12]]})
    assert not check({**want, "value": [1.0 + 1e-9, [2.0, float("nan")]]})
    assert not check({**want, "value": [1.0, [2.0, 0.0]]})
    assert not check({**want, "grad": [[0.5 * (1 + 1e-6), 0.0]]})
    assert not check({**want, "status": [0, 0]})
    assert not check({**want, "extra": 1})
