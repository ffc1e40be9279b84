"""The co-search loop: propose a batch, persist it, run it (funnel + calibration), repeat.

Proposal is pipelined: batch n is proposed as soon as batch n - 2 is decided, while batch
n - 1 still calibrates, from a view in which the records of batch n - 1 are pending (whatever
of them has already finished); every candidate's calibration seed is derived from (search
seed, index). The funnel runs in
the workers; the driver decides duplicates in index order (a candidate whose skeleton an
earlier calibrated candidate of the same scope had is rejected) and commits results as the
decided prefix grows, one transaction per chunk. Given the same proposer, seed and budget in
candidates or batches, the records are identical for any number of workers and across a
kill-and-resume.
"""

from __future__ import annotations

import gc
import hashlib
import subprocess
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ndvm.errors import ConfigError, SearchAborted
from ndvm.search.candidate import Evaluation, Record, skeleton_hash
from ndvm.search.evaluate import CalibLimits, Job, Result
from ndvm.search.scheduler import ProcessExecutor, SerialExecutor
from ndvm.search.state import Budget, Proposer, RecordsView, SearchState, SeenView, derive_seed
from ndvm.search.store import Store
from ndvm.tasks.base import Task

DEFAULT_LIMITS = CalibLimits()
INTERNAL_ERROR_LIMIT = 3  # the same internal error this many times stops the search
INTERNAL = "internal error: "  # how a worker's record of an internal error starts
COMMIT_EVERY = 64  # decided results per commit (a kill loses at most these, rerun on resume)
COMMIT_SECONDS = 0.25  # ... or what was decided in this long


@dataclass(frozen=True)
class Progress:
    """What a progress display shows after each result."""

    elapsed: float
    proposed: int
    evaluated: int
    rejected: int
    successes: int
    best_r2: float  # best validation R² (selection never reads the test split)
    rate: float  # calibrations per second (one candidate, whatever its number of starts)
    lanes_rate: float = 0.0  # start lanes per second
    rejections: dict[str, int] = field(default_factory=dict)  # rejected, by funnel stage
    best_src: str = ""  # the program of ``best_r2`` (what a live best-so-far line shows)


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).parent,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def run_search(
    task: str | Task,
    proposer: Proposer,
    db: str | Path,
    *,
    budget: Budget,
    workers: int = 1,
    seed: int = 0,
    batch_size: int = 64,
    resume: bool = False,
    limits: CalibLimits = DEFAULT_LIMITS,
    executor: str = "auto",
    progress: Callable[[Progress], None] | None = None,
) -> SearchState:
    """Run (or resume) a search; returns the final state. Results are in ``db``."""
    from ndvm import tasks

    the_task = (tasks.get(task) if isinstance(task, str) else task).for_search()
    store = Store(db, exclusive=True)  # one search per database at a time (a lock file)
    config = {
        "batch_size": batch_size, "limits": limits.__dict__, "workers": workers,
        "inputs": list(the_task.inputs), "origin": the_task.data().meta.get("origin"),
        "data": data_digest(the_task),
    }  # fmt: skip
    run, seed, base, records = _open_run(store, the_task, proposer, seed, config, resume)
    ends = budget.until_success or budget.until is not None  # a record may end the search
    book = _Book(run, store, records, _scope_fn(proposer), budget.reached if ends else None)
    t0 = time.perf_counter()

    def elapsed() -> float:
        return base + time.perf_counter() - t0

    def stop() -> bool:
        return book.halted() or (budget.seconds is not None and elapsed() >= budget.seconds)

    def on_results(results: list[Result], flush: bool = False) -> None:
        if not book.take(results, elapsed(), flush):
            return
        if tenure:
            gc.freeze()  # what is committed stays: the collector stops rescanning it
        if progress is not None:
            progress(book.progress(elapsed(), time.perf_counter() - t0))

    def more() -> list[Job]:
        """The next batch's jobs, once the batch two before it is decided ([]: none yet, or
        the search is over); a batch rejected whole at proposal is skipped over."""
        nonlocal finished
        while not finished:
            n = book.next_batch
            if stop() or not book.decided_before(n - 1):
                return []
            state = book.view(the_task.name, seed, n)
            done = budget.exhausted(state, elapsed())
            cands = [] if done else proposer.propose(state, batch_size)
            if not cands:
                finished = True
                return []
            new = book.propose(cands, n, seed, elapsed())
            store.add(run, new, elapsed())
            todo = [r for r in new if r.status == "pending"]
            book.expect(todo)
            if todo:
                return [book.job(r) for r in todo]
        return []

    finished = False
    tenure = gc.isenabled() and not gc.get_freeze_count()  # not when the caller froze already
    sched = make_executor(the_task, workers, limits, executor)
    _hook(proposer, "start", budget.seconds and time.monotonic() + budget.seconds - base)
    try:
        pending = [r for r in records if r.status == "pending"]
        book.expect(pending)
        sched.run([book.job(r) for r in pending], on_results, stop, more, book.halted)
        on_results([], flush=True)
    finally:
        if tenure:
            gc.unfreeze()
        _hook(proposer, "close", then=sched.close)
        store.set_elapsed(run, elapsed())
        store.close()
    return book.state(the_task.name, seed)


def _open_run(
    store: Store, task: Task, proposer: Proposer, seed: int, config: dict[str, Any], resume: bool
) -> tuple[int, int, float, list[Record]]:
    """(run, seed, elapsed so far, records): the latest run when resuming, else a new one.
    On an error the store is closed (its lock released)."""
    try:
        info = store.latest_run() if resume else None
        if info is None:
            run = store.new_run(task.name, proposer.name, seed, config, git_commit())
            return run, seed, 0.0, []
        if info["task"] != task.name:
            raise ValueError(f"{store.path}: latest run is task {info['task']!r}, "
                             f"not {task.name!r}")  # fmt: skip
        recorded = info["config"].get("data")
        if recorded is not None and recorded != config["data"]:
            raise ConfigError(
                f"{store.path}: its latest run searched other data (or another split of it: "
                f"data digest {recorded[:12]}, these data {config['data'][:12]}); records "
                "scored on other data cannot be resumed: use a new database"
            )
        return info["run"], info["seed"], float(info["elapsed"]), store.records(info["run"])
    except BaseException:
        store.close()
        raise


def data_digest(task: Task) -> str:
    """SHA-256 of the task's data (every split's input names and values, targets, float64
    bytes): a resumed run must score its new candidates on the data of its old ones."""
    data = task.data()
    h = hashlib.sha256()
    for part in (data.train_inputs, data.train_target, data.valid_inputs, data.valid_target,
                 data.test_inputs, data.test_target):  # fmt: skip
        if isinstance(part, Mapping):
            for name in sorted(part):
                h.update(name.encode() + b"\0")
                _hash_array(h, part[name])
        else:
            _hash_array(h, part)
        h.update(b"|")
    if data.select_target is not None:  # only then: digests of runs without one are unchanged
        for name in sorted(data.select_inputs or {}):
            h.update(name.encode() + b"\0")
            _hash_array(h, (data.select_inputs or {})[name])
        _hash_array(h, data.select_target)
    return h.hexdigest()


def _hash_array(h: Any, value: Any) -> None:
    if value is None:
        h.update(b"none")
        return
    arr = getattr(value, "array", value)  # an ndvm.const input holds its array
    try:
        a = np.ascontiguousarray(np.asarray(arr, dtype=np.float64))
    except (TypeError, ValueError):
        h.update(repr(arr).encode())
        return
    h.update(str(a.shape).encode() + a.tobytes())


def _hook(
    proposer: Proposer, name: str, *args: Any, then: Callable[[], None] | None = None
) -> None:
    """Call a proposer's optional ``start(end)`` (the search begins; ``end``: the
    ``time.monotonic()`` instant its time budget ends, or ``None``) or ``close()`` (it ended),
    then ``then`` (whatever the hook raised)."""
    fn = getattr(proposer, name, None)
    try:
        if callable(fn):
            fn(*args)
    finally:
        if then is not None:
            then()


def _scope_fn(proposer: Proposer) -> Callable[[int], int]:
    """The dedupe scope of record ``idx`` (a replay cycle; 0 for proposers without scopes)."""
    fn = getattr(proposer, "scope", None)
    return fn if callable(fn) else (lambda idx: 0)


class _Book:
    """The driver's records: final duplicate decisions in index order, committed in groups."""

    def __init__(
        self, run: int, store: Store, records: list[Record], scope: Callable[[int], int],
        reached: Callable[[Record], bool] | None = None,
    ) -> None:  # fmt: skip
        self.run, self.store, self.scope, self.reached = run, store, scope, reached
        # the first decided record that ends the search (``Budget.reached``; None: no record
        # does); once set, nothing after it is decided: the records are those of the
        # index-order prefix
        self.hit = next((r.idx for r in records if reached(r)), None) if reached else None
        self.recs: list[Record] = sorted(records, key=lambda r: r.idx)  # index order
        self.pos: dict[int, int] = {r.idx: i for i, r in enumerate(self.recs)}  # idx -> position
        self.seen = {
            (scope(r.idx), skeleton_hash(r.skeleton, r.candidate.src))
            for r in records
            if r.skeleton and r.status not in ("rejected", "pending")
        }
        self.first: dict[str, int] = {}  # SearchState.seen (every scope): hash -> first idx
        for r in records:
            if r.skeleton and r.status not in ("rejected", "pending"):
                self._saw(r.idx, skeleton_hash(r.skeleton, r.candidate.src))
        self.waiting: dict[int, int] = {}  # batch -> its records still pending
        for r in records:
            if r.status == "pending":
                self.waiting[r.batch] = self.waiting.get(r.batch, 0) + 1
        last = self.recs[-1].batch if self.recs else -1
        # the records of the latest batch as they were proposed (what the next proposal sees)
        self.last: list[Record] = [_as_proposed(r) for r in self.recs if r.batch == last]
        self.order: deque[int] = deque()  # pending indices in the order they are decided
        self.ready: dict[int, Result] = {}
        self.decided: list[Result] = []  # decided in index order, not yet committed
        self.decided_in: dict[int, int] = {}  # batch -> how many of ``decided`` are of it
        self.committed_at = time.perf_counter()
        self.done = 0  # results committed by this process
        self.done_calibrated = 0
        self.lanes = 0  # start lanes calibrated by this process
        self.counts = {"evaluated": 0, "rejected": 0, "successes": 0}
        self.stages: dict[str, int] = {}
        self.best_r2 = float("nan")
        self.internal: dict[str, int] = {}  # internal-error reason -> count (this process)
        self.best_src = ""
        for r in records:
            self._count(r.evaluation, r.candidate.src)

    def _count(self, ev: Evaluation | None, src: str) -> None:
        if ev is None:
            return
        if ev.status == "rejected":
            self.counts["rejected"] += 1
            stage = ev.reason.split(":", 1)[0]
            self.stages[stage] = self.stages.get(stage, 0) + 1
            return
        self.counts["evaluated"] += 1
        self.counts["successes"] += bool(ev.success)
        r2 = ev.validation_r2
        if ev.status == "ok" and r2 == r2 and not self.best_r2 >= r2:
            self.best_r2 = r2  # the selection metric: validation R², never the test split
            self.best_src = src

    def progress(self, now: float, active: float) -> Progress:
        return Progress(
            elapsed=now,
            proposed=len(self.recs),
            evaluated=self.counts["evaluated"],
            rejected=self.counts["rejected"],
            successes=self.counts["successes"],
            best_r2=self.best_r2,
            rate=self.done_calibrated / active if active > 0 else 0.0,
            lanes_rate=self.lanes / active if active > 0 else 0.0,
            rejections=dict(self.stages),
            best_src=self.best_src,
        )

    def _saw(self, idx: int, h: str) -> None:
        if self.first.get(h, idx) >= idx:
            self.first[h] = idx

    @property
    def next_batch(self) -> int:
        return self.recs[-1].batch + 1 if self.recs else 0

    def decided_before(self, batch: int) -> bool:
        """Every record of the batches before ``batch`` is decided."""
        return not any(b < batch for b in self.waiting)

    def state(self, task: str, seed: int) -> SearchState:
        return SearchState.of(task, seed, list(self.recs), frozenset(self.first))

    def view(self, task: str, seed: int, batch: int) -> SearchState:
        """What the proposal of ``batch`` sees: every record, those of ``batch - 1`` as they
        were proposed (pending unless rejected at proposal), whether or not they finished —
        the same state for any timing, executor and number of workers. Every earlier batch is
        committed (final), so the view shares those records instead of copying them, and the
        records of ``batch - 1`` are the list ``propose`` made of them."""
        recs = self.recs
        tail = self.last if recs and recs[-1].batch == batch - 1 else []
        k = len(recs) - len(tail)
        hidden = sum(1 for r in recs[k:] if r.evaluation is not None and r.evaluation.success)
        cutoff = recs[k].idx if k < len(recs) else (recs[-1].idx + 1 if recs else 0)
        return SearchState(task, seed, RecordsView(recs, k, tail), SeenView(self.first, cutoff),
                           self.counts["successes"] - hidden)  # fmt: skip

    def job(self, r: Record) -> Job:
        job = _new(Job)  # ``Job(...)``, its fields set at once
        job.__dict__.update(idx=r.idx, candidate=r.candidate, seed=r.seed, scope=self.scope(r.idx))
        return job

    def expect(self, records: list[Record]) -> None:
        """Pending records to decide, after those already expected (indices increase)."""
        self.order.extend(sorted(r.idx for r in records))

    def propose(self, cands: list[Any], batch: int, seed: int, now: float) -> list[Record]:
        start = self.recs[-1].idx + 1 if self.recs else 0  # index order
        new = [_record(idx, batch, cand, "", 0, 0, derive_seed(seed, idx),
                       Evaluation("rejected", reason=f"proposal: {cand.error}")
                       if cand.error else None, now)
               for idx, cand in enumerate(cands, start)]  # fmt: skip
        pending = sum(1 for r in new if r.evaluation is None)
        if pending:
            self.waiting[batch] = self.waiting.get(batch, 0) + pending
        n = len(self.recs)
        self.pos.update(zip(range(start, start + len(new)), range(n, n + len(new))))
        self.recs.extend(new)
        self.last = new
        return new

    def take(self, results: list[Result], now: float, flush: bool = False) -> bool:
        """Buffer results and decide the prefix that is complete (index order); commit the
        decided ones in one transaction when ``COMMIT_EVERY`` wait, a batch is complete (the
        next proposal waits for it), ``COMMIT_SECONDS`` passed since the last commit, one is
        an internal error, or ``flush``. True if any was committed."""
        ready = self.ready
        for res in results:
            ready[res.idx] = res
        order, decided, per = self.order, self.decided, self.decided_in
        recs, pos, waiting, reached = self.recs, self.pos, self.waiting, self.reached
        complete = False  # the decided results hold the last pending record of a batch
        while self.hit is None and order and order[0] in ready:
            res = self._decide(ready.pop(order.popleft()))
            decided.append(res)
            b = recs[pos[res.idx]].batch
            k = per[b] = per.get(b, 0) + 1
            complete = complete or k >= waiting.get(b, 0)
            ev = res.evaluation  # an internal error is counted (and may stop the search) now
            if ev.status == "failed" and ev.reason.startswith(INTERNAL):
                flush = True
            if reached is not None and reached(self._record(res, now)):
                self.hit, flush = res.idx, True
        if not decided:
            return False
        t = time.perf_counter()
        due = t - self.committed_at >= COMMIT_SECONDS or len(decided) >= COMMIT_EVERY
        if not (flush or due or complete):
            return False
        self.decided, self.decided_in, self.committed_at = [], {}, t
        written = self.store.finish_many(self.run, [(res, now) for res in decided], now)
        self._commit([res for res, ok in zip(decided, written) if ok], now)
        return True

    def halted(self) -> bool:
        """Whether a record reached the budget's condition: the search ends at once."""
        return self.hit is not None

    def _record(self, res: Result, now: float) -> Record:
        """The record of ``res`` as ``_commit`` stores it."""
        r = self.recs[self.pos[res.idx]]
        return _record(r.idx, r.batch, r.candidate, res.skeleton, res.n_params, res.complexity,
                       r.seed, res.evaluation, now)  # fmt: skip

    def _commit(self, results: list[Result], now: float) -> None:
        """Take the committed ``results`` into the records, counts and rates."""
        recs, pos, waiting = self.recs, self.pos, self.waiting
        for res in results:
            i = pos[res.idx]
            r = recs[i]  # (``_record``)
            ev = res.evaluation
            recs[i] = _record(r.idx, r.batch, r.candidate, res.skeleton, res.n_params,
                              res.complexity, r.seed, ev, now)  # fmt: skip
            self.done += 1
            left = waiting[r.batch] - 1
            if left:
                waiting[r.batch] = left
            else:
                del waiting[r.batch]
            if ev.status != "rejected":
                self.done_calibrated += 1
                self.lanes += ev.lanes
            self._count(ev, r.candidate.src)
            self._check_internal(ev)

    def _check_internal(self, ev: Evaluation) -> None:
        """Stop the search when one internal error repeats: every further candidate would
        fail the same way, and a bug is not a search result."""
        if ev.status != "failed" or not ev.reason.startswith(INTERNAL):
            return
        reason = ev.reason[len(INTERNAL) :]
        n = self.internal[reason] = self.internal.get(reason, 0) + 1
        if n >= INTERNAL_ERROR_LIMIT:
            raise SearchAborted(
                f"{n} calibrations failed with the same internal error: {reason}. This is a "
                "bug in ndvm, not in the candidates: please report it to ndvm's issue tracker "
                "with the command line, `python -c 'import ndvm; print(ndvm.__version__)'` and the "
                "data's column names"
            )

    def _src(self, idx: int) -> str:
        pos = self.pos.get(idx)
        return "" if pos is None else self.recs[pos].candidate.src

    def _decide(self, res: Result) -> Result:
        ev = res.evaluation
        if ev.status == "rejected" or not res.skeleton:
            return res
        h = res.key or skeleton_hash(res.skeleton, self._src(res.idx))
        key = (self.scope(res.idx), h)
        if key in self.seen:
            dup = Evaluation("rejected", reason=f"duplicate: skeleton already evaluated: "
                             f"{res.skeleton}", wall=ev.wall)  # fmt: skip
            return Result(res.idx, res.skeleton, res.n_params, res.complexity, dup)
        self.seen.add(key)
        self._saw(res.idx, h)
        return res


_new = object.__new__


def _record(
    idx: int, batch: int, candidate: Any, skeleton: str, n_params: int, complexity: int,
    seed: int, evaluation: Evaluation | None, t_done: float,
) -> Record:  # fmt: skip
    """``Record(...)`` with every field given, set at once (the driver makes two or three
    per candidate; a frozen dataclass's ``__init__`` sets one field at a time)."""
    r = _new(Record)
    d = r.__dict__
    d["idx"], d["batch"], d["candidate"], d["skeleton"] = idx, batch, candidate, skeleton
    d["n_params"], d["complexity"], d["seed"] = n_params, complexity, seed
    d["evaluation"], d["t_done"] = evaluation, t_done
    return r


def _as_proposed(r: Record) -> Record:
    """``r`` as it was proposed: pending, unless it was rejected at proposal."""
    ev = r.evaluation
    if ev is None or ev.reason.startswith("proposal: "):
        return r
    return _record(r.idx, r.batch, r.candidate, "", 0, 0, r.seed, None, r.t_done)


def make_executor(
    task: Task, workers: int, limits: CalibLimits, kind: str = "auto"
) -> SerialExecutor | ProcessExecutor | Any:
    """``auto``: serial for one worker, else processes; ``ray`` needs ``ndvm[ray]``."""
    if kind == "ray":  # Ray actors run the same dispatch loop (scheduler.Pool)
        from ndvm.search.ray_executor import RayExecutor

        return RayExecutor(task, max(workers, 1), limits)
    if kind == "serial" or (kind == "auto" and workers <= 1):
        return SerialExecutor(task, limits)
    return ProcessExecutor(task, max(workers, 1), limits)
