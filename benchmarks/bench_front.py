"""The front end, stage by stage: source text of a never-seen program -> first gradient.

    PYTHONPATH=src python benchmarks/bench_front.py [--reps 400] [--profile]
    valgrind --tool=callgrind --dump-before=getpgrp --callgrind-out-file=DIR/cg.out \
        python benchmarks/bench_front.py --marks 30; python benchmarks/bench_front.py --counts DIR

Each program is timed on ``reps`` distinct sources (a numeric literal changes, so no cache
answers), and each stage is the best over them (on a shared machine the minimum is the stable
figure): ``front`` (the native front end: read, expand, resolve to tables), ``lower`` (tables
-> the core's ``Program``), ``read`` (text -> Python data, what search and the CLI use),
``IR records`` (the Python IR built from the tables, which only the reference evaluator, the
export tracer and the baselines need), then ``ndvm.compile`` whole, the first and a second
``value_and_grad`` (the same theta and data, so the second replays the first's trace), and
``first gradient``: compile and the first together, source text to the first gradient, timed
per source. The targets, printed as ratios in the same run: ``ndvm.compile`` of a 10-30 node
program in 30 us, the first gradient in 50 us, and the first gradient within 1.5x a second
``value_and_grad`` (the ratio of the best times, machine-independent; the target is met by the
median over the programs, printed last). Each source's program is freed after its stages,
outside every timed stage (freeing the previous one is no part of a new one's compile).

Instruction counts: ``--marks N`` runs the same loop (20 sources, then N), calling
``os.getpgrp`` at each stage's end, so that callgrind with ``--dump-before=getpgrp`` writes one
dump per stage (``ndvm.compile``, ``init_theta``, the first and the second ``value_and_grad``,
then freeing the program, which is not counted);
``--counts DIR`` prints each stage's median over the N sources, the ratio, and the ratios'
median over the programs.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pathlib
import pstats
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import ndvm
from ndvm import _core
from ndvm.eval.limits import Limits

TARGET_COMPILE = 30e-6
TARGET_FIRST_GRADIENT = 50e-6
TARGET_FIRST_OVER_SECOND = 1.5  # issue 49: the median over PROGRAMS

# name -> (source with one {k} literal, inputs)
PROGRAMS: dict[str, tuple[str, tuple[str, ...]]] = {
    "sr-damped (10 nodes)": ("(* a (exp (- (* b x {k}))) (cos (+ (* c x) d)))", ("x",)),
    "header + let* (22 nodes)": (
        "(params (a 1.0) (k 0.5 positive) (w 2.0))\n"
        "(let* ((u (* k x)) (v (sin (+ (* w x) {k}))))\n  (+ (* a (exp (- u))) (* v v)))",
        ("x",),
    ),
    "cond + lambda (30 nodes)": (
        "(define (f t) (if (< t 0) (* a t) (* b (sqrt (+ t {k})))))\n"
        "(cond ((> x 2) (f (- x 2))) ((> x 1) (+ (f x) c)) (else (* d (f (abs x)))))",
        ("x",),
    ),
}


def best_us(times: list[float]) -> float:
    return min(times) * 1e6


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def stages(template: str, inputs: tuple[str, ...], reps: int) -> dict[str, float]:
    """Best microseconds of each stage over ``reps`` distinct sources (and the first
    gradient's median)."""
    names = ("front", "lower", "read", "IR records", "ndvm.compile", "first value_and_grad",
             "second value_and_grad", "first gradient")  # fmt: skip
    times: dict[str, list[float]] = {k: [] for k in names}
    x = np.linspace(0.0, 3.0, 32)
    lim = Limits()
    for i in range(reps):
        src = template.format(k=repr(1.0 + i * 1e-6))
        args = (src, None, inputs, lim.max_source_chars, lim.max_forms, False)
        fp, t = timed(_core.front_compile, *args)
        times["front"].append(t)
        _, t = timed(fp.lower)
        times["lower"].append(t)
        _, t = timed(fp.body)
        times["IR records"].append(t)
        _, t = timed(_core.read, src, False, lim.max_source_chars, lim.max_forms)
        times["read"].append(t)
        src3 = template.format(k=repr(3.0 + i * 1e-6))
        t0 = time.perf_counter()
        prog = ndvm.compile(src3, inputs=inputs, backend="native")
        t1 = time.perf_counter()
        theta = prog.init_theta()
        prog.value_and_grad(theta, x=x)
        t2 = time.perf_counter()
        prog.value_and_grad(theta, x=x)
        t3 = time.perf_counter()
        times["ndvm.compile"].append(t1 - t0)
        times["first value_and_grad"].append(t2 - t1)
        times["second value_and_grad"].append(t3 - t2)
        times["first gradient"].append(t2 - t0)
        del prog  # freed here, not in the next source's compile
    best = {k: best_us(v) for k, v in times.items()}
    best["first gradient (median)"] = float(np.median(times["first gradient"])) * 1e6
    return best


STAGES = ("ndvm.compile", "init_theta", "first value_and_grad", "second value_and_grad")
MARKED = (*STAGES, "free")  # each source's dumps: its stages, then freeing its program


def marks(n: int, warm: int = 20) -> None:
    """The loop of ``stages`` with ``os.getpgrp`` (a callgrind dump) after each stage."""
    x = np.linspace(0.0, 3.0, 32)
    mark = os.getpgrp
    for template, inputs in PROGRAMS.values():
        srcs = [template.format(k=repr(3.0 + i * 1e-6)) for i in range(warm + n)]
        for i, src in enumerate(srcs):
            if i == warm:
                mark()
            prog = ndvm.compile(src, inputs=inputs, backend="native")
            if i >= warm:
                mark()
            theta = prog.init_theta()
            if i >= warm:
                mark()
            prog.value_and_grad(theta, x=x)
            if i >= warm:
                mark()
            prog.value_and_grad(theta, x=x)
            if i >= warm:
                mark()
            del prog
            if i >= warm:
                mark()


def counts(folder: str) -> None:
    """Each stage's median instructions from the dumps of a ``--marks`` run."""
    parts = []
    for path in pathlib.Path(folder).glob("cg.out.*"):
        total = next(ln for ln in path.read_text().splitlines() if ln.startswith("totals:"))
        parts.append((int(path.suffix[1:]), int(total.split()[1])))
    totals = [t for _, t in sorted(parts)]
    per = len(totals) // len(PROGRAMS)  # per program: its warm-up, then N x MARKED
    ratios = []
    for p, name in enumerate(PROGRAMS):
        block = totals[p * per + 1 : (p + 1) * per]
        med = [float(np.median(block[k :: len(MARKED)])) for k in range(len(STAGES))]
        first = sum(med[:3])
        ratios.append(first / med[3])
        row = "  ".join(f"{s} {m / 1e3:.1f}k" for s, m in zip(STAGES, med, strict=True))
        print(
            f"{name:26s} {row}  | first gradient {first / 1e3:.1f}k, / second {first / med[3]:.3f}"
        )
    print(_median_line(ratios))


def _median_line(ratios: list[float]) -> str:
    return (
        f"median over the programs: first gradient / second value_and_grad "
        f"{float(np.median(ratios)):.3f}x (target {TARGET_FIRST_OVER_SECOND}x)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=400)
    ap.add_argument("--profile", action="store_true", help="cProfile ndvm.compile")
    ap.add_argument("--marks", type=int, metavar="N", help="the loop for callgrind (N sources)")
    ap.add_argument("--counts", metavar="DIR", help="instructions per stage from --marks dumps")
    args = ap.parse_args()
    if args.counts:
        counts(args.counts)
        return
    if args.marks:
        ndvm.compile("(+ a x)", inputs=("x",), backend="native", free_params=True)
        marks(args.marks)
        return
    ndvm.compile("(+ a x)", inputs=("x",), backend="native")  # imports, caches
    ratios = []
    for name, (template, inputs) in PROGRAMS.items():
        s = stages(template, inputs, args.reps)
        row = "  ".join(f"{k} {v:6.1f}" for k, v in s.items())
        ratio = s["ndvm.compile"] * 1e-6 / TARGET_COMPILE
        first = s["first gradient"] * 1e-6 / TARGET_FIRST_GRADIENT
        over = s["first gradient"] / s["second value_and_grad"]
        ratios.append(over)
        print(
            f"{name:26s} us: {row}  | compile / 30 us target {ratio:.2f}x"
            f"  first gradient / 50 us target {first:.2f}x"
            f"  first gradient / second value_and_grad {over:.2f}x"
            f" (target {TARGET_FIRST_OVER_SECOND}x)"
        )
    print(_median_line(ratios))
    if args.profile:
        template, inputs = PROGRAMS["sr-damped (10 nodes)"]
        srcs = [template.format(k=repr(5.0 + i * 1e-6)) for i in range(args.reps)]
        prof = cProfile.Profile()
        prof.enable()
        for s in srcs:
            ndvm.compile(s, inputs=inputs, backend="native")
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
