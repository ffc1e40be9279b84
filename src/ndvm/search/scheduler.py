"""Run jobs in this process, in a pool of worker processes, or on Ray actors.

Jobs go out in chunks (one message per chunk, not per candidate) and every worker runs its
chunks in the order they were sent, i.e. in increasing job index; a worker remembers the
skeletons it calibrated (``evaluate.run_job``'s ``seen``) with the index of the first job
that had each, and a job sees only those of earlier jobs, so its duplicate shortcut agrees with
the driver's final decision for any number of workers and in whatever order a worker gets its
jobs (a retried job may reach a worker that already ran later ones). A job's result depends
only on the job and the task: records are identical for any executor and worker count.

Per-candidate limits hold inside the worker (steps per walk, a wall budget for the whole
candidate); the executor also kills and replaces a worker whose chunk outlives the sum of its
jobs' budgets plus a grace period, or that died (a crash in native code, or its machine gone):
the chunk's jobs are then retried one by one, and a job that kills its worker twice is
recorded as failed. The process pool restarts all its workers then; the Ray executor ends only
the dead or late actor, the other actors' chunks run on.
"""

from __future__ import annotations

import gc
import math
import multiprocessing as mp
import pickle
import select
import sys
import time
from collections.abc import Callable, Iterator, MutableSet, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Any

from ndvm.search.candidate import Candidate, Evaluation
from ndvm.search.evaluate import CalibLimits, Job, Result, run_job
from ndvm.tasks.base import Task

OnResults = Callable[[list[Result]], None]
More = Callable[[], list[Job]]  # the next jobs to run once the queue is empty ([]: none now)
TaskRef = Any  # a registered task's name, or a (picklable) Task


def task_ref(task: Task) -> TaskRef:
    """What crosses to a worker: the name of a registered task, else the Task itself."""
    from ndvm import tasks

    try:
        return task.name if tasks.get(task.name) is task else task
    except Exception:  # noqa: BLE001 - not a registered name
        return task


def resolve(ref: TaskRef) -> Task:
    from ndvm import tasks

    return tasks.get(ref) if isinstance(ref, str) else ref


def _failed(job: Job, reason: str) -> Result:
    return Result(job.idx, "", 0, 0, Evaluation("failed", reason=reason))


@dataclass
class Worker:
    """The state of one worker: its task, limits and the skeletons it calibrated."""

    task: Task
    limits: CalibLimits
    seen: dict[Any, int] = field(default_factory=dict)  # (scope, hash) -> first job index

    def run(self, jobs: Sequence[Job]) -> list[Result]:
        out = []
        for job in jobs:
            try:
                out.append(run_job(self.task, job, self.limits, _Before(self.seen, job.idx)))
            except Exception as exc:  # noqa: BLE001 - a candidate must never crash the search
                out.append(_failed(job, f"internal error: {type(exc).__name__}: {exc}"))
        return out


class _Before(MutableSet[Any]):
    """The keys a worker calibrated for jobs before job ``idx``: what ``run_job`` may treat as
    duplicates (``add`` records ``idx`` as a key's first job unless an earlier one had it)."""

    def __init__(self, first: dict[Any, int], idx: int) -> None:
        self.first, self.idx = first, idx

    def __contains__(self, key: object) -> bool:
        return self.first.get(key, self.idx) < self.idx

    def __iter__(self) -> Iterator[Any]:
        return (k for k, i in list(self.first.items()) if i < self.idx)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def add(self, key: Any) -> None:
        self.first[key] = min(self.first.get(key, self.idx), self.idx)

    def discard(self, key: Any) -> None:
        if key in self:
            del self.first[key]


_PROCESS_WORKER: list[Worker] = []


def _init_process(ref: TaskRef, limits: CalibLimits) -> None:
    task = resolve(ref)
    task.data()  # build (and cache) the data once per process
    _PROCESS_WORKER[:] = [Worker(task, limits)]
    # what the worker has now (modules, the task and its data) lives as long as it does: the
    # collector stops rescanning it at every full collection (a worker process of its own)
    gc.freeze()


def _run_in_process(jobs: Sequence[Job]) -> list[Result]:
    return _PROCESS_WORKER[0].run(jobs)


def chunks(jobs: Sequence[Job], workers: int, most: int = 32, least: int = 1) -> list[list[Job]]:
    """Split jobs (in index order) into chunks that shrink as the batch drains (guided
    scheduling: a third of the remaining jobs per worker, at most ``most``, at least
    ``least``, but never more than an even share of the batch per worker, so a small batch
    still reaches every worker), so few messages go out and the workers finish the batch
    together."""
    out: list[list[Job]] = []
    i, n = 0, len(jobs)
    least = max(1, min(least, -(-n // max(workers, 1))))
    while i < n:
        size = max(least, min(most, (n - i) // max(3 * workers, 1)))
        out.append(list(jobs[i : i + size]))
        i += size
    return out


class SerialExecutor:
    """Runs jobs one after another in this process (``workers=1``)."""

    def __init__(self, task: Task, limits: CalibLimits) -> None:
        self.worker = Worker(task, limits)

    def run(
        self, jobs: Sequence[Job], on_results: OnResults, stop: Callable[[], bool],
        more: More | None = None, halt: Callable[[], bool] | None = None,
    ) -> None:  # fmt: skip
        """Run ``jobs`` one at a time, then those ``more()`` gives, until both are exhausted
        or ``stop()`` (asked before each job; ``halt`` is ``stop``'s stronger form for the
        pools and needs nothing more here)."""
        while True:
            for job in jobs:
                if stop():
                    return
                on_results(self.worker.run([job]))
            jobs = more() if more is not None else []
            if not jobs:
                return

    def close(self) -> None:
        pass


STREAM_CHUNK = 32  # the smallest chunk of a batch that has another proposed behind it (fewer
# messages: the driver shares the cores with the workers and pays per message)
INFLIGHT = 4  # chunks in flight per worker: a queue that hides the driver's latency


class Pool:
    """The dispatch loop shared by the process and Ray executors (``submit``/``wait``/``kill``)."""

    workers: int
    limits: CalibLimits
    grace: float

    def submit(self, chunk: list[Job]) -> Any: ...
    def wait(self, handles: list[Any], timeout: float) -> list[Any]: ...
    def result(self, handle: Any) -> list[Result]: ...
    def kill(self) -> None: ...

    def run(
        self, jobs: Sequence[Job], on_results: OnResults, stop: Callable[[], bool],
        more: More | None = None, halt: Callable[[], bool] | None = None,
    ) -> None:  # fmt: skip
        """Run ``jobs``, then those ``more()`` gives whenever the queue is empty (the next
        batch, proposed while this one finishes), until both are exhausted or ``stop()``
        (the chunks in flight are awaited) or ``halt()`` (they are dropped: ``close`` ends
        the workers that still run them)."""
        queue = chunks(jobs, self.workers)
        solo = 0  # the first ``solo`` queued chunks run one at a time (after a death)
        inflight: dict[Any, tuple[list[Job], float]] = {}
        died: dict[int, int] = {}  # job idx -> times its worker died while it ran alone
        while True:
            if not queue and more is not None and not solo:
                # more batches follow: no need to shrink the chunks to one job at the end
                queue = chunks(more(), self.workers, least=STREAM_CHUNK)
            if not queue and not inflight:
                return
            room = 1 if solo else INFLIGHT * self.workers
            while queue and len(inflight) < room and not stop():
                chunk = queue.pop(0)
                solo = max(0, solo - 1)
                inflight[self.submit(chunk)] = (chunk, time.monotonic())
                room = 1 if solo else room
            if not inflight:
                return
            alone = len(inflight) == 1
            deadline = min(t + self._budget(c) for c, t in inflight.values())
            done = self.wait(list(inflight), max(0.05, deadline - time.monotonic()))
            retry: list[Job] = []
            dead: list[Any] = []
            for handle in done:
                chunk, _ = inflight.pop(handle)
                try:
                    on_results(self.result(handle))
                except WorkerDied:
                    dead.append(handle)
                    retry += self._died(chunk, alone, died, on_results)
            if halt is not None and halt():
                return
            now = time.monotonic()
            late = [h for h, (c, t) in inflight.items() if now - t > self._budget(c)]
            for handle in late:
                chunk, _ = inflight.pop(handle)
                if len(chunk) == 1:
                    reason = f"killed after {self._budget(chunk):.1f}s (per-candidate limit)"
                    on_results([Result(chunk[0].idx, "", 0, 0, Evaluation("timeout", reason))])
                else:
                    retry += chunk  # find the slow one: one job per chunk
            if late or dead:
                # end the workers that died or run late; the innocent jobs lost with them run
                # again, one job at a time and in index order
                lost = [j for h in self.drop(dead + late, list(inflight))
                        for j in inflight.pop(h)[0]]  # fmt: skip
                again = sorted(retry + lost, key=lambda j: j.idx)
                queue = [[j] for j in again] + queue
                solo += len(again)

    def drop(self, handles: list[Any], inflight: list[Any]) -> list[Any]:
        """End the workers that ran ``handles`` (dead, or running late) and return those of
        the ``inflight`` handles whose chunks are lost with them. A process pool cannot end
        one worker: it restarts them all, and every chunk in flight is lost."""
        self.kill()
        return inflight

    def _budget(self, chunk: list[Job]) -> float:
        return len(chunk) * self.limits.seconds + self.grace

    def _died(
        self, chunk: list[Job], alone: bool, died: dict[int, int], on_results: OnResults
    ) -> list[Job]:
        if len(chunk) > 1 or not alone:
            return chunk
        job = chunk[0]
        died[job.idx] = died.get(job.idx, 0) + 1
        if died[job.idx] < 2:
            return chunk
        on_results([_failed(job, "worker process died during calibration")])
        return []


class WorkerDied(Exception):
    pass


class ProcessExecutor(Pool):
    """``workers`` processes (forkserver where available), each with the task, each fed its
    chunks over its own pipe: no threads in the driver, one pickled message per chunk each
    way. A chunk goes to the worker with the fewest chunks outstanding; a worker that dies
    fails every outstanding chunk (``WorkerDied``), as a broken process pool does."""

    def __init__(self, task: Task, workers: int, limits: CalibLimits, grace: float = 5.0) -> None:
        self.ref, self.workers, self.limits, self.grace = task_ref(task), workers, limits, grace
        self.procs: list[Any] = []  # (process, connection)
        self.owed: dict[int, list[int]] = {}  # worker -> its outstanding handles, in order
        self.done: dict[int, Any] = {}  # handle -> results, or WorkerDied
        self.where: dict[int, int] = {}  # handle -> worker
        self.seq = 0

    def _start(self) -> None:
        methods = mp.get_all_start_methods()
        ctx = mp.get_context("forkserver" if "forkserver" in methods else "spawn")
        if ctx.get_start_method() == "forkserver":
            ctx.set_forkserver_preload(["ndvm.search.evaluate", "ndvm.tasks"])
        with _main_unimported(self.ref):
            for i in range(self.workers):
                here, there = ctx.Pipe()
                proc = ctx.Process(target=_serve, args=(there, self.ref, self.limits),
                                   daemon=True)  # fmt: skip
                proc.start()
                there.close()
                self.procs.append((proc, here))
                self.owed[i] = []

    def submit(self, chunk: list[Job]) -> int:
        if not self.procs:
            self._start()
        self.seq += 1
        w = min(self.owed, key=lambda i: (len(self.owed[i]), i))
        self.owed[w].append(self.seq)
        self.where[self.seq] = w
        try:
            self.procs[w][1].send_bytes(_dumps(pack_jobs(chunk)))
        except (OSError, EOFError):
            self._lost(w)
        return self.seq

    def _lost(self, w: int) -> None:
        """Worker ``w`` died: every outstanding chunk fails (a pool restart reruns them)."""
        for i in self.owed:
            for h in self.owed[i]:
                self.done[h] = WorkerDied()
            self.owed[i] = []

    def wait(self, handles: list[Any], timeout: float) -> list[Any]:
        if not any(h in self.done for h in handles):
            conns = {self.procs[w][1]: w for w in self.owed if self.owed[w]}
            for conn in _ready(list(conns), timeout):
                w = conns[conn]
                try:
                    out = conn.recv()
                except (OSError, EOFError):
                    self._lost(w)
                    continue
                if self.owed[w]:
                    self.done[self.owed[w].pop(0)] = out
        return [h for h in handles if h in self.done]

    def result(self, handle: Any) -> list[Result]:
        out = self.done.pop(handle)
        self.where.pop(handle, None)
        if isinstance(out, WorkerDied):
            raise WorkerDied
        return unpack_results(out)

    def kill(self) -> None:
        procs, self.procs = self.procs, []
        for proc, conn in procs:
            proc.kill()
            conn.close()
        for proc, _ in procs:
            proc.join(timeout=5)
        self.owed, self.done, self.where = {}, {}, {}

    def close(self) -> None:
        if any(self.owed.values()):  # stopped by an error: the chunks still out are dropped
            self.kill()
        procs, self.procs = self.procs, []
        for _, conn in procs:
            try:
                conn.send(None)  # stop after the chunks already sent
            except OSError:
                pass
        for proc, conn in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5)
            conn.close()


def _dumps(rows: list[tuple[Any, ...]]) -> bytes:
    """A chunk's message: its rows of plain values pickled as ``Connection.send`` would, without
    ``multiprocessing``'s pickler (made per message, for objects that rows never hold)."""
    return pickle.dumps(rows, pickle.HIGHEST_PROTOCOL)


def _ready(conns: list[Any], timeout: float) -> list[Any]:
    """The connections of ``conns`` that have a message or were closed, within ``timeout``
    seconds: ``multiprocessing.connection.wait`` as one ``poll`` call, where there is one
    (that function builds and registers a selector per call)."""
    if not hasattr(select, "poll"):
        from multiprocessing.connection import wait

        return list(wait(conns, timeout))
    poller = select.poll()
    by_fd = {}
    for conn in conns:
        by_fd[conn.fileno()] = conn
        poller.register(conn.fileno(), select.POLLIN)
    return [by_fd[fd] for fd, _ in poller.poll(math.ceil(timeout * 1000))]


@contextmanager
def _main_unimported(ref: TaskRef) -> Iterator[None]:
    """Workers start without running the main module again when the task does not need it
    (nothing of ``__main__`` in its pickle): a script that fits without an ``if __name__ ==
    "__main__":`` guard would otherwise run again in every worker, which forkserver and spawn
    workers do to rebuild ``__main__``, and fail there (the workers' start-up reads where the
    main module came from only while they start)."""
    main = sys.modules.get("__main__")
    try:
        needed = main is None or b"__main__" in pickle.dumps(ref)
    except Exception:  # noqa: BLE001 - unpicklable: the start reports it, main untouched
        needed = True
    if needed:
        yield
        return
    saved = {k: main.__dict__[k] for k in ("__file__", "__spec__") if k in main.__dict__}
    main.__dict__.pop("__file__", None)
    main.__spec__ = None
    try:
        yield
    finally:
        main.__dict__.update(saved)
        if "__spec__" not in saved:
            del main.__spec__


def _serve(conn: Any, ref: TaskRef, limits: CalibLimits) -> None:
    """A worker process: run each chunk it is sent, send its results back; None stops."""
    _init_process(ref, limits)
    while True:
        try:
            chunk = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        if chunk is None:
            return
        conn.send_bytes(_dumps(pack_results(_run_in_process(unpack_jobs(chunk)))))


# A chunk crosses the pipe as rows of plain values (``pack_*``), not as pickled dataclasses:
# fewer bytes, and one comprehension each way instead of a reduction per object; ``unpack_*``
# gives back equal objects (the fields in declaration order, set at once).
_JOB = attrgetter("idx", "seed", "scope")
_CAND = attrgetter(*(f.name for f in fields(Candidate)))
_EVAL = attrgetter(*(f.name for f in fields(Evaluation)))
_CAND_NAMES = tuple(f.name for f in fields(Candidate))
_EVAL_NAMES = tuple(f.name for f in fields(Evaluation))


def pack_jobs(jobs: Sequence[Job]) -> list[tuple[Any, ...]]:
    return [(*_JOB(j), *_CAND(j.candidate)) for j in jobs]


def unpack_jobs(rows: list[tuple[Any, ...]]) -> list[Job]:
    out = []
    for idx, seed, scope, *cand in rows:
        c = object.__new__(Candidate)
        c.__dict__.update(zip(_CAND_NAMES, cand))
        job = object.__new__(Job)
        job.__dict__.update(idx=idx, candidate=c, seed=seed, scope=scope)
        out.append(job)
    return out


def pack_results(results: Sequence[Result]) -> list[tuple[Any, ...]]:
    return [(r.idx, r.skeleton, r.n_params, r.complexity, r.key, *_EVAL(r.evaluation))
            for r in results]  # fmt: skip


def unpack_results(rows: list[tuple[Any, ...]]) -> list[Result]:
    out = []
    new, names = object.__new__, _EVAL_NAMES
    for row in rows:
        e = new(Evaluation)
        e.__dict__.update(zip(names, row[5:]))
        r = new(Result)
        d = r.__dict__  # (idx, skeleton, n_params, complexity, key, *evaluation)
        d["idx"], d["skeleton"], d["n_params"], d["complexity"] = row[:4]
        d["evaluation"], d["key"] = e, row[4]
        out.append(r)
    return out
