"""Fits at natural scale from default starts: ``ndvm.calibrate`` against ``curve_fit``.

    PYTHONPATH=src python benchmarks/bench_scale.py [--repeat 5] [--json out.json]

Eight models a scientist fits with constants far from 1 — a logistic onset at t = 45, an
Arrhenius law (A = 1e7, E/R = 5300 K), a damped oscillation with a 50-day period, a power law
over three decades, Michaelis–Menten with Km = 4500, a decay with an offset, two Gaussian
peaks on a wavelength axis, a trend against calendar years — on data generated here with 1 %
noise (seed 5). Per model, one run: ndvm's defaults (no initial values; 16 starts, the data's
scale for parameters that shift, scale or oscillate an input, see docs/calibration.md) against
``curve_fit`` with its default ``p0`` (all ones) and with ``p0`` = the true values (the
reference optimum). Printed: each mse, whether each reached the reference (relative 1e-7),
ndvm's ``success`` and how many of its starts reached its best loss, and both times (best of
``--repeat``).
"""

from __future__ import annotations

import argparse
import json
import os
import warnings
from collections.abc import Callable
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from bench_fit import best_of  # noqa: E402 - the same timing rule

import ndvm  # noqa: E402


def _peaks(w: Any, a: Any, c: Any, s: Any, b: Any, d: Any, u: Any) -> Any:
    return a * np.exp(-(((w - c) / s) ** 2)) + b * np.exp(-(((w - d) / u) ** 2))


# (name, ndvm source, input, low, high, log-spaced, numpy model, true values)
MODELS: list[tuple[str, str, str, float, float, bool, Callable[..., Any], tuple[float, ...]]] = [
    ("logistic onset", "(/ K (+ 1 (exp (* r (- t0 t)))))", "t", 0, 100, False,
     lambda t, K, r, t0: K / (1 + np.exp(r * (t0 - t))), (5000, 0.12, 45)),
    ("Arrhenius", "(* A (exp (- (/ E T))))", "T", 250, 400, False,
     lambda T, A, E: A * np.exp(-E / T), (1e7, 5300)),
    ("damped oscillation", "(* A (exp (- (/ t tau))) (cos (+ (* w t) p)))", "t", 0, 1000, False,
     lambda t, A, tau, w, p: A * np.exp(-t / tau) * np.cos(w * t + p),
     (3.0, 300.0, 2 * np.pi / 50, 0.5)),
    ("power law", "(* a (pow x b))", "x", 1e3, 1e6, True,
     lambda x, a, b: a * x**b, (3e-4, 1.3)),
    ("Michaelis-Menten", "(/ (* V S) (+ K S))", "S", 100, 20000, False,
     lambda S, V, K: V * S / (K + S), (0.02, 4500)),
    ("decay + offset", "(+ c (* a (exp (- (/ h tau)))))", "h", 0, 200, False,
     lambda h, c, a, tau: c + a * np.exp(-h / tau), (150.0, 8e4, 37.0)),
    ("two peaks", "(+ (* a (exp (- (square (/ (- w c) s))))) "
     "(* b (exp (- (square (/ (- w d) u))))))", "w", 400, 700, False,
     _peaks, (1000.0, 480.0, 20.0, 600.0, 590.0, 35.0)),
    ("trend, calendar years", "(+ a (* b (- yr y0)))", "yr", 1950, 2020, False,
     lambda yr, a, b, y0: a + b * (yr - y0), (300.0, 1.6, 1950.0)),
]  # fmt: skip


def _data(rng: np.random.Generator, model: tuple[Any, ...]) -> tuple[np.ndarray, np.ndarray]:
    _, _, _, lo, hi, log, fn, truth = model
    n = 200
    x = np.exp(rng.uniform(np.log(lo), np.log(hi), n)) if log else rng.uniform(lo, hi, n)
    y = fn(x, *truth)
    return x, y + 0.01 * np.std(y) * rng.standard_normal(n)


def _curve_fit(fn: Callable[..., Any], x: np.ndarray, y: np.ndarray, p0: Any) -> float:
    from scipy.optimize import curve_fit

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            popt = curve_fit(fn, x, y, p0=p0, maxfev=20_000)[0]
        except (RuntimeError, ValueError):
            return float("nan")
    return float(np.mean((fn(x, *popt) - y) ** 2))


def run_model(model: tuple[Any, ...], x: np.ndarray, y: np.ndarray, repeat: int) -> dict:
    name, src, var, *_, fn, truth = model

    def fit() -> Any:
        prog = ndvm.compile(src, inputs=[var], free_params=True)
        return ndvm.calibrate(prog, {var: x}, y, warn=False)

    t_ndvm, cal = best_of(fit, repeat)
    t_cf, naive = best_of(lambda: _curve_fit(fn, x, y, None), repeat)
    return dict(name=name, ndvm=cal.loss, success=bool(cal.success), n_best=cal.n_best,
                curve_fit=naive, reference=_curve_fit(fn, x, y, truth), ndvm_s=t_ndvm,
                curve_fit_s=t_cf)  # fmt: skip


def run(repeat: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(5)
    return [run_model(m, *_data(rng, m), repeat) for m in MODELS]


def _reached(loss: float, ref: float) -> bool:
    return bool(np.isfinite(loss) and loss <= ref * (1 + 1e-7))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rows = run(args.repeat)
    print(f"{'model':24} {'reference mse':>13} {'ndvm mse':>12} {'ok':>3} {'succ':>5} "
          f"{'n_best':>6} {'curve_fit p0=1':>14} {'ok':>3} {'ndvm ms':>8} "
          f"{'cf ms':>7}")  # fmt: skip
    for r in rows:
        print(f"{r['name']:24} {r['reference']:13.6g} {r['ndvm']:12.6g} "
              f"{'yes' if _reached(r['ndvm'], r['reference']) else 'NO':>3} "
              f"{'yes' if r['success'] else 'NO':>5} {r['n_best']:>6} {r['curve_fit']:14.6g} "
              f"{'yes' if _reached(r['curve_fit'], r['reference']) else 'NO':>3} "
              f"{1e3 * r['ndvm_s']:8.2f} {1e3 * r['curve_fit_s']:7.2f}")  # fmt: skip
    n = len(rows)
    print(f"reached the reference optimum: ndvm defaults "
          f"{sum(_reached(r['ndvm'], r['reference']) for r in rows)} / {n}, curve_fit's default "
          f"p0 {sum(_reached(r['curve_fit'], r['reference']) for r in rows)} / {n}")  # fmt: skip
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
