"""What the NumPy skeleton reader (``ndvm.lang.numpy_reader``) maps Python onto.

One table per kind of construct: the NumPy / ``math`` functions a skeleton may call and the
ndvm primitive each becomes (docs/primitives.md), the binary and unary operators, the
comparisons, and the module constants. ``np.``, ``numpy.`` and ``math.`` spellings share the
function table (``math`` has no ``clip``/``where``/``maximum``: a name missing from a module is
a ``CompileError``, as NumPy would raise ``AttributeError``).
"""

from __future__ import annotations

import ast
import math

# module aliases a skeleton may use (``import numpy as np`` is not needed and not allowed)
MODULES: dict[str, str] = {"np": "numpy", "numpy": "numpy", "math": "math"}

# name -> (ndvm primitive, number of arguments); a template ``{0}`` form when not a call
_COMMON: dict[str, tuple[str, int]] = {
    "exp": ("exp", 1),
    "log": ("log", 1),
    "log1p": ("log1p", 1),
    "expm1": ("expm1", 1),
    "sqrt": ("sqrt", 1),
    "sin": ("sin", 1),
    "cos": ("cos", 1),
    "tan": ("tan", 1),
    "sinh": ("sinh", 1),
    "cosh": ("cosh", 1),
    "tanh": ("tanh", 1),
    "fabs": ("abs", 1),
    "floor": ("floor", 1),
    "ceil": ("ceiling", 1),
    "trunc": ("truncate", 1),
    "hypot": ("hypot", 2),
}
_NUMPY_ONLY: dict[str, tuple[str, int]] = {
    "arctan": ("atan", 1),
    "arcsin": ("asin", 1),
    "arccos": ("acos", 1),
    "arctan2": ("atan", 2),
    "arcsinh": ("asinh", 1),
    "arccosh": ("acosh", 1),
    "arctanh": ("atanh", 1),
    "abs": ("abs", 1),
    "absolute": ("abs", 1),
    "power": ("expt", 2),
    "float_power": ("expt", 2),
    "square": ("square", 1),
    "cbrt": ("cbrt", 1),
    "sign": ("sign", 1),
    "clip": ("clamp", 3),
    "maximum": ("max", 2),
    "minimum": ("min", 2),
    "fmax": ("max", 2),
    "fmin": ("min", 2),
    "where": ("if", 3),
    "logaddexp": ("logaddexp", 2),
    "add": ("+", 2),
    "subtract": ("-", 2),
    "multiply": ("*", 2),
    "divide": ("/", 2),
    "true_divide": ("/", 2),
    "negative": ("-", 1),
    "mod": ("modulo", 2),
    "remainder": ("modulo", 2),
}
# NumPy functions written as a form of their arguments ({0}, {1}: the translated arguments)
TEMPLATES: dict[str, tuple[int, str]] = {
    "reciprocal": (1, "(/ 1.0 {0})"),
    "exp2": (1, "(expt 2.0 {0})"),
    "heaviside": (2, "(if (< {0} 0.0) 0.0 (if (= {0} 0.0) {1} 1.0))"),
    "zeros_like": (1, "0.0"),
    "ones_like": (1, "1.0"),
    "full_like": (2, "{1}"),
}
_MATH_ONLY: dict[str, tuple[str, int]] = {
    "atan": ("atan", 1),
    "asin": ("asin", 1),
    "acos": ("acos", 1),
    "atan2": ("atan", 2),
    "asinh": ("asinh", 1),
    "acosh": ("acosh", 1),
    "atanh": ("atanh", 1),
    "pow": ("expt", 2),
    "erf": ("erf", 1),
}
FUNCTIONS: dict[str, dict[str, tuple[str, int]]] = {
    "numpy": {**_COMMON, **_NUMPY_ONLY},
    "math": {**_COMMON, **_MATH_ONLY},
}
# log10 / log2: (log x b) with a constant base
LOG_BASES: dict[str, float] = {"log10": 10.0, "log2": 2.0}
# builtins a skeleton may call
BUILTINS: dict[str, tuple[str, int]] = {"abs": ("abs", 1), "max": ("max", 2), "min": ("min", 2)}
# reductions and array constructors: named in the error (they mix data lanes)
REDUCTIONS = frozenset(
    "sum mean std var prod cumsum cumprod max min amax amin argmax argmin median dot matmul "
    "sort diff gradient trapz trapezoid average percentile quantile ptp any all nansum nanmean "
    "array asarray zeros ones linspace arange stack concatenate reshape einsum".split()
)
CONSTANTS: dict[str, dict[str, float]] = {
    "numpy": {"pi": math.pi, "e": math.e, "inf": math.inf},
    "math": {"pi": math.pi, "e": math.e, "tau": math.tau, "inf": math.inf},
}

BINOPS: dict[type, str] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.Pow: "expt",
    ast.Mod: "modulo",
}
COMPARE: dict[type, str] = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "=",
}
# Python constructs named in "not supported" errors
CONSTRUCTS: dict[type, str] = {
    ast.Import: "import",
    ast.ImportFrom: "import",
    ast.While: "while loop",
    ast.ListComp: "list comprehension",
    ast.SetComp: "set comprehension",
    ast.DictComp: "dict comprehension",
    ast.GeneratorExp: "generator expression",
    ast.With: "with statement",
    ast.Try: "try statement",
    ast.Raise: "raise statement",
    ast.Global: "global statement",
    ast.Nonlocal: "nonlocal statement",
    ast.Delete: "del statement",
    ast.ClassDef: "class definition",
    ast.AsyncFunctionDef: "async function",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.YieldFrom: "yield",
    ast.Lambda: "lambda (outside an assignment to a local name)",
    ast.Dict: "dict",
    ast.Set: "set",
    ast.List: "list",
    ast.JoinedStr: "f-string",
    ast.Starred: "starred expression",
    ast.NamedExpr: "assignment expression (:=)",
    ast.If: "if statement (use np.where or a conditional expression)",
    ast.Assert: "assert statement",
    ast.Break: "break",
    ast.Continue: "continue",
    ast.MatMult: "matrix product (@)",
    ast.FloorDiv: "floor division (//)",
    ast.BitXor: "^ (xor)",
    ast.LShift: "shift",
    ast.RShift: "shift",
    ast.Is: "'is' comparison",
    ast.IsNot: "'is not' comparison",
    ast.In: "'in' comparison",
    ast.NotIn: "'not in' comparison",
}
# constructs allowed nowhere in a skeleton (found before translating, at their position)
FORBIDDEN: tuple[type, ...] = (
    ast.Import, ast.ImportFrom, ast.While, ast.ListComp, ast.SetComp, ast.DictComp,
    ast.GeneratorExp, ast.With, ast.Try, ast.Raise, ast.Global, ast.Nonlocal, ast.Delete,
    ast.ClassDef, ast.AsyncFunctionDef, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr,
    ast.Starred, ast.JoinedStr, ast.Dict, ast.Set, ast.List, ast.AsyncFor, ast.AsyncWith,
)  # fmt: skip
