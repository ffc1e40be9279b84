"""The optional extras: which modules each one provides, and one error when one is missing.

``require("ndvm sweep", "torch", "plot")`` raises :class:`~ndvm.errors.MissingExtra` with one
line naming every missing extra and the command that installs them; the CLI prints that line
and exits with status 2. ``module("torch", "ndvm.torch")`` imports an extra's module the same
way. The test suite's markers use the same table (``tests/helpers/extras.py``).
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from ndvm.errors import MissingExtra

# extra name (as in ``pip install 'ndvm[NAME]'``) -> the modules it provides
EXTRAS: dict[str, tuple[str, ...]] = {
    "torch": ("torch",),
    "jax": ("jax",),
    "plot": ("matplotlib",),
    "sympy": ("sympy",),
    "data": ("statsmodels", "scipy", "pandas"),
    "llm": ("openai",),
    "ray": ("ray",),
    "transformer-lens": ("transformer_lens",),
}
_EXTRA_OF = {mod: extra for extra, mods in EXTRAS.items() for mod in mods}


def missing(*extras: str) -> list[str]:
    """The extras among ``extras`` with a module that cannot be found."""
    return [e for e in extras if any(importlib.util.find_spec(m) is None for m in EXTRAS[e])]


def message(what: str, extras: list[str]) -> str:
    names = " and ".join(f"'{e}'" for e in extras)
    noun = "extra" if len(extras) == 1 else "extras"
    return f"{what} needs the {names} {noun}: pip install 'ndvm[{','.join(extras)}]'"


def require(what: str, *extras: str) -> None:
    """Raise :class:`MissingExtra` naming every extra of ``extras`` that is not installed."""
    absent = missing(*extras)
    if absent:
        raise MissingExtra(message(what, absent))


def module(name: str, what: str) -> ModuleType:
    """Import ``name`` (a module an extra provides) or raise :class:`MissingExtra`."""
    extra = _EXTRA_OF[name.split(".")[0]]
    require(what, extra)
    return importlib.import_module(name)


__all__ = ["EXTRAS", "MissingExtra", "missing", "module", "require"]
