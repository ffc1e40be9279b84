"""NumPy equation skeletons in: a never-executed subset of Python read with ``ast``.

``from_numpy(source)`` reads one function (or one expression) in the style LLM-SR and the
methods built on it ask language models for::

    def equation(t, x, v, params):
        a = params[0] * x + params[1] * x**3
        return a - params[2] * v + params[3] * np.sin(params[4] * t)

and returns the ``Program`` of the same function: its array arguments are the inputs, each
``params[i]`` a parameter ``p{i}`` (initial value 1, as LLM-SR's ``params = ones(10)``), its
locals ``let*`` bindings. The text is translated to the ndvm language (docs/language.md) and
compiled by ``ndvm.compile``, so the one front end checks and runs it; Python's ``eval``,
``exec`` and ``compile`` never see the source. docs/search.md ("NumPy skeletons") lists the
subset; anything outside it is a ``CompileError`` at the line and column of the construct.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ndvm.errors import CompileError, NdvmError
from ndvm.lang.numpy_exprs import (
    MAX_DEPTH,
    Bool,
    ExprTranslator,
    Func,
    ParamVec,
    Scope,
    fail,
    is_atom,
)
from ndvm.lang.numpy_table import BUILTINS, CONSTRUCTS, FORBIDDEN, MODULES

MAX_SOURCE_CHARS = 200_000
MAX_PARAMS = 1000
MAX_UNROLL = 10_000  # loop iterations unrolled in total
MAX_RANGE = 10_000  # iterations of one range()
MAX_EMITTED_CHARS = 2_000_000  # the translated program's text


@dataclass(frozen=True)
class Skeleton:
    """A translated skeleton: the ndvm program text, its inputs in signature order, the
    ``params`` indices it reads (ascending; ``params[i]`` is the parameter ``p{i}``), the
    function's name and the source."""

    scheme: str
    inputs: tuple[str, ...]
    used: tuple[int, ...]
    name: str
    source: str

    @property
    def n_params(self) -> int:
        """The length of the parameter vector the skeleton needs (largest index read + 1)."""
        return self.used[-1] + 1 if self.used else 0

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(f"p{i}" for i in self.used)


def _parse(source: str) -> ast.Module:
    if not isinstance(source, str):
        raise CompileError(f"skeleton source must be str, not {type(source).__name__}")
    if len(source) > MAX_SOURCE_CHARS:
        raise CompileError(f"skeleton longer than {MAX_SOURCE_CHARS} characters")
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        msg = str(e.msg).splitlines()[0] if e.msg else "invalid syntax"
        raise CompileError(f"Python syntax error: {msg}", e.lineno, (e.offset or 1)) from None
    except (RecursionError, MemoryError):
        raise CompileError("skeleton nested too deeply to read") from None
    except ValueError as e:  # a null byte, a too-long integer literal
        raise CompileError(f"Python syntax error: {str(e).splitlines()[0]}") from None
    _prescan(tree)
    return tree


def as_vector(values: Any, what: str) -> np.ndarray:
    """``values`` as a 1-D float array, or a ``CompileError`` naming ``what``."""
    try:
        return np.asarray(values, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise CompileError(f"{what} must be numbers, not {type(values).__name__}") from None


def _prescan(tree: ast.AST) -> None:
    """Before any recursive pass, without recursion: the nesting depth, dunder names and the
    constructs allowed nowhere (the first in source order is the error)."""
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    found: list[tuple[int, int, str, ast.AST]] = []
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            fail(node, f"expression nested deeper than {MAX_DEPTH} levels")
        problem = _forbidden(node)
        if problem is not None:
            found.append((getattr(node, "lineno", 0), getattr(node, "col_offset", 0), problem,
                          node))
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    if found:
        _, _, problem, node = min(found, key=lambda f: (f[0], f[1]))
        fail(node, problem)


def _forbidden(node: ast.AST) -> str | None:
    if isinstance(node, FORBIDDEN):
        return f"{CONSTRUCTS.get(type(node), type(node).__name__)} is not supported in a skeleton"
    name = (node.id if isinstance(node, ast.Name) else node.attr
            if isinstance(node, ast.Attribute) else node.arg if isinstance(node, ast.arg)
            else None)
    if name is not None and name.startswith("__"):
        return f"dunder name {name!r}"
    return None


def _main_function(tree: ast.Module, params: str) -> tuple[ast.FunctionDef | None, list[Any]]:
    """The skeleton's function (``equation`` if present, else the one taking ``params``, else
    the last) and the module-level helper definitions; docstrings are skipped."""
    defs: list[ast.FunctionDef] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef):
            defs.append(stmt)
        elif _is_docstring(stmt):
            continue
        elif isinstance(stmt, ast.Expr) and len(tree.body) == 1:
            return None, []
        else:
            fail(stmt, _stmt_name(stmt) + " at module level (expected function definitions)")
    if not defs:
        raise CompileError("no function or expression in the skeleton")
    named = [d for d in defs if d.name == "equation"]
    with_params = [d for d in defs if params in [a.arg for a in d.args.args]]
    main = (named or with_params or defs)[-1]
    return main, [d for d in defs if d is not main]


def _params_name(fn: ast.FunctionDef, params: str) -> str:
    """``params``, or the function's last argument when ``params`` is none of its arguments
    and the last one is indexed (``def f(x, p): return p[0] * x``)."""
    names = [a.arg for a in fn.args.args]
    if not names or params in names:
        return params
    last = names[-1]
    indexed = any(isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
                  and node.value.id == last for node in ast.walk(fn))
    return last if indexed else params


def _is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def _stmt_name(stmt: ast.AST) -> str:
    return CONSTRUCTS.get(type(stmt), type(stmt).__name__.lower() + " statement")


class _Reader(ExprTranslator):
    """Statements: assignments become ``let*`` bindings, ``for`` over ``range`` is unrolled."""

    def __init__(self, params: str, n_params: int | None) -> None:
        super().__init__(params, n_params)
        self.unrolled = 0

    def body(self, stmts: Sequence[ast.stmt], scope: Scope, where: ast.AST) -> str:
        """The value of a function body: its bindings around its ``return`` expression."""
        bindings: list[str] = []
        result = self._block(stmts, scope, bindings, top=True)
        if result is None:
            fail(where, "function has no return statement")
        if not bindings:
            return result
        return f"(let* ({' '.join(bindings)}) {result})"

    def _block(
        self, stmts: Sequence[ast.stmt], scope: Scope, bindings: list[str], top: bool
    ) -> str | None:
        for i, stmt in enumerate(stmts):
            if isinstance(stmt, ast.Return):
                if not top or i != len(stmts) - 1:
                    fail(stmt, "return must be the last statement of the function")
                if stmt.value is None:
                    fail(stmt, "return without a value")
                return self.number(stmt.value, scope)
            self._statement(stmt, scope, bindings)
            if len(bindings) > MAX_UNROLL * 4:
                fail(stmt, "too many local bindings")
        return None

    def _statement(self, stmt: ast.stmt, scope: Scope, bindings: list[str]) -> None:
        if _is_docstring(stmt) or isinstance(stmt, ast.Pass):
            return
        if isinstance(stmt, ast.Assign):
            if len(stmt.targets) != 1:
                fail(stmt, "chained assignment (a = b = ...)")
            self._assign(stmt.targets[0], stmt.value, scope, bindings)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            self._assign(stmt.target, stmt.value, scope, bindings)
        elif isinstance(stmt, ast.AugAssign):
            if not isinstance(stmt.target, ast.Name):
                fail(stmt, "augmented assignment to something other than a local name")
            self.check_in_place(stmt.target, scope, stmt)
            value = ast.BinOp(left=ast.Name(id=stmt.target.id, ctx=ast.Load()), op=stmt.op,
                              right=stmt.value)
            ast.copy_location(value, stmt)
            ast.copy_location(value.left, stmt.target)
            self._assign(stmt.target, value, scope, bindings)
        elif isinstance(stmt, ast.For):
            self._for(stmt, scope, bindings)
        elif isinstance(stmt, ast.FunctionDef):
            self.check_def(stmt)
            self.hold(scope, stmt.name, Func(stmt, scope), stmt)  # names looked up at the call
        else:
            fail(stmt, _stmt_name(stmt) + " is not supported in a skeleton")

    def _assign(self, target: ast.expr, value: ast.expr, scope: Scope, bindings: list[str]) -> None:
        if isinstance(target, ast.Name):
            if isinstance(value, ast.Lambda):
                self.check_lambda(value)
                self.hold(scope, target.id, Func(value, scope), target)  # late binding
                return
            val = self.value(value, scope)
            if isinstance(val, (ParamVec, Func, int)):
                self.hold(scope, target.id, val, target)
                return
            self._bind(target, val, scope, bindings)
            return
        if isinstance(target, ast.Tuple):
            parts = self.unpack(value, scope, len(target.elts))
            vals = [p if isinstance(p, (str, int)) else self.as_number(p, value) for p in parts]
            for elt, val in zip(target.elts, vals):
                if not isinstance(elt, ast.Name):
                    fail(elt, "unpacking into something other than local names")
                self._bind(elt, val, scope, bindings)
            return
        fail(target, "assignment to " + type(target).__name__.lower() + " (only local names)")

    def _bind(self, target: ast.Name, text: Any, scope: Scope, bindings: list[str]) -> None:
        if isinstance(text, Bool):
            local = self.fresh(target.id)
            bindings.append(f"({local} {text.text})")
            self.hold(scope, target.id, Bool(local), target)
            return
        if isinstance(text, int) or is_atom(text):
            self.hold(scope, target.id, text, target)  # no binding needed: a name or a literal
            return
        local = self.fresh(target.id)
        bindings.append(f"({local} {text})")
        self.hold(scope, target.id, local, target)

    def _for(self, stmt: ast.For, scope: Scope, bindings: list[str]) -> None:
        if stmt.orelse:
            fail(stmt, "for ... else")
        if not isinstance(stmt.target, ast.Name):
            fail(stmt.target, "for loop target other than a name")
        bounds = self.range_bounds(stmt.iter)
        count = len(bounds)
        self.unrolled += count
        if self.unrolled > MAX_UNROLL:
            fail(stmt, f"loops unroll to more than {MAX_UNROLL} iterations")
        for i in bounds:
            self.hold(scope, stmt.target.id, i, stmt.target)
            if self._block(stmt.body, scope, bindings, top=False) is not None:
                fail(stmt, "return inside a loop")

    # -- definitions --------------------------------------------------------------------------
    def check_def(self, fn: ast.FunctionDef) -> None:
        if fn.decorator_list:
            fail(fn.decorator_list[0], "decorators are not supported")
        if fn.name.startswith("__"):
            fail(fn, f"dunder name {fn.name!r}")
        self.check_args(fn.args, fn)

    def check_lambda(self, fn: ast.Lambda) -> None:
        self.check_args(fn.args, fn)

    def check_args(self, args: ast.arguments, node: ast.AST) -> None:
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
            fail(node, "only plain positional arguments (no *args, **kwargs, keyword-only)")
        if args.defaults:
            fail(args.defaults[0], "default argument values are not supported")
        for a in args.args:
            if a.arg.startswith("__"):
                fail(a, f"dunder name {a.arg!r}")

    def signature(
        self, fn: ast.FunctionDef, inputs: Sequence[str] | None
    ) -> tuple[list[str], dict[str, str]]:
        """The input names in order and the input each data argument reads: the arguments
        themselves; ``inputs`` naming the same arguments reorders them; other names, one per
        argument, rename them in signature order."""
        self.check_def(fn)
        args = [a.arg for a in fn.args.args if a.arg != self.params]
        if inputs is None:
            return args, {a: a for a in args}
        given = [str(x) for x in inputs]
        if sorted(given) == sorted(args):
            return given, {a: a for a in args}
        if len(given) != len(args) or len(set(given)) != len(given):
            fail(fn, f"inputs {given} do not name the function's {len(args)} data "
                     f"argument(s) {args}")
        return given, dict(zip(args, given))

    def free_inputs(self, expr: ast.expr, inputs: Sequence[str] | None) -> list[str]:
        if inputs is not None:
            return [str(x) for x in inputs]
        seen: dict[str, tuple[int, int]] = {}
        skip = set(MODULES) | set(BUILTINS) | {self.params}
        for node in ast.walk(expr):
            if isinstance(node, ast.Name) and node.id not in skip and node.id not in seen:
                seen[node.id] = (node.lineno, node.col_offset)
        return sorted(seen, key=lambda n: seen[n])

    def range_bounds(self, node: ast.expr) -> range:
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "range" and not node.keywords and 1 <= len(node.args) <= 3):
            fail(node, "for loop over something other than range(<literal>)")
        bounds = []
        for arg in node.args:
            val = _literal_int(arg)
            if val is None:
                fail(arg, "range() bound must be an integer literal")
            bounds.append(val)
        if len(bounds) == 3 and bounds[2] == 0:
            fail(node, "range() step must not be zero")
        r = range(*bounds)
        if len(r) > MAX_RANGE:
            fail(node, f"range() of more than {MAX_RANGE} iterations")
        return r


def _literal_int(node: ast.expr) -> int | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _literal_int(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.Constant) and type(node.value) is int and abs(node.value) < 10**9:
        return node.value
    return None

def translate(
    source: str,
    inputs: Sequence[str] | None = None,
    params: str = "params",
    n_params: int | None = None,
) -> Skeleton:
    """Translate a skeleton to ndvm program text (``from_numpy`` without compiling)."""
    try:
        return _translate(source, inputs, params, n_params)
    except RecursionError:  # nesting within the limits, multiplied by nested helper calls
        raise CompileError("skeleton nested too deeply to translate (helpers within "
                           "deep expressions)") from None


def _translate(
    source: str, inputs: Sequence[str] | None, params: str, n_params: int | None
) -> Skeleton:
    tree = _parse(source)
    main, helpers = _main_function(tree, params)
    if main is not None:
        params = _params_name(main, params)
    reader = _Reader(params, n_params)
    module = Scope()
    if main is None:  # one expression: free names are inputs in order of appearance
        expr = tree.body[0].value  # type: ignore[attr-defined]
        names = reader.free_inputs(expr, inputs)
        scope = module.child()
        scope.bind(params, ParamVec(expr, 0, None), expr)
        for name in names:
            reader.hold(scope, name, name, expr)
        text = reader.number(expr, scope)
        name = "<expression>"
    else:
        for helper in helpers:
            reader.check_def(helper)
            module.bind(helper.name, Func(helper, module), helper)
        module.bind(main.name, Func(main, module), main)
        names, reads = reader.signature(main, inputs)
        scope = module.child()
        for arg in main.args.args:
            val: Any = ParamVec(arg, 0, None) if arg.arg == params else reads[arg.arg]
            reader.hold(scope, arg.arg, val, arg)
        text = reader.body(main.body, scope, main)
        name = main.name
    if len(text) > MAX_EMITTED_CHARS:
        raise CompileError(f"skeleton translates to more than {MAX_EMITTED_CHARS} characters")
    used = tuple(sorted(reader.used))
    if used and used[-1] >= MAX_PARAMS:
        raise CompileError(f"more than {MAX_PARAMS} parameters")
    return Skeleton(text, tuple(names), used, name, source)


def from_numpy(
    source: str,
    inputs: Sequence[str] | None = None,
    params: str = "params",
    *,
    init: Any = None,
    n_params: int | None = None,
    **compile_options: Any,
) -> Any:
    """Compile a NumPy equation skeleton (a never-executed subset of Python) to a ``Program``.

    Args:
        source: one function definition (``def equation(x, v, params): ...``), helper
            functions beside it allowed, or one expression (``params[0] * np.exp(x)``).
        inputs: the input names. For a function: its arguments other than ``params`` (the
            default, in signature order); given, either those arguments in another order
            (the order of ``X`` columns) or one new name per argument, in signature order
            (the program's inputs are then these names). For an expression: its free names
            (default: every name other than ``params``/``np``/``numpy``/``math``, in order of
            first appearance).
        params: the name of the parameter vector argument.
        init: initial parameter values (LLM-SR layout: ``init[i]`` is ``params[i]``);
            default ones, as LLM-SR's ``params = np.ones(MAX_NPARAMS)``.
        n_params: the length of the parameter vector (default: the largest index used + 1);
            a negative index ``params[-k]`` needs it.
        compile_options: passed to ``ndvm.compile`` (backend, dtype, limits, ...).

    Returns the ``Program`` with a parameter ``p{i}`` for each ``params[i]`` the skeleton reads
    (ascending; an index it never reads is no parameter: nothing to fit) and the skeleton's
    inputs; ``program.source`` is the translated text. Raises ``CompileError``
    with the line and column of the first construct outside the subset (docs/search.md).
    """
    from ndvm.api import compile as ndvm_compile

    if n_params is not None and (not isinstance(n_params, (int, np.integer)) or n_params < 0):
        raise CompileError(f"n_params must be a non-negative integer, not {n_params!r}")
    skel = translate(source, inputs, params, n_params)
    n = skel.n_params if n_params is None else int(n_params)
    if n < skel.n_params:
        raise CompileError(f"the skeleton uses params[{skel.n_params - 1}], n_params is {n}")
    values = np.ones(n) if init is None else as_vector(init, "init")
    if values.shape[0] < n:
        raise CompileError(f"init has {values.shape[0]} values, the skeleton needs {n}")
    specs = [(f"p{i}", float(values[i])) for i in skel.used]
    clash = set(skel.inputs) & {s[0] for s in specs}
    if clash:
        raise CompileError(f"input name {sorted(clash)[0]!r} clashes with a parameter name")
    try:
        return ndvm_compile(skel.scheme, params=specs, inputs=skel.inputs, **compile_options)
    except NdvmError as e:  # e.g. the translation is past Limits.max_forms or max nesting
        raise CompileError(f"skeleton could not be compiled: {e.message}") from None
