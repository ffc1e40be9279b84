"""Fuzz target over program source text: every input must give a value or a typed NdvmError.

Modes:
  python tools/fuzz/fuzz_source.py --iterations 2000 [--seed 0]   # built-in mutator (no deps)
  python tools/fuzz/fuzz_source.py --minutes 60 --seed 7          # a longer run, by time
  python tools/fuzz/fuzz_source.py --atheris [libFuzzer args]     # coverage-guided, if atheris
                                                                  # is installed
  tools/sanitize.sh --fuzz 30                                     # 30 minutes under ASan/UBSan

Seeds are the golden programs, the examples and the hostile corpus (tests/hostile). Each input
is compiled (free variables become parameters), evaluated and its result printed on the native
backend (the reference backend when the native one is not built, or ``--backend``) over 3 lanes,
with small limits so nothing should hang. Any exception that is not an ``ndvm.NdvmError`` is a
bug: the input is written to ``fuzz-crash-<n>.scm`` and the run fails. A hang (no answer within
``--hang`` seconds, even inside the native core) dumps the stacks and exits 1; the input is in
``fuzz-last.scm``. A crash (a signal, an ASan report) leaves it there too.
"""

from __future__ import annotations

import argparse
import faulthandler
import random
import sys
import time
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
    "(floor a)",
    "(list-ref (list 1 2 3) (floor a))",
    "(let loop ((l '()) (k 0)) (if (= k 60) l (loop (cons l l) (+ k 1))))",
    "(let loop ((i 0)) (loop (+ i 1)))",
    "(assoc a (list (cons a 1)))",
    "(zeros 100000 100000)",
    "(outer (ones 9) (ones 9))",
    "(params (a -1.0 positive))",
    "pi",
    "(make-vector 100000 a)",
    "(vector->list (vec a b 1))",
    "(list->vector (iota 5 a))",
    "(apply list (iota 100000))",
    "(reverse (append (list a) (list b)))",
    "(let ((l (list a b))) (list l l))",
    '(error "bad" (let ((l (list a))) (cons l l)))',
]


def seeds() -> list[str]:
    out = [p.read_text() for p in sorted((ROOT / "tests" / "golden" / "programs").glob("*.scm"))]
    out += [p.read_text() for p in sorted((ROOT / "examples").glob("*.scm"))]
    sys.path.insert(0, str(ROOT))
    try:
        from tests.hostile.corpus import CASES
    except ImportError:  # a checkout without the tests
        CASES = []
    out += [c.source for c in CASES if c.source and len(c.source) < 20_000]
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
        prog = ndvm.compile(text, backend=backend, limits=limits, strict=False, free_params=True)
        theta = np.linspace(-1.5, 1.5, 3 * max(1, len(prog.params))).reshape(3, -1)
        res = prog.evaluate(theta[:, : len(prog.params)], {}, grad=True)
        if len(repr(res.value)) > 1_000_000:  # results print bounded (ndvm.printer)
            raise AssertionError("the printed result is not bounded")
        # a second evaluation replays the trace (and runs fused chains where NDVM_CHAIN_LANES
        # asks for them, as tools/sanitize.sh does)
        prog.evaluate(theta[:, : len(prog.params)] + 1e-3, {}, grad=True)
    except ndvm.NdvmError:
        pass


def builtin(iterations: int, seed: int, backend: str, minutes: float, hang: float) -> int:
    rng = random.Random(seed)
    corpus = seeds()
    last = Path("fuzz-last.scm")
    stop = time.monotonic() + minutes * 60 if minutes else None
    i = 0
    while (i < iterations) if stop is None else (time.monotonic() < stop):
        text = mutate(rng.choice(corpus), rng)
        last.write_text(text)
        faulthandler.dump_traceback_later(hang, exit=True)
        try:
            check(text, backend)
        except Exception as exc:  # noqa: BLE001 - anything untyped is the bug we look for
            path = Path(f"fuzz-crash-{i}.scm")
            path.write_text(text)
            print(f"untyped {type(exc).__name__}: {exc}; input saved to {path}", file=sys.stderr)
            return 1
        finally:
            faulthandler.cancel_dump_traceback_later()
        i += 1
    last.unlink(missing_ok=True)
    print(f"fuzz: {i} inputs, backend {backend}: typed errors only")
    return 0


def parser(doc: str) -> argparse.ArgumentParser:
    """The options the fuzz targets share: how many inputs (or minutes), the seed, the hang."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--iterations", type=int, default=1000)
    ap.add_argument("--minutes", type=float, default=0.0, help="run for this long instead")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--hang", type=float, default=60.0, help="seconds before an input hangs")
    return ap


def main() -> int:
    ap = parser(__doc__)
    ap.add_argument("--backend", default=None, help="reference or native (default: auto)")
    ap.add_argument("--atheris", action="store_true")
    args, rest = ap.parse_known_args()
    from ndvm.backends import registry

    backend = args.backend or registry.available()[0]
    if not args.atheris:
        return builtin(args.iterations, args.seed, backend, args.minutes, args.hang)
    import atheris  # optional: pip install atheris

    def one(data: bytes) -> None:
        check(data.decode("utf-8", "replace"), backend)

    atheris.Setup([sys.argv[0], *rest], one)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main())
