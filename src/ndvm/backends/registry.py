"""Backend lookup by name; the default is the native runtime when it is built."""

from __future__ import annotations

import functools
from typing import Any

from ndvm.errors import NdvmError

INSTANCES: dict[str, Any] = {}  # the backends built so far, by name


@functools.cache
def available() -> tuple[str, ...]:
    """The backends this install can run, the default first (looked up once)."""
    names = ["reference"]
    try:
        from ndvm.backends import native  # noqa: F401
    except ImportError:
        return tuple(names)
    if native.AVAILABLE:
        names[:0] = ["native", "vm"]
    return tuple(names)


def get(name: str | None) -> Any:
    if name is None:
        name = available()[0]
    hit = INSTANCES.get(name)
    if hit is not None:
        return hit
    if name == "reference":
        from ndvm.backends.reference import ReferenceBackend

        INSTANCES[name] = ReferenceBackend()
    elif name in ("native", "vm") and name in available():
        from ndvm.backends.native import NativeBackend

        # "vm": the native core's bytecode client on the same runtime (docs/native.md)
        INSTANCES[name] = NativeBackend(client=name)
    else:
        raise NdvmError(
            f"unknown or unavailable backend {name!r} (available: {', '.join(available())})"
        )
    return INSTANCES[name]
