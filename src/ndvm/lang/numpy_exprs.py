"""Expressions of a NumPy skeleton -> ndvm program text (``ndvm.lang.numpy_reader``).

Every value of the translation is one of: program text of a number (``str``), a per-lane
boolean (``Bool``, from comparisons: what ``np.where`` and conditional expressions test), a
literal loop index (``int``, from an unrolled ``for``), the parameter vector or a slice of it
(``ParamVec``), or a function (``Func``: a helper ``def`` or a local ``lambda``, inlined at
each call). Nothing here evaluates Python: names are looked up in ``Scope`` and the module
tables of ``ndvm.lang.numpy_table``.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from ndvm.errors import CompileError
from ndvm.lang.numpy_table import (
    BINOPS,
    BUILTINS,
    COMPARE,
    CONSTANTS,
    CONSTRUCTS,
    FUNCTIONS,
    LOG_BASES,
    MODULES,
    REDUCTIONS,
    TEMPLATES,
)

MAX_DEPTH = 200  # syntax-tree nesting (a 10^5-deep expression is a CompileError, not a crash)
MAX_INLINE = 16  # nested helper calls
MAX_LITERAL = 1e300
_EXACT = 2**53  # integers kept exact (static) up to this size
_PARAM = re.compile(r"^p\d+$")  # params[i] is the program's p{i}
_LITERAL = re.compile(r"^[+-]?(\d|\.\d)")  # the text of a literal (repr of a float)


def fail(node: ast.AST | None, message: str) -> NoReturn:
    """A ``CompileError`` at ``node``'s line and column (1-based)."""
    line = getattr(node, "lineno", None)
    col = getattr(node, "col_offset", None)
    raise CompileError(message, line, None if col is None else col + 1)


@dataclass(frozen=True)
class Bool:
    text: str


@dataclass(frozen=True)
class ParamVec:
    node: ast.AST
    offset: int
    length: int | None  # None: the whole vector (its length is n_params)


@dataclass(frozen=True)
class Func:
    node: ast.FunctionDef | ast.Lambda
    closure: Scope


class Scope:
    """Python names -> translation values, with the enclosing function's scope behind."""

    def __init__(self, parent: Scope | None = None) -> None:
        self.names: dict[str, Any] = {}
        self.parent = parent

    def bind(self, name: str, value: Any, node: ast.AST) -> None:
        if name.startswith("__"):
            fail(node, f"dunder name {name!r}")
        self.names[name] = value

    def lookup(self, name: str) -> Any:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.names:
                return scope.names[name]
            scope = scope.parent
        return None

    def child(self) -> Scope:
        return Scope(self)


class ExprTranslator:
    """Expressions; ``body`` (statements) is the subclass's."""

    def __init__(self, params: str, n_params: int | None = None) -> None:
        self.params = params
        self.n_params = n_params
        self.used: set[int] = set()  # params[i] indices the skeleton reads
        self.counter = 0
        self.active: list[ast.AST] = []  # helpers being inlined (recursion is an error)
        self.refs: dict[str, int] = {}  # array symbol -> Python names holding it now

    def body(self, stmts: Sequence[ast.stmt], scope: Scope, where: ast.AST) -> str:
        raise NotImplementedError

    def hold(self, scope: Scope, name: str, val: Any, node: ast.AST) -> None:
        """Bind ``name`` in ``scope``, counting the names that hold each array (a symbol):
        ``a = x`` makes ``a`` and ``x`` one array, which NumPy's ``a += ...`` changes in place
        (see ``check_in_place``)."""
        self.release(scope.names.get(name))
        sym = _symbol(val)
        if sym is not None:
            self.refs[sym] = self.refs.get(sym, 0) + 1
        scope.bind(name, val, node)

    def release(self, val: Any) -> None:
        sym = _symbol(val)
        if sym is not None:
            self.refs[sym] -= 1

    def check_in_place(self, target: ast.Name, scope: Scope, node: ast.AST) -> None:
        """``target op= ...`` on an array another live name holds too: NumPy would change both
        (an alias of an input, of a caller's argument, or ``b = a``); rebinding would not."""
        sym = _symbol(scope.lookup(target.id))
        if sym is not None and self.refs.get(sym, 0) > 1:
            fail(node, f"augmented assignment to {target.id!r}, whose array another name "
                       f"holds too: NumPy would change both in place (write {target.id} = "
                       f"{target.id} <op> ...)")

    def fresh(self, name: str) -> str:
        self.counter += 1
        return f"{name}%{self.counter}"

    # -- values -----------------------------------------------------------------------------
    def number(self, node: ast.expr, scope: Scope) -> str:
        return self.as_number(self.value(node, scope), node)

    def boolean(self, node: ast.expr, scope: Scope) -> str:
        val = self.value(node, scope)
        if isinstance(val, Bool):
            return val.text
        return f"(not (= {self.as_number(val, node)} 0.0))"

    def as_number(self, val: Any, node: ast.AST) -> str:
        if isinstance(val, str):
            return val
        if isinstance(val, Bool):
            return f"(if {val.text} 1.0 0.0)"
        if isinstance(val, int):
            return repr(float(val))
        if isinstance(val, ParamVec):
            fail(node, f"'{self.params}' used as a number (index it: {self.params}[0])")
        fail(node, "a function used as a number")

    def value(self, node: ast.expr, scope: Scope) -> Any:
        method = getattr(self, "_" + type(node).__name__, None)
        if method is None:
            what = CONSTRUCTS.get(type(node), type(node).__name__)
            fail(node, f"{what} is not supported in a skeleton")
        return method(node, scope)

    def _Constant(self, node: ast.Constant, scope: Scope) -> Any:
        v = node.value
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            fail(node, f"literal {type(v).__name__} is not a number")
        if isinstance(v, int) and abs(v) > 2**1000:
            fail(node, "integer literal too large")
        f = float(v)
        if not math.isfinite(f) or abs(f) > MAX_LITERAL:
            fail(node, "numeric literal too large (at most 1e300)")
        if isinstance(v, int) and abs(v) <= _EXACT:
            return v  # an int stays static: an index, a range bound, arithmetic of them
        return repr(f)

    def _Name(self, node: ast.Name, scope: Scope) -> Any:
        if node.id.startswith("__"):
            fail(node, f"dunder name {node.id!r}")
        val = scope.lookup(node.id)
        if val is not None:
            return val
        if node.id in MODULES:
            fail(node, f"module {node.id!r} used as a value")
        fail(node, f"unknown name {node.id!r}")

    def _Attribute(self, node: ast.Attribute, scope: Scope) -> Any:
        module, attr = self._module_attr(node, scope)
        if attr in CONSTANTS[module]:
            value = CONSTANTS[module][attr]
            if not math.isfinite(value):
                fail(node, f"{attr} is not a finite number")
            return repr(value)
        fail(node, f"{node.value.id}.{attr} used as a value")  # type: ignore[attr-defined]

    def _module_attr(self, node: ast.Attribute, scope: Scope) -> tuple[str, str]:
        if node.attr.startswith("__"):
            fail(node, f"dunder attribute {node.attr!r}")
        base = node.value
        if not isinstance(base, ast.Name) or base.id not in MODULES or scope.lookup(base.id):
            fail(node, f"attribute access .{node.attr} (only np./numpy./math. names)")
        module = MODULES[base.id]
        known = FUNCTIONS[module].keys() | CONSTANTS[module].keys() | LOG_BASES.keys()
        if module == "numpy":
            known = known | TEMPLATES.keys()
        if attr_reduces(module, node.attr):
            fail(node, f"{base.id}.{node.attr} reduces over the data or builds an array: a "
                       "skeleton is a function of one data point")
        if node.attr not in known:
            fail(node, f"{base.id}.{node.attr} is not supported")
        return module, node.attr

    def _UnaryOp(self, node: ast.UnaryOp, scope: Scope) -> Any:
        if isinstance(node.op, (ast.Not, ast.Invert)):
            return Bool(f"(not {self._bool_operand(node.operand, scope)})")
        val = self.value(node.operand, scope)
        if isinstance(val, int):
            return -val if isinstance(node.op, ast.USub) else val
        text = self.as_number(val, node.operand)
        if isinstance(node.op, ast.UAdd):
            return text
        if _is_literal(text):
            return repr(-float(text))
        return f"(- {text})"

    def _bool_operand(self, node: ast.expr, scope: Scope) -> str:
        val = self.value(node, scope)
        if not isinstance(val, Bool):
            fail(node, "logical operator on a number (compare first: x > 0)")
        return val.text

    def _BinOp(self, node: ast.BinOp, scope: Scope) -> Any:
        if isinstance(node.op, (ast.BitAnd, ast.BitOr)):
            op = "and" if isinstance(node.op, ast.BitAnd) else "or"
            left = self._bool_operand(node.left, scope)
            return Bool(f"({op} {left} {self._bool_operand(node.right, scope)})")
        prim = BINOPS.get(type(node.op))
        if prim is None:
            fail(node, f"{CONSTRUCTS.get(type(node.op), 'operator')} is not supported")
        a, b = self.value(node.left, scope), self.value(node.right, scope)
        if isinstance(a, int) and isinstance(b, int) and prim in ("+", "-", "*"):
            out = a + b if prim == "+" else a - b if prim == "-" else a * b
            if abs(out) <= _EXACT:
                return out
        left, right = self.as_number(a, node.left), self.as_number(b, node.right)
        return power(left, right) if prim == "expt" else f"({prim} {left} {right})"

    def _BoolOp(self, node: ast.BoolOp, scope: Scope) -> Any:
        op = "and" if isinstance(node.op, ast.And) else "or"
        parts = [self._bool_operand(v, scope) for v in node.values]
        return Bool(f"({op} {' '.join(parts)})")

    def _Compare(self, node: ast.Compare, scope: Scope) -> Any:
        terms = [self.number(node.left, scope)] + [self.number(c, scope) for c in node.comparators]
        parts = []
        for i, op in enumerate(node.ops):
            if isinstance(op, ast.NotEq):
                parts.append(f"(not (= {terms[i]} {terms[i + 1]}))")
                continue
            prim = COMPARE.get(type(op))
            if prim is None:
                fail(node, f"{CONSTRUCTS.get(type(op), 'comparison')} is not supported")
            parts.append(f"({prim} {terms[i]} {terms[i + 1]})")
        return Bool(parts[0] if len(parts) == 1 else f"(and {' '.join(parts)})")

    def _IfExp(self, node: ast.IfExp, scope: Scope) -> Any:
        test = self.boolean(node.test, scope)
        return f"(if {test} {self.number(node.body, scope)} {self.number(node.orelse, scope)})"

    def _Subscript(self, node: ast.Subscript, scope: Scope) -> Any:
        vec = self.value(node.value, scope)
        if not isinstance(vec, ParamVec):
            fail(node, f"indexing is only for the parameter vector '{self.params}'")
        if isinstance(node.slice, ast.Slice):
            return self._slice(vec, node.slice, scope)
        i = self.static_int(node.slice, scope)
        return self.param_at(vec, i, node)

    def _slice(self, vec: ParamVec, sl: ast.Slice, scope: Scope) -> ParamVec:
        if sl.step is not None:
            fail(sl, "slice with a step")
        length = vec.length if vec.length is not None else self.n_params
        lo = 0 if sl.lower is None else self.static_int(sl.lower, scope)
        hi = length if sl.upper is None else self.static_int(sl.upper, scope)
        if lo < 0 or hi is None or hi < 0:
            if length is None:
                fail(sl, "a slice from the end needs the vector's length (n_params=)")
            lo = lo + length if lo < 0 else lo
            hi = length if hi is None else (hi + length if hi < 0 else hi)
        if length is not None:
            hi = min(hi, length)
        return ParamVec(sl, vec.offset + lo, max(0, hi - lo))

    def param_at(self, vec: ParamVec, i: int, node: ast.AST) -> str:
        length = vec.length if vec.length is not None else self.n_params
        if i < 0:
            if length is None:
                fail(node, f"{self.params}[{i}] needs the vector's length (n_params=)")
            i += length
        if i < 0 or (length is not None and i >= length):
            fail(node, f"index {i} out of range of {self.params} (length {length})")
        index = vec.offset + i
        if index >= 1000:
            fail(node, f"parameter index {index} too large")
        self.used.add(index)
        return f"p{index}"

    def static_int(self, node: ast.expr, scope: Scope) -> int:
        """An index known when translating: a literal, a loop variable, or +, -, * of them."""
        val = self.value(node, scope)
        if isinstance(val, int):
            return val
        if isinstance(val, str) and _is_literal(val) and float(val).is_integer():
            if isinstance(node, ast.Constant) and isinstance(node.value, float):
                fail(node, "index must be an integer")
            return int(float(val))
        fail(node, "index must be an integer literal or a loop variable")

    def unpack(self, node: ast.expr, scope: Scope, n: int) -> list[Any]:
        """The values of ``a, b, c = <node>``: a tuple or the parameter vector (a slice)."""
        if isinstance(node, ast.Tuple):
            if len(node.elts) != n:
                fail(node, f"unpacking {len(node.elts)} values into {n} names")
            return [self.value(e, scope) for e in node.elts]
        vec = self.value(node, scope)
        if not isinstance(vec, ParamVec):
            fail(node, "only a tuple or the parameter vector can be unpacked")
        if vec.length is not None and vec.length != n:
            fail(node, f"unpacking {vec.length} parameters into {n} names")
        whole = ParamVec(vec.node, vec.offset, n)
        return [self.param_at(whole, i, node) for i in range(n)]

    def _Call(self, node: ast.Call, scope: Scope) -> Any:
        if node.keywords:
            fail(node.keywords[0], "keyword arguments are not supported")
        func = node.func
        if isinstance(func, ast.Attribute):
            module, name = self._module_attr(func, scope)
            return self._module_call(module, name, node, scope)
        if isinstance(func, ast.Name):
            target = scope.lookup(func.id)
            if isinstance(target, Func):
                return self.inline(target, node, scope)
            if target is None and func.id in BUILTINS:
                prim, arity = BUILTINS[func.id]
                return self._prim(prim, arity, node, scope, f"{func.id}()")
            if target is None and func.id == "range":
                fail(node, "range() outside a for loop")
            fail(func, f"call of {func.id!r}, which is not a known function")
        fail(node, "call of an expression (only names and np./math. functions)")

    def _module_call(self, module: str, name: str, node: ast.Call, scope: Scope) -> Any:
        label = f"{module}.{name}"
        if name in LOG_BASES:
            x = self._prim("log", 1, node, scope, label)[:-1]
            return f"{x} {LOG_BASES[name]!r})"
        if module == "numpy" and name in TEMPLATES:
            arity, form = TEMPLATES[name]
            if len(node.args) != arity:
                fail(node, f"{label} takes {arity} argument(s), got {len(node.args)}")
            return form.format(*(self.number(a, scope) for a in node.args))
        if name not in FUNCTIONS[module]:
            fail(node, f"{label} is not a function")
        prim, arity = FUNCTIONS[module][name]
        if module == "math" and name == "log" and len(node.args) == 2:
            arity = 2
        if prim == "if":
            if len(node.args) != 3:
                fail(node, f"{label} takes 3 arguments here (condition, x, y)")
            cond = self.boolean(node.args[0], scope)
            a, b = (self.number(x, scope) for x in node.args[1:])
            return f"(if {cond} {a} {b})"
        if prim == "clamp" and len(node.args) == 3:
            return self._clip(node, scope)
        return self._prim(prim, arity, node, scope, label)

    def _clip(self, node: ast.Call, scope: Scope) -> str:
        """``np.clip(x, lo, hi)``; a ``None`` bound is no bound (NumPy's meaning)."""
        x, lo, hi = node.args
        none_lo, none_hi = (isinstance(a, ast.Constant) and a.value is None for a in (lo, hi))
        if none_lo and none_hi:
            fail(node, "np.clip with both bounds None")
        xs = self.number(x, scope)
        if none_lo:
            return f"(min {xs} {self.number(hi, scope)})"
        if none_hi:
            return f"(max {xs} {self.number(lo, scope)})"
        return f"(clamp {xs} {self.number(lo, scope)} {self.number(hi, scope)})"

    def _prim(self, prim: str, arity: int, node: ast.Call, scope: Scope, label: str) -> str:
        if len(node.args) != arity:
            fail(node, f"{label} takes {arity} argument(s), got {len(node.args)}")
        args = [self.number(a, scope) for a in node.args]
        return power(*args) if prim == "expt" else f"({prim} {' '.join(args)})"

    def inline(self, func: Func, node: ast.Call, scope: Scope) -> Any:
        fn = func.node
        if fn in self.active:
            fail(node, "recursive call of a helper function")
        if len(self.active) >= MAX_INLINE:
            fail(node, f"helper calls nested deeper than {MAX_INLINE}")
        names = [a.arg for a in fn.args.args]
        if len(node.args) != len(names):
            fail(node, f"helper takes {len(names)} argument(s), got {len(node.args)}")
        inner = func.closure.child()
        bindings = []
        for name, arg in zip(names, node.args):
            val = self.value(arg, scope)
            if isinstance(val, str) and not is_atom(val):
                local = self.fresh(name)
                bindings.append(f"({local} {val})")
                val = local
            self.hold(inner, name, val, arg)
        self.active.append(fn)
        try:
            if isinstance(fn, ast.Lambda):
                text = self.number(fn.body, inner)
            else:
                text = self.body(fn.body, inner, fn)
        finally:
            self.active.pop()
        for held in inner.names.values():  # the helper's names end with the call
            self.release(held)
        return f"(let* ({' '.join(bindings)}) {text})" if bindings else text


def attr_reduces(module: str, name: str) -> bool:
    return module == "numpy" and name in REDUCTIONS


def power(base: str, exponent: str) -> str:
    """``base ** exponent``: NumPy's own fast paths for a literal 2 (square) and 0.5 (sqrt),
    which are also the ndvm primitives cheaper than ``expt``; ``expt`` otherwise."""
    if _is_literal(exponent):
        if float(exponent) == 2.0:
            return f"(square {base})"
        if float(exponent) == 0.5:
            return f"(sqrt {base})"
    return f"(expt {base} {exponent})"


def _symbol(val: Any) -> str | None:
    """The symbol an array value is held as (an input or a let-bound local), else None
    (literals, loop indices, parameters — NumPy scalars, never changed in place — and
    compound texts, which no name holds)."""
    text = val.text if isinstance(val, Bool) else val
    if isinstance(text, str) and is_atom(text) and not _is_literal(text):
        return None if _PARAM.match(text) else text
    return None


def _is_literal(text: str) -> bool:
    return _LITERAL.match(text) is not None


def is_atom(text: str) -> bool:
    return "(" not in text and " " not in text
