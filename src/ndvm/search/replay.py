"""Replay proposer: candidates from JSON Lines files (docs/tasks.md format), in file order.

The position in the file is the number of records already in the state, so a resumed
search continues where it stopped. Malformed lines become rejected candidates. With
``cycles`` > 1 (0: until the budget is spent) the file is replayed again and again, as the
reference harness restarts its corpus; each cycle is its own dedupe scope, so a skeleton seen
in an earlier cycle is calibrated again, with the fresh seeds of its new record index.
"""

from __future__ import annotations

from pathlib import Path

from ndvm.search.candidate import Candidate, read_jsonl
from ndvm.search.state import SearchState


class ReplayProposer:
    def __init__(self, path: str | Path, cycles: int = 1) -> None:
        if cycles < 0:
            raise ValueError(f"cycles must be >= 0 (0: until the budget is spent), got {cycles}")
        self.path = Path(path)
        self.cycles = cycles
        self.name = f"replay:{self.path}" + (f" x{cycles}" if cycles != 1 else "")
        self.items: list[Candidate] = []
        for n, item in read_jsonl(self.path):
            if isinstance(item, str):
                origin = f"{self.path.name}:{n}"
                self.items.append(Candidate("", origin=origin, error=f"bad line: {item}"))
            else:
                self.items.append(item)

    def scope(self, idx: int) -> int:
        """The cycle record ``idx`` belongs to (its dedupe scope)."""
        return idx // max(len(self.items), 1)

    def propose(self, state: SearchState, n: int) -> list[Candidate]:
        start, total = len(state.records), len(self.items)
        if total == 0:
            return []
        end = start + n if self.cycles == 0 else min(start + n, self.cycles * total)
        return [self.items[i % total] for i in range(start, end)]
