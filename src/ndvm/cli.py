"""``ndvm`` command line: argparse subcommands; each lives in ``ndvm.commands.<name>``.

ndvm eval FILE|- [--param a=1] [--input x=2] [--grad] [--json]
ndvm sweep [--layers 4] [--heads 4] [--d-model 64] [--out DIR]
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Each module defines ``register(subparsers)`` which adds its parser and sets ``func``.
_SUBCOMMANDS = (
    "ndvm.commands.eval",
    "ndvm.commands.fit",
    "ndvm.commands.search",
    "ndvm.commands.report",
    "ndvm.commands.bench",
    "ndvm.commands.sweep",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ndvm", description=__doc__.splitlines()[0])
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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
