"""Discovery against Operon: does the search find the law itself, at the same wall clock?

    python benchmarks/bench_discovery.py [--seconds 10] [--noise 0,0.01] [--laws NAME,...]
                                         [--seeds 0,1,2] [--binary +,-,*,/]
                                         [--unary exp,log,sqrt,sin,cos] [--success-r2 0.999]
                                         [--out bench-out]

Laws in the style of SRBench's Feynman set (the harder ones with nested quotients and roots,
or four to six variables) and laws at natural scales (constants far from 1),
with data generated here from their published formulas (200 rows in the formula's range;
``--noise`` relative Gaussian noise on the target), 120 held-out test rows from the same range
and 120 extrapolation rows beyond it. ndvm's ``SymbolicRegressor`` and pyoperon's (``pip install
'ndvm[bench]'``) run one after the other per law, one thread each, with the same wall-clock
budget. Every system gets the same grammar: ndvm searches with ``--binary``/``--unary`` (its
defaults), Operon's ``allowed_symbols`` and gplearn's ``function_set`` are set from the same
operators (``peer_grammar``; an operator a peer cannot express is listed in the output and the
JSON); the same wall-clock budget, one thread each; the same 200 training rows (each system's
own internal validation split, if any, is taken from them) and the same held-out rows; the
same success rules: exact recovery, and test R² at least ``--success-r2``. Each seed of
``--seeds`` draws fresh data and seeds every system; the summary gives per-seed counts and their
range. Reported per law and method: exact recovery (``recovered``: the model and the law —
numeric subexpressions evaluated, quotients normalized by the denominator's leading
coefficient, constants below 1e-4 dropped — are equal as exact expressions, by sympy, the
variables positive where the data's range is; noiseless, with every constant rounded to 3
significant digits; with noise, with each constant of the model within ``NOISE_TOLERANCE``
times the noise level of the law's, relative: 2 % at 1 % noise, on either side and for every
constant, law and system alike — rounding to 2 digits, the former rule, was 0.5 % to 5 % wide
by the constant's leading digits and lopsided by its place between two roundings, so 0.8 at
0.7 % off failed while 147.5 at 4 % off passed),
test R², extrapolation R², model size (ndvm: nodes of the program; Operon: its model length)
and wall time. Writes ``discovery.json`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from discovery_laws import LAWS, Law

from ndvm.export.bounded import time_limit


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


SYMPY_SECONDS = 20.0  # a check sympy has not decided in this time is "not recovered"


NOISE_TOLERANCE = 2.0  # with noise: each constant within this many times the noise, relative


def recovered(expr: Any, law: Law, noise: float = 0.0) -> bool:
    """Whether ``expr`` is the law: the model and the law, normalized (``_normalized``;
    floats below 1e-4 in magnitude dropped), are equal as exact expressions, by sympy (within
    ``SYMPY_SECONDS``: ``simplify`` can take minutes on a large model that only approximates
    the law). Without noise each float of both is rounded to 3 (or 4, for a constant at a
    rounding boundary) significant digits (``exact``). With relative noise ``noise`` each
    float of the model that lies within ``NOISE_TOLERANCE * noise`` of one of the law's
    numbers, relative to that number, takes its exact value (the nearest), the others 3
    significant digits (``within``): one relative tolerance for every constant, law and
    system, the same on either side of the true value."""
    try:
        with time_limit(SYMPY_SECONDS):  # ndvm.export.bounded: SIGALRM, main thread
            if noise > 0:
                return within(expr, law, NOISE_TOLERANCE * noise)
            return exact(expr, law, 3) or exact(expr, law, 4)
    except Exception:  # noqa: BLE001 - sympy gives up on some forms: not recovered
        return False


def _prepared(e: Any, names: dict[str, Any]) -> Any:
    """``e`` in the law's symbols, numeric subexpressions evaluated (0.7071*sqrt(2) -> 1.0)
    and quotients normalized."""
    import sympy

    e = e.xreplace({s: names[s.name] for s in e.free_symbols if s.name in names})
    return _normalized(sympy.N(e))


def _same(model: Any, truth: Any) -> bool:
    import sympy

    return bool(sympy.simplify(sympy.expand_log(model - truth)) == 0)


def exact(expr: Any, law: Law, digits: int) -> bool:
    """The model and the law with every float rounded to ``digits`` significant digits (those
    below 1e-4 dropped) are equal."""
    import sympy

    names = _symbols(law)

    def rounded(e: Any) -> Any:
        e = _prepared(e, names)
        return e.xreplace({f: _round(f, digits) for f in e.atoms(sympy.Float)})

    return _same(rounded(expr), rounded(sympy.sympify(law.formula, locals=names)))


def within(expr: Any, law: Law, rtol: float) -> bool:
    """The model, each float within ``rtol`` (relative) of one of the law's numbers or 1 (or
    their negatives) replaced by that number exactly, the others rounded to 3 significant digits
    (those below 1e-4 dropped), equals the law with its floats exact."""
    import sympy

    names = _symbols(law)
    truth = _prepared(sympy.sympify(law.formula, locals=names), names)
    truth = truth.xreplace({f: sympy.Rational(repr(float(f))) for f in truth.atoms(sympy.Float)})
    # the law's numbers and 1 (the coefficient of a term written without one: mu*Nn)
    numbers = {n for c in truth.atoms(sympy.Number) | {sympy.S.One} if c != 0 for n in (c, -c)}

    def snapped(f: Any) -> Any:
        v = float(f)
        near = min(numbers, key=lambda c: abs(v - float(c)) / abs(float(c)), default=None)
        if near is not None and abs(v - float(near)) <= rtol * abs(float(near)):
            return near
        return _round(f, 3)

    model = _prepared(expr, names)
    return _same(model.xreplace({f: snapped(f) for f in model.atoms(sympy.Float)}), truth)


def _symbols(law: Law) -> dict[str, Any]:
    """The law's variables as sympy symbols: real, and positive where the data's range is (so
    that ``log(V2) - log(V1)`` is ``log(V2/V1)`` on the data, as it is for the law)."""
    import sympy

    return {v: sympy.Symbol(v, real=True, positive=lo > 0 or None)
            for v, lo in zip(law.variables, law.low)}  # fmt: skip


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


FIRST_R2 = 0.999  # default --success-r2: "time to first R² > 0.999" on the test rows and the
# R² success rule (main() sets it from --success-r2 for every system alike)

# ndvm operator -> (Operon symbol, gplearn function name); None: the peer cannot express it
PEER_OPS: dict[str, tuple[str | None, str | None]] = {
    "+": ("add", "add"), "-": ("sub", "sub"), "*": ("mul", "mul"), "/": ("div", "div"),
    "exp": ("exp", "exp"), "log": ("log", "log"), "sqrt": ("sqrt", "sqrt"),
    "sin": ("sin", "sin"), "cos": ("cos", "cos"), "tan": ("tan", "tan"),
    "tanh": ("tanh", None), "abs": ("abs", "abs"), "neg": (None, "neg"),
    "square": ("square", None), "^": ("pow", None), "pow": ("pow", None),
}  # fmt: skip
GRAMMAR: dict[str, tuple[str, ...]] = {"binary": (), "unary": ()}  # set by set_grammar


def set_grammar(binary: tuple[str, ...], unary: tuple[str, ...]) -> None:
    GRAMMAR["binary"], GRAMMAR["unary"] = tuple(binary), tuple(unary)


def peer_grammar(peer: str) -> tuple[list[str], list[str]]:
    """(the peer's names for ndvm's operators, the operators it cannot express)."""
    col = {"operon": 0, "gplearn": 1}[peer]
    names, missing = [], []
    for op in (*GRAMMAR["binary"], *GRAMMAR["unary"]):
        name = PEER_OPS.get(op, (None, None))[col]
        (names.append(name) if name else missing.append(op))
    return names, missing


def run_ndvm(law: Law, X: np.ndarray, y: np.ndarray, seconds: float, seed: int,
             test: tuple[np.ndarray, np.ndarray]) -> dict[str, Any]:  # fmt: skip
    from ndvm.search import SymbolicRegressor

    model = SymbolicRegressor(time_budget=seconds, workers=1, random_state=seed,
                              variable_names=list(law.variables),
                              binary_operators=GRAMMAR["binary"],
                              unary_operators=GRAMMAR["unary"])  # fmt: skip
    model.fit(X, y)
    return {"predict": model.predict, "expr": model.sympy(), "size": model.best_.complexity,
            "first_s": _ndvm_first(model, *test)}  # fmt: skip


def _ndvm_first(model: Any, Xt: np.ndarray, yt: np.ndarray) -> float | None:
    """Search time at which the best program so far (lowest validation loss: what the search
    would report at that moment) first reaches test R² > FIRST_R2."""
    best = np.inf
    done = [r for r in model.records_ if r.status == "ok" and r.evaluation is not None]
    for r in sorted(done, key=lambda r: (r.t_done, r.idx)):
        loss = r.evaluation.selection_loss
        if loss < best:
            best = loss
            if r2(yt, model.predict(Xt, r)) > FIRST_R2:
                return float(r.t_done)
    return None


def run_operon(
    law: Law,
    X: np.ndarray,
    y: np.ndarray,
    seconds: float,
    seed: int,
    test: tuple[np.ndarray, np.ndarray],
    ladder: bool = True,
) -> dict[str, Any]:
    """pyoperon's defaults with ``max_time`` (whole seconds) and ndvm's operators as
    ``allowed_symbols`` (plus ``constant, variable``). Operon reports nothing during a
    run: its time to first R² > FIRST_R2 is the smallest budget of the ladder 1, 2, 4, ...
    seconds (below ``seconds``; fresh runs, same seed) whose model reaches it, else the full
    run's time if it does."""
    import sympy
    from pyoperon.sklearn import SymbolicRegressor

    def fit(budget: float) -> Any:
        symbols = ",".join([*peer_grammar("operon")[0], "constant", "variable"])
        model = SymbolicRegressor(max_time=int(max(1, budget)), n_threads=1, random_state=seed,
                                  generations=10**6, max_evaluations=10**9,
                                  allowed_symbols=symbols)  # fmt: skip
        return model.fit(X, y)

    t0 = time.perf_counter()
    model = fit(seconds)
    wall, first = time.perf_counter() - t0, None
    budget = 1
    while ladder and budget < seconds and first is None:
        if r2(test[1], fit(budget).predict(test[0])) > FIRST_R2:
            first = float(budget)
        budget *= 2
    if first is None and r2(test[1], model.predict(test[0])) > FIRST_R2:
        first = round(wall, 1)
    names = {f"X{i + 1}": sympy.Symbol(v, real=True) for i, v in enumerate(law.variables)}
    text = model.get_model_string(model.model_, 12, names=list(names))
    expr = sympy.sympify(text, locals=names)
    return {"predict": model.predict, "expr": expr, "size": int(model.stats_["model_length"]),
            "first_s": first, "wall_s": wall}  # fmt: skip


def run_gplearn(law: Law, X: np.ndarray, y: np.ndarray, seconds: float, seed: int,
                test: tuple[np.ndarray, np.ndarray]) -> dict[str, Any]:  # fmt: skip
    """gplearn's ``SymbolicRegressor`` (defaults; ndvm's operators as ``function_set``: its
    own protected ``div``, ``sqrt``, ``log`` (of abs(x), 0 near 0) and an ``exp`` capped at e^50),
    one generation at a time (``warm_start``) until the budget is spent; its test R² after
    each generation gives the time to first R² > FIRST_R2."""
    import warnings

    from gplearn.functions import make_function
    from gplearn.genetic import SymbolicRegressor

    def _exp(a: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            return np.where(a < 50, np.exp(np.minimum(a, 50)), np.exp(50))

    exp = make_function(function=_exp, name="exp", arity=1)
    fs = tuple(exp if f == "exp" else f for f in peer_grammar("gplearn")[0])
    model = SymbolicRegressor(function_set=fs, random_state=seed, n_jobs=1, warm_start=True,
                              generations=0)  # fmt: skip
    t0, first, gens = time.perf_counter(), None, 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        while time.perf_counter() - t0 < seconds:
            gens += 1
            model.set_params(generations=gens).fit(X, y)
            if first is None and r2(test[1], model.predict(test[0])) > FIRST_R2:
                first = time.perf_counter() - t0
    return {"predict": model.predict, "expr": _gplearn_sympy(model._program, law),
            "size": int(model._program.length_), "first_s": first}  # fmt: skip


def _gplearn_sympy(program: Any, law: Law) -> Any:
    import sympy

    names = {f"X{i}": sympy.Symbol(v, real=True) for i, v in enumerate(law.variables)}
    ops = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
           "div": lambda a, b: a / b, "sqrt": lambda a: sympy.sqrt(abs(a)),
           "log": lambda a: sympy.log(abs(a)), "inv": lambda a: 1 / a, "neg": lambda a: -a,
           "exp": sympy.exp, "sin": sympy.sin, "cos": sympy.cos, "tan": sympy.tan,
           "abs": sympy.Abs}  # fmt: skip
    return sympy.sympify(str(program), locals={**names, **ops})


METHODS = {"ndvm": run_ndvm, "operon": run_operon, "gplearn": run_gplearn}
TENTH = "ndvm/10"  # ndvm at a tenth of the budget


def one(law: Law, noise: float, method: str, seconds: float, seed: int) -> dict[str, Any]:
    """One law, one noise level, one system, one seed: the seed draws the data (the same rows
    for every system) and seeds the system."""
    rng = np.random.default_rng(seed)
    X, Xt, Xe = sample(law, 200, rng), sample(law, 120, rng), sample(law, 120, rng, beyond=True)
    y = law.fn(*X.T)
    y = y + noise * np.std(y) * rng.standard_normal(len(y))
    fn, budget = (run_ndvm, seconds / 10) if method == TENTH else (METHODS[method], seconds)
    head = {"law": law.name, "noise": noise, "method": method, "seed": seed}
    t0 = time.perf_counter()
    try:
        out = fn(law, X, y, budget, seed, (Xt, law.fn(*Xt.T)))
    except Exception as exc:  # noqa: BLE001 - a failed run is a row of the table
        return {**head, "error": str(exc)[:200], "recovered": False, "success": False}
    wall = out.get("wall_s", time.perf_counter() - t0)
    first = out["first_s"]
    test_r2 = r2(law.fn(*Xt.T), out["predict"](Xt))
    return {
        **head, "budget_s": budget,
        "wall_s": round(wall, 1), "first_r2_s": None if first is None else round(first, 2),
        "recovered": recovered(out["expr"], law, noise), "size": out["size"],
        "test_r2": test_r2, "success": bool(test_r2 >= FIRST_R2),
        "extrapolation_r2": r2(law.fn(*Xe.T), out["predict"](Xe)),
        "model": str(out["expr"])[:120],
    }  # fmt: skip


def spread(rows: list[dict[str, Any]], method: str, key: str) -> dict[str, Any]:
    """Per seed, how many of the method's runs have ``key`` true; with the median and range."""
    seeds = sorted({r["seed"] for r in rows})
    counts = [sum(bool(r.get(key)) for r in rows if r["method"] == method and r["seed"] == s)
              for s in seeds]  # fmt: skip
    runs = sum(1 for r in rows if r["method"] == method and r["seed"] == seeds[0]) if seeds else 0
    return {"seeds": seeds, "counts": counts, "of": runs,
            "median": float(np.median(counts)) if counts else float("nan"),
            "min": min(counts, default=0), "max": max(counts, default=0)}  # fmt: skip


def _counts(s: dict[str, Any]) -> str:
    per = ", ".join(str(c) for c in s["counts"])
    return f"{s['median']:g} / {s['of']} (range {s['min']}–{s['max']}; per seed {per})"


def summary(rows: list[dict[str, Any]], methods: list[str]) -> list[str]:
    """Per method: exact recoveries and R² successes per seed (median, range), median test R²,
    size and time to first R² > FIRST_R2; then ndvm at a tenth of the budget against Operon
    at the full budget."""
    out = [f"seeds {sorted({r['seed'] for r in rows})}, success: exact recovery; test R² >= "
           f"{FIRST_R2}"]  # fmt: skip
    for peer in ("operon", "gplearn"):
        if peer in methods:
            names, missing = peer_grammar(peer)
            out.append(
                f"{peer} grammar: {', '.join(names)}"
                + (f" (cannot express {', '.join(missing)})" if missing else "")
            )
    for method in methods:
        mine = [r for r in rows if r["method"] == method and "error" not in r]
        if not mine:
            continue
        firsts = [r["first_r2_s"] for r in mine if r["first_r2_s"] is not None]
        med = np.median(firsts) if firsts else float("nan")
        out.append(
            f"{method}: recovered {_counts(spread(rows, method, 'recovered'))}; R² >= {FIRST_R2} "
            f"{_counts(spread(rows, method, 'success'))}; median test "
            f"R² {np.median([r['test_r2'] for r in mine]):.4f}, median size "
            f"{np.median([r['size'] for r in mine]):.0f}, R² > {FIRST_R2} in "
            f"{len(firsts)}/{len(mine)} (median {med:.2f} s)"
        )  # fmt: skip
    got = {(r["law"], r["noise"], r["seed"], r["method"]): r.get("recovered") for r in rows}
    keys = sorted({(r["law"], r["noise"], r["seed"]) for r in rows})
    if {"ndvm", "operon", TENTH} <= set(methods):
        both = [k for k in keys if got.get((*k, "ndvm")) and got.get((*k, "operon"))]
        tenth = sum(bool(got.get((*k, TENTH))) for k in keys)
        full = sum(bool(got.get((*k, "operon"))) for k in keys)
        out.append(
            f"{TENTH} (a tenth of the budget) recovered {tenth} runs, Operon (full budget) "
            f"{full}: {tenth / full if full else float('inf'):.2f}x; on the {len(both)} runs "
            f"both recover at the full budget: {TENTH} "
            f"{sum(bool(got.get((*k, TENTH))) for k in both)}/{len(both)}"
        )
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from ndvm.tasks.columns import DEFAULT_BINARY, DEFAULT_UNARY

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--noise", default="0,0.01")
    ap.add_argument("--laws", default=",".join(law.name for law in LAWS))
    ap.add_argument("--methods", default=f"ndvm,{TENTH},operon,gplearn")
    ap.add_argument("--seeds", default="0", help="comma-separated; each draws data and seeds")
    ap.add_argument("--seed", type=int, default=None, help="one seed (same as --seeds N)")
    ap.add_argument("--binary", default=",".join(DEFAULT_BINARY))
    ap.add_argument("--unary", default=",".join(DEFAULT_UNARY))
    ap.add_argument(
        "--success-r2",
        type=float,
        default=FIRST_R2,
        help="test R² counted as a success, and for time-to-first, on every system",
    )
    ap.add_argument("--no-ladder", action="store_true", help="no Operon time-to-first ladder")
    ap.add_argument("--out", default="bench-out")
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run: 2 s, noiseless, two laws, no Operon ladder")  # fmt: skip
    args = ap.parse_args(argv)
    if args.seed is not None:
        args.seeds = str(args.seed)
    if args.quick:
        args.seconds, args.noise, args.laws = 2.0, "0", "I.12.1,michaelis-menten"
        args.no_ladder = True
    return args


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every law x noise x seed x method (interleaved: law by law); the rows and summary."""
    global FIRST_R2
    FIRST_R2 = args.success_r2
    set_grammar(tuple(args.binary.split(",")), tuple(args.unary.split(",")))
    if args.no_ladder:
        METHODS["operon"] = partial(run_operon, ladder=False)
    laws = [law for law in LAWS if law.name in args.laws.split(",")]
    methods = args.methods.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    rows = []
    for seed in seeds:
        for law in laws:
            for noise in (float(x) for x in args.noise.split(",")):
                for method in methods:
                    row = one(law, noise, method, args.seconds, seed)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    lines = summary(rows, methods)
    grammar = {p: dict(zip(("symbols", "cannot_express"), peer_grammar(p)))
               for p in ("operon", "gplearn")}  # fmt: skip
    stats = {m: {k: spread(rows, m, k) for k in ("recovered", "success")} for m in methods}
    return {"options": vars(args), "grammar": {**GRAMMAR, **grammar}, "spread": stats,
            "summary": lines, "rows": rows}  # fmt: skip


def main() -> None:
    args = parse_args()
    result = run(args)
    for line in result["summary"]:
        print(line)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "discovery.json").write_text(json.dumps(result["rows"], indent=1))
    (out / "discovery_summary.json").write_text(
        json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=1)
    )


if __name__ == "__main__":
    main()
