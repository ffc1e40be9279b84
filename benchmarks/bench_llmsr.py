"""LLM-SR-style skeletons: ``ndvm.fit_skeleton`` (defaults) against LLM-SR's BFGS from ones.

    PYTHONPATH=src python benchmarks/bench_llmsr.py [--repeat 3] [--llmsr-data DIR] [--json F]

LLM-SR fits every skeleton ``equation(*inputs, params)`` with
``scipy.optimize.minimize(mse, ones(10), method="BFGS")``; ``ndvm.fit_skeleton`` reads the same
source with ``ndvm.from_numpy`` and fits it with ``ndvm.calibrate``'s defaults. Both see the
same data and start from the same ones. Printed per skeleton: both times (best of
``--repeat``; ndvm's includes reading and compiling the skeleton), both MSEs, and the totals'
ratio; "ok" when ndvm's MSE is at most BFGS's (1e-9 relative, 1e-15 absolute slack).

The data are generated here (three problems of the shape of LLM-SR's: a driven nonlinear
oscillator (t, x, v -> a), stress against strain and temperature, bacterial growth rate against
population, substrate, temperature and pH). ``--llmsr-data DIR`` also runs the skeletons on
LLM-SR's own public data (``DIR/oscillator2/train.csv``, ``DIR/stressstrain/train.csv``,
``DIR/bactgrow/train.csv`` from github.com/deep-symbolic-mathematics/LLM-SR; not shipped).
The baseline executes the skeleton source (that is what BFGS needs); ndvm never does.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import ndvm  # noqa: E402

OSC = """
def equation(t, x, v, params):
    drive = params[0] * np.sin(params[1] * t)
    restoring = params[2] * x + params[3] * x**3
    damping = params[4] * v + params[5] * v**3
    return drive - restoring - damping
""", """
def equation(t, x, v, params):
    a = -params[0] * x - params[1] * x**3 - params[2] * v**3 - params[3] * x * v
    a += params[4] * np.sin(params[5] * t + params[6])
    return a
""", """
def equation(t, x, v, params):
    spring = -params[0] * np.sin(params[1] * x)
    friction = -params[2] * np.tanh(params[3] * v) - params[4] * v * np.abs(v)
    return spring + friction + params[5] * np.cos(params[6] * t)
""", """
def equation(t, x, v, params):
    k = params[0] + params[1] * x**2
    c = np.clip(params[2] + params[3] * v**2, 0.0, 10.0)
    return -k * x - c * v + params[4] * np.sin(params[5] * t) + params[6]
"""
STRESS = """
def equation(strain, temp, params):
    modulus = params[0] * np.exp(-params[1] * temp)
    soft = 1.0 + np.power(np.abs(strain / params[2]), params[3])
    return modulus * strain / soft + params[4]
""", """
def equation(strain, temp, params):
    e = params[0] - params[1] * temp
    hardening = params[2] * strain**2 + params[3] * strain**3
    return e * strain + hardening + params[4] * temp * strain**2 + params[5]
""", """
def equation(strain, temp, params):
    e = params[0] * (1.0 - params[1] * temp)
    sat = params[2] * np.tanh(params[3] * strain)
    return e * sat + params[4] * strain * np.exp(-params[5] * strain) + params[6]
"""
BACT = """
def equation(b, s, temp, pH, params):
    mu = params[0] * s / (params[1] + s)
    ft = np.exp(-params[2] * (temp - params[3])**2)
    fph = np.exp(-params[4] * (pH - params[5])**2)
    return mu * ft * fph * b * (1.0 - b / params[6])
""", """
def equation(b, s, temp, pH, params):
    mu = params[0] * s / (params[1] + s + params[2] * s**2)
    ft = np.clip((temp - params[3]) * (params[4] - temp), 0.0, None)
    fph = np.exp(-params[5] * np.abs(pH - params[6]))
    return mu * ft * fph * b + params[7]
""", """
def equation(b, s, temp, pH, params):
    monod = s / (params[0] + s)
    growth = params[1] * monod * b
    temp_term = np.exp(-((temp - params[2]) / params[3])**2)
    ph_term = 1.0 / (1.0 + np.power(np.abs(pH - params[4]) / params[5], 2.0))
    death = params[6] * b
    return growth * temp_term * ph_term - death + params[7]
"""


def generated() -> dict[str, tuple[tuple[str, ...], dict[str, np.ndarray], np.ndarray]]:
    """Three problems' data: (skeletons, inputs by name, target)."""
    rng = np.random.default_rng(0)
    t = np.linspace(0.0, 20.0, 400)
    x = np.sin(0.9 * t) + 0.1 * rng.normal(size=t.size)
    v = np.cos(0.9 * t) + 0.1 * rng.normal(size=t.size)
    a = 0.7 * np.sin(1.3 * t) - 0.5 * x - 0.8 * x**3 - 0.3 * v**3 - 0.1 * x * v
    strain = rng.uniform(0.0, 0.6, 300)
    temp = rng.uniform(0.0, 1.0, 300)
    stress = (2.0 - 0.7 * temp) * np.tanh(3.0 * strain) + 0.05 * rng.normal(size=300)
    n = 500
    b, s = rng.uniform(0.1, 2.0, n), rng.uniform(0.1, 5.0, n)
    tt, ph = rng.uniform(15.0, 40.0, n), rng.uniform(4.0, 9.0, n)
    db = 1.4 * s / (0.8 + s) * np.exp(-0.01 * (tt - 30.0) ** 2) * np.exp(-0.3 * (ph - 7.0) ** 2)
    db = db * b * (1.0 - b / 3.0) + 0.01 * rng.normal(size=n)
    return {
        "oscillator": (OSC, {"t": t, "x": x, "v": v}, a),
        "stress": (STRESS, {"strain": strain, "temp": temp}, stress),
        "bactgrow": (BACT, {"b": b, "s": s, "temp": tt, "pH": ph}, db),
    }


def llmsr(root: Path) -> dict[str, tuple[tuple[str, ...], dict[str, np.ndarray], np.ndarray]]:
    """LLM-SR's train splits (columns by the skeletons' argument names)."""
    out = {}
    for name, problem, skels, cols in (
        ("oscillator2", "oscillator2", OSC, ("t", "x", "v")),
        ("stressstrain", "stressstrain", STRESS, ("strain", "temp")),
        ("bactgrow", "bactgrow", BACT, ("b", "s", "temp", "pH")),
    ):
        table = np.loadtxt(root / problem / "train.csv", delimiter=",", skiprows=1)
        out[f"llmsr-{name}"] = (skels, dict(zip(cols, table[:, :-1].T)), table[:, -1])
    return out


def bfgs(source: str, inputs: dict[str, np.ndarray], y: np.ndarray) -> tuple[float, float]:
    """LLM-SR's evaluate: BFGS from ones(10) on the MSE; (seconds, mse)."""
    from scipy.optimize import minimize

    namespace: dict[str, Any] = {"np": np}
    exec(source, namespace)  # the baseline runs the skeleton as LLM-SR does (trusted text)
    equation = namespace["equation"]
    args = list(inputs.values())

    def loss(params: np.ndarray) -> float:
        with np.errstate(all="ignore"):
            return float(np.mean((equation(*args, params) - y) ** 2))

    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = minimize(loss, [1.0] * 10, method="BFGS")
    return time.perf_counter() - start, float(result.fun)


def ours(source: str, inputs: dict[str, np.ndarray], y: np.ndarray) -> tuple[float, float]:
    start = time.perf_counter()
    fit = ndvm.fit_skeleton(source, inputs, y)
    return time.perf_counter() - start, fit.loss


def run(problems: dict[str, Any], repeat: int) -> list[dict[str, Any]]:
    rows = []
    for problem, (skels, inputs, y) in problems.items():
        for k, source in enumerate(skels):
            tb, lb = min(bfgs(source, inputs, y) for _ in range(repeat))
            tn, ln = min(ours(source, inputs, y) for _ in range(repeat))
            ok = bool(ln <= lb * (1 + 1e-9) + 1e-15) or not np.isfinite(lb)
            rows.append({"problem": problem, "skeleton": k, "n": int(y.size), "bfgs_s": tb,
                         "ndvm_s": tn, "bfgs_mse": lb, "ndvm_mse": ln, "ok": ok})
            print(f"{problem:>20} #{k}  N={y.size:5d}  BFGS {tb:7.3f}s mse {lb:10.4g}   "
                  f"ndvm {tn:7.3f}s mse {ln:10.4g}  {'ok' if ok else 'WORSE'}", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--llmsr-data", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    problems = generated()
    if args.llmsr_data is not None:
        problems.update(llmsr(args.llmsr_data))
    rows = run(problems, args.repeat)
    tb, tn = sum(r["bfgs_s"] for r in rows), sum(r["ndvm_s"] for r in rows)
    worse = [f"{r['problem']}#{r['skeleton']}" for r in rows if not r["ok"]]
    print(f"total: BFGS {tb:.2f}s, ndvm {tn:.2f}s, ratio {tn / tb:.3f}; "
          f"at least as good on {len(rows) - len(worse)}/{len(rows)} {worse or ''}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "ratio": tn / tb}, indent=1))


if __name__ == "__main__":
    main()
