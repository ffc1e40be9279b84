"""The tracer's values beyond ``float``, ``bool`` and ``ndvm.values``: payloads and procedures."""

from __future__ import annotations

from typing import Any

from ndvm.lang import ir


class Arr:
    """A number, vector or matrix payload: ``val`` is ``(*lanes, *struct)``."""

    __slots__ = ("val", "struct")

    def __init__(self, val: Any, struct: tuple[int, ...]) -> None:
        self.val = val
        self.struct = struct


class Bool:
    """A per-lane boolean computed from parameters or inputs."""

    __slots__ = ("val",)

    def __init__(self, val: Any) -> None:
        self.val = val


class Closure:
    __slots__ = ("lam", "env")

    def __init__(self, lam: ir.Lambda, env: Any) -> None:
        self.lam = lam
        self.env = env


class Prim:
    __slots__ = ("code",)

    def __init__(self, code: int) -> None:
        self.code = code
