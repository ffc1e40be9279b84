"""Co-search benchmarks (TASKS.md): evolve on sr-damped / iterated-map under a fixed budget,
1 vs 2 workers, and enso-lim Adam-through-ndvm vs a gradient-free random search.

    PYTHONPATH=src python benchmarks/bench_search.py [--budget 60] [--out bench-out]

Writes ``search.json`` and an environment manifest (``env.json``) to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import time
from pathlib import Path

import numpy as np


def manifest() -> dict:
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    except OSError:
        commit = ""
    from ndvm.backends.registry import available

    return {
        "commit": commit.strip(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "backends": list(available()),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def bench_evolve(task: str, budget: float, workers: int, out: Path, seed: int = 0) -> dict:
    from ndvm.search import Budget, make_proposer, run_search
    from ndvm.search.frontier import summarize

    db = out / f"{task}-w{workers}.db"
    for p in out.glob(f"{db.name}*"):
        p.unlink()
    t = time.perf_counter()
    st = run_search(
        task,
        make_proposer("evolve", task),
        db,
        budget=Budget(seconds=budget),
        workers=workers,
        seed=seed,
    )
    wall = time.perf_counter() - t
    s = summarize(list(st.records), wall)
    return {
        "task": task,
        "workers": workers,
        "budget_s": budget,
        "calibrations": s.evaluated,
        "rejected": s.rejected,
        "calibrations_per_s": round(s.calibrations_per_s, 2),
        "time_to_first_success_s": s.time_to_first_success,
        "successes": s.successes,
        "distinct_success_skeletons": s.distinct_success_skeletons,
        "best_heldout_r2": s.best_r2,
        "best_program": s.best.candidate.src if s.best else None,
    }


def bench_enso(budget: float, seed: int = 0) -> dict:
    """Adam through ndvm vs isotropic random search (gradient-free), same wall budget."""
    import ndvm
    from ndvm.tasks import enso_lim

    data = enso_lim.build()
    prog = ndvm.compile(enso_lim.program_source(), inputs=("Y",))
    feed = dict(data.train_inputs)
    Y, start = data.meta["Y"], int(data.meta["n_train"])

    def corr(theta: np.ndarray) -> dict:
        F, Q, r = enso_lim.unpack(prog.constrain(theta))
        return enso_lim.forecast_corr(F, Q, r, Y, start)

    th0 = prog.init_theta()
    nll0 = float(prog.eval(th0, **feed))
    # Adam
    th, m, v = th0.copy(), np.zeros(611), np.zeros(611)
    t0, k, best = time.perf_counter(), 0, (nll0, th0.copy())
    while time.perf_counter() - t0 < budget:
        k += 1
        val, g = prog.value_and_grad(th, **feed)
        if np.isfinite(float(val)) and float(val) < best[0]:
            best = (float(val), th.copy())
        g = g / len(Y[:start])
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        th = th - 0.01 * (m / (1 - 0.9**k)) / (np.sqrt(v / (1 - 0.999**k)) + 1e-8)
    adam = {"nll": best[0], "steps": k, **corr(best[1])}
    # gradient-free: (1+1) random search with step adaptation
    rng = np.random.default_rng(seed)
    th, f, sigma, n = th0.copy(), nll0, 0.02, 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < budget:
        n += 1
        cand = th + sigma * rng.standard_normal(611)
        fc = float(prog.eval(cand, **feed))
        if np.isfinite(fc) and fc < f:
            th, f, sigma = cand, fc, sigma * 1.5
        else:
            sigma *= 0.9
    rs = {"nll": f, "evaluations": n, **corr(th)}
    return {"nll_init": nll0, "budget_s": budget, "adam": adam, "random_search": rs}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=float, default=60.0)
    ap.add_argument("--enso-budget", type=float, default=60.0)
    ap.add_argument("--out", default="bench-out")
    ap.add_argument("--skip-enso", action="store_true")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "env.json").write_text(json.dumps(manifest(), indent=1))
    results: dict = {"evolve": []}
    for task in ("sr-damped", "iterated-map"):
        for workers in (1, 2):
            r = bench_evolve(task, args.budget, workers, out)
            print(json.dumps(r))
            results["evolve"].append(r)
    if not args.skip_enso:
        results["enso"] = bench_enso(args.enso_budget)
        print(json.dumps(results["enso"]))
    (out / "search.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
