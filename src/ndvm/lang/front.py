"""Front end: source text -> ``CompiledProgram`` (read, header, expand, resolve).

The prelude procedures a program uses (``map``, ``fold-left``, ...) are written in ndvm
source in the primitive table; the ones a program names (and their dependencies) are bound in
an outermost ``letrec`` frame around the program.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence, Set
from functools import cache, lru_cache
from typing import Any

from ndvm.errors import CompileError
from ndvm.eval.limits import Limits
from ndvm.lang import ir
from ndvm.lang.datum import Datum, Num, SList, Sym, symbols_in, to_source
from ndvm.lang.expand import Expander, head_name
from ndvm.lang.reader import read, read_with_symbols
from ndvm.lang.resolve import Resolver
from ndvm.lang.suggest import did_you_mean
from ndvm.prims import PRIMS, Kind

ParamsArg = Sequence[Any] | Mapping[str, Any] | None

_RECURSION_LIMIT = 20_000


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
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, _RECURSION_LIMIT))
    try:
        return _compile(source, params, tuple(inputs), limits, dialect)
    except RecursionError:
        raise CompileError("program nested too deeply to compile") from None
    finally:
        sys.setrecursionlimit(old)


def _compile(
    source: str,
    params: ParamsArg,
    inputs: tuple[str, ...],
    limits: Limits | None,
    dialect: str | None,
) -> ir.CompiledProgram:
    for name in inputs:
        if not isinstance(name, str) or not name:
            raise CompileError(f"input names must be non-empty strings, got {name!r}")
    data, symbols = read_with_symbols(source, limits=limits)
    header: tuple[ir.ParamSpec, ...] = ()
    has_header = head_name(data[0]) == "params"
    if has_header:
        header = parse_header(data[0])  # type: ignore[arg-type]
        data = data[1:]
        if not data:
            raise CompileError("program has a params header but no expression", 1, 1)
    for d in data[1:] if has_header else data:
        if head_name(d) == "params":
            raise CompileError("params header is only allowed as the first form", d.line, d.column)
    specs = _param_specs(params, header, has_header)
    infer = params is None and not has_header
    names = [s.name for s in specs]
    for n in names:
        if n in inputs:
            raise CompileError(f"{n!r} is declared both as a parameter and as an input")
    top = SList(data, None, data[0].line, data[0].column)
    expander = Expander(sequential_let=dialect == "dmci")
    body_datum = expander.expand_body(data, top)
    prelude = prelude_closure(symbols)
    if prelude and has_header:  # names only the header mentions do not count
        prelude = prelude_closure(symbols_in(data))
    resolver = Resolver(names, inputs, infer)
    resolver.scopes.append(list(prelude))
    body = resolver.resolve(body_datum, True)
    if prelude:
        inits = tuple(_prelude_ir(name, resolver) for name in prelude)
        body = ir.Letrec(inits, body, prelude, 0, 0)
    if infer:
        specs = tuple(ir.ParamSpec(n) for n in resolver.params)
    for spec in specs:
        _check_init(spec)
    return ir.CompiledProgram(
        body=body,
        params=specs,
        inputs=inputs,
        source=source,
        has_header=has_header,
        prelude=prelude,
        input_positions=tuple(resolver.input_positions.get(n, (0, 0)) for n in inputs),
        dialect=dialect,
    )


def _check_init(spec: ir.ParamSpec) -> None:
    """A parameter's initial value must lie inside its constraint (theta must exist)."""
    lo, hi = ir.CONSTRAINT_RANGES[spec.constraint]
    if spec.constraint != "free" and not lo < spec.init < hi:
        raise CompileError(
            f"params: initial value {spec.init!r} of {spec.name!r} is outside its constraint "
            f"{spec.constraint} ({lo}, {hi})",
            spec.line or None,
            spec.column or None,
        )


def parse_header(form: SList) -> tuple[ir.ParamSpec, ...]:
    specs: list[ir.ParamSpec] = []
    for item in form.items[1:]:
        if isinstance(item, Sym):
            if any(s.name == item.name for s in specs):
                raise CompileError(f"params: {item.name!r} declared twice", item.line, item.column)
            specs.append(ir.ParamSpec(item.name, 0.0, "free", item.line, item.column))
            continue
        if (
            not isinstance(item, SList)
            or item.tail is not None
            or not 1 <= len(item.items) <= 3
            or not isinstance(item.items[0], Sym)
        ):
            raise CompileError(
                "params: each entry must be (name [init] [constraint])", item.line, item.column
            )
        name = item.items[0].name
        init = 0.0
        kind = "free"
        rest = item.items[1:]
        if rest and isinstance(rest[0], Num):
            init = rest[0].value
            rest = rest[1:]
        if rest:
            if not isinstance(rest[0], Sym) or rest[0].name not in ir.CONSTRAINTS:
                got = rest[0].name if isinstance(rest[0], Sym) else ""
                hint = did_you_mean(got, ir.CONSTRAINTS) if got else ""
                raise CompileError(
                    f"params: constraint must be one of {', '.join(ir.CONSTRAINTS)}"
                    + (f" ({hint})" if hint else ""),
                    rest[0].line,
                    rest[0].column,
                )
            kind = rest[0].name
        if len(rest) > 1:
            raise CompileError("params: too many fields in entry", item.line, item.column)
        if any(s.name == name for s in specs):
            raise CompileError(f"params: {name!r} declared twice", item.line, item.column)
        specs.append(ir.ParamSpec(name, init, kind, item.line, item.column))
    return tuple(specs)


def _param_specs(
    params: ParamsArg, header: tuple[ir.ParamSpec, ...], has_header: bool
) -> tuple[ir.ParamSpec, ...]:
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


@cache
def _prelude_names() -> frozenset[str]:
    return frozenset(n for n, p in PRIMS.names().items() if p.kind is Kind.PRELUDE)


def prelude_closure(symbols: Set[str]) -> tuple[str, ...]:
    """The prelude procedures ``symbols`` name, with the prelude procedures they use."""
    named = _prelude_names() & symbols
    if not named:
        return ()
    needed: list[str] = []
    todo = [PRIMS.by_name(n).name for n in sorted(named)]
    while todo:
        name = todo.pop()
        if name in needed:
            continue
        needed.append(name)
        todo.extend(
            d
            for d in PRIMS.by_name(name).deps
            if PRIMS.by_name(d).kind is Kind.PRELUDE and d not in needed
        )
    return tuple(sorted(needed))


@cache
def _prelude_datum(name: str) -> Datum:
    prim = PRIMS.by_name(name)
    assert prim.prelude is not None
    (form,) = read(prim.prelude)
    return Expander().expand(form)


def _prelude_ir(name: str, resolver: Resolver) -> ir.Node:
    node = resolver.resolve(_prelude_datum(name))
    if isinstance(node, ir.Lambda):
        node = ir.Lambda(node.nreq, node.rest, node.body, name, node.line, node.column)
    return node


@lru_cache(maxsize=1024)
def _skeleton_of(source: str, has_header: bool, params: frozenset[str]) -> str:
    # the source was read once already, under the program's limits
    data = read(source, limits=Limits(max_source_chars=len(source), max_forms=len(source)))
    return skeleton(data[1:] if has_header else data, params)


def skeleton_of(program: ir.CompiledProgram) -> str:
    """The structure string of ``program`` (computed on first use: search dedupes by it)."""
    return _skeleton_of(
        program.source, program.has_header, frozenset(s.name for s in program.params)
    )


def skeleton(data: Iterable[Datum], params: Set[str]) -> str:
    """Structure string: parameters -> ``P``, numeric literals -> ``C``, spaces collapsed."""
    data = tuple(data)
    try:
        return _skeleton_fast(data, params)
    except RecursionError:  # deeper than the interpreter stack allows: the iterative printer
        return " ".join(_skeleton_one(d, params) for d in data)


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
            app("P" if x.name in params else x.name)
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
            return "P" if x.name in params else x.name
        return "C" if isinstance(x, Num) else str(x)

    return " ".join(to_source(d, atom).split())
