"""Limits of compilation and evaluation, shared by the front end and every backend."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Limits:
    """Limits of one compilation and of each evaluation; never a crash or a hang.

    Evaluation (a ``LimitExceeded`` subclass; steps, depth and the deadline fail only the
    lanes still running, the heap stops the whole evaluation):
    max_steps: evaluation steps of each lane (one per IR node visited or continuation
        resumed, plus the work of structural primitives such as ``equal?``), counted for the
        lanes that ran them. The native core checks a lane's count at check points and
        when the lane ends (with a value or its own error), so a lane that ends past the limit
        fails with ``StepLimitExceeded`` alone and in any batch alike.
    max_heap: heap cells allocated (pairs, closures, vectors, environment frames); exporting a
        structural result to Python may use as many cells again.
    max_depth: control-stack depth (non-tail nesting, e.g. non-tail recursion).
    deadline: wall-clock seconds for one evaluation (and its result export), or None.

    Compilation (``ndvm.compile``; a ``ReadError`` / ``CompileError`` with a position):
    max_source_chars: characters of source text.
    max_forms: forms read (atoms, strings and lists, quoted data included).
    """

    max_steps: int = 10_000_000
    max_heap: int = 20_000_000
    max_depth: int = 200_000
    deadline: float | None = None
    max_source_chars: int = 5_000_000
    max_forms: int = 50_000

    def __post_init__(self) -> None:
        for name in ("max_steps", "max_heap", "max_depth", "max_source_chars", "max_forms"):
            if int(getattr(self, name)) <= 0:
                raise ValueError(f"Limits.{name} must be positive")
        if self.deadline is not None and not self.deadline > 0:
            raise ValueError("Limits.deadline must be positive seconds or None")
