"""Converged fits of never-seen programs: ndvm's defaults against scipy's ``curve_fit``.

    PYTHONPATH=src python benchmarks/bench_fit.py [--repeat 20] [--json out.json]

Same data, same initial values (the declared ones; curve_fit's ``p0``), one thread, one run:
ten programs — eight 3-parameter structures on sr-damped's 44 training points, a straight line
with constants in the hundreds, a 5-parameter trend with an annual harmonic — plus, with
statsmodels installed, monthly Mauna Loa CO₂ (quadratic trend + annual harmonic) and yearly
sunspot numbers (an 11-year cycle). ndvm's time is a fresh ``ndvm.compile`` plus
``ndvm.calibrate`` with its defaults (16 starts as lanes in waves — the first 4 alone when they
agree, docs/calibration.md —, Levenberg–Marquardt in the runtime, diagnostics on); curve_fit's
is one call (trust-region LM, finite-difference Jacobian, one start). Each time is the best of
``--repeat``. Printed: both times, both losses (mse), ndvm's verdict, its iterations and the
starts it ran (4 where the first wave agreed), and the totals' ratio; then ndvm with 64
starts, and with one start (the same start as curve_fit's), against curve_fit's one.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from collections.abc import Callable
from typing import Any

# one thread: set before NumPy loads its BLAS (which reads it once, at import)
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import ndvm  # noqa: E402


def sr_data() -> tuple[np.ndarray, np.ndarray]:
    x = np.linspace(0.1, 6.0, 64)
    y = np.exp(-0.3 * x) * np.cos(2.0 * x) + np.random.default_rng(0).normal(0.0, 0.02, 64)
    rows = np.random.default_rng(0).permutation(64)[:44]
    return x[rows], y[rows]


# (name, ndvm source, numpy function of (x, *params), params, init)
SR = [
    ("sr: a exp(-b x) cos(c x)", "(* a (exp (- (* b x))) (cos (* c x)))",
     lambda x, a, b, c: a * np.exp(-b * x) * np.cos(c * x)),
    ("sr: a sin(b x + c)", "(* a (sin (+ (* b x) c)))", lambda x, a, b, c: a * np.sin(b * x + c)),
    ("sr: a exp(b x) + c", "(+ (* a (exp (* b x))) c)", lambda x, a, b, c: a * np.exp(b * x) + c),
    ("sr: a cos(b x) / (1 + c x)", "(/ (* a (cos (* b x))) (+ 1 (* c x)))",
     lambda x, a, b, c: a * np.cos(b * x) / (1 + c * x)),
    ("sr: a + b x + c x^2", "(+ a (* b x) (* c x x))", lambda x, a, b, c: a + b * x + c * x * x),
    ("sr: a exp(-b x^2) + c", "(+ (* a (exp (- (* b x x)))) c)",
     lambda x, a, b, c: a * np.exp(-b * x * x) + c),
    ("sr: a cos(b x) exp(-c x)", "(* a (cos (* b x)) (exp (* -1 c x)))",
     lambda x, a, b, c: a * np.cos(b * x) * np.exp(-c * x)),
    ("sr: a / (1 + b x) + c", "(+ (/ a (+ 1 (* b x))) c)", lambda x, a, b, c: a / (1 + b * x) + c),
]  # fmt: skip


def cases() -> list[dict[str, Any]]:
    x, y = sr_data()
    out = [dict(name=n, src=s, fn=f, x=x, y=y, init=[1.0, 1.0, 1.0]) for n, s, f in SR]
    xl = np.linspace(300.0, 5000.0, 44)
    yl = 147.5 + 0.49 * xl + np.random.default_rng(1).normal(0.0, 30.0, 44)
    out.append(dict(name="line, intercept 147.5", src="(+ a (* b x))",
                    fn=lambda x, a, b: a + b * x, x=xl, y=yl, init=[1.0, 1.0]))  # fmt: skip
    t = np.arange(240) / 12.0
    yt = (315.0 + 0.8 * t + 0.012 * t * t + 3.0 * np.sin(2 * np.pi * t + 0.5)
          + np.random.default_rng(2).normal(0.0, 0.3, t.size))  # fmt: skip
    out.append(dict(name="trend + annual harmonic (5)", src=HARMONIC, fn=harmonic, x=t, y=yt,
                    init=[1.0] * 5))  # fmt: skip
    out.extend(statsmodels_cases())
    return out


HARMONIC = "(+ a (* b x) (* c x x) (* d (sin (* 6.283185307179586 x))) (* e (cos (* 6.283185307179586 x))))"  # noqa: E501


def harmonic(x: np.ndarray, a: float, b: float, c: float, d: float, e: float) -> np.ndarray:
    w = 6.283185307179586 * x
    return a + b * x + c * x * x + d * np.sin(w) + e * np.cos(w)


def statsmodels_cases() -> list[dict[str, Any]]:
    try:
        import statsmodels.api as sm
    except ImportError:
        print("(statsmodels not installed: no CO2 and sunspot cases)")
        return []
    co2 = sm.datasets.co2.load_pandas().data["co2"].resample("MS").mean().interpolate()
    t = (np.arange(co2.size) / 12.0).astype(np.float64)
    spots = sm.datasets.sunspots.load_pandas().data
    yr = spots["YEAR"].to_numpy(np.float64) - 1700.0
    return [
        dict(name="Mauna Loa CO2, monthly (5)", src=HARMONIC, fn=harmonic, x=t,
             y=co2.to_numpy(np.float64), init=[1.0] * 5),
        dict(name="sunspots, yearly (4)", src="(+ m (* A (sin (+ (* w x) p))))",
             fn=lambda x, m, A, w, p: m + A * np.sin(w * x + p), x=yr,
             y=spots["SUNACTIVITY"].to_numpy(np.float64), init=[50.0, 40.0, 0.57, 0.0]),
    ]  # fmt: skip


def best_of(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def run_case(case: dict[str, Any], repeat: int, starts: int | None) -> dict[str, Any]:
    from scipy.optimize import curve_fit

    x, y, init = case["x"], case["y"], case["init"]
    names = [f"p{i}" for i in range(len(init))]
    src = case["src"]
    for old, new in zip("abcde" if "m" not in src else "mAwp", names):
        src = src.replace(f" {old})", f" {new})").replace(f"({old} ", f"({new} ")
        src = src.replace(f" {old} ", f" {new} ")
    params = dict(zip(names, init))

    def fit_ndvm() -> Any:
        prog = ndvm.compile(src, params=params, inputs=["x"])
        return ndvm.calibrate(prog, {"x": x}, y, starts=starts, warn=False)

    def fit_scipy() -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                return curve_fit(case["fn"], x, y, p0=init, maxfev=10_000)[0]
            except RuntimeError:
                return None

    t_ndvm, cal = best_of(fit_ndvm, repeat)
    t_scipy, popt = best_of(fit_scipy, repeat)
    loss_scipy = float("nan") if popt is None else float(np.mean((case["fn"](x, *popt) - y) ** 2))
    return dict(name=case["name"], ndvm_s=t_ndvm, scipy_s=t_scipy, ndvm_loss=cal.loss,
                scipy_loss=loss_scipy, success=bool(cal.success), nit=cal.nit,
                n_best=cal.n_best, ran=len(cal.status))  # fmt: skip


def table(rows: list[dict[str, Any]], title: str) -> None:
    print(f"\n{title}")
    print(f"{'program':32} {'ndvm ms':>8} {'scipy ms':>9} {'ndvm mse':>12} {'scipy mse':>12} "
          f"{'ok':>4} {'nit':>4} {'ran':>4}")  # fmt: skip
    for r in rows:
        ok = r["ndvm_loss"] <= r["scipy_loss"] * (1 + 1e-9) or not np.isfinite(r["scipy_loss"])
        print(f"{r['name'][:32]:32} {1e3 * r['ndvm_s']:8.3f} {1e3 * r['scipy_s']:9.3f} "
              f"{r['ndvm_loss']:12.6g} {r['scipy_loss']:12.6g} {'yes' if r['success'] else 'NO':>4}"
              f" {r['nit']:4d} {r['ran']:4d}{'' if ok else ' (worse than curve_fit)'}")  # fmt: skip
    tn = sum(r["ndvm_s"] for r in rows)
    ts = sum(r["scipy_s"] for r in rows)
    good = sum(r["ndvm_loss"] <= r["scipy_loss"] * (1 + 1e-9) or not np.isfinite(r["scipy_loss"])
               for r in rows)  # fmt: skip
    print(f"total: ndvm {1e3 * tn:.2f} ms, curve_fit {1e3 * ts:.2f} ms, ratio ndvm / curve_fit "
          f"{tn / ts:.2f}; optimum at least as good on {good} / {len(rows)}; success on "
          f"{sum(r['success'] for r in rows)} / {len(rows)}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    all_cases = cases()
    rows = [run_case(c, args.repeat, None) for c in all_cases]
    table(rows, "ndvm defaults (16 starts, adaptive) vs curve_fit (1 start), same data and init")
    rows64 = [run_case(c, max(3, args.repeat // 4), 64) for c in all_cases]
    table(rows64, "ndvm with 64 starts vs curve_fit (1 start)")
    rows1 = [run_case(c, args.repeat, 1) for c in all_cases]
    table(rows1, "ndvm with 1 start (curve_fit's p0) vs curve_fit (1 start)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"defaults": rows, "starts64": rows64, "starts1": rows1}, fh, indent=1)


if __name__ == "__main__":
    main()
