"""Regenerate the golden programs' expected results, independently of ndvm.

The programs and their oracles are in ``tools/goldens/`` (one module per part of the language).
Expected values come from the oracle; expected gradients from float64 five-point central
differences of the oracle (or a closed form). ndvm itself is never run here, so a golden can
catch a bug in every backend, the reference one included.

    PYTHONPATH=src .venv/bin/python tools/regen_golden.py            # rewrite all
    PYTHONPATH=src .venv/bin/python tools/regen_golden.py --check    # fail if any is stale
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "golden" / "programs"
FD_STEP = 1e-4


sys.path.insert(0, str(Path(__file__).resolve().parent))
from goldens import GOLDENS, TRANSFORMS, Fail, Golden  # noqa: E402


# -- generation ---------------------------------------------------------------------------
def constrained(g: Golden, row: list[float]) -> list[float]:
    return [TRANSFORMS[g.constraints.get(p, "free")](t) for p, t in zip(g.params, row)]


def data_len(g: Golden) -> int | None:
    for kind, value in g.inputs.values():
        if kind == "data":
            return len(value)
    return None


def lane_points(g: Golden, row: list[float]) -> list[Any]:
    """Oracle results of one parameter lane: one per data point (a list) or one value."""
    vals = constrained(g, row)
    n = data_len(g)
    consts = {k: np.asarray(v, dtype=np.float64) for k, (kind, v) in g.inputs.items()}
    points = range(n) if n is not None else [None]
    out = []
    for i in points:
        kw = {}
        for k, (kind, v) in g.inputs.items():
            kw[k] = float(v[i]) if kind == "data" else (float(v) if kind == "scalar" else consts[k])
        try:
            out.append(g.oracle(*vals, **kw))
        except Fail as exc:
            out.append(exc)
    return out


def _total(g: Golden, row: list[float]) -> float:
    total = 0.0
    for v in lane_points(g, row):
        if isinstance(v, Fail):
            return math.nan
        total += float(np.sum(np.asarray(v, dtype=np.float64)))
    return total


def fd_grad(g: Golden, row: list[float]) -> list[float]:
    """Five-point central differences of the summed oracle, per theta coordinate."""
    grad = []
    for j in range(len(row)):
        h = FD_STEP * max(1.0, abs(row[j]))

        def at(k: int, j: int = j, h: float = h) -> float:
            r = list(row)
            r[j] += k * h
            return _total(g, r)

        grad.append((8 * (at(1) - at(-1)) - (at(2) - at(-2))) / (12 * h))
    return grad


def _plain(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, (bool, str)) or v is None:
        return v
    if isinstance(v, (int, float, np.floating, np.integer)):
        return float(v)
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    raise TypeError(f"oracle returned {type(v).__name__}")


def build(g: Golden) -> dict[str, Any]:
    values, status, grads = [], [], []
    n = data_len(g)
    for row in g.theta:
        pts = lane_points(g, row)
        lane_vals, lane_status = [], []
        for v in pts:
            if isinstance(v, Fail):
                lane_vals.append(None)
                lane_status.append(2)
                continue
            pv = _plain(v)
            lane_vals.append(pv)
            finite = not g.grad or bool(np.all(np.isfinite(np.asarray(pv, float))))
            lane_status.append(0 if finite else 1)
        values.append(lane_vals if n is not None else lane_vals[0])
        status.append(lane_status if n is not None else lane_status[0])
        if not g.grad or any(s != 0 for s in lane_status):
            grads.append(None)
        elif g.grad_closed is not None:
            vals = constrained(g, row)
            grads.append([float(x) for x in g.grad_closed(*vals)])
        else:
            grads.append(fd_grad(g, row))
    inputs = {k: {"kind": kind, "value": _plain(np.asarray(v, dtype=np.float64))}
              for k, (kind, v) in g.inputs.items()}  # fmt: skip
    return {
        "source": f"{g.name}.scm",
        "note": g.note,
        "params": g.params,
        "theta": g.theta,
        "inputs": inputs,
        "data_lanes": n is not None,
        "numeric": g.grad,  # numeric results (numbers, vectors, matrices) carry gradients
        "value": values,
        "status": status,
        "grad": grads if g.grad else None,
        "errors": g.errors,
        "rtol_value": g.rtol_value,
        "rtol_grad": g.rtol_grad,
    }


# Staleness tolerances: the oracle's values are exact up to the platform's libm (a few ulps),
# its gradients are five-point central differences (truncation and rounding ~1e-10 relative).
# Statuses, errors, positions, sources and structure are compared exactly.
CHECK_TOL = {"value": (1e-12, 1e-15), "grad": (1e-7, 1e-9)}


def _close(a: Any, b: Any, rtol: float, atol: float) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y, rtol, atol) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        if math.isinf(a) or math.isinf(b):
            return a == b
        return abs(a - b) <= rtol * max(abs(a), abs(b)) + atol
    return a == b and type(a) is type(b)


def _same(path: Path, text: str) -> bool:
    """``path`` holds ``text`` up to ``CHECK_TOL`` on the numeric fields (exact elsewhere)."""
    old = path.read_text()
    if old == text or not path.name.endswith(".json"):
        return old == text
    try:
        have, want = json.loads(old), json.loads(text)
    except ValueError:
        return False
    if not isinstance(have, dict) or have.keys() != want.keys():
        return False
    for key, value in want.items():
        rtol, atol = CHECK_TOL.get(key, (0.0, 0.0))
        if key in CHECK_TOL:
            if not _close(have[key], value, rtol, atol):
                return False
        elif have[key] != value:
            return False
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--check",
        action="store_true",
        help="fail if a golden file is stale (numeric fields within CHECK_TOL, the rest exact)",
    )
    ap.add_argument("names", nargs="*", help="only these goldens (name prefixes)")
    args = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    stale = []
    names = [g.name for g in GOLDENS]
    assert len(set(names)) == len(names), "duplicate golden names"
    for g in GOLDENS:
        if args.names and not any(g.name.startswith(p) for p in args.names):
            continue
        files = {
            OUT / f"{g.name}.scm": g.source,
            OUT / f"{g.name}.expected.json": json.dumps(build(g), indent=1) + "\n",
        }
        for path, text in files.items():
            if args.check:
                if not path.exists() or not _same(path, text):
                    stale.append(path.name)
            else:
                path.write_text(text)
    if stale:
        print("stale goldens: " + ", ".join(stale), file=sys.stderr)
        return 1
    print(f"{len(GOLDENS)} goldens {'checked' if args.check else 'written'} in {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
