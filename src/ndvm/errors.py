"""The one ndvm error hierarchy: every failure the library reports is an ``NdvmError``.

Errors that come from source text carry ``line`` and ``column`` (1-based); runtime errors
also carry ``lanes``, the parameter/data lanes that failed (``None`` when all lanes failed or
the error is not lane-specific).
"""

from __future__ import annotations

from collections.abc import Sequence


class NdvmError(Exception):
    """Base class of every ndvm error."""

    kind = "NdvmError"

    def __init__(
        self,
        message: str,
        line: int | None = None,
        column: int | None = None,
        *,
        lanes: Sequence[int] | None = None,
        source_name: str | None = None,
    ) -> None:
        self.message = message
        self.line = line
        self.column = column
        self.lanes = None if lanes is None else tuple(int(x) for x in lanes)
        self.source_name = source_name
        super().__init__(self._render())

    def _render(self) -> str:
        where = ""
        if self.line is not None:
            where = f"{self.line}:{self.column}: "
        return f"{where}{self.message}"

    def located(self, default: str = "<program>") -> str:
        """``file:line:col: Kind: message`` as printed by the CLI."""
        name = self.source_name or default
        if self.line is None:
            return f"{name}: {type(self).__name__}: {self.message}"
        return f"{name}:{self.line}:{self.column}: {type(self).__name__}: {self.message}"


class ReadError(NdvmError):
    """Malformed source text: unbalanced parentheses, bad tokens, an empty program."""


class CompileError(NdvmError):
    """A program that reads but cannot be compiled: unbound names, bad forms, bad arity."""


class UnsupportedForm(CompileError):
    """A form outside the language: mutation (the heap is write-once), call/cc, dynamic-wind."""


class ProgramError(NdvmError):
    """A runtime error raised by the program: type errors, call arity, ``(error ...)``."""


class ShapeError(ProgramError):
    """Vector/matrix shapes that do not fit the primitive they are passed to."""


class LimitExceeded(NdvmError):
    """An evaluation limit (steps, heap cells, recursion depth, wall time) was reached."""


class StepLimitExceeded(LimitExceeded):
    """More evaluation steps than ``Limits.max_steps``."""


class HeapLimitExceeded(LimitExceeded):
    """More heap cells than ``Limits.max_heap``."""


class DepthLimitExceeded(LimitExceeded):
    """Control stack deeper than ``Limits.max_depth``."""


class DeadlineExceeded(LimitExceeded):
    """Wall-clock deadline ``Limits.deadline`` passed."""


class ResultTooLarge(NdvmError, ValueError):
    """A result too big to print or to convert as asked (more elements than the limit given,
    shared parts counted once per path when expanded)."""


class BackendUnsupported(NdvmError):
    """A backend cannot run this program (a feature it does not implement yet)."""


class MissingExtra(NdvmError, ImportError):
    """A feature needs an optional extra that is not installed (``pip install 'ndvm[NAME]'``)."""


class ExportUnsupported(NdvmError):
    """A program outside ``ndvm.export``'s subset; ``line``/``column`` locate the form."""


class NativeError(NdvmError):
    """An internal failure reported by the native core (a bug: please report it)."""


class ConfigError(NdvmError, ValueError):
    """A missing or invalid setting (a command-line option or its environment variable)."""


class RequestFailed(NdvmError):
    """One request to an external endpoint (an LLM) failed after its retries: a transport error,
    a timeout, an HTTP error status or a malformed reply. The message is the reason."""


class SearchAborted(NdvmError):
    """A search stopped because its calibrations keep failing with the same internal error (a
    bug in ndvm, not in the candidates); the message carries the reason and how to report it.
    Results committed before the stop stay in the search's database."""


class ProposerFailed(NdvmError):
    """A proposer cannot go on (its endpoint failed too many times in a row); the search stops
    and the message carries the last reason."""


class WorkersUnavailable(NdvmError):
    """No search worker can run: none of the Ray executor's actors started (each needs a free
    CPU in the cluster) or they fail to load the task; the message says which."""


class FreeNameWarning(UserWarning):
    """Free names of a program were taken as parameters (no ``params`` header or
    ``params=``); ``ndvm.compile(..., free_params=True)`` accepts them silently."""


__all__ = [
    "BackendUnsupported",
    "CompileError",
    "ConfigError",
    "DeadlineExceeded",
    "DepthLimitExceeded",
    "ExportUnsupported",
    "FreeNameWarning",
    "HeapLimitExceeded",
    "LimitExceeded",
    "MissingExtra",
    "NativeError",
    "NdvmError",
    "ProgramError",
    "ProposerFailed",
    "ReadError",
    "SearchAborted",
    "RequestFailed",
    "ResultTooLarge",
    "ShapeError",
    "StepLimitExceeded",
    "UnsupportedForm",
]
