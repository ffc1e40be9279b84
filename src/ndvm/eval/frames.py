"""The reference machine's frames and results: continuation tags, join states, outcomes."""

from __future__ import annotations

from typing import Any

import numpy as np

from ndvm.errors import NdvmError
from ndvm.eval.runtime import Runtime
from ndvm.lang import ir

K_IF, K_SEQ, K_OR, K_LET, K_LETREC, K_CALL, K_PRIM, K_ASSERT, K_JOIN = range(9)
SIMPLE = (ir.Const, ir.Local, ir.Param, ir.Input)


class Overrun:
    """Some (not all) running lanes passed the step limit: they fail, the others go on."""

    __slots__ = ("active", "ok", "bad")

    def __init__(self, active: np.ndarray, bad: np.ndarray) -> None:
        self.active = active
        self.ok = active & ~bad
        self.bad = bad


class JoinState:
    """A pending lane split: arms still to run, results delivered, lanes outstanding."""

    __slots__ = ("mask", "outstanding", "arms", "results")

    def __init__(self, mask: np.ndarray, arms: list[tuple[np.ndarray, tuple[Any, ...]]]) -> None:
        self.mask = mask
        self.outstanding = int(mask.sum())
        self.arms = arms
        self.results: list[tuple[np.ndarray, Any]] = []


class Outcome:
    """Final lane groups ``(mask, value)`` and lane errors ``(mask, error)``."""

    __slots__ = ("groups", "errors", "runtime", "steps")

    def __init__(self, runtime: Runtime) -> None:
        self.groups: list[tuple[np.ndarray, Any]] = []
        self.errors: list[tuple[np.ndarray, NdvmError]] = []
        self.runtime = runtime
        self.steps = 0
