"""Replay proposer: candidates from JSON Lines files (docs/tasks.md format), in file order.

A file ending in ``.py`` is a corpus of NumPy skeletons (``def equation(...)`` after
``def equation(...)``, helpers before the one that uses them: ``skeletons.split_corpus``), and a
JSON line may carry one as ``{"numpy": ...}``; each is translated (``ndvm.from_numpy``) against
the task's inputs, and one that does not translate is a rejected candidate with the reason.

The position in the file is the number of records already in the state, so a resumed
search continues where it stopped. Malformed lines become rejected candidates. With
``cycles`` > 1 (0: until the budget is spent) the file is replayed again and again, as the
reference harness restarts its corpus; each cycle is its own dedupe scope, so a skeleton seen
in an earlier cycle is calibrated again, with the fresh seeds of its new record index.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ndvm.search.candidate import Candidate, read_jsonl
from ndvm.search.skeletons import candidate_from_numpy, read_corpus
from ndvm.search.state import SearchState


class ReplayProposer:
    def __init__(
        self, path: str | Path, cycles: int = 1, inputs: Sequence[str] | None = None
    ) -> None:
        if cycles < 0:
            raise ValueError(f"cycles must be >= 0 (0: until the budget is spent), got {cycles}")
        self.path = Path(path)
        self.cycles = cycles
        self.name = f"replay:{self.path}" + (f" x{cycles}" if cycles != 1 else "")
        self.items: list[Candidate] = []
        if self.path.suffix == ".py":
            self.items = read_corpus(self.path, inputs)
            return
        for n, item in read_jsonl(self.path):
            if isinstance(item, str):
                origin = f"{self.path.name}:{n}"
                self.items.append(Candidate("", origin=origin, error=f"bad line: {item}"))
            elif item.text and not item.src:
                self.items.append(candidate_from_numpy(item.text, item.origin, inputs))
            else:
                self.items.append(item)

    def scope(self, idx: int) -> int:
        """The cycle record ``idx`` belongs to (its dedupe scope)."""
        return idx // (len(self.items) or 1)

    def propose(self, state: SearchState, n: int) -> list[Candidate]:
        start, total = len(state.records), len(self.items)
        if total == 0:
            return []
        end = start + n if self.cycles == 0 else min(start + n, self.cycles * total)
        return [self.items[i % total] for i in range(start, end)]
