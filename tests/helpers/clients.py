"""The native core's clients under test: the CEK tree walker ("native") and the bytecode VM
("vm"), two backend names of one runtime; native tests parametrize over them (the ``client``
fixture in tests/native/conftest.py)."""

from __future__ import annotations

NATIVE_CLIENTS: tuple[str, ...] = ("native", "vm")
