"""Candidates and evaluation records; the candidate JSON Lines format of docs/tasks.md.

A candidate line is ``{"src": ..., "params": [...], "skeleton": ...}``; ``params`` and
``skeleton`` are optional on input (missing ``params``: every free variable other than the
task's inputs is a parameter; the skeleton is always recomputed by the compiler). A line may
carry a NumPy skeleton instead, ``{"numpy": "def equation(x, params): ..."}`` (docs/search.md,
"NumPy skeletons"): the replay proposer translates it, and a translated candidate's line has
both ``src`` and ``numpy``.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Candidate:
    """A proposed program: source text, optional parameter names, and where it came from.

    ``error`` is set by a proposer that could not produce a program (a malformed JSON line, an
    LLM reply without a code block, a timeout); such a candidate is recorded as rejected.
    ``key`` is ``skeleton_hash(skeleton)`` when the proposer computed both (``evolve`` does, to
    deduplicate what it proposes): the worker takes it instead of hashing again when the
    compiled program's skeleton is ``skeleton``. It is never read from or written to JSON.
    ``text``: what the proposer was given when ``src`` is a translation of it (a NumPy
    skeleton, ``ndvm.search.skeletons``), recorded beside the program; "" otherwise.
    """

    src: str
    params: tuple[str, ...] | None = None
    origin: str = ""
    skeleton: str = ""
    error: str = ""
    key: str = ""
    text: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"src": self.src}
        if self.params is not None:
            out["params"] = list(self.params)
        if self.skeleton:
            out["skeleton"] = self.skeleton
        if self.text:
            out["numpy"] = self.text
        return out

    @staticmethod
    def from_json(obj: dict[str, Any], origin: str = "") -> Candidate:
        if isinstance(obj, dict) and "src" not in obj and isinstance(obj.get("numpy"), str):
            return Candidate("", origin=origin, text=obj["numpy"])  # translated by the proposer
        if not isinstance(obj, dict) or not isinstance(obj.get("src"), str):
            raise ValueError("candidate line must be an object with a string 'src' or 'numpy'")
        text = obj.get("numpy")
        if text is not None and not isinstance(text, str):
            raise ValueError("candidate 'numpy' must be a string")
        params = obj.get("params")
        if params is not None:
            if not isinstance(params, list) or not all(isinstance(p, str) for p in params):
                raise ValueError("candidate 'params' must be a list of names")
            params = tuple(params)
        return Candidate(obj["src"], params, origin, str(obj.get("skeleton") or ""),
                         text=text or "")


@functools.lru_cache(maxsize=1 << 16)
def skeleton_hash(skeleton: str, src: str = "") -> str:
    """A short stable hash of a skeleton string (dedupe key), taken of its canonical form
    (``simplify.canonical_skeleton``): ``(* P x)``, ``(* x P)`` and ``(* (exp P) x)`` are
    one skeleton. With the program's source ``src`` its literals keep their values, so that
    ``(* a (expt x 2))`` and ``(* a (expt x 3))`` are two keys: every caller that has the
    source passes it (folding and deduplication never lose a program)."""
    from ndvm.search.simplify import canonical_skeleton

    text = canonical_skeleton(" ".join(skeleton.split()), src)
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def read_jsonl(path: str | Path) -> Iterator[tuple[int, Candidate | str]]:
    """Yield ``(line_number, Candidate)`` or ``(line_number, error message)`` per non-blank line."""
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield n, Candidate.from_json(json.loads(line), origin=f"{Path(path).name}:{n}")
            except (ValueError, json.JSONDecodeError) as exc:
                yield n, f"{exc}"


def write_jsonl(path: str | Path, candidates: Iterable[Candidate]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for c in candidates:
            fh.write(json.dumps(c.to_json()) + "\n")


@dataclass(frozen=True)
class Evaluation:
    """The outcome of one candidate: calibrated scores or the reason it failed.

    status: ``ok`` (calibrated, finite), ``failed`` (non-finite loss or error), ``timeout``
    (per-candidate limit hit), ``rejected`` (stopped by the funnel, never calibrated).
    train_loss: the best lane's training loss; validation_*: scores on the validation split
    (what every selection uses; NaN when the task has none); heldout_*: scores on the test
    (held-out) split, never used to choose anything; success: the task's criterion.
    """

    status: str
    reason: str = ""
    train_loss: float = float("nan")
    heldout_mse: float = float("nan")
    heldout_r2: float = float("nan")
    success: bool = False
    params: dict[str, float] = field(default_factory=dict)
    wall: float = 0.0
    steps: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    validation_mse: float = float("nan")
    validation_r2: float = float("nan")

    @staticmethod
    def scored(
        train_loss: float, heldout_mse: float, heldout_r2: float, success: bool,
        params: dict[str, float], wall: float, steps: int, extra: dict[str, Any],
        validation_mse: float, validation_r2: float,
    ) -> Evaluation:  # fmt: skip
        """``Evaluation("ok", "", ...)`` with every field given (a worker makes one per
        calibrated candidate): the same fields in the same order, set at once rather than one
        ``object.__setattr__`` at a time as a frozen dataclass's ``__init__`` does."""
        ev = object.__new__(Evaluation)
        ev.__dict__.update(
            status="ok", reason="", train_loss=train_loss, heldout_mse=heldout_mse,
            heldout_r2=heldout_r2, success=success, params=params, wall=wall, steps=steps,
            extra=extra, validation_mse=validation_mse, validation_r2=validation_r2,
        )  # fmt: skip
        return ev

    @property
    def lanes(self) -> int:
        """Start lanes this candidate calibrated (0 when rejected before calibration)."""
        if self.status == "rejected":
            return 0
        return max(1, len(self.extra.get("lane_losses", ())))

    @property
    def selection_loss(self) -> float:
        """The loss selection ranks by: validation MSE, else (no split) the training loss."""
        v = self.validation_mse
        return v if v == v else self.train_loss


@dataclass(frozen=True)
class Record:
    """One row of a search: the candidate, its index and seed, and its evaluation (if any)."""

    idx: int
    batch: int
    candidate: Candidate
    skeleton: str
    n_params: int
    complexity: int
    seed: int
    evaluation: Evaluation | None
    t_done: float = 0.0

    @property
    def status(self) -> str:
        return "pending" if self.evaluation is None else self.evaluation.status
