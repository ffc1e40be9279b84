"""sr-damped whose scoring logs every calibration and can be held on one Ray node (the
multi-node test: a node removed while one of its jobs runs).

Module level (picklable): Ray workers import it by name. Files in ``box``:

- ``calibrations``: one line per finished calibration, ``node id <tab> job key``; the key is
  the program and a digest of every start's initial loss, which the job's seed fixes (two jobs
  of one program differ in it);
- ``hold``: a node id; a calibration on that node writes ``caught`` and then waits (its node
  is about to be removed) instead of finishing, and one on any other node takes ``SLOW``
  seconds more (the other workers still have work in flight when the node goes).
"""

from __future__ import annotations

import functools
import hashlib
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from tests.search.crashy import scored

from ndvm.tasks import sr_damped
from ndvm.tasks.base import Task

HOLD_SECONDS = 120.0  # how long a held calibration waits for its node to go
SLOW = 0.1  # seconds added to a calibration elsewhere while a node is held


def node_id() -> str:
    """This process's Ray node id ("" outside Ray)."""
    import ray

    return ray.get_runtime_context().get_node_id() if ray.is_initialized() else ""


def held_score(cal: Any, data: Any, box: str) -> dict[str, float]:
    node = node_id()
    try:
        held = Path(box, "hold").read_text() if node else ""
    except OSError:  # none, or just removed
        held = ""
    if held and held == node:
        Path(box, "caught").write_text(node)
        end = time.monotonic() + HOLD_SECONDS
        while time.monotonic() < end:
            time.sleep(0.05)
    elif held:
        time.sleep(SLOW)
    out = sr_damped.score(cal, data)
    first = np.ascontiguousarray(np.asarray(cal.history[0], dtype=np.float64))
    key = cal.program.source.strip() + " " + hashlib.sha256(first.tobytes()).hexdigest()[:16]
    with open(Path(box, "calibrations"), "a") as f:
        f.write(f"{node}\t{key}\n")
    return out


def calibrations(box: Path) -> list[tuple[str, str]]:
    """(node id, job key) of every calibration logged so far, in order."""
    path = box / "calibrations"
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    return [tuple(line.split("\t", 1)) for line in lines if "\t" in line]  # type: ignore[misc]


def task(box: Path) -> Task:
    return scored("held", "sr-damped whose scoring logs its calibrations, held on one node",
                  functools.partial(held_score, box=str(box)))  # fmt: skip


def no_data() -> Any:
    raise RuntimeError("these data live nowhere")


def unloadable() -> Task:
    """A task whose data cannot be built (a worker cannot load it)."""
    return replace(scored("unloadable", "sr-damped without its data", sr_damped.score),
                   build_data=no_data)  # fmt: skip
