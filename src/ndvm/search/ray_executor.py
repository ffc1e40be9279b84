"""Jobs on Ray actors (``ndvm[ray]``): one actor per worker, each holding the task.

``ray.init`` connects to the cluster named by ``address`` (or the ``RAY_ADDRESS`` environment
variable, e.g. ``ray://head:10001`` or ``auto``); without one it starts a local instance with
``workers`` CPUs. Each actor asks for one CPU, wherever Ray places it; a chunk goes to the
started actor with the fewest chunks outstanding, and Ray runs one caller's calls to an actor
in order. An actor that has not started (no free CPU in the cluster for it) gets nothing until
it does, so asking for more workers than the cluster has CPUs runs on those it has.

An actor that dies (its process killed or crashed, or its node gone: ``RayActorError``, which
covers ``ActorDiedError`` and ``ActorUnavailableError``, ``WorkerCrashedError``,
``NodeDiedError``, or a result lost with its node: ``ObjectLostError``) is ended for good and
replaced by a new actor that Ray places on a node with a free CPU; the chunks it still had are
retried one job at a time (``scheduler.Pool``) while the other actors go on with theirs. A
chunk's results reach the driver once: a chunk taken from a dead actor is never read again.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

from ndvm.errors import WorkersUnavailable
from ndvm.search.evaluate import CalibLimits, Job, Result
from ndvm.search.scheduler import Pool, Worker, WorkerDied, resolve, task_ref
from ndvm.tasks.base import Task

START_WAIT = 30.0  # seconds to wait for the first actors before sending work to fewer
NO_WORKER = 300.0  # seconds without any started actor before giving up


class _Actor:
    def __init__(self, ref: Any, limits: CalibLimits) -> None:
        task = resolve(ref)
        task.data()
        self.worker = Worker(task, limits)

    def run(self, jobs: Sequence[Job]) -> list[Result]:
        return self.worker.run(jobs)

    def where(self) -> tuple[int, str]:
        """(process id, Ray node id)."""
        import ray

        return os.getpid(), ray.get_runtime_context().get_node_id()


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
        self.actors: dict[int, Any] = {}  # started actors by number
        self.placed: dict[int, tuple[int, str]] = {}  # actor number -> (pid, node id)
        self.starting: dict[Any, tuple[int, Any]] = {}  # ready ref -> (number, actor)
        self.owed: dict[int, set[Any]] = {}  # actor number -> its outstanding handles
        self.where: dict[Any, int] = {}  # outstanding handle -> actor number
        self.made = 0  # actors created
        self.lost = 0  # actors ended because they died or ran late

    def _fill(self) -> None:
        """Create actors until ``workers`` are started or starting."""
        while len(self.actors) + len(self.starting) < self.workers:
            actor = self.remote.remote(self.ref, self.limits)
            self.starting[actor.where.remote()] = (self.made, actor)
            self.made += 1

    def _take_started(self, timeout: float, want: int) -> None:
        """Move the actors that started to ``actors``, waiting up to ``timeout`` seconds for
        ``want`` of them; an actor that died while starting is replaced (its task failing to
        load is an error: every actor would)."""
        from ray.exceptions import RayActorError, RayError

        refs = list(self.starting)
        if not refs:
            return
        done, _ = self.ray.wait(refs, num_returns=min(want, len(refs)), timeout=timeout)
        for ref in done:
            n, actor = self.starting.pop(ref)
            try:
                self.placed[n] = self.ray.get(ref)
            except RayActorError as exc:
                if getattr(exc, "actor_init_failed", False):  # its __init__ raised: the
                    why = (str(exc).strip().splitlines() or [""])[-1]  # traceback's last line
                    raise WorkersUnavailable(f"a Ray worker cannot load the task: {why}") from None
                self.ray.kill(actor, no_restart=True)  # gone, or unreachable: not to come back
                continue
            except RayError:
                self.ray.kill(actor, no_restart=True)
                continue
            self.actors[n] = actor
            self.owed[n] = set()

    def _started(self) -> None:
        """At least one started actor. When none is (the first call, or every actor died),
        wait for as many as the cluster has CPUs for, up to ``START_WAIT`` seconds, so that
        the first chunks spread over them."""
        self._fill()
        if self.actors:
            self._take_started(0, len(self.starting))
            return
        cpus = int(self.ray.cluster_resources().get("CPU", 0))
        self._take_started(START_WAIT, max(1, min(self.workers, cpus)))
        t0 = time.monotonic()
        while not self.actors:
            if time.monotonic() - t0 > NO_WORKER:
                raise WorkersUnavailable(
                    f"no Ray worker started in {NO_WORKER:.0f} s: each needs a free CPU "
                    f"(cluster resources: {self.ray.cluster_resources()})"
                )
            self._fill()
            self._take_started(1.0, 1)

    def pids(self) -> list[int]:
        """The started workers' process ids (tests kill one to check recovery)."""
        self._started()
        return [self.placed[n][0] for n in sorted(self.actors)]

    def nodes(self) -> list[str]:
        """The Ray node ids of the started workers."""
        self._started()
        return [self.placed[n][1] for n in sorted(self.actors)]

    def submit(self, chunk: list[Job]) -> Any:
        self._started()
        n = min(self.actors, key=lambda i: (len(self.owed[i]), i))
        handle = self.actors[n].run.remote(chunk)
        self.owed[n].add(handle)
        self.where[handle] = n
        return handle

    def wait(self, handles: list[Any], timeout: float) -> list[Any]:
        done, _ = self.ray.wait(handles, num_returns=1, timeout=timeout)
        return list(done)

    def result(self, handle: Any) -> list[Result]:
        from ray.exceptions import (
            GetTimeoutError,
            NodeDiedError,
            ObjectLostError,
            RayActorError,
            WorkerCrashedError,
        )

        died = (RayActorError, WorkerCrashedError, NodeDiedError, ObjectLostError, GetTimeoutError)
        try:
            out = self.ray.get(handle, timeout=self.grace + 60)
        except died:
            raise WorkerDied from None  # ``drop`` ends its actor
        n = self.where.pop(handle)
        self.owed[n].discard(handle)
        return out  # type: ignore[no-any-return]

    def drop(self, handles: list[Any], inflight: list[Any]) -> list[Any]:
        """End the actors that ran ``handles``; their other chunks in flight are lost."""
        ended = {self.where.pop(h) for h in handles if h in self.where}
        lost = []
        for n in ended:
            self.ray.kill(self.actors.pop(n), no_restart=True)
            self.lost += 1
            for h in self.owed.pop(n):
                if self.where.pop(h, None) is not None and h in inflight:
                    lost.append(h)
        return lost

    def kill(self) -> None:
        for actor in [*self.actors.values(), *(a for _, a in self.starting.values())]:
            self.ray.kill(actor, no_restart=True)
        self.actors, self.starting, self.owed, self.where = {}, {}, {}, {}

    def close(self) -> None:
        self.kill()
