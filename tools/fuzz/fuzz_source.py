"""Fuzz target over program source text: every input must give a value or a typed NdvmError.

Modes:
  python tools/fuzz/fuzz_source.py --iterations 2000 [--seed 0]   # built-in mutator (no deps)
  python tools/fuzz/fuzz_source.py --atheris [libFuzzer args]     # coverage-guided, if atheris
                                                                  # is installed

Seeds are the golden programs and examples. Each input is compiled (free variables become
parameters) and evaluated on the native backend (the reference backend when the native one is
not built) over 3 lanes, with small limits so nothing can hang. Any exception that is not an
``ndvm.NdvmError`` is a bug: the input is written to ``fuzz-crash-<n>.scm`` and the run fails.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
TOKENS = [
    "(",
    ")",
    "'",
    "[",
    "]",
    " ",
    "a",
    "b",
    "x",
    "0",
    "1",
    "-1",
    "2.5",
    "+inf.0",
    "+nan.0",
    "#t",
    "#f",
    '"s"',
    "car",
    "cdr",
    "cons",
    "list",
    "vec",
    "mat",
    "ref",
    "if",
    "let",
    "let*",
    "letrec",
    "lambda",
    "define",
    "loop",
    "recur",
    "apply",
    "error",
    "map",
    "+",
    "-",
    "*",
    "/",
    "exp",
    "log",
    "sqrt",
    "inv",
    "det",
    "matmul",
    "dot",
    "eye",
    "zeros",
    "iota",
    "length",
    "equal?",
    "eq?",
    "assert",
    "cond",
    "else",
    "and",
    "or",
    "not",
    "(> a 0)",
    "(list a b)",
    "(vec a b)",
    "(mat (vec a 1) (vec 1 b))",
    "#|",
    "|#",
    ";",
    "#;",
    ".",
]


def seeds() -> list[str]:
    out = [p.read_text() for p in sorted((ROOT / "tests" / "golden" / "programs").glob("*.scm"))]
    out += [p.read_text() for p in sorted((ROOT / "examples").glob("*.scm"))]
    return out or ["(+ a b)"]


def mutate(text: str, rng: random.Random) -> str:
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(4)
        pos = rng.randint(0, len(text))
        if op == 0:
            text = text[:pos] + rng.choice(TOKENS) + text[pos:]
        elif op == 1 and text:
            end = min(len(text), pos + rng.randint(1, 8))
            text = text[:pos] + text[end:]
        elif op == 2 and text:
            end = min(len(text), pos + rng.randint(1, 30))
            text = text[:pos] + text[pos:end] * rng.randint(1, 3) + text[end:]
        else:
            text = text[:pos] + chr(rng.randrange(32, 127)) + text[pos:]
    return text


def check(text: str, backend: str) -> None:
    """Compile and run ``text``; only typed ndvm errors may escape (they are swallowed)."""
    import ndvm
    from ndvm.eval.limits import Limits

    limits = Limits(max_steps=200_000, max_heap=200_000, max_depth=5_000, deadline=2.0)
    try:
        prog = ndvm.compile(text, backend=backend, limits=limits, strict=False)
        theta = np.linspace(-1.5, 1.5, 3 * max(1, len(prog.params))).reshape(3, -1)
        prog.evaluate(theta[:, : len(prog.params)], {}, grad=True)
    except ndvm.NdvmError:
        pass


def builtin(iterations: int, seed: int, backend: str) -> int:
    rng = random.Random(seed)
    corpus = seeds()
    for i in range(iterations):
        text = mutate(rng.choice(corpus), rng)
        try:
            check(text, backend)
        except Exception as exc:  # noqa: BLE001 - anything untyped is the bug we look for
            path = Path(f"fuzz-crash-{i}.scm")
            path.write_text(text)
            print(f"untyped {type(exc).__name__}: {exc}; input saved to {path}", file=sys.stderr)
            return 1
    print(f"fuzz: {iterations} inputs, backend {backend}: typed errors only")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iterations", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--atheris", action="store_true")
    args, rest = ap.parse_known_args()
    from ndvm.backends import registry

    backend = registry.available()[0]
    if not args.atheris:
        return builtin(args.iterations, args.seed, backend)
    import atheris  # optional: pip install atheris

    def one(data: bytes) -> None:
        check(data.decode("utf-8", "replace"), backend)

    atheris.Setup([sys.argv[0], *rest], one)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main())
