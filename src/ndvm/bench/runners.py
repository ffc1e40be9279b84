"""Timing and the per-tier callables: tagged (torch), reference, native, staged JAX.

``native`` is the native backend as it runs by default (an evaluation repeated with the same
inputs replays its recorded trace); ``native-walk`` is the same backend with ``replay=False``,
walking the program at every evaluation.

``time_call`` warms up once, then repeats until ``min_time`` seconds or ``max_reps`` calls and
reports the median seconds per call. Torch is pinned to one thread so tiers compare per core.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ndvm.baselines.programs import BenchProgram

TIERS = ("tagged", "reference", "native-walk", "native")
NATIVE_TIERS = ("native-walk", "native")


@dataclass(frozen=True)
class Budget:
    """How long each measurement may take."""

    min_time: float
    max_reps: int

    @staticmethod
    def of(quick: bool) -> Budget:
        return Budget(0.01, 3) if quick else Budget(0.3, 50)


def available_tiers() -> tuple[str, ...]:
    from ndvm.backends import registry

    built = "native" in registry.available()
    return tuple(t for t in TIERS if t not in NATIVE_TIERS or built)


def time_call(fn: Callable[[], Any], budget: Budget) -> float:
    """Median seconds per call of ``fn`` (after one warm-up call)."""
    fn()
    times: list[float] = []
    total = 0.0
    min_reps = min(3, budget.max_reps)
    while len(times) < min_reps or (total < budget.min_time and len(times) < budget.max_reps):
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        times.append(dt)
        total += dt
    return statistics.median(times)


def runner(tier: str, prog: BenchProgram, B: int, grad: bool) -> Callable[[], Any]:
    """A no-argument callable doing one forward (``grad`` False) or forward+gradient walk."""
    compiled, theta, inputs = prog.compiled(), prog.theta(B), prog.inputs()
    if tier == "tagged":
        import torch

        from ndvm.baselines.tagged import TaggedBackend

        torch.set_num_threads(1)
        backend = TaggedBackend()
        return lambda: backend.run(compiled, theta, inputs, grad=grad)
    if tier in ("reference", *NATIVE_TIERS):
        from ndvm.api import Program

        program = Program(compiled, tier.split("-")[0], replay=tier != "native-walk")
        return lambda: program.evaluate(theta, inputs, grad=grad)
    raise ValueError(f"unknown tier {tier!r}")


def staged(prog: BenchProgram, B: int, grad: bool = True) -> Any:
    """A compiled ``StagedProgram`` (its ``compile_seconds`` is the one-time cost)."""
    from ndvm.baselines.staged_jax import StagedProgram

    return StagedProgram(prog.compiled(), B, prog.inputs(), grad=grad)


def fmt_seconds(s: float) -> str:
    if s != s or s == float("inf"):
        return "-"
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.1f} us"
