"""The shipped example programs compile and stay identical to the task programs they show."""

from __future__ import annotations

from pathlib import Path

import pytest

import ndvm
from ndvm.tasks.kalman80 import PROGRAM as KALMAN80
from ndvm.tasks.nile import PROGRAM as NILE

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_examples_kalman80_matches_task_program() -> None:
    assert (EXAMPLES / "kalman80.scm").read_text() == KALMAN80


def test_examples_nile_matches_task_program() -> None:
    assert (EXAMPLES / "nile_local_level.scm").read_text() == NILE


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.scm")), ids=lambda p: p.name)
def test_examples_compile(path: Path) -> None:
    prog = ndvm.compile(path.read_text(), inputs=("x", "Y", "y"), params=None)
    assert prog.params
