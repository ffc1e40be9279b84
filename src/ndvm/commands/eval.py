"""``ndvm eval``: evaluate a program file (or stdin) once, optionally with its gradient."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np

from ndvm.commands.common import (
    HelpFormatter,
    add_limit_options,
    check_inputs,
    encode,
    json_safe,
    limits_from,
    number,
    print_cells,
    write_value,
)
from ndvm.errors import NdvmError
from ndvm.lang.suggest import did_you_mean

GRAD_OF = "d value / d parameter value (constrained space), summed over data lanes"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "eval",
        help="evaluate a program (and its gradient)",
        description="Evaluate a program file or '-' (stdin) once; with --grad also its "
        "gradient with respect to the parameter values.",
        formatter_class=HelpFormatter,
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
    p.add_argument("--grad", action="store_true", help=f"also print {GRAD_OF}")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--backend", default=None, help="reference or native (default: auto)")
    p.add_argument("--dtype", default="float64", choices=("float64", "float32"), help="dtype")
    p.add_argument("--dialect", default=None, choices=("dmci",), help="language dialect")
    add_limit_options(p)
    p.set_defaults(func=run)


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise NdvmError(f"--{what} expects NAME=VALUE, got {item!r}")
        name, value = item.split("=", 1)
        if name.strip() in out:
            raise NdvmError(f"--{what} {name.strip()} is given more than once")
        out[name.strip()] = value.strip()
    return out


def _parse_value(name: str, text: str) -> Any:
    from ndvm.backends.inputs import real_array
    from ndvm.textnum import parse_numbers

    def fail(why: str) -> NdvmError:
        return NdvmError(f"--input {name}={text}: {why}")

    try:
        if text.startswith("["):
            return real_array(json.loads(text), fail)
        if "," in text:
            return np.asarray(parse_numbers(text), dtype=np.float64)
    except ValueError as exc:
        raise fail(f"not numbers ({exc})") from None
    return number("--input", name, text)


def _prepare(args: argparse.Namespace) -> tuple[Any, Any, dict[str, Any]]:
    """``(program, theta, inputs)`` from the file and the options (raises on bad input)."""
    import ndvm
    from ndvm.api import free_name_message, free_names_guessed

    if args.file == "-":
        source = sys.stdin.read()
    else:
        with open(args.file, encoding="utf-8") as fh:
            source = fh.read()
    inputs = {k: _parse_value(k, v) for k, v in _pairs(args.input, "input").items()}
    params = {k: number("--param", k, v) for k, v in _pairs(args.param, "param").items()}
    check_inputs(source, inputs, complete=False)
    program = ndvm.compile(
        source,
        inputs=tuple(inputs),
        backend=args.backend,
        dtype=args.dtype,
        dialect=args.dialect,
        limits=limits_from(args),
        strict=True,
        free_params=True,  # warned below, for the names --param does not give
    )
    guessed = [p for p in program.params if p not in params]
    if free_names_guessed(program.compiled, None) and guessed:
        print(f"ndvm: warning: {free_name_message(program.compiled, guessed)}", file=sys.stderr)
    unknown = [p for p in params if p not in program.params]
    if unknown:
        hints = [h for p in unknown if (h := did_you_mean(p, program.params))]
        raise NdvmError(
            f"unknown parameter(s) {', '.join(unknown)}"
            f"{' (' + '; '.join(hints) + ')' if hints else ''}; the program's "
            f"parameters are: {', '.join(program.params) or 'none'}"
        )
    values = np.array([s.init for s in program.param_specs], dtype=np.float64)
    for i, pname in enumerate(program.params):
        if pname in params:
            values[i] = params[pname]
    theta = program.unconstrain(values)
    return program, theta, inputs


def _fail(exc: Exception, name: str, status: int) -> int:
    """Print ``exc`` as one line located in the program ``name``; return ``status``."""
    if isinstance(exc, NdvmError):
        exc.source_name = exc.source_name or name
        print(exc.located(name), file=sys.stderr)
    else:
        print(f"{name}: error: {exc}", file=sys.stderr)
    return status


def run(args: argparse.Namespace) -> int:
    """Exit status 2 when the input is wrong (the file, an option, a name, a value, the
    program does not compile), 1 when the program ran and failed (a runtime error, a limit,
    a result too large to print), else 0."""
    name = "<stdin>" if args.file == "-" else args.file
    try:
        program, theta, inputs = _prepare(args)
    except (NdvmError, OSError, ValueError) as exc:
        return _fail(exc, name, 2)
    try:
        out: dict[str, Any] = {}
        if args.grad:
            value, grad = program.value_and_grad(theta, None, inputs)
            grad = grad / program.constrain_jacobian(theta)  # d value / d parameter
            out["grad"] = {p: float(g) for p, g in zip(program.params, grad)}
            out["grad_of"] = GRAD_OF
        else:
            value = program.eval(theta, inputs)
        cells = print_cells(value)
        text = encode(np.asarray(value).tolist(), args.json, cells)
    except (NdvmError, OSError, ValueError) as exc:
        return _fail(exc, name, 1)
    if args.json:
        rest = json.dumps(json_safe(out), allow_nan=False)[1:]
        print('{"value": ' + text + (", " + rest if out else "}"))
    else:
        print(f"value: {text}")
        if "grad" in out:
            print(f"gradient ({GRAD_OF}):")
        for pname, g in out.get("grad", {}).items():
            print(f"d/d{pname}: {write_value(g)}")
    return 0
