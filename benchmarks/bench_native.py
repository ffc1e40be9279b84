"""Native runtime benchmark: per-lane forward+gradient cost, amortization, ceiling, first gradient.

Run: ``python benchmarks/bench_native.py [--quick]``. Prints ratios measured in this one run:

* per-lane forward+gradient time at B = 1, 16, 64, 256, 1024 for the 80-step Kalman NLL
  (examples/kalman80.scm) and a symbolic-regression expression over 44 data points, through the
  public API (``Program.value_and_grad``) and through the core alone;
* amortization (per-lane B=1 / per-lane B=256);
* native / hand-written C++ ceiling per lane at B=256 (benchmarks/kalman_ceiling.cpp, built
  here with the system C++ compiler);
* native / reference backend;
* time from the source text of a never-seen 10-node program to its first gradient.

Every time is the best of several repetitions (the machine is shared; best-of is the least
noisy estimate of the cost itself).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

import ndvm
from ndvm.backends import registry
from ndvm.backends.inputs import Const

ROOT = Path(__file__).resolve().parents[1]
KALMAN = (ROOT / "examples" / "kalman80.scm").read_text()
SR = "(* a (exp (- (* b x))) (cos (+ (* c x) d)))"
LANES = (1, 16, 64, 256, 1024)


def best_of(fn: Callable[[], Any], reps: int, budget: float = 2.0) -> float:
    best = float("inf")
    start = time.perf_counter()
    for i in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        if i >= 2 and time.perf_counter() - start > budget:
            break
    return best


def workloads(rng: np.random.Generator) -> dict[str, tuple[str, dict[str, Any], int]]:
    Y = rng.normal(size=(80, 2)).cumsum(axis=0)
    x = np.linspace(0.0, 4.0, 44)
    return {
        "kalman80": (KALMAN, {"Y": ndvm.const(Y)}, 2),
        "sr44": (SR, {"x": x}, 4),
    }


def core_runner(prog: ndvm.Program, theta: np.ndarray, inputs: dict[str, Any]) -> Callable[[], Any]:
    """Forward + gradient through ndvm._core only (no API/result assembly in Python)."""
    backend = registry.get("native")
    low = backend.lowered(prog.compiled)
    ctx = backend._context()
    kinds = []
    arrays = []
    n_data = 1
    for name in prog.inputs:
        v = inputs[name]
        if isinstance(v, Const):
            kinds.append(2)
            arrays.append(np.ascontiguousarray(v.array, dtype=np.float64))
        else:
            arr = np.ascontiguousarray(v, dtype=np.float64).reshape(-1)
            kinds.append(1 if np.ndim(v) == 1 else 0)
            n_data = max(n_data, arr.size if np.ndim(v) == 1 else 1)
            arrays.append(arr)
    theta = np.ascontiguousarray(theta)
    P = theta.shape[1]

    def run() -> Any:
        ctx.run(low.core, theta, low.constraints, kinds, arrays, n_data, False,
                10**9, 10**9, 10**6, 0.0, False)  # fmt: skip
        return ctx.gradient(None, P)

    return run


def ceiling_per_lane(Y: np.ndarray, theta: np.ndarray) -> tuple[float | None, str]:
    cxx = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        return None, "no C++ compiler"
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "kalman_ceiling"
        src = ROOT / "benchmarks" / "kalman_ceiling.cpp"
        subprocess.run([cxx, "-O3", "-std=c++17", "-o", str(exe), str(src)], check=True)

        def rows(a: np.ndarray) -> str:
            return "\n".join(" ".join(repr(float(v)) for v in r) for r in a)

        text = f"{len(Y)}\n{rows(Y)}\n{len(theta)}\n{rows(theta)}\n"
        out = subprocess.run([str(exe)], input=text, capture_output=True, text=True, check=True)
    lines = out.stdout.split("\n")
    return float(lines[1]) * 1e-6, lines[0]


def first_gradient(quick: bool) -> dict[str, float]:
    """Source text of a new 10-node program -> first gradient, split into its stages."""
    x = np.linspace(0.0, 4.0, 44)
    totals: dict[str, list[float]] = {"compile": [], "first_run": [], "total": []}
    for k in range(5 if quick else 20):
        src = f"(* a (exp (- (* b x {1.0 + k * 1e-3!r}))) (cos (+ (* c x) d)))"
        t0 = time.perf_counter()
        prog = ndvm.compile(src, inputs=("x",), backend="native")
        t1 = time.perf_counter()
        prog.value_and_grad(np.array([1.0, 0.5, 2.0, 0.1]), x=x)
        t2 = time.perf_counter()
        totals["compile"].append(t1 - t0)
        totals["first_run"].append(t2 - t1)
        totals["total"].append(t2 - t0)
    return {k: float(np.median(v)) for k, v in totals.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = ap.parse_args()
    reps = 5 if args.quick else 30
    rng = np.random.default_rng(0)
    loads = workloads(rng)
    print(f"backends: {registry.available()}")
    print(f"{'program':10} {'B':>5} {'api us/lane':>12} {'core us/lane':>13} {'ref us/lane':>12}")
    per_lane: dict[tuple[str, int, str], float] = {}
    for name, (src, inputs, P) in loads.items():
        nat = ndvm.compile(src, inputs=tuple(inputs), backend="native")
        ref = ndvm.compile(src, inputs=tuple(inputs), backend="reference")
        for B in LANES:
            theta = rng.normal(scale=0.3, size=(B, P))
            api = best_of(partial(nat.value_and_grad, theta, **inputs), reps)
            core = best_of(core_runner(nat, theta, inputs), reps)
            refr = float("nan")
            if B in (1, 256):
                refr = best_of(partial(ref.value_and_grad, theta, **inputs), 3, budget=5.0)
            per_lane[(name, B, "api")] = api / B
            per_lane[(name, B, "core")] = core / B
            per_lane[(name, B, "ref")] = refr / B
            print(f"{name:10} {B:5d} {api / B * 1e6:12.2f} {core / B * 1e6:13.2f} "
                  f"{refr / B * 1e6:12.2f}")  # fmt: skip
    print()
    for name in loads:
        for kind in ("api", "core"):
            amort = per_lane[(name, 1, kind)] / per_lane[(name, 256, kind)]
            print(f"{name}: amortization B=1 -> 256 ({kind}): {amort:.1f}x (target >= 60x)")
        for B in (1, 256):
            r = per_lane[(name, B, "ref")] / per_lane[(name, B, "api")]
            print(f"{name}: reference / native at B={B}: {r:.1f}x")
    Y = loads["kalman80"][1]["Y"].array
    theta = rng.normal(scale=0.3, size=(256, 2))
    ceil, check = ceiling_per_lane(Y, theta)
    if ceil is not None:
        nat_lane = per_lane[("kalman80", 256, "core")]
        print(
            f"kalman80: ceiling {ceil * 1e6:.2f} us/lane; native core / ceiling at B=256: "
            f"{nat_lane / ceil:.1f}x (target <= 3x); api / ceiling "
            f"{per_lane[('kalman80', 256, 'api')] / ceil:.1f}x"
        )
        nat = ndvm.compile(KALMAN, inputs=("Y",), backend="native")
        v, g = nat.value_and_grad(theta[0], Y=ndvm.const(Y))
        print(f"kalman80: ceiling lane 0 (nll, grad) = {check}; native = {float(v)!r} {g}")
    else:
        print(f"kalman80: ceiling not measured ({check})")
    print(
        f"kalman80: B=1 forward+gradient {per_lane[('kalman80', 1, 'api')] * 1e6:.0f} us "
        f"(api), {per_lane[('kalman80', 1, 'core')] * 1e6:.0f} us (core) (target <= 150 us)"
    )
    fg = first_gradient(args.quick)
    print(
        f"first gradient of a new 10-node program: {fg['total'] * 1e6:.0f} us "
        f"(compile_source {fg['compile'] * 1e6:.0f} us + lower/run/grad "
        f"{fg['first_run'] * 1e6:.0f} us) (target <= 100 us)"
    )


if __name__ == "__main__":
    main()
