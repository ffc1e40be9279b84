"""Errors raised by the reactive graph engine; all are ``NdvmError`` subclasses."""

from __future__ import annotations

from ndvm.errors import NdvmError


class GraphError(NdvmError):
    """Base class of reactive-graph errors (bad names, bad rewiring, misuse of patches)."""


class UnknownNodeError(GraphError):
    """A node name or id that the graph does not hold."""


class CycleError(GraphError):
    """A rule definition or graft that would close a cycle."""


class NotAnEdgeError(GraphError):
    """A graft on ``(u, w)`` where ``w`` does not read ``u``."""


class OverlappingPatchError(GraphError):
    """A cache restore that would overwrite, or ignore, a still-active patch."""


class StaleCacheError(GraphError):
    """A cache restore after the graph changed (leaf set, redefinition, graft) since capture."""


class EvaluationError(GraphError):
    """A node's rule raised while the graph was demanded."""


__all__ = [
    "CycleError",
    "EvaluationError",
    "GraphError",
    "NotAnEdgeError",
    "OverlappingPatchError",
    "StaleCacheError",
    "UnknownNodeError",
]
