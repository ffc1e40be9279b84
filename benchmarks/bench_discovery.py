"""Discovery against Operon: does the search find the law itself, at the same wall clock?

    python benchmarks/bench_discovery.py [--seconds 10] [--noise 0,0.01] [--laws NAME,...]
                                         [--out bench-out]

Laws in the style of SRBench's Feynman set, with data generated here from their published
formulas (200 rows in the formula's range; ``--noise`` relative Gaussian noise on the target),
120 held-out test rows from the same range and 120 extrapolation rows beyond it. ndvm's
``SymbolicRegressor`` and pyoperon's (``pip install 'ndvm[bench]'``) run one after the other per
law, one thread each, with the same wall-clock budget. Reported per law and method: exact
recovery (the model and the law — quotients normalized by the denominator's leading
coefficient — with their constants rounded to 3 significant digits, 2 with noise, and those
below 1e-4 dropped, are equal as exact rationals, by sympy), test R², extrapolation R², model
size (ndvm: nodes of the program; Operon: its model length) and wall time. Writes
``discovery.json`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Law:
    name: str
    formula: str  # sympy text in the variable names
    variables: tuple[str, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]
    fn: Callable[..., np.ndarray]


def _gauss(t: np.ndarray) -> np.ndarray:
    return np.exp(-(t**2) / 2) / np.sqrt(2 * np.pi)


def _mm(s: np.ndarray) -> np.ndarray:
    return 2.5 * s / (0.8 + s)


LAWS = [
    Law("I.12.1", "mu*Nn", ("mu", "Nn"), (1, 1), (5, 5), lambda mu, n: mu * n),
    Law("I.14.4", "k*x**2/2", ("k", "x"), (1, 1), (5, 5), lambda k, x: k * x**2 / 2),
    Law("I.29.4", "omega/c", ("omega", "c"), (1, 1), (10, 10), lambda w, c: w / c),
    Law("I.6.2a", "exp(-angle**2/2)/sqrt(2*pi)", ("angle",), (-3,), (3,), lambda t: _gauss(t)),
    Law("michaelis-menten", "2.5*S/(0.8 + S)", ("S",), (0.1,), (5,), lambda s: _mm(s)),
    Law("decay", "3*exp(-0.7*t)", ("t",), (0,), (4,), lambda t: 3 * np.exp(-0.7 * t)),
]


def sample(law: Law, n: int, rng: np.random.Generator, beyond: bool = False) -> np.ndarray:
    lo, hi = np.asarray(law.low, float), np.asarray(law.high, float)
    if beyond:  # extrapolation: the next stretch of the same length above the range
        lo, hi = hi, hi + 0.5 * (hi - lo)
    return rng.uniform(lo, hi, (n, len(law.variables)))


def r2(y: np.ndarray, pred: np.ndarray) -> float:
    pred = np.broadcast_to(np.asarray(pred, float), y.shape)
    if not np.all(np.isfinite(pred)):
        return float("-inf")
    return float(1 - np.sum((y - pred) ** 2) / np.sum((y - y.mean()) ** 2))


def recovered(expr: Any, law: Law, digits: int = 3) -> bool:
    """The model and the law, normalized (``_normalized``), with their floats rounded to
    ``digits`` significant digits (those below 1e-4 in magnitude dropped) are equal as exact
    rationals, by sympy."""
    import sympy

    names = {v: sympy.Symbol(v, real=True) for v in law.variables}

    def rounded(e: Any) -> Any:
        e = _normalized(e)
        return e.xreplace({f: _round(f, digits) for f in e.atoms(sympy.Float)})

    try:
        truth = rounded(sympy.N(sympy.sympify(law.formula, locals=names)))  # 1/sqrt(2 pi) too
        return bool(sympy.simplify(rounded(expr) - truth) == 0)
    except Exception:  # noqa: BLE001 - sympy gives up on some forms: not recovered
        return False


def _round(f: Any, digits: int) -> Any:
    import sympy

    v = float(f)
    return sympy.Integer(0) if abs(v) < 1e-4 else sympy.Rational(f"{v:.{digits}g}")


def _normalized(expr: Any) -> Any:
    """A quotient with its denominator's leading coefficient divided out (``-2.24 S / (-0.897 S
    - 0.718)`` -> ``2.5 S / (S + 0.8)``), so that rounding sees the law's own constants."""
    import sympy

    num, den = sympy.fraction(sympy.together(expr))
    if den.is_number:
        return sympy.expand(expr)
    try:
        lead = sympy.Poly(den, *sorted(den.free_symbols, key=str)).LC()
    except sympy.PolynomialError:
        lead = den.as_coeff_Mul()[0]
    return sympy.expand(num / lead) / sympy.expand(den / lead)


def run_ndvm(law: Law, X: np.ndarray, y: np.ndarray, seconds: float, seed: int) -> dict[str, Any]:
    from ndvm.search import SymbolicRegressor

    model = SymbolicRegressor(time_budget=seconds, workers=1, random_state=seed,
                              variable_names=list(law.variables))  # fmt: skip
    model.fit(X, y)
    return {"predict": model.predict, "expr": model.sympy(), "size": model.best_.complexity}


def run_operon(law: Law, X: np.ndarray, y: np.ndarray, seconds: float, seed: int) -> dict[str, Any]:
    import sympy
    from pyoperon.sklearn import SymbolicRegressor

    model = SymbolicRegressor(max_time=int(max(1, seconds)), n_threads=1, random_state=seed,
                              generations=10**6, max_evaluations=10**9)  # fmt: skip
    model.fit(X, y)
    names = {f"X{i + 1}": sympy.Symbol(v, real=True) for i, v in enumerate(law.variables)}
    text = model.get_model_string(model.model_, 12, names=list(names))
    expr = sympy.sympify(text, locals=names)
    return {"predict": model.predict, "expr": expr, "size": int(model.stats_["model_length"])}


METHODS = {"ndvm": run_ndvm, "operon": run_operon}


def one(law: Law, noise: float, method: str, seconds: float, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    X, Xt, Xe = sample(law, 200, rng), sample(law, 120, rng), sample(law, 120, rng, beyond=True)
    y = law.fn(*X.T)
    y = y + noise * np.std(y) * rng.standard_normal(len(y))
    t0 = time.perf_counter()
    try:
        out = METHODS[method](law, X, y, seconds, seed)
    except Exception as exc:  # noqa: BLE001 - a failed run is a row of the table
        return {"law": law.name, "noise": noise, "method": method, "error": str(exc)[:200]}
    wall = time.perf_counter() - t0
    return {
        "law": law.name, "noise": noise, "method": method, "wall_s": round(wall, 1),
        "recovered": recovered(out["expr"], law, 3 if noise == 0 else 2), "size": out["size"],
        "test_r2": r2(law.fn(*Xt.T), out["predict"](Xt)),
        "extrapolation_r2": r2(law.fn(*Xe.T), out["predict"](Xe)),
        "model": str(out["expr"])[:120],
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--noise", default="0,0.01")
    ap.add_argument("--laws", default=",".join(law.name for law in LAWS))
    ap.add_argument("--methods", default="ndvm,operon")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="bench-out")
    args = ap.parse_args()
    laws = [law for law in LAWS if law.name in args.laws.split(",")]
    rows = []
    for law in laws:
        for noise in (float(x) for x in args.noise.split(",")):
            for method in args.methods.split(","):  # interleaved: law by law
                row = one(law, noise, method, args.seconds, args.seed)
                rows.append(row)
                print(json.dumps(row), flush=True)
    for method in args.methods.split(","):
        mine = [r for r in rows if r["method"] == method and "error" not in r]
        print(f"{method}: recovered {sum(r['recovered'] for r in mine)}/{len(mine)}, median "
              f"test R² {np.median([r['test_r2'] for r in mine]):.4f}, median size "
              f"{np.median([r['size'] for r in mine]):.0f}")  # fmt: skip
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "discovery.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
