"""pytest plugin: one rule for the optional extras.

A test that needs an optional framework carries the marker of its extra (``torch``, ``jax``,
``plot``, ``sympy``, ``data``, ``llm``, ``ray``). In a core-only environment such a test is
skipped with a one-line reason naming the extra; under ``NDVM_REQUIRE_OPTIONAL=1`` (set by CI,
which installs every extra) a missing extra is a usage error at session start and any skip
caused by a missing module is a failure, exactly as ``NDVM_REQUIRE_NATIVE=1`` does for the
native runtime.

Test modules that use an extra at import time call :func:`need` at the top instead of
``import torch``: it returns the module or skips the module cleanly.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from types import ModuleType

import pytest

from ndvm.extras import EXTRAS  # marker name = the ndvm extra that provides it

_EXTRA_OF = {mod: extra for extra, mods in EXTRAS.items() for mod in mods}


def required() -> bool:
    return os.environ.get("NDVM_REQUIRE_OPTIONAL") == "1"


def missing(extra: str) -> list[str]:
    return [m for m in EXTRAS[extra] if importlib.util.find_spec(m) is None]


def reason(extra: str) -> str:
    return f"needs the '{extra}' extra: pip install 'ndvm[{extra}]'"


def need(module: str) -> ModuleType:
    """Import ``module`` (an extra's module) or skip the calling test module."""
    extra = _EXTRA_OF.get(module.split(".")[0])
    if extra is not None and missing(extra):
        if required():
            pytest.fail(f"NDVM_REQUIRE_OPTIONAL=1 but {reason(extra)}", pytrace=False)
        pytest.skip(reason(extra), allow_module_level=True)
    return importlib.import_module(module)


def pytest_configure(config: pytest.Config) -> None:
    for extra, mods in EXTRAS.items():
        config.addinivalue_line("markers", f"{extra}: needs {', '.join(mods)} (ndvm[{extra}])")


def pytest_sessionstart(session: pytest.Session) -> None:
    if not required():
        return
    absent = [f"{e} ({', '.join(missing(e))})" for e in EXTRAS if missing(e)]
    if absent:
        raise pytest.UsageError(
            "NDVM_REQUIRE_OPTIONAL=1 but these extras are not installed: " + "; ".join(absent)
        )


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers():
        if mark.name in EXTRAS and missing(mark.name):
            if required():
                pytest.fail(f"NDVM_REQUIRE_OPTIONAL=1 but {reason(mark.name)}", pytrace=False)
            pytest.skip(reason(mark.name))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    rep = outcome.get_result()
    if required() and rep.skipped and "could not import" in str(rep.longrepr):
        rep.outcome = "failed"
        rep.longrepr = f"NDVM_REQUIRE_OPTIONAL=1 but a test skipped: {rep.longrepr}"
