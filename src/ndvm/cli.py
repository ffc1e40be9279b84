"""ndvm: evaluate, fit and search model programs with one differentiable native evaluator.

Each subcommand lives in ``ndvm.commands.<name>`` and registers its own parser. Exit status 2
is an input or usage error, 1 a command that ran and did not succeed (``ndvm eval``: a run-time
error; ``ndvm fit``: an unconverged fit), 0 success. A feature that
needs a missing optional extra prints one line naming it and exits with status 2, as does a
numeric option given something that is not a number (``Parser``); Ctrl-C exits
with status 130; a closed output pipe (``ndvm report | head``) ends the command quietly.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings
from typing import Any

# Each module defines ``register(subparsers)`` which adds its parser and sets ``func``.
_SUBCOMMANDS = (
    "ndvm.commands.eval",
    "ndvm.commands.fit",
    "ndvm.commands.search",
    "ndvm.commands.report",
    "ndvm.commands.bench",
    "ndvm.commands.sweep",
)


DESCRIPTION = """\
Evaluate, fit and search small model programs. A program is a Scheme-like expression over
parameters and data; ndvm runs it over many parameter sets at once with exact gradients."""

EPILOG = """\
examples:
  ndvm eval model.scm --param k=0.5 --input x=1,2,3 --grad
  ndvm fit model.scm --data data.csv --x t --y y
  ndvm search --task sr-damped --budget 60

Run 'ndvm COMMAND --help' for a command's options."""


class _BadNumber(argparse.ArgumentTypeError):
    """A numeric option's value that is not a number."""


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise _BadNumber(f"must be a number, got {text!r}") from None


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise _BadNumber(f"must be an integer, got {text!r}") from None


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors for numeric values: ``type=float`` / ``type=int``
    options (of this parser, its groups and subcommands) reject a value that is not a number
    as ``ndvm search: --budget must be a number, got 'abc'``, exit status 2, like the range
    checks' ``ConfigError`` lines; other usage errors keep argparse's usage line."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("type", float, _number)
        self.register("type", int, _integer)

    def error(self, message: str) -> Any:
        exc = sys.exc_info()[1]
        if isinstance(exc, argparse.ArgumentError) and isinstance(exc.__context__, _BadNumber):
            self.exit(2, f"{self.prog}: {exc.argument_name} {exc.message}\n")
        return super().error(message)


def build_parser() -> argparse.ArgumentParser:
    from ndvm import __version__

    parser = Parser(
        prog="ndvm",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"ndvm {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in _SUBCOMMANDS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(sub)
    return parser


def _one_line_warning(message: Any, category: Any, *args: Any, **kwargs: Any) -> None:
    """A warning as one line on stderr (``ndvm: warning: ...``), not Python's two."""
    print(f"ndvm: warning: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    from ndvm.errors import MissingExtra

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _one_line_warning
            return int(args.func(args) or 0)
    except MissingExtra as exc:
        print(f"ndvm: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ndvm: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away: point stdout at devnull so the interpreter's final flush
        # does not raise again, and end quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
