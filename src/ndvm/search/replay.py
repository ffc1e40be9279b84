"""Replay proposer: candidates from JSON Lines files (TASKS.md format), in file order.

The position in the file is the number of records already in the state, so a resumed
search continues where it stopped. Malformed lines become rejected candidates.
"""

from __future__ import annotations

from pathlib import Path

from ndvm.search.candidate import Candidate, read_jsonl
from ndvm.search.state import SearchState


class ReplayProposer:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.name = f"replay:{self.path}"
        self.items: list[Candidate] = []
        for n, item in read_jsonl(self.path):
            if isinstance(item, str):
                origin = f"{self.path.name}:{n}"
                self.items.append(Candidate("", origin=origin, error=f"bad line: {item}"))
            else:
                self.items.append(item)

    def propose(self, state: SearchState, n: int) -> list[Candidate]:
        start = len(state.records)
        return self.items[start : start + n]
