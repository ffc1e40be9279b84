"""Named workloads (docs/tasks.md): ``ndvm.tasks.get("sr-damped")`` -> a ``Task`` record."""

from __future__ import annotations

import importlib

from ndvm.errors import NdvmError
from ndvm.tasks.base import CalibSpec as CalibSpec
from ndvm.tasks.base import SearchSpec as SearchSpec
from ndvm.tasks.base import Task as Task
from ndvm.tasks.base import TaskData as TaskData
from ndvm.tasks.base import TaskResult as TaskResult
from ndvm.tasks.base import load_candidate as load_candidate

# task name -> module defining ``TASK`` (imported on first use: some need optional extras)
MODULES = {
    "sr-damped": "ndvm.tasks.sr_damped",
    "kalman-80": "ndvm.tasks.kalman80",
    "nile": "ndvm.tasks.nile",
    "iterated-map": "ndvm.tasks.iterated_map",
    "enso-lim": "ndvm.tasks.enso_lim",
    "battery-knee": "ndvm.tasks.battery_knee",
    "battery-knee-early": "ndvm.tasks.battery_knee:TASK_EARLY",
}


def names() -> tuple[str, ...]:
    return tuple(MODULES)


def get(name: str) -> Task:
    """The task called ``name`` (see ``names()``)."""
    key = name.replace("_", "-")
    if key not in MODULES:
        raise NdvmError(f"unknown task {name!r} (known: {', '.join(MODULES)})")
    module, _, attr = MODULES[key].partition(":")
    return getattr(importlib.import_module(module), attr or "TASK")


__all__ = [
    "CalibSpec",
    "SearchSpec",
    "Task",
    "TaskData",
    "TaskResult",
    "get",
    "load_candidate",
    "names",
]
