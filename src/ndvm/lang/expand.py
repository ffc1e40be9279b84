"""Expander: surface forms -> core forms, still as data (with source positions kept).

Core forms left for the resolver: ``quote if lambda let letrec begin or #assert %void
#recur`` and applications. Derived forms (``cond case and when unless let* named-let do
loop/recur letrec* define``) are rewritten here. Generated names start with ``#``, which the
reader never produces for a symbol, so they cannot capture user names.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

from ndvm.errors import CompileError, UnsupportedForm
from ndvm.lang.datum import Bool, Datum, SList, Str, Sym, to_source
from ndvm.lang.forms import BODY_HEADS, MUTATION_FORMS, RESERVED, SPECIAL_FORMS, UNSUPPORTED_FORMS


def err(msg: str, at: Datum) -> CompileError:
    return CompileError(msg, at.line, at.column)


def sym(name: str, at: Datum) -> Sym:
    return Sym(name, at.line, at.column)


def lst(items: list[Datum] | tuple[Datum, ...], at: Datum) -> SList:
    return SList(tuple(items), None, at.line, at.column)


def head_name(d: Datum) -> str | None:
    if isinstance(d, SList) and d.items and isinstance(d.items[0], Sym):
        return d.items[0].name
    return None


class Expander:
    """Rewrites one program. ``loop_stack`` holds the hidden names of enclosing ``loop``s."""

    def __init__(self, sequential_let: bool = False) -> None:
        self.sequential_let = sequential_let  # the dmci dialect: let binds like let*
        self._ids: Iterator[int] = itertools.count()
        self.loop_stack: list[tuple[str, int]] = []
        self.shadowed: list[str] = []  # special-form names bound as variables in scope

    def binding(self, names: Iterable[Datum]) -> AbstractContextManager[None]:
        """Scope in which ``names`` are variables (a bound ``loop`` is no longer a form)."""
        pushed = [n.name for n in names if isinstance(n, Sym) and n.name in SPECIAL_FORMS]
        return self._shadowing(pushed) if pushed else _UNCHANGED

    @contextmanager
    def _shadowing(self, pushed: list[str]) -> Iterator[None]:
        self.shadowed.extend(pushed)
        try:
            yield
        finally:
            del self.shadowed[len(self.shadowed) - len(pushed) :]

    def is_form(self, name: str) -> bool:
        return name not in self.shadowed

    def gensym(self, base: str, at: Datum) -> Sym:
        return sym(f"#{base}{next(self._ids)}", at)

    # -- entry points -------------------------------------------------------------------
    def expand_body(self, forms: tuple[Datum, ...], at: Datum) -> Datum:
        """A body (top level or lambda/let body): defines become one ``letrec``."""
        if not forms:
            raise err("empty body: expected at least one expression", at)
        if not any(head_name(f) in BODY_HEADS for f in forms):  # the common case
            exprs = [self.expand(f) for f in forms]
            return exprs[0] if len(exprs) == 1 else lst([sym("begin", at), *exprs], at)
        flat = list(self._splice_begins(forms))
        defined = [self._defined_name(f) for f in flat if head_name(f) == "define"]
        with self.binding(defined):
            return self._expand_body(flat, at)

    def _defined_name(self, form: Datum) -> Datum:
        assert isinstance(form, SList)
        target = form.items[1] if len(form.items) > 1 else form
        if isinstance(target, SList) and target.items:
            return target.items[0]
        return target

    def _expand_body(self, flat: list[Datum], at: Datum) -> Datum:
        if not any(head_name(f) == "define" for f in flat):
            exprs = [self.expand(f) for f in flat]
            return exprs[0] if len(exprs) == 1 else lst([sym("begin", at), *exprs], at)
        bindings: list[Datum] = []
        for i, form in enumerate(flat):
            if head_name(form) == "define":
                name, value = self._define_parts(form)
                bindings.append(lst([name, value], form))
            elif i == len(flat) - 1:
                break
            else:
                bindings.append(lst([self.gensym("_", form), self.expand(form)], form))
        last = flat[-1]
        if head_name(last) == "define":
            body: Datum = sym("#void", last)
        else:
            body = self.expand(last)
        return lst([sym("letrec", at), lst(bindings, at), body], at)

    def _splice_begins(self, forms: tuple[Datum, ...]) -> Iterator[Datum]:
        for f in forms:
            if head_name(f) == "begin" and any(
                head_name(x) == "define"
                for x in f.items[1:]  # type: ignore[union-attr]
            ):
                yield from self._splice_begins(f.items[1:])  # type: ignore[union-attr]
            else:
                yield f

    def _define_parts(self, form: SList) -> tuple[Sym, Datum]:
        if len(form.items) < 2:
            raise err("define: expected (define name expr) or (define (name args) body)", form)
        target = form.items[1]
        if isinstance(target, SList):
            if not target.items or not isinstance(target.items[0], Sym):
                raise err("define: the procedure name must be a symbol", form)
            name = target.items[0]
            self._check_bindable(name)
            formals = SList(target.items[1:], target.tail, target.line, target.column)
            lam = lst([sym("lambda", form), formals, *form.items[2:]], form)
            return name, self.f_lambda(lam)
        if not isinstance(target, Sym):
            raise err("define: expected a symbol to define", target)
        self._check_bindable(target)
        if len(form.items) != 3:
            raise err("define: expected exactly one expression after the name", form)
        return target, self.expand(form.items[2])

    def _check_bindable(self, name: Datum) -> None:
        if not isinstance(name, Sym):
            raise err(f"expected a variable name, got {to_source(name)}", name)
        if name.name in RESERVED:
            raise err(f"cannot bind the special form name {name.name!r}", name)

    # -- expressions --------------------------------------------------------------------
    def expand(self, d: Datum) -> Datum:
        tp = type(d)
        if tp is Sym:
            if d.name in SPECIAL_FORMS and self.is_form(d.name):  # type: ignore[union-attr]
                self._form_as_value(d)  # type: ignore[arg-type]
            return d
        if tp is not SList:
            return d
        items = d.items  # type: ignore[union-attr]
        if d.tail is not None:  # type: ignore[union-attr]
            raise err("dotted list is not a valid expression (quote it for data)", d)
        if not items:
            raise err("empty application '()' (use '() for the empty list)", d)
        head = items[0]
        if type(head) is Sym and head.name in _HEADS and self.is_form(head.name):
            return self._form(head.name, d)  # type: ignore[arg-type]
        out: list[Datum] = []
        same = True
        shadowed = self.shadowed
        for x in items:  # an application: atoms inline, lists recursively
            tx = type(x)
            if tx is SList:
                y = self.expand(x)
                same = same and y is x
                out.append(y)
                continue
            if tx is Sym and x.name in SPECIAL_FORMS and x.name not in shadowed:  # type: ignore
                self._form_as_value(x)  # type: ignore[arg-type]
            out.append(x)
        # an application whose parts expand to themselves is already core
        return d if same else SList(tuple(out), None, d.line, d.column)

    def _form_as_value(self, d: Sym) -> None:
        if d.name == "recur":
            raise err("recur used as a value: it may only be called, in tail position", d)
        raise err(f"special form {d.name!r} used as a value", d)

    def _form(self, name: str, d: SList) -> Datum:
        method = _FORMS.get(name)
        if method is not None:
            return method(self, d)
        if name in MUTATION_FORMS:
            raise UnsupportedForm(
                f"{name} is not supported: the heap is write-once (no mutation in the language)",
                d.line,
                d.column,
            )
        raise UnsupportedForm(f"{name}: {UNSUPPORTED_FORMS[name]}", d.line, d.column)

    def _args(self, d: SList, lo: int, hi: int | None, usage: str) -> tuple[Datum, ...]:
        args = d.items[1:]
        if len(args) < lo or (hi is not None and len(args) > hi):
            raise err(f"bad {d.items[0]} form: expected {usage}", d)
        return args

    def f_quote(self, d: SList) -> Datum:
        self._args(d, 1, 1, "(quote datum)")
        return d

    def f_if(self, d: SList) -> Datum:
        args = self._args(d, 2, 3, "(if test then [else])")
        out = [sym("if", d), *(self.expand(a) for a in args)]
        if len(args) == 2:
            out.append(sym("#void", d))
        return lst(out, d)

    def f_begin(self, d: SList) -> Datum:
        args = self._args(d, 1, None, "(begin expr ...)")
        for a in args:
            if head_name(a) == "define":
                raise err("define is only allowed at the start of a body or at top level", a)
        return lst([sym("begin", d), *(self.expand(a) for a in args)], d)

    def f_define(self, d: SList) -> Datum:
        raise err("define is only allowed at the start of a body or at top level", d)

    def f_params(self, d: SList) -> Datum:
        raise err("params header is only allowed as the first form of a program", d)

    def f_else(self, d: SList) -> Datum:
        raise err("else outside cond/case", d)

    def f_lambda(self, d: SList) -> Datum:
        args = self._args(d, 2, None, "(lambda (args ...) body ...)")
        formals = args[0]
        self._check_formals(formals)
        saved, self.loop_stack = self.loop_stack, []
        try:
            with self.binding(_formal_names(formals)):
                body = self.expand_body(args[1:], d)
        finally:
            self.loop_stack = saved
        return lst([sym("lambda", d), formals, body], d)

    def _check_formals(self, formals: Datum) -> None:
        if isinstance(formals, Sym):
            self._check_bindable(formals)
            return
        if not isinstance(formals, SList):
            raise err("lambda: formals must be a list of symbols or a symbol", formals)
        seen: set[str] = set()
        for f in (*formals.items, *(() if formals.tail is None else (formals.tail,))):
            self._check_bindable(f)
            assert isinstance(f, Sym)
            if f.name in seen:
                raise err(f"duplicate parameter name {f.name!r}", f)
            seen.add(f.name)

    def _bindings(self, d: SList, spec: Datum) -> list[tuple[Sym, Datum]]:
        if not isinstance(spec, SList) or spec.tail is not None:
            raise err(f"{d.items[0]}: bindings must be a list of (name expr)", spec)
        out: list[tuple[Sym, Datum]] = []
        for b in spec.items:
            if not isinstance(b, SList) or len(b.items) != 2 or b.tail is not None:
                raise err(f"{d.items[0]}: each binding must be (name expr)", b)
            self._check_bindable(b.items[0])
            out.append((b.items[0], b.items[1]))  # type: ignore[arg-type]
        return out

    def f_let(self, d: SList) -> Datum:
        if len(d.items) >= 2 and isinstance(d.items[1], Sym):
            return self._named_let(d)
        if self.sequential_let:
            return self.f_let_star(d)
        args = self._args(d, 2, None, "(let ((name expr) ...) body ...)")
        binds = self._bindings(d, args[0])
        names = [n.name for n, _ in binds]
        for i, (n, _) in enumerate(binds):
            if n.name in names[:i]:
                raise err(f"let: duplicate binding {n.name!r}", n)
        spec = lst([lst([n, self.expand(v)], n) for n, v in binds], args[0])
        with self.binding([n for n, _ in binds]):
            body = self.expand_body(args[1:], d)
        return lst([sym("let", d), spec, body], d)

    def _named_let(self, d: SList) -> Datum:
        args = self._args(d, 3, None, "(let name ((var init) ...) body ...)")
        name = args[0]
        self._check_bindable(name)
        binds = self._bindings(d, args[1])
        formals = lst([n for n, _ in binds], args[1])
        lam = lst([sym("lambda", d), formals, *args[2:]], d)
        with self.binding([name]):
            fn = self.f_lambda(lam)
        rec = lst([sym("letrec", d), lst([lst([name, fn], d)], d), name], d)
        return lst([rec, *(self.expand(v) for _, v in binds)], d)

    def f_let_star(self, d: SList) -> Datum:
        args = self._args(d, 2, None, "(let* ((name expr) ...) body ...)")
        binds = self._bindings(d, args[0])
        names = [n for n, _ in binds]
        with self.binding(names):
            body = self.expand_body(args[1:], d)
        if not binds:
            return lst([sym("let", d), lst([], d), body], d)
        for i in range(len(binds) - 1, -1, -1):
            n, v = binds[i]
            with self.binding(names[:i]):
                init = self.expand(v)
            body = lst([sym("let", d), lst([lst([n, init], n)], n), body], d)
        return body

    def f_letrec(self, d: SList) -> Datum:
        args = self._args(d, 2, None, "(letrec ((name expr) ...) body ...)")
        binds = self._bindings(d, args[0])
        with self.binding([n for n, _ in binds]):
            spec = lst([lst([n, self.expand(v)], n) for n, v in binds], args[0])
            body = self.expand_body(args[1:], d)
        return lst([sym("letrec", d), spec, body], d)

    def f_and(self, d: SList) -> Datum:
        args = d.items[1:]
        if not args:
            return Bool(True, d.line, d.column)
        out = self.expand(args[-1])
        for a in reversed(args[:-1]):
            out = lst([sym("if", a), self.expand(a), out, Bool(False, a.line, a.column)], a)
        return out

    def f_or(self, d: SList) -> Datum:
        args = d.items[1:]
        if not args:
            return Bool(False, d.line, d.column)
        if len(args) == 1:
            return self.expand(args[0])
        return lst([sym("or", d), *(self.expand(a) for a in args)], d)

    def f_when(self, d: SList) -> Datum:
        args = self._args(d, 2, None, f"({d.items[0]} test expr ...)")
        body = lst([sym("begin", d), *args[1:]], d)
        test = self.expand(args[0])
        if head_name(d) == "unless":
            return lst([sym("if", d), test, sym("#void", d), self.f_begin(body)], d)
        return lst([sym("if", d), test, self.f_begin(body), sym("#void", d)], d)

    def f_cond(self, d: SList) -> Datum:
        clauses = d.items[1:]
        if not clauses:
            raise err("cond: expected at least one clause", d)
        out: Datum = sym("#void", d)
        for i in range(len(clauses) - 1, -1, -1):
            c = clauses[i]
            if not isinstance(c, SList) or not c.items or c.tail is not None:
                raise err("cond: each clause must be (test expr ...)", c)
            test, body = c.items[0], c.items[1:]
            if isinstance(test, Sym) and test.name == "else":
                if i != len(clauses) - 1:
                    raise err("cond: else must be the last clause", c)
                if not body:
                    raise err("cond: else clause needs an expression", c)
                out = self.f_begin(lst([sym("begin", c), *body], c))
                continue
            if body and isinstance(body[0], Sym) and body[0].name == "=>":
                if len(body) != 2:
                    raise err("cond: expected (test => procedure)", c)
                tmp = self.gensym("t", c)
                call = lst([self.expand(body[1]), tmp], c)
                inner = lst([sym("if", c), tmp, call, out], c)
                out = lst([sym("let", c), lst([lst([tmp, self.expand(test)], c)], c), inner], c)
            elif not body:
                out = lst([sym("or", c), self.expand(test), out], c)
            else:
                then = self.f_begin(lst([sym("begin", c), *body], c))
                out = lst([sym("if", c), self.expand(test), then, out], c)
        return out

    def f_case(self, d: SList) -> Datum:
        args = self._args(d, 2, None, "(case key ((datum ...) expr ...) ... [(else expr ...)])")
        key = self.gensym("k", d)
        out: Datum = sym("#void", d)
        clauses = args[1:]
        for i in range(len(clauses) - 1, -1, -1):
            c = clauses[i]
            if not isinstance(c, SList) or len(c.items) < 2 or c.tail is not None:
                raise err("case: each clause must be ((datum ...) expr ...)", c)
            sel, body = c.items[0], c.items[1:]
            if isinstance(body[0], Sym) and body[0].name == "=>":
                if len(body) != 2:
                    raise err("case: expected (... => procedure)", c)
                then: Datum = lst([self.expand(body[1]), key], c)
            else:
                then = self.f_begin(lst([sym("begin", c), *body], c))
            if isinstance(sel, Sym) and sel.name == "else":
                if i != len(clauses) - 1:
                    raise err("case: else must be the last clause", c)
                out = then
                continue
            if not isinstance(sel, SList) or sel.tail is not None:
                raise err("case: clause must start with a list of data", c)
            tests = [lst([sym("eqv?", x), key, lst([sym("quote", x), x], x)], x) for x in sel.items]
            test: Datum = Bool(False, c.line, c.column)
            if tests:
                test = tests[0] if len(tests) == 1 else lst([sym("or", c), *tests], c)
            out = lst([sym("if", c), test, then, out], c)
        return lst([sym("let", d), lst([lst([key, self.expand(args[0])], d)], d), out], d)

    def f_do(self, d: SList) -> Datum:
        args = self._args(d, 2, None, "(do ((var init [step]) ...) (test expr ...) body ...)")
        spec, end = args[0], args[1]
        if not isinstance(spec, SList) or spec.tail is not None:
            raise err("do: expected a list of (var init [step])", spec)
        if not isinstance(end, SList) or not end.items or end.tail is not None:
            raise err("do: expected (test expr ...) after the bindings", end)
        binds, steps = [], []
        for b in spec.items:
            if not isinstance(b, SList) or len(b.items) not in (2, 3) or b.tail is not None:
                raise err("do: each binding must be (var init [step])", b)
            self._check_bindable(b.items[0])
            binds.append(lst(list(b.items[:2]), b))
            steps.append(b.items[2] if len(b.items) == 3 else b.items[0])
        name = self.gensym("do", d)
        result = (
            lst([sym("begin", end), *end.items[1:]], end)
            if len(end.items) > 1
            else sym("#void", end)
        )
        again = lst([name, *steps], d)
        body = lst([sym("begin", d), *args[2:], again], d) if len(args) > 2 else again
        loop = lst(
            [
                sym("let", d),
                name,
                lst(binds, spec),
                lst([sym("if", end), end.items[0], result, body], d),
            ],
            d,
        )
        return self._named_let(loop)

    def f_loop(self, d: SList) -> Datum:
        args = self._args(d, 2, None, "(loop ((var init) ...) body ...)")
        binds = self._bindings(d, args[0])
        name = self.gensym("loop", d)
        formals = lst([n for n, _ in binds], args[0])
        saved, self.loop_stack = self.loop_stack, []
        try:
            self.loop_stack = [(name.name, len(binds))]
            with self.binding(formals.items):
                body = self.expand_body(args[1:], d)
        finally:
            self.loop_stack = saved
        lam = lst([sym("lambda", d), formals, body], d)
        rec = lst([sym("letrec", d), lst([lst([name, lam], d)], d), name], d)
        return lst([rec, *(self.expand(v) for _, v in binds)], d)

    def f_recur(self, d: SList) -> Datum:
        if not self.loop_stack:
            raise err("recur outside of a loop body (recur may only call the innermost loop)", d)
        name, arity = self.loop_stack[-1]
        args = d.items[1:]
        if len(args) != arity:
            raise err(f"recur: the loop binds {arity} variable(s) but recur got {len(args)}", d)
        return lst([sym("#recur", d), sym(name, d), *(self.expand(a) for a in args)], d)

    def f_assert(self, d: SList) -> Datum:
        args = self._args(d, 1, 1, "(assert expr)")
        return lst([sym("#assert", d), self.expand(args[0]), Str(to_source(args[0]))], d)

    def f_quasi(self, d: SList) -> Datum:
        raise UnsupportedForm(f"{d.items[0]} is not supported", d.line, d.column)


def _formal_names(formals: Datum) -> list[Datum]:
    if isinstance(formals, SList):
        return [*formals.items, *(() if formals.tail is None else (formals.tail,))]
    return [formals]


_FORMS = {
    "quote": Expander.f_quote,
    "if": Expander.f_if,
    "begin": Expander.f_begin,
    "define": Expander.f_define,
    "params": Expander.f_params,
    "else": Expander.f_else,
    "=>": Expander.f_else,
    "lambda": Expander.f_lambda,
    "let": Expander.f_let,
    "let*": Expander.f_let_star,
    "letrec": Expander.f_letrec,
    "letrec*": Expander.f_letrec,
    "and": Expander.f_and,
    "or": Expander.f_or,
    "when": Expander.f_when,
    "unless": Expander.f_when,
    "cond": Expander.f_cond,
    "case": Expander.f_case,
    "do": Expander.f_do,
    "loop": Expander.f_loop,
    "recur": Expander.f_recur,
    "assert": Expander.f_assert,
    "quasiquote": Expander.f_quasi,
    "unquote": Expander.f_quasi,
}

# heads the expander rewrites or rejects (a list headed by any other name is an application)
_HEADS = frozenset(_FORMS) | MUTATION_FORMS | frozenset(UNSUPPORTED_FORMS)
_UNCHANGED: AbstractContextManager[None] = nullcontext()
