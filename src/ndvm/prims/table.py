"""The one primitive table ``PRIMS``, filled by the family modules of ``ndvm.prims``."""

from __future__ import annotations

from ndvm.prims.registry import Registry

PRIMS = Registry()
