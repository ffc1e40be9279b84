"""pytest plugin: with NDVM_REQUIRE_NATIVE=1 a missing native runtime is a failure."""

from __future__ import annotations

import os

import pytest


def pytest_sessionstart(session: pytest.Session) -> None:
    if os.environ.get("NDVM_REQUIRE_NATIVE") != "1":
        return
    from ndvm.backends import registry

    if "native" not in registry.available():
        raise pytest.UsageError(
            "NDVM_REQUIRE_NATIVE=1 but the native runtime (ndvm._core) is not importable: "
            "the package was installed without its extension"
        )
