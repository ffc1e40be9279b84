"""``ndvm bench``: measure ndvm against its baselines; results go only to ``--out``.

ndvm bench decompose  [--out DIR] [--quick] [--programs scalar,kalman80]
ndvm bench amortize   [--out DIR] [--quick] [--program kalman80]
ndvm bench crossover  [--out DIR] [--quick] [--programs ...]
ndvm bench throughput [--out DIR] [--quick] [--program kalman80] [--tiers native,...]
ndvm bench meta       [--out DIR] [--quick] [--programs scalar,logistic16]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

_DEFAULT_OUT = "results/bench"
_HELP = {
    "decompose": "forward / forward+grad per program: tagged vs reference vs native",
    "amortize": "per-lane cost vs parameter lanes B",
    "crossover": "cumulative time vs gradient steps: interpreter vs staged JAX",
    "throughput": "Kalman calibrations per CPU-hour per tier",
    "meta": "the interpretive tower: direct vs one vs two metacircular levels",
}
_WITH_PROGRAMS = ("decompose", "crossover", "meta")


def register(sub: Any) -> None:
    p = sub.add_parser("bench", help="benchmarks against the baselines", description=__doc__)
    bench_sub = p.add_subparsers(dest="bench_command", required=True)
    for name, text in _HELP.items():
        q = bench_sub.add_parser(name, help=text, description=text)
        q.add_argument("--out", default=_DEFAULT_OUT, help=f"output folder ({_DEFAULT_OUT})")
        q.add_argument("--quick", action="store_true", help="smoke form: seconds, not minutes")
        if name in _WITH_PROGRAMS:
            q.add_argument("--programs", default=None, help="comma-separated program names")
        else:
            q.add_argument("--program", default=None, help="benchmark program name")
        if name == "throughput":
            q.add_argument("--tiers", type=_tiers, default="reference,native,staged-jax",
                           help="tiers measured besides the tagged baseline")  # fmt: skip
        q.set_defaults(func=run)


def _tiers(text: str) -> tuple[str, ...]:
    """``--tiers``: comma-separated names of ``ndvm.bench.suites.THROUGHPUT_TIERS``."""
    from ndvm.bench.suites import THROUGHPUT_TIERS

    tiers = tuple(t for t in text.split(",") if t)
    if unknown := set(tiers) - set(THROUGHPUT_TIERS):
        raise argparse.ArgumentTypeError(f"unknown tier(s) {', '.join(sorted(unknown))}; "
                                         f"choose from {', '.join(THROUGHPUT_TIERS)}")  # fmt: skip
    return tiers


# The optional extras each benchmark needs (its baselines and its plot).
_EXTRAS = {
    "decompose": ("torch", "plot"),
    "amortize": ("plot",),
    "crossover": ("jax", "plot"),
    "throughput": ("torch", "plot"),
    "meta": ("torch", "plot"),
}


def run(args: argparse.Namespace) -> int:
    from ndvm.extras import require

    require(f"ndvm bench {args.bench_command}", *_EXTRAS.get(args.bench_command, ()))
    # One intra-op thread for XLA, as torch is pinned to one: every tier is measured per core.
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
    from ndvm.bench import suites, tower

    out = Path(args.out)
    name = args.bench_command
    fn = tower.meta if name == "meta" else getattr(suites, name)
    t0 = time.perf_counter()
    if name in _WITH_PROGRAMS:
        names = tuple(n for n in (args.programs or "").split(",") if n) or None
        folder = fn(out, args.quick, print, names)
    elif name == "throughput":
        folder = fn(out, args.quick, print, args.program, args.tiers)
    else:
        folder = fn(out, args.quick, print, args.program)
    print(f"wrote {folder} in {time.perf_counter() - t0:.1f} s")
    return 0
