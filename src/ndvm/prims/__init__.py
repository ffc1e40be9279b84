"""The one primitive table (``PRIMS``): every primitive of the language, declared once."""

from __future__ import annotations

# Each family module registers its primitives into PRIMS on import.
from ndvm.prims import linalg as _linalg  # noqa: F401
from ndvm.prims import numeric as _numeric  # noqa: F401
from ndvm.prims import predicates as _predicates  # noqa: F401
from ndvm.prims import prelude as _prelude  # noqa: F401
from ndvm.prims import structural as _structural  # noqa: F401
from ndvm.prims import vectors as _vectors  # noqa: F401
from ndvm.prims.constants import CONSTANTS
from ndvm.prims.registry import Arity, Domain, ImplTable, Kind, Prim, Registry, Shape
from ndvm.prims.table import PRIMS

__all__ = [
    "CONSTANTS",
    "PRIMS",
    "Arity",
    "Domain",
    "ImplTable",
    "Kind",
    "Prim",
    "Registry",
    "Shape",
]
