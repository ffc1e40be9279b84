"""Native tests need ndvm._core: skipped without it, an error when NDVM_REQUIRE_NATIVE=1."""

from __future__ import annotations

import os

import pytest


def _core_available() -> bool:
    try:
        from ndvm.backends import native
    except ImportError:
        return False
    return bool(native.AVAILABLE)


@pytest.fixture(autouse=True)
def _require_native() -> None:
    if _core_available():
        return
    if os.environ.get("NDVM_REQUIRE_NATIVE") == "1":
        pytest.fail("ndvm._core is missing but NDVM_REQUIRE_NATIVE=1")
    pytest.skip("ndvm._core is not built")
