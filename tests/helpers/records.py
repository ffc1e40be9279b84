"""Calibrated search records of given programs on a task, for tests of selection: each
source run as a search would run it (``run_job``), index ``i`` its position."""

from __future__ import annotations

from ndvm.search.candidate import Candidate, Record
from ndvm.search.evaluate import CalibLimits, Job, run_job
from ndvm.tasks.base import Task


def record_key(records: list[Record]) -> list[tuple]:
    """What must agree between two runs of one search: per record its index, program, seed,
    status, skeleton, reason, test R², fitted values and every start's final loss."""
    out = []
    for r in records:
        ev = r.evaluation
        out.append(
            (
                r.idx,
                r.candidate.src,
                r.seed,
                r.status,
                r.skeleton,
                None if ev is None else ev.reason,
                None if ev is None else repr(ev.heldout_r2),
                None if ev is None else ev.params,
                None if ev is None else repr(ev.extra.get("lane_losses")),
            )
        )
    return out


def calibrated(task: Task, srcs: list[str], starts: int = 4) -> list[Record]:
    """One record per source of ``srcs`` (batch 0, seed = index), calibrated with ``starts``."""
    out = []
    for i, src in enumerate(srcs):
        res = run_job(task, Job(i, Candidate(src), i), CalibLimits(starts=starts), set())
        out.append(Record(i, 0, Candidate(src), res.skeleton, res.n_params, res.complexity, i,
                          res.evaluation))  # fmt: skip
    return out
