"""``ByIdentity``: a small bounded cache keyed by an object's identity.

For values derived once per object that the caller treats as immutable (a task's data, a
compiled program, a parent program in a search): the cache holds the object with its value,
so an id stays that object's while the entry lives, and a hit is checked with ``is``. When
full, the oldest entry goes.
"""

from __future__ import annotations

from typing import Any

MISSING: Any = object()  # ``get``'s default: no entry (None may be a cached value)


class ByIdentity:
    def __init__(self, size: int) -> None:
        self._size = size
        self._items: dict[int, tuple[Any, Any]] = {}

    def get(self, obj: Any, default: Any = None) -> Any:
        hit = self._items.get(id(obj))
        return hit[1] if hit is not None and hit[0] is obj else default

    def put(self, obj: Any, value: Any) -> Any:
        """Store ``value`` for ``obj`` and return it."""
        if len(self._items) >= self._size:
            self._items.pop(next(iter(self._items)), None)
        self._items[id(obj)] = (obj, value)
        return value
