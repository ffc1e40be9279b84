"""Calibrated search records of given programs on a task, for tests of selection: each
source run as a search would run it (``run_job``), index ``i`` its position."""

from __future__ import annotations

from ndvm.search.candidate import Candidate, Record
from ndvm.search.evaluate import CalibLimits, Job, run_job
from ndvm.tasks.base import Task


def calibrated(task: Task, srcs: list[str], starts: int = 4) -> list[Record]:
    """One record per source of ``srcs`` (batch 0, seed = index), calibrated with ``starts``."""
    out = []
    for i, src in enumerate(srcs):
        res = run_job(task, Job(i, Candidate(src), i), CalibLimits(starts=starts), set())
        out.append(Record(i, 0, Candidate(src), res.skeleton, res.n_params, res.complexity, i,
                          res.evaluation))  # fmt: skip
    return out
