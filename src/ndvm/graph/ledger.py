"""Exact cost accounting: counters of invalidated, recomputed and copied rule nodes.

Leaves (inputs, parameters) are never counted: they are never invalid and never recomputed.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class SiteRecord:
    """One intervention of a sweep: its site, cone size and what it cost."""

    site: str
    cone: int
    recomputed: int
    copied: int
    seconds: float


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of the event log: ``kind`` is ``invalidate``, ``execute`` or ``copy``."""

    kind: str
    node: str


@dataclass(slots=True)
class Ledger:
    """Running counters; ``events`` is ``None`` unless the event log is enabled."""

    invalidated: int = 0
    recomputed: int = 0
    copied: int = 0
    demands: int = 0
    sites: list[SiteRecord] = field(default_factory=list)
    events: list[Event] | None = None

    def reset(self) -> None:
        """Zero every counter and clear the site records (and the log, keeping it enabled)."""
        self.invalidated = self.recomputed = self.copied = self.demands = 0
        self.sites.clear()
        if self.events is not None:
            self.events.clear()

    def enable_events(self, on: bool = True) -> None:
        """Start (or stop) recording ``Event`` entries."""
        self.events = [] if on else None

    def snapshot(self) -> dict[str, int]:
        """The counters as a plain dict (for reports and tests)."""
        return {
            "invalidated": self.invalidated,
            "recomputed": self.recomputed,
            "copied": self.copied,
            "demands": self.demands,
        }


@dataclass(frozen=True, slots=True)
class Report:
    """What one demand did: the recomputed node ids in execution order, and its time."""

    recomputed: tuple[int, ...]
    seconds: float

    @property
    def count(self) -> int:
        return len(self.recomputed)
