"""The evolutionary proposer's parents: islands of the fittest, and the best of each complexity.

Batch ``g`` belongs to island ``g % islands``; a calibrated record joins the island of its
batch. Each island keeps its ``size`` fittest records (selection loss times ``1 + parsimony *
complexity``), so that islands evolve apart and a lineage that leads one island does not fill
the others. All islands share the best record of every complexity (the niches: simple
structures keep breeding next to complex ones) and the fittest over all islands (the
migrants). Records are read once, in order; a record still pending is read again later.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ndvm.lang.datum import Datum
from ndvm.lang.reader import read
from ndvm.search.state import SearchState


@dataclass(frozen=True)
class Member:
    fit: float  # selection loss with the size penalty (tournament order)
    idx: int
    datum: Datum
    complexity: int
    loss: float  # selection loss (niche order)


@dataclass(frozen=True)
class Pool:
    ranked: list[Datum]  # the island's fittest, best first
    niches: list[list[Datum]]  # the best of each complexity over all islands, by complexity
    migrants: list[Datum]  # the fittest over all islands, best first

    def __len__(self) -> int:
        return len(self.ranked) or len(self.migrants)


class Population:
    """Parents for each batch, kept incrementally from a search's records."""

    def __init__(self, size: int, parsimony: float, islands: int = 1, per_niche: int = 1) -> None:
        if min(size, islands, per_niche) < 1:
            raise ValueError(f"population, islands and per_niche must be >= 1 "
                             f"(got {size}, {islands}, {per_niche})")  # fmt: skip
        self.size, self.parsimony, self.islands = size, parsimony, islands
        self.per_niche = per_niche
        self._of: tuple[str, int] | None = None  # the search these pools belong to
        self._reset()

    def _reset(self) -> None:
        self._best: list[dict[int, Member]] = [{} for _ in range(self.islands)]
        self._niche: dict[int, list[Member]] = {}  # complexity -> its best, best first
        self._scanned = 0  # records already read

    def pool(self, state: SearchState) -> Pool:
        """The parents for batch ``state.next_batch`` (a state with fewer records than read
        before, or another search, starts over)."""
        if self._scanned > len(state.records) or self._of != (state.task, state.seed):
            self._reset()
            self._of = (state.task, state.seed)
        self._read(state)
        island = self._best[state.next_batch % self.islands]
        everyone = [m for best in self._best for m in best.values()]
        return Pool(
            [m.datum for m in _ranked(island.values())],
            [[m.datum for m in self._niche[c]] for c in sorted(self._niche)],
            [m.datum for m in _ranked(everyone)[: self.size]],
        )

    def _read(self, state: SearchState) -> None:
        recs, n = state.records, len(state.records)
        touched: set[int] = set()
        for r in recs[self._scanned :]:
            ev = r.evaluation
            if r.status != "ok" or ev is None or not math.isfinite(ev.selection_loss):
                continue
            forms = read(r.candidate.src)
            if len(forms) != 1:
                continue
            loss = ev.selection_loss
            m = Member(loss * (1.0 + self.parsimony * r.complexity), r.idx, forms[0],
                       r.complexity, loss)  # fmt: skip
            k = r.batch % self.islands
            self._best[k][r.idx] = m
            touched.add(k)
            self._enter_niche(m)
        for k in touched:
            self._best[k] = {m.idx: m for m in _ranked(self._best[k].values())[: self.size]}
        # records still pending may be scored later: read again from the first pending one
        self._scanned = next((i for i in range(self._scanned, n) if recs[i].status == "pending"), n)

    def _enter_niche(self, m: Member) -> None:
        best = [o for o in self._niche.get(m.complexity, []) if o.idx != m.idx] + [m]
        best.sort(key=lambda o: (o.loss, o.idx))
        self._niche[m.complexity] = best[: self.per_niche]


def _ranked(members: object) -> list[Member]:
    return sorted(members, key=lambda m: (m.fit, m.idx))  # type: ignore[attr-defined]
