"""Where a default ``ndvm.calibrate`` fit's time goes: timers around each part of the fit.

    PYTHONPATH=src python benchmarks/profile_fit.py [--fits 300] [--calls]

The ten never-seen programs of ``bench_fit.py`` (eight 3-parameter structures, a line, a
5-parameter trend with a harmonic), each compiled fresh and fitted with the defaults ``--fits``
times. Timers wrap the parts of ``calibrate`` (the functions it calls, patched here; the runtime
call through a proxy of the backend's context); a part's time is the median of its per-fit
time over the fits, "other" (the rest of ``calibrate``: seed, bounds, dispatch, and the timers'
own cost) the median of what each fit's total leaves. Printed in µs per fit, each program's
and the mean over the ten programs; ``--calls`` adds cProfile's
count of Python calls per fit.
"""

from __future__ import annotations

import argparse
import os
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from bench_fit import cases  # noqa: E402

import ndvm  # noqa: E402
from ndvm.backends import registry  # noqa: E402
from ndvm.calibrate import api, native, waves  # noqa: E402

_T: dict[str, float] = defaultdict(float)  # part -> seconds in the current fit


def _timed(part: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            _T[part] += time.perf_counter() - t0

    return wrapper


class _Ctx:
    """The backend's context with its ``optimize`` timed (the runtime's LM)."""

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx

    def optimize(self, *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self._ctx.optimize(*args)
        finally:
            _T["runtime LM"] += time.perf_counter() - t0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)


# (part, module or class, attribute): inclusive timers; nested ones are subtracted below
PATCHES = [
    ("input checks", api, "user_data"),
    ("starts and roles", api, "_init_theta"),
    ("objective", api, "_objective"),
    ("waves", waves, "minimize"),
    ("wrappers", native.NativeOptimizer, "minimize"),
    ("result and verdict", api, "build"),
]
NESTED = {"waves": "wrappers", "wrappers": "runtime LM"}  # outer part -> the inner one


def install() -> None:
    for part, owner, name in PATCHES:
        setattr(owner, name, _timed(part, getattr(owner, name)))
    backend = registry.get("native")
    backend._context()  # this thread's context, then its timed proxy
    backend._local.ctx = _Ctx(backend._local.ctx)


def source(case: dict[str, Any]) -> tuple[str, dict[str, float]]:
    """(the program as ``bench_fit`` compiles it, its parameters with their inits)."""
    src, init = case["src"], case["init"]
    names = [f"p{i}" for i in range(len(init))]
    for old, new in zip("abcde", names):
        src = src.replace(f" {old})", f" {new})").replace(f"({old} ", f"({new} ")
        src = src.replace(f" {old} ", f" {new} ")
    return src, dict(zip(names, init))


def profile(case: dict[str, Any], fits: int) -> dict[str, float]:
    x, y = case["x"], case["y"]
    src, params = source(case)
    rows: dict[str, list[float]] = defaultdict(list)
    for _ in range(fits):
        _T.clear()
        t0 = time.perf_counter()
        prog = ndvm.compile(src, params=params, inputs=["x"])
        t1 = time.perf_counter()
        ndvm.calibrate(prog, {"x": x}, y, warn=False)
        t2 = time.perf_counter()
        parts = dict(_T)
        for outer, inner in NESTED.items():
            parts[outer] = parts.get(outer, 0.0) - parts.get(inner, 0.0)
        parts["compile"] = t1 - t0
        parts["other"] = (t2 - t0) - sum(parts.values())  # calibrate's own lines, the timers
        parts["total"] = t2 - t0
        for k, v in parts.items():
            rows[k].append(v)
    return {k: float(np.median(v)) * 1e6 for k, v in rows.items()}


def calls(todo: list[dict[str, Any]], fits: int, top: int) -> None:
    """cProfile over ``fits`` default fits of each program: Python calls per fit, and the
    ``top`` functions by their own time (cProfile's overhead included)."""
    import cProfile
    import pstats

    pr = cProfile.Profile()
    pr.enable()
    for case in todo:
        x, y = case["x"], case["y"]
        src, params = source(case)
        for _ in range(fits):
            prog = ndvm.compile(src, params=params, inputs=["x"])
            ndvm.calibrate(prog, {"x": x}, y, warn=False)
    pr.disable()
    st = pstats.Stats(pr)
    n = fits * len(todo)
    print(f"Python calls per fit (cProfile): {sum(v[1] for v in st.stats.values()) / n:.0f}")
    st.sort_stats("tottime").print_stats(top)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fits", type=int, default=300)
    ap.add_argument("--calls", action="store_true")
    args = ap.parse_args()
    import warnings

    warnings.simplefilter("ignore")
    todo = cases()[:10]
    for c in todo:  # warm: imports, caches of the compiler
        src, params = source(c)
        ndvm.calibrate(ndvm.compile(src, params=params, inputs=["x"]), {"x": c["x"]}, c["y"])
    if args.calls:  # before the timers are installed
        calls(todo, 50, 40)
    install()
    per = [profile(c, args.fits) for c in todo]
    order = ["runtime LM", "compile", "input checks", "starts and roles", "objective",
             "wrappers", "waves", "result and verdict", "other", "total"]  # fmt: skip
    print(f"{'program':32} " + " ".join(f"{k[:10]:>10}" for k in order))
    for c, p in zip(todo, per):
        print(f"{c['name'][:32]:32} " + " ".join(f"{p.get(k, 0.0):10.1f}" for k in order))
    mean = {k: sum(p.get(k, 0.0) for p in per) / len(per) for k in order}
    print(f"{'mean (µs per fit)':32} " + " ".join(f"{mean[k]:10.1f}" for k in order))


if __name__ == "__main__":
    main()
