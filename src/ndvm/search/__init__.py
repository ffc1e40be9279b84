"""Co-search: proposers, a validation funnel, a scheduler, persistence and the frontier.

``run_search(task, proposer, db, budget=Budget(...), workers=N)`` proposes batches of candidate
programs, validates them (``funnel``), calibrates the valid ones concurrently (``scheduler``),
and stores every result in SQLite (``store``); ``frontier.summarize`` reads it back.
``SymbolicRegressor`` wraps it all as a scikit-learn-style estimator (``estimator``).
"""

from ndvm.search.candidate import Candidate as Candidate
from ndvm.search.candidate import Evaluation as Evaluation
from ndvm.search.candidate import Record as Record
from ndvm.search.driver import run_search as run_search
from ndvm.search.estimator import SymbolicRegressor as SymbolicRegressor
from ndvm.search.evaluate import CalibLimits as CalibLimits
from ndvm.search.llm import LLMConfig as LLMConfig
from ndvm.search.state import Budget as Budget
from ndvm.search.state import Proposer as Proposer
from ndvm.search.state import SearchState as SearchState
from ndvm.tasks.base import Task as Task
from ndvm.tasks.grammar import Grammar as Grammar

__all__ = [
    "Budget",
    "CalibLimits",
    "Candidate",
    "Evaluation",
    "Grammar",
    "LLMConfig",
    "Proposer",
    "Record",
    "SearchState",
    "SymbolicRegressor",
    "Task",
    "make_proposer",
    "run_search",
]


def make_proposer(
    spec: str,
    task: str | Task,
    *,
    population: int = 24,
    cycles: int = 1,
    llm: LLMConfig | None = None,
) -> Proposer:
    """``replay:FILE`` (``cycles`` passes over the file; 0: endless), ``evolve`` or ``llm``
    (configured by ``llm``; ``None``: ``LLMConfig.resolve()`` from the environment)."""
    from ndvm import tasks

    the_task = tasks.get(task) if isinstance(task, str) else task
    if spec.startswith("replay:"):
        from ndvm.search.replay import ReplayProposer

        return ReplayProposer(spec.split(":", 1)[1], cycles=cycles, inputs=the_task.inputs)
    if the_task.search is None:
        raise ValueError(f"task {the_task.name!r} has no search grammar (use replay:FILE)")
    if spec == "evolve":
        from ndvm.search.evolve import EvolveProposer

        spec_ = the_task.search
        return EvolveProposer(spec_.grammar, spec_.seeds, population=population)
    if spec == "llm":
        from ndvm.search.llm import LLMProposer

        return LLMProposer(the_task, llm)
    raise ValueError(f"unknown proposer {spec!r} (replay:FILE, evolve or llm)")
