"""Search state, budget and the proposer protocol."""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Protocol, overload

from ndvm.search.candidate import Candidate, Record, skeleton_hash


@dataclass(frozen=True)
class Budget:
    """When to stop: wall-clock seconds of search, proposals in total, batches in total, or
    at the first decided record (in index order) that ``reached`` accepts: a success
    (``until_success``) or one for which ``until(record)`` is true. The driver asks
    ``reached`` once per decided record and stops there: nothing more is scheduled, the
    calibrations still running are dropped and the records after it stay pending."""

    seconds: float | None = None
    candidates: int | None = None
    batches: int | None = None
    until_success: bool = False
    until: Callable[[Record], bool] | None = None

    def exhausted(self, state: SearchState, elapsed: float) -> bool:
        if self.until_success and state.has_success:
            return True
        if self.seconds is not None and elapsed >= self.seconds:
            return True
        if self.candidates is not None and len(state.records) >= self.candidates:
            return True
        return self.batches is not None and state.next_batch >= self.batches

    def reached(self, record: Record) -> bool:
        """Whether the decided ``record`` ends the search (``until_success``, ``until``)."""
        ev = record.evaluation
        if ev is None:
            return False
        if self.until_success and ev.success:
            return True
        return self.until is not None and bool(self.until(record))


@dataclass(frozen=True)
class SearchState:
    """Everything proposed so far, in index order; proposers read it, never mutate it.

    ``records`` and ``seen`` are snapshots: what a proposer keeps of them does not change
    later. ``successes``, when the driver knows it, is how many of ``records`` are successes.
    """

    task: str
    seed: int
    records: Sequence[Record] = ()
    seen: Set[str] = field(default_factory=frozenset)
    successes: int | None = None

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
                skeleton_hash(r.skeleton, r.candidate.src)
                for r in records
                if r.skeleton and r.status not in ("rejected", "pending")
            )
        return SearchState(task, seed, tuple(records), seen)

    @property
    def has_success(self) -> bool:
        if self.successes is not None:
            return self.successes > 0
        return any(r.evaluation is not None and r.evaluation.success for r in self.records)

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


class RecordsView(Sequence[Record]):
    """The first ``n`` records of a list that only grows and changes at positions ``>= k``,
    with ``tail`` in place of positions ``k`` to ``n``: a snapshot without a copy of the
    (final) first ``k``."""

    __slots__ = ("_base", "_k", "_tail")

    def __init__(self, base: list[Record], k: int, tail: list[Record]) -> None:
        self._base, self._k, self._tail = base, k, tail

    def __len__(self) -> int:
        return self._k + len(self._tail)

    @overload
    def __getitem__(self, i: int) -> Record: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[Record, ...]: ...
    def __getitem__(self, i: int | slice) -> Record | tuple[Record, ...]:
        if isinstance(i, slice):
            a, b, step = i.indices(len(self))
            if step != 1:
                return tuple(self)[i]
            head = self._base[a : min(b, self._k)] if a < self._k else []
            return (*head, *self._tail[max(a - self._k, 0) : max(b - self._k, 0)])
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("record index out of range")
        return self._base[i] if i < self._k else self._tail[i - self._k]

    def __iter__(self) -> Iterator[Record]:
        return itertools.chain(itertools.islice(self._base, self._k), self._tail)

    def __eq__(self, other: object) -> bool:  # equal to the tuple it stands for
        if isinstance(other, (tuple, RecordsView)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"RecordsView({len(self)} records)"


class SeenView(Set[str]):
    """The hashes whose first record (``first``: hash -> smallest index) comes before
    ``cutoff``; ``first`` only gains entries at indices ``>= cutoff``, so this is a snapshot.
    Membership is one lookup; iterating it walks ``first``."""

    __slots__ = ("_first", "_cutoff")

    def __init__(self, first: Mapping[str, int], cutoff: int) -> None:
        self._first, self._cutoff = first, cutoff

    def __contains__(self, h: object) -> bool:
        return self._first.get(h, self._cutoff) < self._cutoff  # type: ignore[call-overload]

    def __iter__(self) -> Iterator[str]:
        return (h for h, i in list(self._first.items()) if i < self._cutoff)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __hash__(self) -> int:
        return hash(frozenset(self))


def derive_seed(seed: int, idx: int) -> int:
    """The calibration seed of candidate ``idx`` (independent of workers and scheduling): 32
    bits of BLAKE2b over both numbers (a tenth of ``SeedSequence``'s cost, per proposal)."""
    digest = hashlib.blake2b(b"%d:%d" % (seed, idx), digest_size=4).digest()
    return int.from_bytes(digest, "little")


class Proposer(Protocol):
    """Proposes the next batch given the state; an empty list means it has nothing more.

    Optional hooks the driver calls when a proposer has them: ``start(end)`` as the search
    begins (``end``: the ``time.monotonic()`` instant its time budget ends, or ``None``) and
    ``close()`` when it ends (the LLM proposer stops its requests in flight)."""

    name: str

    def propose(self, state: SearchState, n: int) -> list[Candidate]: ...
