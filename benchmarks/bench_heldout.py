"""Selection on rows the search never read: is the law on the front, and is it the default choice?

    python benchmarks/bench_heldout.py [--seconds 5] [--seed 0] [--rows 200] [--noise 0.01]
                                       [--laws NAME,...]

``SymbolicRegressor(time_budget=seconds, workers=1)`` with library defaults on each law of
``discovery_laws`` (``rows`` samples, relative Gaussian noise); one JSON line per law (law on
the front, default choice is the law, wall seconds, which losses chose: ``cv_.method``) and
the totals. "The law" is ``bench_discovery.recovered`` (its structure, each constant within
2x the noise level relative with noise, to 3 significant digits without). Run it on two
checkouts to compare choices; docs/search.md has figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_discovery import recovered, sample  # noqa: E402
from discovery_laws import LAWS  # noqa: E402

DEFAULT_LAWS = ("I.12.1,I.14.4,I.29.4,I.6.2a,michaelis-menten,decay,I.39.1,I.43.31,II.38.14,"
                "I.27.6")  # fmt: skip


def main() -> None:
    from ndvm.search import SymbolicRegressor

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rows", type=int, default=200)
    ap.add_argument("--noise", type=float, default=0.01)
    ap.add_argument("--laws", default=DEFAULT_LAWS)
    args = ap.parse_args()
    wanted = args.laws.split(",")
    front = chosen = 0
    for law in [law for law in LAWS if law.name in wanted]:
        rng = np.random.default_rng(args.seed)
        X = sample(law, args.rows, rng)
        y = law.fn(*X.T)
        y = y + args.noise * np.std(y) * rng.standard_normal(len(y))
        t0 = time.perf_counter()
        m = SymbolicRegressor(time_budget=args.seconds, workers=1, random_state=args.seed,
                              variable_names=list(law.variables)).fit(X, y)  # fmt: skip
        wall = time.perf_counter() - t0
        on = any(recovered(m.sympy(i), law, args.noise) for i in range(len(m.front_)))
        ch = recovered(m.sympy(), law, args.noise)
        front, chosen = front + on, chosen + ch
        print(json.dumps({"law": law.name, "on_front": on, "chosen": ch, "wall_s": round(wall, 2),
                          "method": getattr(m.cv_, "method", "cv"),
                          "model": str(m.sympy())[:80]}), flush=True)  # fmt: skip
    print(f"TOTAL law on the front {front}, default choice is the law {chosen}", flush=True)


if __name__ == "__main__":
    main()
