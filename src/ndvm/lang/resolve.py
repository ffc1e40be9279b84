"""Resolver: core forms (from the expander) -> IR with lexical addresses and opcodes.

Free names resolve, in order, to: a lexical variable, a primitive (opcode), a declared
parameter, a data input, or (when parameters are inferred) a new parameter; anything else is
an unbound-variable ``CompileError`` with its position. A name in operator position must be a
lexical variable or a primitive: parameters and inputs are numbers, so calling one (or a
free name, which would become a parameter) is a ``CompileError``. Every unknown name comes
with the closest known names ("did you mean"). Calls to known primitives are checked for
arity here, once.
"""

from __future__ import annotations

from ndvm.errors import CompileError
from ndvm.lang import ir
from ndvm.lang.datum import Bool, Datum, Num, SList, Str, Sym, to_source
from ndvm.lang.forms import SPECIAL_FORMS
from ndvm.lang.suggest import did_you_mean
from ndvm.prims import PRIMS, Kind
from ndvm.prims.registry import Prim
from ndvm.values import NIL, VOID, Pair, String, Symbol


def err(msg: str, at: Datum) -> CompileError:
    return CompileError(msg, at.line, at.column)


def quote_datum(d: Datum) -> object:
    """The runtime constant for a quoted datum (lists become constant Pair chains)."""
    if isinstance(d, Num):
        return d.value
    if isinstance(d, Bool):
        return d.value
    if isinstance(d, Str):
        return String(d.value)
    if isinstance(d, Sym):
        return Symbol(d.name)
    out: object = NIL if d.tail is None else quote_datum(d.tail)
    for item in reversed(d.items):
        out = Pair(quote_datum(item), out)
    return out


class Resolver:
    """Resolves one program. ``scopes`` is innermost-last; each is a list of names."""

    def __init__(
        self,
        params: list[str],
        inputs: tuple[str, ...],
        infer_params: bool,
    ) -> None:
        self.params = params
        self.inputs = inputs
        self.infer_params = infer_params
        self.scopes: list[list[str]] = []
        self.input_positions: dict[str, tuple[int, int]] = {}

    def lookup(self, s: Sym) -> ir.Node:
        name = s.name
        scopes = self.scopes
        for depth in range(len(scopes)):
            scope = scopes[-1 - depth]
            if name in scope:
                # the last binding of a name in a frame wins (letrec* shadowing within a body)
                index = len(scope) - 1 - scope[::-1].index(name)
                return ir.Local(depth, index, name, s.line, s.column)
        prim = _prim_named(name)
        if prim is not None:
            return ir.PrimRef(prim.code, prim.name, s.line, s.column)
        if name == "#void":
            return ir.Const(VOID, s.line, s.column)
        if name in self.params:
            return ir.Param(self.params.index(name), name, s.line, s.column)
        if name in self.inputs:
            self.input_positions.setdefault(name, (s.line, s.column))
            return ir.Input(self.inputs.index(name), name, s.line, s.column)
        if self.infer_params and not name.startswith("#"):
            self.params.append(name)
            return ir.Param(len(self.params) - 1, name, s.line, s.column)
        hint = did_you_mean(name, self._known(operator=False))
        why = "not a parameter, input, primitive or local binding"
        raise CompileError(
            f"unbound variable {name!r} ({why}{'; ' + hint if hint else ''})", s.line, s.column
        )

    def _known(self, operator: bool) -> list[str]:
        """Names a typo may have meant: primitives, names in scope, and special forms (in
        operator position) or parameters and inputs (as values)."""
        names = list(PRIMS.names())
        for scope in self.scopes:
            names.extend(scope)
        names.extend(SPECIAL_FORMS if operator else (*self.params, *self.inputs))
        return names

    def _check_operator(self, head: Sym) -> None:
        """A free name called as a procedure: never a parameter or an input."""
        name = head.name
        if self._is_local(name) or name in PRIMS or name.startswith("#"):
            return
        if name in self.params:
            msg = f"cannot call parameter {name!r}: parameters are numbers, not procedures"
        elif name in self.inputs:
            msg = f"cannot call input {name!r}: inputs are data, not procedures"
        else:
            hint = did_you_mean(name, self._known(operator=True))
            msg = f"unknown procedure {name!r} ({hint or 'not a primitive or a local binding'})"
        raise err(msg, head)

    def resolve(self, d: Datum, tail: bool = False) -> ir.Node:
        tp = type(d)
        if tp is SList:
            head = d.items[0]  # type: ignore[union-attr]
            if type(head) is Sym and not self._is_local(head.name):
                form = _CORE.get(head.name)
                if form is not None:
                    return form(self, d, tail)  # type: ignore[arg-type]
                prim = _prim_named(head.name)
                if prim is not None and head.name not in _PROCEDURE_FIRST:
                    return self._prim_call(prim, d)  # type: ignore[arg-type]
            return self._call(d, tail)  # type: ignore[arg-type]
        if tp is Sym:
            return self.lookup(d)  # type: ignore[arg-type]
        if tp is Str:
            return ir.Const(String(d.value), d.line, d.column)  # type: ignore[union-attr]
        return ir.Const(d.value, d.line, d.column)  # type: ignore[union-attr]  # Num, Bool

    def _prim_call(self, prim: Prim, d: SList) -> ir.Node:
        """A call whose operator is a (not rebound) primitive: checked for arity, once."""
        const, resolve = ir.Const, self.resolve
        args = tuple(
            [
                const(a.value, a.line, a.column) if type(a) is Num else resolve(a)
                for a in d.items[1:]
            ]  # type: ignore[union-attr]
        )
        if not prim.arity.accepts(len(args)):
            raise err(
                f"{prim.name} expects {prim.arity.describe()} argument(s), got {len(args)}", d
            )
        if prim.kind is Kind.PRELUDE:  # the front end binds every prelude name it needs
            raise err(f"internal: prelude procedure {prim.name!r} not bound", d)
        return ir.PrimCall(prim.code, args, prim.name, d.line, d.column)

    def _is_local(self, name: str) -> bool:
        for scope in self.scopes:
            if name in scope:
                return True
        return False

    def _call(self, d: SList, tail: bool) -> ir.Node:
        head = d.items[0]
        if isinstance(head, Sym):
            self._check_operator(head)
            # (map sqr xs): the procedure argument of a higher-order primitive is called too
            if head.name in _PROCEDURE_FIRST and len(d.items) > 1 and isinstance(d.items[1], Sym):
                if not any(head.name in scope for scope in self.scopes[1:]):  # not rebound
                    self._check_operator(d.items[1])
        fn = self.resolve(d.items[0])
        if isinstance(fn, ir.PrimRef):
            return self._prim_call(PRIMS.by_code(fn.code), d)
        args = tuple(self.resolve(a) for a in d.items[1:])
        if isinstance(fn, ir.Const):
            raise err(f"cannot call a constant: {to_source(d.items[0])} is not a procedure", d)
        return ir.Call(fn, args, tail, d.line, d.column)

    # -- core forms ---------------------------------------------------------------------
    def f_quote(self, d: SList, tail: bool) -> ir.Node:
        return ir.Const(quote_datum(d.items[1]), d.line, d.column)

    def f_if(self, d: SList, tail: bool) -> ir.Node:
        test, then, orelse = d.items[1:4]
        return ir.If(
            self.resolve(test),
            self.resolve(then, tail),
            self.resolve(orelse, tail),
            d.line,
            d.column,
        )

    def f_begin(self, d: SList, tail: bool) -> ir.Node:
        items = d.items[1:]
        exprs = [self.resolve(x) for x in items[:-1]]
        exprs.append(self.resolve(items[-1], tail))
        return ir.Seq(tuple(exprs), d.line, d.column)

    def f_or(self, d: SList, tail: bool) -> ir.Node:
        items = d.items[1:]
        exprs = [self.resolve(x) for x in items[:-1]]
        exprs.append(self.resolve(items[-1], tail))
        return ir.Or(tuple(exprs), d.line, d.column)

    def f_lambda(self, d: SList, tail: bool) -> ir.Node:
        formals, body = d.items[1], d.items[2]
        names: list[str]
        if isinstance(formals, Sym):
            names, rest = [formals.name], True
        else:
            assert isinstance(formals, SList)
            names = [x.name for x in formals.items]  # type: ignore[union-attr]
            rest = formals.tail is not None
            if rest:
                names.append(formals.tail.name)  # type: ignore[union-attr]
        self.scopes.append(names)
        try:
            node = self.resolve(body, True)
        finally:
            self.scopes.pop()
        nreq = len(names) - (1 if rest else 0)
        return ir.Lambda(nreq, rest, node, "lambda", d.line, d.column)

    def f_let(self, d: SList, tail: bool) -> ir.Node:
        spec = d.items[1]
        assert isinstance(spec, SList)
        inits = tuple(self.resolve(b.items[1]) for b in spec.items)  # type: ignore[union-attr]
        self.scopes.append([b.items[0].name for b in spec.items])  # type: ignore[union-attr]
        try:
            body = self.resolve(d.items[2], tail)
        finally:
            self.scopes.pop()
        return ir.Let(inits, body, d.line, d.column)

    def f_letrec(self, d: SList, tail: bool) -> ir.Node:
        spec = d.items[1]
        assert isinstance(spec, SList)
        names = [b.items[0].name for b in spec.items]  # type: ignore[union-attr]
        self.scopes.append(names)
        try:
            inits = []
            for b in spec.items:
                init = self.resolve(b.items[1])  # type: ignore[union-attr]
                if isinstance(init, ir.Lambda):
                    init = ir.Lambda(
                        init.nreq, init.rest, init.body, b.items[0].name, init.line, init.column
                    )  # type: ignore
                inits.append(init)
            body = self.resolve(d.items[2], tail)
        finally:
            self.scopes.pop()
        return ir.Letrec(tuple(inits), body, tuple(names), d.line, d.column)

    def f_recur(self, d: SList, tail: bool) -> ir.Node:
        if not tail:
            raise err("recur is not in tail position", d)
        target = d.items[1]
        assert isinstance(target, Sym)
        fn = self.lookup(target)
        args = tuple(self.resolve(a) for a in d.items[2:])
        return ir.Call(fn, args, True, d.line, d.column)

    def f_assert(self, d: SList, tail: bool) -> ir.Node:
        text = d.items[2]
        assert isinstance(text, Str)
        return ir.Assert(self.resolve(d.items[1]), text.value, d.line, d.column)


# Primitives (and prelude procedures, bound in the outermost scope) whose first argument is a
# procedure they call.
_PROCEDURE_FIRST = frozenset(
    "map for-each filter reduce fold-left fold-right apply vector-map".split()
)

_prim_named = PRIMS.get

_CORE = {
    "quote": Resolver.f_quote,
    "if": Resolver.f_if,
    "begin": Resolver.f_begin,
    "or": Resolver.f_or,
    "lambda": Resolver.f_lambda,
    "let": Resolver.f_let,
    "letrec": Resolver.f_letrec,
    "#recur": Resolver.f_recur,
    "#assert": Resolver.f_assert,
}
