"""A task whose scoring kills its worker process on chosen candidates (executor recovery tests).

Module level (picklable): worker processes import it by name.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from ndvm.tasks import sr_damped
from ndvm.tasks.base import Task

CRASH_ONCE = "(* a (sin x))"  # kills the first worker that scores it, then scores normally
CRASH_ALWAYS = "(* a (cos x))"  # kills every worker that scores it


def crash_score(cal: Any, data: Any, marker: str) -> dict[str, float]:
    src = cal.program.source.strip()
    if src == CRASH_ALWAYS:
        os._exit(3)
    if src == CRASH_ONCE and not Path(marker).exists():
        Path(marker).write_text("crashed once")
        os._exit(3)
    return sr_damped.score(cal, data)


def scored(name: str, description: str, score: Any) -> Task:
    """sr-damped under another name, scored by ``score`` (the executor tests' tasks)."""
    base = sr_damped.TASK
    return Task(name=name, description=description, inputs=base.inputs,
                build_data=base.build_data, calib=base.calib, score=score, success=base.success,
                search=base.search)  # fmt: skip


def task(marker: Path) -> Task:
    return scored("crashy", "sr-damped whose scoring kills its worker on chosen candidates",
                  functools.partial(crash_score, marker=str(marker)))  # fmt: skip
