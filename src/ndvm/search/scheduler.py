"""Concurrent calibration of candidates on local cores (processes) or a Ray cluster.

Each job is ``(idx, candidate, seed)``; its result depends only on the job and the task, so
results are identical for any number of workers. Per-candidate limits are enforced twice:
inside the worker (evaluation steps, a deadline per walk, a wall budget checked per Adam
step) and by the scheduler, which kills and replaces a worker whose job outlives
``limits.seconds + grace`` (a hung primitive cannot stall the search).
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from ndvm.search.calib import CalibLimits, calibrate_candidate
from ndvm.search.candidate import Candidate, Evaluation
from ndvm.search.problems import get as get_problem


@dataclass(frozen=True)
class Job:
    idx: int
    candidate: Candidate
    seed: int


OnResult = Callable[[int, Evaluation], None]


def run_job(task: str, job: Job, limits: CalibLimits) -> Evaluation:
    """Calibrate one job in this process (what every executor runs)."""
    try:
        return calibrate_candidate(job.candidate, get_problem(task), job.seed, limits)
    except Exception as exc:  # noqa: BLE001 - a candidate must never crash the search
        return Evaluation("failed", reason=f"internal error: {type(exc).__name__}: {exc}")


def _timeout(limits: CalibLimits, grace: float) -> Evaluation:
    return Evaluation(
        "timeout", reason=f"killed after {limits.seconds + grace:.1f}s (per-candidate limit)"
    )


class SerialExecutor:
    """Runs jobs one after another in this process (``workers=1``)."""

    def __init__(self, task: str, limits: CalibLimits) -> None:
        self.task, self.limits = task, limits

    def run(self, jobs: Sequence[Job], on_result: OnResult, stop: Callable[[], bool]) -> None:
        for job in jobs:
            if stop():
                return
            on_result(job.idx, run_job(self.task, job, self.limits))

    def close(self) -> None:
        pass


class ProcessExecutor:
    """A pool of worker processes; at most ``workers`` jobs in flight, each with a hard limit."""

    def __init__(self, task: str, workers: int, limits: CalibLimits, grace: float = 5.0) -> None:
        self.task, self.workers, self.limits, self.grace = task, workers, limits, grace
        self.pool: ProcessPoolExecutor | None = None

    def _pool(self) -> ProcessPoolExecutor:
        if self.pool is None:
            methods = mp.get_all_start_methods()
            ctx = mp.get_context("forkserver" if "forkserver" in methods else "spawn")
            if ctx.get_start_method() == "forkserver":
                ctx.set_forkserver_preload(["ndvm.search.calib", "ndvm.search.problems"])
            self.pool = ProcessPoolExecutor(self.workers, mp_context=ctx)
        return self.pool

    def _kill(self) -> None:
        pool, self.pool = self.pool, None
        if pool is None:
            return
        for proc in list(getattr(pool, "_processes", {}).values()):
            proc.kill()
        pool.shutdown(wait=False, cancel_futures=True)

    def run(self, jobs: Sequence[Job], on_result: OnResult, stop: Callable[[], bool]) -> None:
        queue = list(jobs)
        inflight: dict[Future[Evaluation], tuple[Job, float]] = {}
        broke: dict[int, int] = {}  # job idx -> times its pool broke while it ran
        hard = self.limits.seconds + self.grace
        while queue or inflight:
            while queue and len(inflight) < self.workers and not stop():
                job = queue.pop(0)
                try:
                    fut = self._pool().submit(run_job, self.task, job, self.limits)
                except BrokenProcessPool:
                    self._kill()
                    fut = self._pool().submit(run_job, self.task, job, self.limits)
                inflight[fut] = (job, time.monotonic())
            if not inflight:
                return
            oldest = min(t for _, t in inflight.values())
            timeout = max(0.05, oldest + hard - time.monotonic())
            done, _ = wait(list(inflight), timeout=timeout, return_when=FIRST_COMPLETED)
            requeue: list[Job] = []
            for fut in done:
                job, _ = inflight.pop(fut)
                try:
                    ev = fut.result()
                except BrokenProcessPool:
                    # a worker died (e.g. a crash in native code): retry each job once, alone
                    broke[job.idx] = broke.get(job.idx, 0) + 1
                    if broke[job.idx] < 2:
                        requeue.append(job)
                        continue
                    ev = Evaluation("failed", reason="worker process died during calibration")
                except Exception as exc:  # noqa: BLE001 - a dead worker is a failed job
                    ev = Evaluation("failed", reason=f"worker error: {type(exc).__name__}: {exc}")
                on_result(job.idx, ev)
            now = time.monotonic()
            late = [f for f, (_, t) in inflight.items() if now - t > hard]
            if late:
                for fut in late:
                    job, _ = inflight.pop(fut)
                    on_result(job.idx, _timeout(self.limits, self.grace))
            if late or requeue:
                # the pool cannot kill one worker: restart it and requeue the innocent jobs
                queue = requeue + [j for j, _ in inflight.values()] + queue
                inflight.clear()
                self._kill()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None


class RayExecutor:
    """Jobs as Ray tasks (``ndvm[ray]``); connects to ``address`` or starts a local instance."""

    def __init__(
        self, task: str, workers: int, limits: CalibLimits, address: str | None = None
    ) -> None:
        from ndvm.extras import require

        require("the Ray executor", "ray")
        import ray

        self.ray = ray
        if not ray.is_initialized():
            ray.init(address=address, num_cpus=None if address else workers, log_to_driver=False)
        self.task, self.workers, self.limits = task, workers, limits
        self.remote = ray.remote(max_retries=0)(run_job)

    def run(self, jobs: Sequence[Job], on_result: OnResult, stop: Callable[[], bool]) -> None:
        ray = self.ray
        queue = list(jobs)
        inflight: dict[Any, tuple[Job, float]] = {}
        hard = self.limits.seconds + 5.0
        while queue or inflight:
            while queue and len(inflight) < 2 * self.workers and not stop():
                job = queue.pop(0)
                ref = self.remote.remote(self.task, job, self.limits)
                inflight[ref] = (job, time.monotonic())
            if not inflight:
                return
            done, _ = ray.wait(list(inflight), num_returns=1, timeout=1.0)
            for ref in done:
                job, _ = inflight.pop(ref)
                try:
                    ev = ray.get(ref)
                except Exception as exc:  # noqa: BLE001
                    ev = Evaluation("failed", reason=f"ray task failed: {exc}")
                on_result(job.idx, ev)
            now = time.monotonic()
            for ref, (job, t) in list(inflight.items()):
                if now - t > 2 * hard:  # queued time counts too: be generous
                    ray.cancel(ref, force=True)
                    inflight.pop(ref)
                    on_result(job.idx, _timeout(self.limits, 5.0))

    def close(self) -> None:
        pass


def make_executor(
    task: str, workers: int, limits: CalibLimits, kind: str = "auto"
) -> SerialExecutor | ProcessExecutor | RayExecutor:
    """``auto``: serial for one worker, else processes; ``ray`` needs ``ndvm[ray]``."""
    if kind == "ray":
        return RayExecutor(task, max(workers, 1), limits)
    if kind == "serial" or (kind == "auto" and workers <= 1):
        return SerialExecutor(task, limits)
    return ProcessExecutor(task, max(workers, 1), limits)
