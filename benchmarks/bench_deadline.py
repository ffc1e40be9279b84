"""How far past a 1 s deadline a long tape runs (issue 48's case), per native backend.

Run: ``python benchmarks/bench_deadline.py [--runs 5] [--deadline 1.0]``. The program is a
40 000-operand variadic product feeding a loop that runs until the deadline, over 2 lanes:
the forward pass records ~10^7 tape records before the deadline stops it. For the walker
(``native``) and the bytecode VM (``vm``), with ``grad=True`` (``value_and_grad``'s path) and
``grad=False``, it prints the wall time of each run (min / median / max) and the status of
the lanes (2: the deadline's). The bound that holds is docs/language.md's ("Limits").

``--steady N``: instead, the walk's steady speed without a deadline: the best of ``--runs``
walks (replay off) of a loop of N iterations over the same product (a tape of ~N records),
forward only and with the gradient, per backend, in nanoseconds per step.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import ndvm
from ndvm.eval.limits import Limits

SRC = (
    "(let ((s (apply * (map (lambda (i) (* a 1.0)) (iota 40000)))))"
    " (let loop ((k 0.0)) (loop (+ k s))))"
)


def timed(backend: str, grad: bool, deadline: float) -> tuple[float, list[int]]:
    limits = Limits(deadline=deadline, max_steps=10**12)
    prog = ndvm.compile(SRC, params=["a"], backend=backend, limits=limits, strict=False)
    theta = np.array([[1.0], [2.0]])
    t0 = time.perf_counter()
    result = prog.evaluate(theta, grad=grad)
    elapsed = time.perf_counter() - t0
    return elapsed, sorted({int(s) for s in np.asarray(result.status).ravel()})


def steady(backend: str, n: int, runs: int) -> None:
    src = (
        "(let ((s (apply * (map (lambda (i) (* a 1.0)) (iota 1000)))))"
        f" (let loop ((k 0.0) (i 0)) (if (= i {n}) k (loop (+ k s) (+ i 1)))))"
    )
    prog = ndvm.compile(src, params=["a"], backend=backend, replay=False,
                        limits=Limits(max_steps=10**12))  # fmt: skip
    theta = np.array([[1.0], [2.0]])
    for grad in (False, True):
        best, steps = float("inf"), 0
        for _ in range(runs):
            t0 = time.perf_counter()
            result = prog.evaluate(theta, grad=grad)
            best = min(best, time.perf_counter() - t0)
            steps = result.stats["steps"]
        print(f"{backend:6s} grad={grad!s:5s} steady: {best:.3f} s, {steps} steps,"
              f" {best / steps * 1e9:.1f} ns/step", flush=True)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--deadline", type=float, default=1.0)
    ap.add_argument("--backends", default="native,vm")
    ap.add_argument("--steady", type=int, metavar="N", help="time a loop of N iterations")
    args = ap.parse_args()
    if args.steady:
        for backend in args.backends.split(","):
            steady(backend, args.steady, args.runs)
        return
    for backend in args.backends.split(","):
        for grad in (True, False):
            times, statuses = [], set()
            for _ in range(args.runs):
                t, st = timed(backend, grad, args.deadline)
                times.append(t)
                statuses.update(st)
            print(
                f"{backend:6s} grad={grad!s:5s} deadline {args.deadline:g} s:"
                f" min {min(times):.2f}  median {statistics.median(times):.2f}"
                f"  max {max(times):.2f} s   statuses {sorted(statuses)}"
                f"   runs {' '.join(f'{t:.2f}' for t in times)}",
                flush=True,
            )


if __name__ == "__main__":
    main()
