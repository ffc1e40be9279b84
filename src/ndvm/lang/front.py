"""Front end: source text -> ``CompiledProgram``.

The language has one definition, native: the reader, the expander and the resolver are
``cpp/src/front_read.cpp``, ``front_expand.cpp`` and ``front_resolve.cpp``, driven by
``front_compile.cpp`` (docs/architecture.md, "The front end"). They write the node tables the
native backend lowers directly; the IR records of ``ndvm.lang.ir``, which the reference
evaluator, the export tracer and the baselines walk, are built from those tables on first use.
This module passes the host's arguments in: the input names, the ``params`` argument (turned
into parameter specs here, given the header's), the limits and the dialect.

The prelude procedures a program uses (``map``, ``fold-left``, ...) are written in ndvm
source in the primitive table; the ones a program names (and their dependencies) are bound in
an outermost ``letrec`` frame around the program.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from typing import Any

from ndvm.errors import CompileError, ReadError
from ndvm.eval.limits import Limits
from ndvm.lang import ir
from ndvm.lang.datum import Datum, Num, SList, Sym, to_source
from ndvm.lang.reader import native_core, read
from ndvm.lang.suggest import did_you_mean

ParamsArg = Sequence[Any] | Mapping[str, Any] | None

_DEFAULT = Limits()


def compile_source(
    source: str,
    params: ParamsArg = None,
    inputs: Iterable[str] = (),
    limits: Limits | None = None,
    dialect: str | None = None,
) -> ir.CompiledProgram:
    """Read, expand and resolve ``source``. Raises ReadError / CompileError with positions;
    ``limits`` bounds the source size and the number of forms (``Limits.max_forms``);
    ``dialect="dmci"`` compiles ``let`` as sequential (``let*``), as the reference system."""
    inputs = tuple(inputs)
    for name in inputs:
        if not isinstance(name, str) or not name:
            raise CompileError(f"input names must be non-empty strings, got {name!r}")
    if not isinstance(source, str):
        raise ReadError(f"source must be str, not {type(source).__name__}")
    lim = limits or _DEFAULT
    specs_of = None if params is None else _plain_params(params) or _specs_function(params)
    front = (_FRONT_COMPILE or _front_compile())(
        source, specs_of, inputs, lim.max_source_chars, lim.max_forms, dialect == "dmci"
    )
    key, has_header, prelude, input_positions = front.fields
    specs = _SPECS.get(key)
    return ir.CompiledProgram(
        None,
        _specs(front, key) if specs is None else specs,
        inputs,
        source,
        has_header,
        prelude,
        input_positions,
        dialect,
        front,
    )


_FRONT_COMPILE: Any = None  # ``_core.front_compile``, once the core is imported


def _front_compile() -> Any:
    global _FRONT_COMPILE
    _FRONT_COMPILE = native_core().front_compile
    return _FRONT_COMPILE


# the parameter specs by the front end's ``params_key``: the variants of a program share
# theirs (nothing mutates a ``ParamSpec``)
_SPECS: dict[bytes, ir.ParamSpecs] = {}


def _specs(front: Any, key: bytes) -> ir.ParamSpecs:
    """The parameter specs of the front end's rows (name, init, constraint, line, column);
    ``key``: its ``params_key``."""
    specs = _SPECS.get(key)
    if specs is None:
        specs = ir.ParamSpecs(ir.ParamSpec(*r) for r in front.params)
        if len(_SPECS) >= 4096:
            _SPECS.clear()
        _SPECS[key] = specs
    return specs


def check_name(name: str, role: str = "input") -> None:
    """Raise ``CompileError`` unless ``name`` can name an input or parameter that a program's
    text refers to: it reads as one symbol of the language and is not a special form. (Any
    such name works, including names of primitives, Python keywords and API argument names.)"""
    if not isinstance(name, str) or not name:
        raise CompileError(f"{role} names must be non-empty strings, got {name!r}")
    try:
        data = read(name)
    except (ReadError, CompileError) as exc:
        raise CompileError(
            f"{role} name {name!r} is not a symbol of the language ({exc}); rename it"
        ) from None
    if len(data) != 1 or not isinstance(data[0], Sym) or data[0].name != name:
        raise CompileError(
            f"{role} name {name!r} does not read as one symbol of the language (see "
            "docs/language.md, 'Names'); rename it"
        )
    try:
        compile_source(name, params=(), inputs=(name,))
    except CompileError as exc:
        raise CompileError(f"{role} name {name!r} cannot be used: {exc}; rename it") from None


def _specs_function(params: ParamsArg) -> Any:
    """The host's ``params`` as the function the native driver calls with the header's specs
    (at the point of the checks where the header is known)."""

    def specs(header: tuple[tuple[Any, ...], ...]) -> list[tuple[Any, ...]]:
        given = tuple(ir.ParamSpec(*h) for h in header)
        out = _param_specs(params, given)
        return [(s.name, float(s.init), s.constraint, s.line, s.column) for s in out]

    return specs


def _plain_params(params: ParamsArg) -> list[Any] | None:
    """The common ``params`` (a dict of str names to numbers, a list or tuple of distinct str
    names) as the list the native driver takes: the rows ``_param_specs`` gives for a dict,
    the names for a list (the driver takes a name's spec from the header, as ``_param_specs``
    does); None for any other ``params`` (``_param_specs`` then decides, and words any
    error)."""
    kind = type(params)
    if kind is dict:
        rows: list[Any] = []
        for name, value in params.items():  # type: ignore[union-attr]
            if type(name) is not str or not isinstance(value, (float, int)):
                return None
            rows.append((name, float(value), "free", 0, 0))
        return rows
    if kind is not list and kind is not tuple:
        return None
    for name in params:  # type: ignore[union-attr]
        if type(name) is not str:
            return None
    if len(set(params)) != len(params):  # type: ignore[arg-type]
        return None  # a name given twice
    return list(params)  # type: ignore[arg-type]


def prelude_closure(symbols: Set[str]) -> tuple[str, ...]:
    """The prelude procedures ``symbols`` name, with the prelude procedures they use."""
    return tuple(native_core().prelude_closure(sorted(symbols)))


def _param_specs(params: ParamsArg, header: tuple[ir.ParamSpec, ...]) -> tuple[ir.ParamSpec, ...]:
    if params is None:
        return header
    by_header = {s.name: s for s in header}
    out: list[ir.ParamSpec] = []
    items: Iterable[Any] = params.items() if isinstance(params, Mapping) else params
    if isinstance(params, str):
        raise CompileError("params must be a sequence of names, not a single string")
    for item in items:
        if isinstance(params, Mapping):
            name, val = item
            init, kind = val if isinstance(val, tuple) else (val, "free")
            spec = ir.ParamSpec(str(name), float(init), str(kind))
        elif isinstance(item, ir.ParamSpec):
            spec = item
        elif isinstance(item, str):
            spec = by_header.get(item, ir.ParamSpec(item))
        elif isinstance(item, tuple) and item and isinstance(item[0], str):
            spec = ir.ParamSpec(
                item[0],
                float(item[1]) if len(item) > 1 else 0.0,
                str(item[2]) if len(item) > 2 else "free",
            )
        else:
            raise CompileError(f"bad parameter spec {item!r}")
        if spec.constraint not in ir.CONSTRAINTS:
            hint = did_you_mean(spec.constraint, ir.CONSTRAINTS)
            raise CompileError(
                f"parameter {spec.name!r}: unknown constraint "
                f"{spec.constraint!r} ({hint + ' ' if hint else ''}one of "
                f"{', '.join(ir.CONSTRAINTS)})"
            )
        if any(s.name == spec.name for s in out):
            raise CompileError(f"parameter {spec.name!r} given twice")
        out.append(spec)
    return tuple(out)


_SKELETONS: dict[tuple[str, bool, frozenset[str]], str] = {}  # the last 1024 computed
_SKELETONS_KEPT = 1024


def skeleton_of(
    program: ir.CompiledProgram, data: Sequence[Datum] | None = None,
    plain: Callable[[frozenset[str], bool], str] | None = None,
) -> str:  # fmt: skip
    """The structure string of ``program`` (computed on first use: search dedupes by it).
    ``data``: its source as read (``ndvm.lang.reader``), when the caller has it: not read
    again; ``plain``: what gives it from the parameter names and whether the first form is a
    header (``search.facts.Facts.skeleton``), used when there is no ``data``."""
    names = param_names(program)
    key = (program.source, program.has_header, names)
    out = _SKELETONS.get(key)
    if out is None:
        if data is None and plain is not None:
            out = plain(names, program.has_header)
        else:
            if data is None:  # the source was read once already, under the program's limits
                source = program.source
                data = read(source, limits=Limits(max_source_chars=len(source),
                                                  max_forms=len(source)))  # fmt: skip
            out = skeleton(data[1:] if program.has_header else data, names)
        if len(_SKELETONS) >= _SKELETONS_KEPT:  # the oldest goes
            try:
                _SKELETONS.pop(next(iter(_SKELETONS)), None)
            except (RuntimeError, StopIteration):  # another thread changed it meanwhile
                pass
        _SKELETONS[key] = out
    return out


def param_names(program: ir.CompiledProgram) -> frozenset[str]:
    """The names of ``program``'s parameters (what its skeleton writes as ``P``)."""
    specs = program.params
    memo = specs.__dict__ if type(specs) is ir.ParamSpecs else {}  # kept with the specs
    names = memo.get("name_set")
    if names is None:
        names = memo["name_set"] = frozenset(s.name for s in specs)
    return names  # type: ignore[no-any-return]


def skeleton(data: Iterable[Datum], params: Set[str]) -> str:
    """Structure string: parameters -> ``P``, numeric literals -> ``C``, spaces collapsed.
    Any other name spelled like a marker (``P``, ``C``, then any number of ``*``) gets one more
    ``*`` (an input named ``P`` is ``P*``), so that no name reads as a marker and distinct
    programs keep distinct skeletons."""
    data = tuple(data)
    try:
        return _skeleton_fast(data, params)
    except RecursionError:  # deeper than the interpreter stack allows: the iterative printer
        return " ".join(_skeleton_one(d, params) for d in data)


def skeleton_name(name: str) -> str:
    """A name as the skeleton writes it (``skeleton``): one more ``*`` after a marker's."""
    marker = name[:1] in ("P", "C") and not name[1:].strip("*")
    return name + "*" if marker else name


def _skeleton_fast(data: tuple[Datum, ...], params: set[str]) -> str:
    out: list[str] = []
    app = out.append

    def walk(x: Datum) -> None:
        if type(x) is SList:
            app("(")
            first = True
            for y in x.items:
                if first:
                    first = False
                else:
                    app(" ")
                walk(y)
            if x.tail is not None:
                app(" . ")
                walk(x.tail)
            app(")")
        elif type(x) is Sym:
            app("P" if x.name in params else skeleton_name(x.name))
        else:
            app("C" if type(x) is Num else str(x))

    for i, top in enumerate(data):
        if i:
            app(" ")
        walk(top)
    return " ".join("".join(out).split())


def _skeleton_one(d: Datum, params: set[str]) -> str:
    def atom(x: Datum) -> str:
        if isinstance(x, Sym):
            return "P" if x.name in params else skeleton_name(x.name)
        return "C" if isinstance(x, Num) else str(x)

    return " ".join(to_source(d, atom).split())
