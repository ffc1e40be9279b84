"""Line counts per folder, and the size budgets CI enforces (STYLE.md 2.1).

Usage: ``python tools/sz.py [--check]``. ``--check`` exits 1 when, under ``src/``, ``cpp/`` or
``bindings/``, a Python module exceeds ``PY_MAX`` lines, a C++ source exceeds ``CPP_MAX``
lines, or a function exceeds ``FN_MAX`` lines. Python functions are measured from the AST
(``def`` line through the last line of the body; decorators and the docstring, which is
documentation rather than logic, excluded); C++ functions by a
brace-matching scan: a ``{`` that opens at namespace or class level after a ``)`` (optionally
followed by qualifiers such as ``const``, ``noexcept`` or ``override``, or a constructor's
initializer list) starts a function body, which ends at its matching ``}``. Braces inside
string and character literals and comments are ignored. Lambdas and nested blocks count
towards the function that contains them.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY_MAX = 500
CPP_MAX = 800
FN_MAX = 80
GENERATED = {"cpp/include/ndvm/prims.inc"}
CHECKED = ("src/", "cpp/", "bindings/")
CPP_SUFFIXES = (".cpp", ".hpp", ".h")

_LITERAL = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|//[^\n]*|/\*.*?\*/', re.S)
_QUALIFIERS = re.compile(
    r"\)\s*(?:const|noexcept|override|final|mutable|&|&&|\s|->\s*[\w:<>,\s*&]+)*$"
)


def python_functions(source: str) -> list[tuple[str, int, int]]:
    """``(qualified name, first line, lines)`` of every function and method in ``source``."""
    out: list[tuple[str, int, int]] = []
    stack: list[tuple[ast.AST, str]] = [(ast.parse(source), "")]
    while stack:
        node, prefix = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    end = child.end_lineno or child.lineno
                    n = end - child.lineno + 1 - _docstring_lines(child)
                    out.append((name, child.lineno, n))
                stack.append((child, name + "."))
            else:
                stack.append((child, prefix))
    return sorted(out, key=lambda f: f[1])


def _docstring_lines(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    first = fn.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        if isinstance(first.value.value, str):
            return (first.end_lineno or first.lineno) - first.lineno + 1
    return 0


def _blank_literals(text: str) -> str:
    """``text`` with literals and comments replaced by spaces (newlines kept, so lines match)."""
    return _LITERAL.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def cpp_functions(source: str) -> list[tuple[str, int, int]]:
    """``(name, first line, lines)`` of every function body at namespace or class level."""
    text = _blank_literals(source)
    out: list[tuple[str, int, int]] = []
    scopes: list[str] = []  # per open brace: "scope" (namespace/class/other) or "fn"
    start = 0
    for i, ch in enumerate(text):
        if ch == "{":
            inside_fn = "fn" in scopes
            head = text[start:i]
            if not inside_fn and _is_function_head(head):
                scopes.append("fn")
                name = _function_name(head)
                out.append((name, text.count("\n", 0, i) + 1, i))
            else:
                scopes.append("scope")
            start = i + 1
        elif ch == "}":
            kind = scopes.pop() if scopes else "scope"
            if kind == "fn" and "fn" not in scopes:
                name, line, _ = out[-1]
                out[-1] = (name, line, text.count("\n", 0, i) + 1 - line + 1)
            start = i + 1
        elif ch == ";" and "fn" not in scopes:
            start = i + 1
    return out


def _is_function_head(head: str) -> bool:
    head = head.strip()
    if not head or re.match(r"(namespace|class|struct|union|enum)\b", head.split("\n")[-1].strip()):
        return False
    if re.search(r"\b(namespace|class|struct|union|enum)\b[^()]*$", head):
        return False
    if re.search(r"=\s*$", head):  # an initializer: int x[] = {...}
        return False
    # A constructor's initializer list: ``Foo(...) : a_(x), b_{y}`` ends in ``)`` or ``}``.
    return bool(_QUALIFIERS.search(head)) or bool(re.search(r"\)\s*:\s*[\w:]+\s*[({]", head))


def _function_name(head: str) -> str:
    m = re.search(r"([~\w:]+(?:operator\s*\S+)?)\s*\(", head)
    return m.group(1) if m else "?"


def _long_functions(rel: str, path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".py":
        functions = python_functions(text)
    else:
        functions = cpp_functions(text)
    return [
        f"{rel}:{line}: {name} is {n} lines (budget {FN_MAX})"
        for name, line, n in functions
        if n > FN_MAX
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    totals: dict[str, int] = defaultdict(int)
    over: list[str] = []
    for path in sorted(ROOT.glob("**/*")):
        rel = path.relative_to(ROOT).as_posix()
        if not path.is_file() or rel in GENERATED or rel.startswith((".venv", "build", ".git")):
            continue
        if path.suffix not in (".py", *CPP_SUFFIXES):
            continue
        n = sum(1 for _ in path.open(encoding="utf-8", errors="replace"))
        totals[str(Path(rel).parent)] += n
        if not rel.startswith(CHECKED):
            continue
        limit = PY_MAX if path.suffix == ".py" else CPP_MAX
        if n > limit:
            over.append(f"{rel}: {n} lines (budget {limit})")
        over.extend(_long_functions(rel, path))
    for folder, n in sorted(totals.items()):
        print(f"{n:7d}  {folder}")
    print(f"{sum(totals.values()):7d}  total")
    for line in over:
        print("over budget:", line, file=sys.stderr)
    return 1 if (args.check and over) else 0


if __name__ == "__main__":
    sys.exit(main())
