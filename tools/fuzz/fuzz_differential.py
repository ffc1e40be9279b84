"""Differential fuzzing over mutated programs: every client of one program must agree.

    python tools/fuzz/fuzz_differential.py --iterations 3000 [--seed 0]
    python tools/fuzz/fuzz_differential.py --minutes 10 --seed 7 [--hang 60]

Inputs are the source fuzzer's (``fuzz_source.py``: the golden programs, the examples and the
hostile corpus, mutated). Each one that compiles is evaluated with its gradient over 3 parameter
lanes by the native tree walker, the bytecode VM (both walking every evaluation) and the walker
replaying its own trace (a second evaluation with the same inputs), which must agree bitwise:
values, per-lane statuses, error types, messages and positions, gradients. Structural results
(lists, possibly shared and deep) are compared node by node, a pair of lists once, so a DAG of
2^60 paths compares in its size; their ``repr`` must stay bounded. The reference backend must
agree on statuses and errors, and within a tolerance on values (numeric and structural),
gradients (relative to each lane's largest entry, with an absolute 1e-12) and the numbers the
error messages print (not for programs with literals of three-digit exponents, whose
ill-conditioned problems two correct algorithms may answer differently). Inputs that reach a
step, depth or time limit anywhere are skipped: the two clients count steps and depth
differently. The float32 core (``dtype="float32"``) must end every input with a value or a typed
error, with the float64 walker's structure for structural results (its numbers are not compared:
a mutated program is often ill-conditioned in float32). The first disagreement is written to
``fuzz-diff-<n>.scm`` and the run fails.
"""

from __future__ import annotations

import collections
import faulthandler
import random
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fuzz_source import mutate, parser, seeds  # noqa: E402

NUMBER = re.compile(r"(?<![\w.#-])-?\d+(\.\d+)?(?![\w.])")
UNARY = re.compile(r"\((exp|sin|cos|tanh|abs|square|sqrt|log|floor|-) ")
BINARY = re.compile(r"\((\+|-|\*|/|max|min|<|>|=|<=|>=) ")
DECIMAL = re.compile(r"(-?\d+\.\d+(?:e[-+]?\d+)?)")
# literals near the ends of the float range make ill-conditioned problems, where two correct
# algorithms (the core's LU, the reference's SVD adjugate) legitimately disagree
EXTREME = re.compile(r"\d[eE][-+]?\d{3}")
RTOL = 1e-9  # reference vs native: NumPy's and the core's libm may differ in the last bits
ATOL = 1e-12  # and a zero of one is the other's rounding (as the differential tests allow)


SEEN: collections.Counter[str] = collections.Counter()  # what the inputs came to


class Skip(Exception):
    """The input reached a limit whose accounting differs between clients."""


def outcome(program: Any, theta: np.ndarray, twice: bool = False) -> tuple[Any, ...]:
    """(kind, ...) of one evaluation with its gradient: a result's parts or the error."""
    import ndvm

    try:
        res = program.evaluate(theta, {}, grad=True)
        if twice:
            res = program.evaluate(theta, {}, grad=True)
            if not res.stats.get("replayed", True):
                return ("walked again",)
    except (ndvm.errors.StepLimitExceeded, ndvm.errors.DepthLimitExceeded,
            ndvm.errors.DeadlineExceeded):  # fmt: skip
        raise Skip from None
    except ndvm.NdvmError as exc:
        return ("error", type(exc).__name__, str(exc), exc.line, exc.column)
    errors = [(np.asarray(m).tobytes(), type(e).__name__, str(e)) for m, e in res.errors]
    if any(name in ("StepLimitExceeded", "DepthLimitExceeded", "DeadlineExceeded")
           for _, name, _ in errors):  # fmt: skip
        raise Skip
    value = np.asarray(res.value)
    grad = None if res.grad is None else np.asarray(res.grad)
    return ("result", value, np.asarray(res.status), errors, grad)


def same_array(a: Any, b: Any, rtol: float) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if a.shape != b.shape:
        return False
    if a.dtype == object or b.dtype == object:
        return a.dtype == b.dtype and same_struct(a.ravel().tolist(), b.ravel().tolist(), rtol)
    if rtol == 0.0:
        return a.tobytes() == b.tobytes()
    a2, b2 = a.reshape(a.shape[0], -1), b.reshape(b.shape[0], -1)
    fa, fb = np.isfinite(a2), np.isfinite(b2)
    if not (np.array_equal(fa, fb) and np.array_equal(a2[~fa], b2[~fb], equal_nan=True)):
        return False
    # relative to each lane's largest entry: an entry far smaller than its lane's others
    # carries their rounding (a cancellation), not its own precision
    scale = np.where(fb, np.abs(b2), 0.0).max(axis=1, initial=0.0)[:, None]
    err = np.abs(np.where(fa, a2, 0.0) - np.where(fb, b2, 0.0))
    return bool((err <= rtol * (np.abs(np.where(fb, b2, 0.0)) + scale) + ATOL).all())


def _same_leaf(x: Any, y: Any, rtol: float) -> bool:
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        return (isinstance(x, np.ndarray) and isinstance(y, np.ndarray) and x.shape == y.shape
                and same_array(x.reshape(1, -1), y.reshape(1, -1), rtol))  # fmt: skip
    if type(x) is float and type(y) is float:
        if rtol < 0:  # float32 against float64: numbers are not compared
            return True
        return same_array(np.array([[x]]), np.array([[y]]), rtol)
    return type(x) is type(y) and x == y


def same_struct(a: Any, b: Any, rtol: float) -> bool:
    """Nested lists equal node by node (a pair of lists compared once: a DAG costs its size),
    numbers as ``same_array`` (``rtol`` < 0: any numbers), and both ``repr``s bounded."""
    stack, seen = [(a, b)], set()
    while stack:
        x, y = stack.pop()
        if isinstance(x, list) and isinstance(y, list):
            if (id(x), id(y)) in seen:
                continue
            seen.add((id(x), id(y)))
            if len(x) != len(y):
                return False
            stack += zip(x, y)
        elif isinstance(x, list) or isinstance(y, list) or not _same_leaf(x, y, rtol):
            return False
    return len(repr(a)) < 100_000 and len(repr(b)) < 100_000


def same_message(x: str, y: str, rtol: float) -> bool:
    """Equal messages; with ``rtol``, the computed numbers in them (written with a point)
    may differ as the values do."""
    if rtol == 0.0 or x == y:
        return x == y
    px, py = DECIMAL.split(x), DECIMAL.split(y)
    if len(px) != len(py) or px[::2] != py[::2]:
        return False
    a, b = np.array(px[1::2], dtype=float), np.array(py[1::2], dtype=float)
    return bool(np.allclose(a, b, rtol=rtol, atol=ATOL))


def same_errors(a: list[Any], b: list[Any], rtol: float) -> bool:
    return len(a) == len(b) and all(
        ma == mb and ta == tb and same_message(xa, xb, rtol)
        for (ma, ta, xa), (mb, tb, xb) in zip(a, b)
    )


def same(a: tuple[Any, ...], b: tuple[Any, ...], rtol: float) -> bool:
    if a[0] != b[0]:
        return False
    if a[0] == "error":
        return a[1] == b[1] and a[3:] == b[3:] and same_message(a[2], b[2], rtol)
    if a[0] != "result":
        return a == b
    _, va, sa, ea, ga = a
    _, vb, sb, eb, gb = b
    return (
        same_array(sa, sb, 0.0)
        and same_errors(ea, eb, rtol)
        and same_array(va, vb, rtol)
        and same_array(ga, gb, rtol)
    )


def float32_agrees(walker: Any, theta: np.ndarray, walk: tuple[Any, ...]) -> str | None:
    """None, or how the float32 core's outcome breaks its contract (see the module doc)."""
    import ndvm

    try:
        f32 = outcome(walker.with_options(dtype="float32", replay=False), theta)
    except Skip:
        return None
    except Exception as exc:  # noqa: BLE001 - an untyped error is the finding
        return f"float32 raised {type(exc).__name__}: {exc}"
    SEEN["float32"] += 1
    if walk[0] == "result" and f32[0] == "result" and np.asarray(walk[1]).dtype == object:
        if not same_array(np.asarray(f32[1]), np.asarray(walk[1]), -1.0):
            return f"float32 and float64 structures differ:\n  f64 {walk}\n  f32 {f32}"
    assert f32[0] in ("result", "error") and (f32[0] == "result" or issubclass(
        getattr(ndvm.errors, f32[1], ndvm.NdvmError), ndvm.NdvmError))  # fmt: skip
    return None


def check(text: str) -> str | None:
    """None, or which two clients disagree on ``text``."""
    import ndvm
    from ndvm.eval.limits import Limits

    limits = Limits(max_steps=20_000, max_heap=50_000, max_depth=1_000, deadline=1.0)
    try:
        walker = ndvm.compile(text, backend="native", limits=limits, strict=False, free_params=True)
    except ndvm.NdvmError:
        SEEN["compile error"] += 1
        return None
    P = len(walker.params)
    theta = np.linspace(-1.5, 1.5, 3 * max(1, P)).reshape(3, -1)[:, :P]
    try:
        walk = outcome(walker.with_options(replay=False), theta)
        vm = outcome(walker.with_options(backend="vm", replay=False), theta)
        replay = outcome(walker, theta, twice=True)
        if walk[0] == "result" and not EXTREME.search(text):
            ref = outcome(walker.with_options(backend="reference"), theta)
        else:
            ref = walk
        why32 = float32_agrees(walker, theta, walk)
    except Skip:
        SEEN["limit (skipped)"] += 1
        return None
    SEEN[walk[0] if walk[0] == "error" else "result"] += 1
    SEEN["replayed"] += replay != ("walked again",) and walk[0] == "result"
    SEEN["against the reference"] += ref is not walk
    if not same(walk, vm, 0.0):
        return f"walker and VM differ:\n  walker {walk}\n  vm     {vm}"
    if replay != ("walked again",) and not same(walk, replay, 0.0):
        return f"walk and replay differ:\n  walk   {walk}\n  replay {replay}"
    if not same(walk, ref, RTOL):
        return f"native and reference differ:\n  native    {walk}\n  reference {ref}"
    return why32


def vary(text: str, rng: random.Random) -> str:
    """A program like ``text`` that still reads: numbers changed, unary or binary primitives
    swapped for others of their kind (so more of the inputs run than raw mutations)."""
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(3)
        pattern = (NUMBER, UNARY, BINARY)[kind]
        hits = list(pattern.finditer(text))
        if not hits:
            continue
        m = rng.choice(hits)
        if kind == 0:
            new = rng.choice(["0", "1", "-1", "2", "0.5", "-2.5", "3", "1e-300", "1e300", "7"])
        else:
            names = UNARY.pattern if kind == 1 else BINARY.pattern
            choices = names[names.index("(", 2) + 1 : names.index(")")].replace("\\", "")
            new = "(" + rng.choice(choices.split("|")) + " "
        text = text[: m.start()] + new + text[m.end() :]
    return text


def run(iterations: int, seed: int, minutes: float, hang: float = 60.0) -> int:
    """Fuzz ``iterations`` inputs (or for ``minutes``); an input that takes longer than
    ``hang`` seconds dumps the stacks and exits 1, leaving it in ``fuzz-last.scm``."""
    rng = random.Random(seed)
    corpus = seeds()
    stop = time.monotonic() + minutes * 60 if minutes else None
    i = 0
    last = Path("fuzz-last.scm")
    while (i < iterations) if stop is None else (time.monotonic() < stop):
        base = rng.choice(corpus)
        text = vary(base, rng) if rng.random() < 0.7 else mutate(base, rng)
        last.write_text(text)  # the input a crash or hang leaves behind
        faulthandler.dump_traceback_later(hang, exit=True)
        try:
            with np.errstate(all="ignore"):
                why = check(text)
        finally:
            faulthandler.cancel_dump_traceback_later()
        if why is not None:
            path = Path(f"fuzz-diff-{i}.scm")
            path.write_text(text)
            print(f"{why}\ninput saved to {path}", file=sys.stderr)
            return 1
        i += 1
    last.unlink(missing_ok=True)
    seen = ", ".join(f"{k} {v}" for k, v in sorted(SEEN.items()))
    print(f"differential fuzz: {i} inputs, clients agree ({seen})")
    return 0


def main() -> int:
    args = parser(__doc__).parse_args()
    return run(args.iterations, args.seed, args.minutes, args.hang)


if __name__ == "__main__":
    sys.exit(main())
