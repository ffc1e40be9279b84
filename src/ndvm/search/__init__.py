"""Co-search: proposers, a validation funnel, a scheduler, persistence and the frontier.

``run_search(task, proposer, db, budget=Budget(...), workers=N)`` proposes batches of candidate
programs, validates them (``funnel``), calibrates the valid ones concurrently (``scheduler``),
and stores every result in SQLite (``store``); ``frontier.summarize`` reads it back.
"""

from ndvm.search.candidate import Candidate as Candidate
from ndvm.search.candidate import Evaluation as Evaluation
from ndvm.search.candidate import Record as Record
from ndvm.search.driver import run_search as run_search
from ndvm.search.grammar import Grammar as Grammar
from ndvm.search.state import Budget as Budget
from ndvm.search.state import Proposer as Proposer
from ndvm.search.state import SearchState as SearchState

__all__ = [
    "Budget",
    "Candidate",
    "Evaluation",
    "Grammar",
    "Proposer",
    "Record",
    "SearchState",
    "make_proposer",
    "run_search",
]


def make_proposer(spec: str, task: str, *, population: int = 24) -> Proposer:
    """``replay:FILE``, ``evolve`` or ``llm`` for ``task``."""
    from ndvm.search.problems import get

    problem = get(task)
    if spec.startswith("replay:"):
        from ndvm.search.replay import ReplayProposer

        return ReplayProposer(spec.split(":", 1)[1])
    if spec == "evolve":
        from ndvm.search.evolve import EvolveProposer

        return EvolveProposer(problem.grammar, problem.seeds, population=population)
    if spec == "llm":
        from ndvm.search.llm import LLMProposer

        return LLMProposer(problem)
    raise ValueError(f"unknown proposer {spec!r} (replay:FILE, evolve or llm)")
