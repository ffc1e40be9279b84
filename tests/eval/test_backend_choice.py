"""Which backend ``ndvm.compile`` binds a program to: the named one (its refusal is the
caller's error), or the first available one whose ``prepare`` accepts the program."""

from __future__ import annotations

from typing import Any

import pytest

import ndvm
from ndvm.backends import registry
from ndvm.errors import BackendUnsupported


class Fake:
    """A backend that records what it was asked to prepare and refuses when told to."""

    def __init__(self, name: str, refuse: bool) -> None:
        self.name = name
        self.refuse = refuse
        self.seen: list[Any] = []

    def prepare(self, compiled: Any) -> None:
        self.seen.append(compiled)
        if self.refuse:
            raise BackendUnsupported(f"{self.name} refuses")


class NoPrepare:
    name = "noprep"


@pytest.fixture
def backends(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Install fake backends and make ``names`` the available ones, the first the default."""

    def install(names: tuple[str, ...], **built: Any) -> None:
        for name, impl in built.items():
            monkeypatch.setitem(registry.INSTANCES, name, impl)
        monkeypatch.setattr(registry, "available", lambda: names)

    return install


def test_the_default_backend_when_it_accepts(backends: Any) -> None:
    first, second = Fake("first", refuse=False), Fake("second", refuse=False)
    backends(("first", "second"), first=first, second=second)
    prog = ndvm.compile("(+ 1 2)")
    assert prog.backend == "first"
    assert first.seen == [prog.compiled] and second.seen == []


def test_a_refusing_default_moves_on_to_the_next(backends: Any) -> None:
    first, second = Fake("first", refuse=True), Fake("second", refuse=False)
    backends(("first", "second", "reference"), first=first, second=second)
    prog = ndvm.compile("(+ 1 2)")
    assert prog.backend == "second"
    assert first.seen == [prog.compiled] and second.seen == [prog.compiled]


def test_the_next_one_without_prepare_is_taken(backends: Any) -> None:
    backends(("first", "noprep"), first=Fake("first", refuse=True), noprep=NoPrepare())
    assert ndvm.compile("(+ 1 2)").backend == "noprep"


def test_a_default_without_prepare_is_taken(backends: Any) -> None:
    backends(("noprep", "first"), noprep=NoPrepare(), first=Fake("first", refuse=True))
    assert ndvm.compile("(+ 1 2)").backend == "noprep"


def test_the_only_backend_refusing_raises_its_error(backends: Any) -> None:
    backends(("first",), first=Fake("first", refuse=True))
    with pytest.raises(BackendUnsupported, match="first refuses"):
        ndvm.compile("(+ 1 2)")


def test_every_backend_refusing_raises_the_last_error(backends: Any) -> None:
    backends(("first", "second"), first=Fake("first", refuse=True),
             second=Fake("second", refuse=True))  # fmt: skip
    with pytest.raises(BackendUnsupported, match="second refuses"):
        ndvm.compile("(+ 1 2)")


def test_a_named_backend_refusing_is_the_callers_error(backends: Any) -> None:
    second = Fake("second", refuse=False)
    backends(("first", "second"), first=Fake("first", refuse=True), second=second)
    with pytest.raises(BackendUnsupported, match="first refuses"):
        ndvm.compile("(+ 1 2)", backend="first")
    assert second.seen == []
    assert ndvm.compile("(+ 1 2)", backend="second").backend == "second"
