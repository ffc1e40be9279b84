"""Per-lane step accounting and the deadline of one evaluation (the reference machine's).

Every machine step is charged to the lanes active when it ran, so ``Limits.max_steps`` bounds
the steps of each lane's own path: a lane that runs away fails alone with
``StepLimitExceeded``, exactly as it would in a batch of one, and the other lanes finish. The
deadline is wall-clock for the whole evaluation: once it has passed, every lane that has not
finished fails with ``DeadlineExceeded``; finished lanes keep their values.
"""

from __future__ import annotations

import time

import numpy as np

from ndvm.errors import DeadlineExceeded, DepthLimitExceeded, LimitExceeded, StepLimitExceeded
from ndvm.eval.limits import Limits


class LaneClock:
    __slots__ = ("limits", "lanes", "base", "segments", "charged", "t0", "expired")

    def __init__(self, limits: Limits, B: int, Ng: int) -> None:
        self.limits = limits
        self.lanes = np.zeros((B, Ng), dtype=np.int64)  # steps of each lane beyond ``base``
        self.base = 0  # steps charged to every lane
        self.segments: list[tuple[np.ndarray, int]] = []  # (mask, steps) not yet in ``lanes``
        self.charged = 0  # machine steps already charged to some lanes
        self.t0 = time.monotonic()
        self.expired = False

    def charge(self, steps: int, mask: np.ndarray | None) -> None:
        """Charge the steps run since the last charge to the lanes of ``mask`` (None: all).

        O(1): masked charges are kept as segments and summed into ``lanes`` in one
        vectorized operation when the counts are needed (or 64 have accumulated)."""
        d = steps - self.charged
        if d:
            self.charged = steps
            if mask is None:
                self.base += d
            else:
                self.segments.append((mask, d))
                if len(self.segments) >= 64:
                    self._flush()

    def _flush(self) -> None:
        if self.segments:
            masks = np.stack([m for m, _ in self.segments])
            steps = np.array([d for _, d in self.segments], dtype=np.int64)
            self.lanes += (masks * steps[:, None, None]).sum(axis=0)
            self.segments.clear()

    def check(self, steps: int, mask: np.ndarray | None, depth: int) -> LimitExceeded | None:
        """The limit error of the running lanes, or None; lanes over the step limit are
        reported through ``over`` (a subset may fail while the rest continue)."""
        lim = self.limits
        if depth > lim.max_depth:
            return DepthLimitExceeded(
                f"control stack deeper than {lim.max_depth} frames (non-tail recursion too deep?)"
            )
        if self.expired or (lim.deadline is not None and time.monotonic() - self.t0 > lim.deadline):
            self.expired = True
            return DeadlineExceeded(f"evaluation exceeded its deadline of {lim.deadline} s")
        self.charge(steps, mask)
        return None

    def over(self, mask: np.ndarray | None) -> np.ndarray | None:
        """The active lanes past ``max_steps`` (a (B, Ng) mask), or None when there are none."""
        self._flush()
        bad = self.lanes > self.limits.max_steps - self.base
        if mask is not None:
            bad &= mask
        return bad if bad.any() else None

    def step_error(self) -> StepLimitExceeded:
        return StepLimitExceeded(f"step limit of {self.limits.max_steps} exceeded")
