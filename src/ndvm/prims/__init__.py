"""The one primitive table (``PRIMS``): every primitive of the language, declared once."""

from __future__ import annotations

from ndvm.prims.registry import Arity, Domain, Kind, Prim, Registry, Shape

PRIMS = Registry()

# Each family module registers its primitives into PRIMS on import, in opcode order.
from ndvm.prims import linalg as _linalg  # noqa: E402,F401
from ndvm.prims import numeric as _numeric  # noqa: E402,F401
from ndvm.prims import prelude as _prelude  # noqa: E402,F401
from ndvm.prims import structural as _structural  # noqa: E402,F401
from ndvm.prims import vectors as _vectors  # noqa: E402,F401

__all__ = ["PRIMS", "Arity", "Domain", "Kind", "Prim", "Registry", "Shape"]
