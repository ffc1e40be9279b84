"""Search state, budget and the proposer protocol."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ndvm.search.candidate import Candidate, Record, skeleton_hash


@dataclass(frozen=True)
class Budget:
    """When to stop: wall-clock seconds of search, proposals in total, batches in total, or
    (``until_success``) after the batch holding the first success."""

    seconds: float | None = None
    candidates: int | None = None
    batches: int | None = None
    until_success: bool = False

    def exhausted(self, state: SearchState, elapsed: float) -> bool:
        if self.until_success and any(
            r.evaluation is not None and r.evaluation.success for r in state.records
        ):
            return True
        if self.seconds is not None and elapsed >= self.seconds:
            return True
        if self.candidates is not None and len(state.records) >= self.candidates:
            return True
        return self.batches is not None and state.next_batch >= self.batches


@dataclass(frozen=True)
class SearchState:
    """Everything proposed so far, in index order; proposers read it, never mutate it."""

    task: str
    seed: int
    records: tuple[Record, ...] = ()
    seen: frozenset[str] = field(default_factory=frozenset)

    @staticmethod
    def of(
        task: str,
        seed: int,
        records: list[Record] | tuple[Record, ...],
        seen: frozenset[str] | None = None,
    ) -> SearchState:
        """The state of ``records``; ``seen`` (hashes of calibrated skeletons) if already known."""
        if seen is None:
            seen = frozenset(
                skeleton_hash(r.skeleton)
                for r in records
                if r.skeleton and r.status not in ("rejected", "pending")
            )
        return SearchState(task, seed, tuple(records), seen)

    @property
    def next_batch(self) -> int:
        return self.records[-1].batch + 1 if self.records else 0

    @property
    def evaluated(self) -> tuple[Record, ...]:
        return tuple(r for r in self.records if r.status in ("ok", "failed", "timeout"))

    @property
    def ok(self) -> tuple[Record, ...]:
        return tuple(r for r in self.records if r.status == "ok")

    def best(self, k: int = 5, key: str = "validation") -> list[Record]:
        """The ``k`` best calibrated candidates by validation loss (``key="validation"``; the
        training loss for a task without a validation split) or by training loss. Test
        (held-out) scores are never a key: they do not choose anything."""
        if key not in ("validation", "train"):
            raise ValueError(f"key must be 'validation' or 'train', got {key!r}")
        ok = [r for r in self.ok if r.evaluation is not None]
        if key == "train":
            ok.sort(key=lambda r: (_finite(r.evaluation.train_loss), r.complexity, r.idx))
        else:
            ok.sort(key=lambda r: (_finite(r.evaluation.selection_loss), r.complexity, r.idx))
        return ok[:k]

    def failures(self, k: int = 5) -> list[Record]:
        """The latest ``k`` rejected or failed candidates (feedback for an LLM)."""
        bad = [r for r in self.records if r.status in ("rejected", "failed", "timeout")]
        return bad[-k:]


def _finite(x: float) -> float:
    return x if math.isfinite(x) else math.inf


def derive_seed(seed: int, idx: int) -> int:
    """The calibration seed of candidate ``idx`` (independent of workers and scheduling)."""
    return int(np.random.SeedSequence([seed, idx]).generate_state(1)[0])


class Proposer(Protocol):
    """Proposes the next batch given the state; an empty list means it has nothing more."""

    name: str

    def propose(self, state: SearchState, n: int) -> list[Candidate]: ...
