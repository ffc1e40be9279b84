"""ndvm.meta: programs run through a metacircular evaluator written in the ndvm language.

``evaluator.scm`` (shipped in this package) is an evaluator for the ndvm language written in
the ndvm language. ``compile(src, ...)`` quotes ``src`` and wraps it in that evaluator: the
result is an ordinary host program, compiled by ``ndvm.compile`` into a ``Program`` with the
same parameters, inputs and API as ``ndvm.compile(src, ...)``. Its values and gradients are
the object program's: the object program's numeric primitives are the host's, called through
``apply`` and differentiated on the host's tape. ``levels=2`` runs the evaluator running
itself running ``src`` (the interpretive tower).

The wrapper defines two names the evaluator expects, both generated from the one primitive
table for the names the wrapped text mentions: ``meta-primitives`` (each such primitive and
alias bound to the host procedure, except the evaluator's own ``apply`` and ``procedure?``,
and each named constant bound to its value) and ``meta-prelude`` (the prelude procedures'
ndvm source, which the evaluator interprets like user code).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from ndvm.api import DIALECTS, Program
from ndvm.api import compile as _compile
from ndvm.errors import NdvmError
from ndvm.eval.limits import Limits
from ndvm.lang.datum import symbols_in
from ndvm.lang.front import ParamsArg, compile_source, prelude_closure
from ndvm.lang.ir import CompiledProgram
from ndvm.lang.reader import read
from ndvm.prims import CONSTANTS, PRIMS, Kind

EVALUATOR_PATH = Path(__file__).with_name("evaluator.scm")
# The evaluator defines these procedures itself (they must see object closures).
_OWN = ("apply", "procedure?")
# Looked up most often: first in the global association list.
_HOT = ("+", "-", "*", "/", "car", "cdr", "cons", "=", "<", ">", "<=", ">=", "null?", "pair?",
        "eq?", "not", "list", "cadr", "caddr", "cddr", "symbol?", "void", "append", "reverse",
        "error")  # fmt: skip


@cache
def evaluator_source() -> str:
    """The text of ``evaluator.scm``."""
    return EVALUATOR_PATH.read_text()


def support_source(program_text: str) -> str:
    """``meta-primitives`` and ``meta-prelude`` for the names ``program_text`` mentions.

    Generated from the primitive table. Only the primitives and prelude procedures the text
    names (and the prelude's dependencies) are bound: the global environment stays short, so
    a lookup walks a few dozen entries, not every primitive.
    """
    names = symbols_in(read(program_text))
    prelude_names = prelude_closure(names)
    used = names | {d for n in prelude_names for d in _prelude_symbols(n)}
    prims = [
        p
        for p in PRIMS
        if p.kind is not Kind.PRELUDE and p.name not in _OWN and used & set(p.names)
    ]
    prims.sort(key=lambda p: (_HOT.index(p.name) if p.name in _HOT else len(_HOT), p.code))
    entries = [f"(cons '{alias} {p.name})" for p in prims for alias in p.names if alias in used]
    entries += [f"(cons '{k} {k})" for k in CONSTANTS if k in used]  # the host's constants
    lines = ["(define meta-primitives", "  (list"]
    lines += [f"   {' '.join(entries[i : i + 4])}" for i in range(0, len(entries), 4)]
    lines[-1] += "))"
    prelude = [f"   ({n} . {PRIMS.by_name(n).prelude.strip()})" for n in prelude_names]
    lines += ["(define meta-prelude", "  '(", *prelude, "   ))"]
    return "\n".join(lines) + "\n"


@cache
def _prelude_symbols(name: str) -> frozenset[str]:
    return frozenset(symbols_in(read(PRIMS.by_name(name).prelude or "")))


def host_names(n: int) -> list[str]:
    """The host's names for the object program's ``n`` parameters and inputs, in order:
    ``%meta-0``, ``%meta-1``... The evaluator names none of them, so no object name (``car``,
    ``lookup``, ``%meta-bindings``) can capture a name the evaluator runs on: object names
    appear in the host program only quoted."""
    return [f"%meta-{i}" for i in range(n)]


def wrap(program_text: str, names: Sequence[str], hosts: Sequence[str] | None = None) -> str:
    """One level: the evaluator running ``program_text`` with ``names`` bound by the host to
    the host variables ``hosts`` (default: the same names).

    The bindings are made outside the evaluator's definitions, so an object variable may have
    any name (``lookup``, ``meval``...) without being captured by the evaluator's own; with
    ``hosts`` (``compile`` passes ``host_names``) the host variables are not the object's
    names either, so a parameter named ``car`` leaves the evaluator's ``car`` alone.
    """
    hosts = list(names) if hosts is None else list(hosts)
    bindings = " ".join(f"(cons '{n} {h})" for n, h in zip(names, hosts, strict=True))
    evaluator = evaluator_source()
    support = support_source(program_text + "\n" + evaluator)
    return (
        f"(let ((%meta-bindings (list {bindings})))\n"
        f"{support}{evaluator}\n"
        f"(meta-run '(\n{program_text}\n) %meta-bindings))\n"
    )


def source(src: str, names: Sequence[str], levels: int = 1) -> str:
    """The host program that runs ``src`` under ``levels`` evaluators (``levels >= 1``); its
    free variables are ``host_names(len(names))``, bound to ``names`` at the first level."""
    if levels < 1:
        raise ValueError(f"levels must be >= 1, got {levels}")
    hosts = host_names(len(names))
    text = wrap(src, names, hosts)
    for _ in range(levels - 1):
        text = wrap(text, hosts)
    return text


def compile(  # noqa: A001 - mirrors ndvm.compile
    src: str,
    params: ParamsArg = None,
    inputs: Sequence[str] = (),
    *,
    levels: int = 1,
    **options: Any,
) -> Program:
    """``ndvm.compile``'s contract, evaluated by ``levels`` metacircular evaluators.

    ``src`` is first compiled directly (without running), so read and compile errors are
    reported at the object program's line and column, and the parameters (names, initial
    values, constraints) are the ones ``ndvm.compile(src, params, inputs)`` would choose.
    Runtime errors of the object program are ``ProgramError``s raised by the evaluator.
    ``options`` are ``ndvm.compile``'s keyword options (backend, dtype, limits, strict,
    dialect...): under ``dialect="dmci"`` the evaluator runs the object program with that
    dialect's rules (its sequential ``let``; the numeric rules are the host's own).
    """
    if isinstance(inputs, str):
        inputs = (inputs,)
    dialect = options.get("dialect")
    if dialect not in DIALECTS:
        raise NdvmError(f"dialect must be one of {DIALECTS}, got {dialect!r}")
    direct = compile_source(src, params, tuple(inputs), dialect=dialect)
    names = [s.name for s in direct.params] + list(direct.inputs)
    hosts = host_names(len(names))
    n_params = len(direct.params)
    specs = tuple(dataclasses.replace(s, name=h) for s, h in zip(direct.params, hosts))
    text = source(src, names, levels)
    host_inputs = tuple(hosts[n_params:])

    def recompile(limits: Limits, dialect: str | None) -> CompiledProgram:
        """The host program under ``dialect``, answering to the object's names (the
        backends bind parameters and inputs by position)."""
        host = compile_source(text, specs, host_inputs, limits, dialect)
        out = host.replace(params=direct.params, inputs=direct.inputs)
        out.derived["recompile"] = recompile  # Program.with_options(dialect=...)
        return out

    prog = _compile(text, specs, host_inputs, **options)
    renamed = prog.compiled.replace(params=direct.params, inputs=direct.inputs)
    renamed.derived["recompile"] = recompile
    return dataclasses.replace(prog, compiled=renamed)


__all__ = [
    "EVALUATOR_PATH",
    "compile",
    "evaluator_source",
    "host_names",
    "source",
    "support_source",
    "wrap",
]
