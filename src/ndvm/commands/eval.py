"""``ndvm eval``: evaluate a program file (or stdin) once, optionally with its gradient."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np

from ndvm.errors import NdvmError


def register(sub: Any) -> None:
    p = sub.add_parser(
        "eval",
        help="evaluate a program (and its gradient)",
        description="Evaluate a program file or '-' (stdin).",
    )
    p.add_argument("file", help="program file, or - for stdin")
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="parameter value (in the constrained space the program sees)",
    )
    p.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="input: a number, or comma-separated numbers / a JSON array for data "
        "lanes; a JSON 2-D array for a constant matrix",
    )
    p.add_argument("--grad", action="store_true", help="also print d value / d parameter")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--backend", default=None, help="reference or native (default: auto)")
    p.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    p.add_argument("--dialect", default=None, choices=("dmci",))
    p.set_defaults(func=run)


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        if "=" not in item:
            raise NdvmError(f"--{what} expects NAME=VALUE, got {item!r}")
        name, value = item.split("=", 1)
        out[name.strip()] = value.strip()
    return out


def _parse_value(text: str) -> Any:
    if text.startswith("["):
        return np.asarray(json.loads(text), dtype=np.float64)
    if "," in text:
        return np.asarray([float(x) for x in text.split(",") if x.strip()], dtype=np.float64)
    return float(text)


MAX_PRINT_CELLS = 1_000_000  # elements a printed value may have (shared parts count per path)


def _leaf(x: Any, as_json: bool) -> str:
    if isinstance(x, float) and not np.isfinite(x):
        x = str(x)
    return json.dumps(x) if as_json else repr(x)


def encode(value: Any, as_json: bool, max_cells: int = MAX_PRINT_CELLS) -> str:
    """``value`` (floats, lists, arrays, str, bool, None) as JSON or as Python prints it,
    non-finite floats as strings. Iterative and bounded: deeply nested values print, and a
    value with more than ``max_cells`` elements (e.g. a DAG of shared lists, printed once per
    path) is an ``NdvmError`` instead of a hang."""
    out: list[str] = []
    stack: list[Any] = [value]
    cells = 0
    while stack:
        x = stack.pop()
        if type(x) is _Token:
            out.append(x.text)
            continue
        cells += 1
        if cells > max_cells:
            raise NdvmError(f"the value has more than {max_cells} elements to print")
        if isinstance(x, np.ndarray):
            x = x.tolist()
        if isinstance(x, (list, tuple)):
            stack.append(_CLOSE)
            for k in range(len(x) - 1, -1, -1):
                stack.append(x[k])
                if k:
                    stack.append(_SEP)
            stack.append(_OPEN)
            continue
        out.append(_leaf(x.item() if isinstance(x, np.generic) else x, as_json))
    return "".join(out)


class _Token:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


_OPEN, _CLOSE, _SEP = _Token("["), _Token("]"), _Token(", ")


def run(args: argparse.Namespace) -> int:
    import ndvm

    name = "<stdin>" if args.file == "-" else args.file
    try:
        if args.file == "-":
            source = sys.stdin.read()
        else:
            with open(args.file, encoding="utf-8") as fh:
                source = fh.read()
        inputs = {k: _parse_value(v) for k, v in _pairs(args.input, "input").items()}
        params = _pairs(args.param, "param")
        program = ndvm.compile(
            source,
            inputs=tuple(inputs),
            backend=args.backend,
            dtype=args.dtype,
            dialect=args.dialect,
            strict=True,
        )
        unknown = [p for p in params if p not in program.params]
        if unknown:
            raise NdvmError(
                f"unknown parameter(s) {', '.join(unknown)}; the program's "
                f"parameters are: {', '.join(program.params) or 'none'}"
            )
        values = np.array([s.init for s in program.param_specs], dtype=np.float64)
        for i, pname in enumerate(program.params):
            if pname in params:
                values[i] = float(params[pname])
        theta = program.unconstrain(values)
        out: dict[str, Any] = {}
        if args.grad:
            value, grad = program.value_and_grad(theta, **inputs)
            grad = grad / program.constrain_jacobian(theta)  # d value / d parameter
            out["grad"] = {p: float(g) for p, g in zip(program.params, grad)}
        else:
            value = program.eval(theta, **inputs)
        arr = np.asarray(value)
        # a numeric array prints whole (its size is its cost); structure is bounded
        cells = MAX_PRINT_CELLS if arr.dtype == object else MAX_PRINT_CELLS + 2 * arr.size
        text = encode(arr.tolist(), args.json, cells)
    except NdvmError as exc:
        exc.source_name = exc.source_name or name
        print(exc.located(name), file=sys.stderr)
        return 1
    except (OSError, ValueError) as exc:
        print(f"{name}: error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        rest = json.dumps(out)[1:]
        print('{"value": ' + text + (", " + rest if out else "}"))
    else:
        print(f"value: {text}")
        for pname, g in out.get("grad", {}).items():
            print(f"d/d{pname}: {g}")
    return 0
