"""Jobs on Ray actors (``ndvm[ray]``): one actor per worker, each holding the task.

``ray.init`` connects to the cluster named by ``address`` (or the ``RAY_ADDRESS`` environment
variable, e.g. ``ray://head:10001`` or ``auto``); without one it starts a local instance with
``workers`` CPUs. Chunks go to actors round robin, so every actor runs its chunks in index
order (Ray runs one caller's calls to an actor in order). A dead actor (its process killed or
crashed) is replaced and its jobs retried one at a time, exactly as the process pool does.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ndvm.search.evaluate import CalibLimits, Job, Result
from ndvm.search.scheduler import Pool, Worker, WorkerDied, resolve, task_ref
from ndvm.tasks.base import Task


class _Actor:
    def __init__(self, ref: Any, limits: CalibLimits) -> None:
        task = resolve(ref)
        task.data()
        self.worker = Worker(task, limits)

    def run(self, jobs: Sequence[Job]) -> list[Result]:
        return self.worker.run(jobs)

    def pid(self) -> int:
        return os.getpid()


class RayExecutor(Pool):
    def __init__(
        self,
        task: Task,
        workers: int,
        limits: CalibLimits,
        address: str | None = None,
        grace: float = 10.0,
    ) -> None:
        from ndvm.extras import require

        require("the Ray executor", "ray")
        import ray

        self.ray = ray
        address = address or os.environ.get("RAY_ADDRESS")
        if not ray.is_initialized():
            ray.init(
                address=address,
                num_cpus=None if address else workers,
                log_to_driver=False,
                include_dashboard=False,
            )
        self.ref, self.workers, self.limits, self.grace = task_ref(task), workers, limits, grace
        self.remote = ray.remote(num_cpus=1, max_restarts=0)(_Actor)
        self.actors: list[Any] = []
        self.turn = 0

    def _actors(self) -> list[Any]:
        if not self.actors:
            self.actors = [self.remote.remote(self.ref, self.limits) for _ in range(self.workers)]
        return self.actors

    def pids(self) -> list[int]:
        """The worker processes' ids (tests kill one to check recovery)."""
        return [int(p) for p in self.ray.get([a.pid.remote() for a in self._actors()])]

    def submit(self, chunk: list[Job]) -> Any:
        actors = self._actors()
        actor = actors[self.turn % len(actors)]
        self.turn += 1
        return actor.run.remote(chunk)

    def wait(self, handles: list[Any], timeout: float) -> list[Any]:
        done, _ = self.ray.wait(handles, num_returns=1, timeout=timeout)
        return list(done)

    def result(self, handle: Any) -> list[Result]:
        from ray.exceptions import RayActorError, WorkerCrashedError

        try:
            return self.ray.get(handle)
        except (RayActorError, WorkerCrashedError):
            raise WorkerDied from None

    def kill(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor, no_restart=True)
        self.actors = []

    def close(self) -> None:
        self.kill()
