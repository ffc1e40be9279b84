"""Evaluation limits shared by every backend."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-evaluation limits; exceeding one raises ``LimitExceeded`` (never a crash).

    max_steps: evaluation steps (one per IR node visited or continuation resumed).
    max_heap: heap cells allocated (pairs, closures, vectors, environment frames).
    max_depth: control-stack depth (non-tail nesting, e.g. non-tail recursion).
    deadline: wall-clock seconds for one evaluation, or None.
    """

    max_steps: int = 10_000_000
    max_heap: int = 20_000_000
    max_depth: int = 200_000
    deadline: float | None = None

    def __post_init__(self) -> None:
        for name in ("max_steps", "max_heap", "max_depth"):
            if int(getattr(self, name)) <= 0:
                raise ValueError(f"Limits.{name} must be positive")
        if self.deadline is not None and not self.deadline > 0:
            raise ValueError("Limits.deadline must be positive seconds or None")
