"""Native tests need ndvm._core: skipped without it, an error when NDVM_REQUIRE_NATIVE=1."""

from __future__ import annotations

import os

import pytest
from tests.helpers.clients import NATIVE_CLIENTS


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


@pytest.fixture(params=NATIVE_CLIENTS)
def client(request: pytest.FixtureRequest) -> str:
    """A backend name of the native core's clients: "native" (the walker) or "vm"."""
    return str(request.param)
