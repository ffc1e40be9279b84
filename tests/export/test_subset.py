"""What every export target shares: the missing-extra message and the error positions."""

from __future__ import annotations

import importlib

import pytest

import ndvm
import ndvm.export
from ndvm.export import namespaces


def test_missing_framework_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.import_module

    def fake(name: str, *args: object) -> object:
        if name == "torch":
            raise ImportError("no torch here")
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", fake)
    namespaces.torch_namespace.cache_clear()
    try:
        with pytest.raises(ndvm.NdvmError, match=r"pip install 'ndvm\[torch\]'"):
            ndvm.export.to_torch("(* a 2)")
    finally:
        namespaces.torch_namespace.cache_clear()


def test_source_text_errors_are_ndvm_errors() -> None:
    with pytest.raises(ndvm.ReadError):
        ndvm.export.program_of("(+ a")
    with pytest.raises(ndvm.CompileError):
        ndvm.export.program_of("(+ a (set! a 1))")
