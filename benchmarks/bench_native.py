"""Native runtime benchmark: per-lane forward+gradient cost against its baselines, in one run.

Run: ``python benchmarks/bench_native.py [--quick]``. Prints, measured in this one run:

* Kalman-80 (examples/kalman80.scm) forward + gradient, microseconds per parameter lane, at
  B = 1, 8, 64, 256, 1024: ndvm float64 and ``dtype="float32"`` (public API and core alone;
  repeated evaluations replay the recorded trace, as the API does by default), the core's tree
  walker and bytecode VM with ``replay=False`` (walking every evaluation),
  the hand-written scalar C++ (benchmarks/kalman_ceiling.cpp, forward-mode duals, built here
  with the system C++ compiler) and, when jax is installed, ``jit(vmap(value_and_grad))`` of
  the same filter written with ``lax.scan`` (float64; compile time excluded), once with
  ``jnp.linalg.inv``/``slogdet`` and once with the 2x2 inverse written out; then the ratios
  ndvm/C, ndvm/JAX and float64/float32 side by side (``--table``: only this table, as the
  Markdown of docs/native.md);
* a symbolic-regression expression over 44 data points (per lane, and amortization);
* native / reference at B = 1 and 256, and the time from a never-seen program to its first
  gradient.

``--reference``: only native / reference; ``--lanes 1,256`` and ``--columns "f64 core"``: the
Kalman table at those B and timing only those columns (hand C is always measured; the others
read nan); ``--json PATH``: also write what was measured, seconds per lane (used by
``benchmarks/report.py``).

Every time is the best of several repetitions (the machine is shared; best-of is the least
noisy estimate of the cost itself). Wall time on a shared machine is noisy: for stable figures
count instructions instead: ``valgrind --tool=callgrind python benchmarks/bench_native.py
--profile 256 --reps R`` for two values of R, and take the difference of the inclusive costs of
``Interp::run`` and ``Interp::gradient`` over the difference of R (``--profile B`` runs only the
core Kalman evaluation, ``--reps`` times after one warm-up; ``--client vm``: by the bytecode
VM, whose run is ``Interp::run`` too; ``--no-replay``: walk every evaluation). A
``--toggle-collect`` pattern ``Interp::run*`` would also match ``Interp::run_thread`` and switch
collection off inside it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

import ndvm
from ndvm.backends import registry
from ndvm.backends.inputs import Const
from ndvm.backends.native import CLIENTS

ROOT = Path(__file__).resolve().parents[1]
KALMAN = (ROOT / "examples" / "kalman80.scm").read_text()
SR = "(* a (exp (- (* b x))) (cos (+ (* c x) d)))"
LANES = (1, 8, 64, 256, 1024)
LOG_2PI = 1.8378770664093453


def best_of(fn: Callable[[], Any], reps: int, budget: float = 2.0) -> float:
    best = float("inf")
    start = time.perf_counter()
    for i in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        if i >= 2 and time.perf_counter() - start > budget:
            break
    return best


def core_runner(
    prog: ndvm.Program,
    theta: np.ndarray,
    inputs: dict[str, Any],
    dtype: str = "float64",
    client: str = "native",
    replay: bool = True,
) -> Callable[[], Any]:
    """Forward + gradient through the core only (no API/result assembly in Python); client:
    "native" (the tree walker) or "vm" (the bytecode VM); replay: repeated evaluations replay
    the recorded trace (the default of the API) or walk every time."""
    backend = registry.get(client)
    low = backend.lowered(prog.compiled)
    ctx = backend._context(dtype)
    core = low.program(dtype, prog.compiled)
    kinds = []
    arrays = []
    n_data = 1
    for name in prog.inputs:
        v = inputs[name]
        if isinstance(v, Const):
            kinds.append(2)
            arrays.append(np.ascontiguousarray(v.array, dtype=np.float64))
        else:
            arr = np.ascontiguousarray(v, dtype=np.float64).reshape(-1)
            kinds.append(1 if np.ndim(v) == 1 else 0)
            n_data = max(n_data, arr.size if np.ndim(v) == 1 else 1)
            arrays.append(arr)
    theta = np.ascontiguousarray(theta)
    core_module = importlib.import_module(type(ctx).__module__)  # _core or _core32
    options = core_module.RunOptions(
        max_steps=10**9, max_heap=10**9, max_depth=10**6, client=CLIENTS[client], replay=replay
    )

    def run() -> Any:  # value and gradient in one call
        return ctx.run(core, theta, low.constraints, kinds, arrays, n_data, options, True).grad

    return run


def ceiling(Y: np.ndarray, theta: np.ndarray) -> tuple[float | None, str]:
    """Per-lane time of the hand-written scalar C++ and its lane-0 (nll, grad)."""
    cxx = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        return None, "no C++ compiler"
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "kalman_ceiling"
        src = ROOT / "benchmarks" / "kalman_ceiling.cpp"
        subprocess.run([cxx, "-O3", "-std=c++17", "-o", str(exe), str(src)], check=True)

        def rows(a: np.ndarray) -> str:
            return "\n".join(" ".join(repr(float(v)) for v in r) for r in a)

        text = f"{len(Y)}\n{rows(Y)}\n{len(theta)}\n{rows(theta)}\n"
        out = subprocess.run([str(exe)], input=text, capture_output=True, text=True, check=True)
    lines = out.stdout.split("\n")
    return float(lines[1]) * 1e-6, lines[0]


def jax_kalman(Y: np.ndarray, closed_form: bool) -> Callable[[np.ndarray], Any] | None:
    """jit(vmap(value_and_grad)) of the Kalman NLL with lax.scan, float64; None without jax.
    closed_form: the 2x2 inverse and log-determinant written out (no LAPACK calls per step)
    instead of jnp.linalg.inv / slogdet (the program's own operations)."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    Yj = jnp.asarray(Y)
    eye = jnp.eye(2)

    def inv_logdet(S: Any) -> tuple[Any, Any]:
        if not closed_form:
            return jnp.linalg.inv(S), jnp.linalg.slogdet(S)[1]
        det = S[0, 0] * S[1, 1] - S[0, 1] * S[1, 0]
        adj = jnp.array([[S[1, 1], -S[0, 1]], [-S[1, 0], S[0, 0]]])
        return adj / det, jnp.log(jnp.abs(det))

    def nll(theta: Any) -> Any:
        q = jax.nn.softplus(theta[0])
        r = jax.nn.softplus(theta[1])
        Q = eye * (q * q)
        R = eye * (r * r)

        def step(carry: Any, y: Any) -> Any:
            m, P, acc = carry
            Pp = P + Q
            v = y - m
            S = Pp + R
            Si, logdet = inv_logdet(S)
            K = Pp @ Si
            acc = acc + 0.5 * (logdet + v @ (Si @ v) + 2 * LOG_2PI)
            return (m + K @ v, Pp - K @ Pp, acc), None

        (_, _, out), _ = jax.lax.scan(step, (jnp.zeros(2), eye, jnp.asarray(0.0)), Yj)
        return out

    fn = jax.jit(jax.vmap(jax.value_and_grad(nll)))

    def run(theta: np.ndarray) -> Any:
        v, g = fn(theta)
        return g.block_until_ready()

    return run


COLUMNS = ("f64 api", "f64 core", "walk core", "vm core", "f32 api", "f32 core", "jax", "jax 2x2",
           "hand C")  # fmt: skip


def _timers(
    progs: tuple[ndvm.Program, ndvm.Program], jaxes: tuple[Any, Any], theta: np.ndarray,
    inputs: dict[str, Any],
) -> dict[str, Callable[[], Callable[[], Any]]]:  # fmt: skip
    """Per timed column of COLUMNS: a function building its no-argument call (jax: compiled
    for this B first), built only when the column is timed."""
    f64, f32 = progs

    def jax_call(fn: Callable[[np.ndarray], Any]) -> Callable[[], Callable[[], Any]]:
        def build() -> Callable[[], Any]:
            fn(theta)  # compile for this B
            return partial(fn, theta)

        return build

    t32 = theta.astype(np.float32)
    return {
        "f64 api": lambda: partial(f64.value_and_grad, theta, **inputs),
        "f64 core": lambda: core_runner(f64, theta, inputs),
        "walk core": lambda: core_runner(f64, theta, inputs, replay=False),
        "vm core": lambda: core_runner(f64, theta, inputs, client="vm", replay=False),
        "f32 api": lambda: partial(f32.value_and_grad, t32, **inputs),
        "f32 core": lambda: core_runner(f32, theta, inputs, "float32"),
        **{c: jax_call(fn) for c, fn in zip(("jax", "jax 2x2"), jaxes) if fn is not None},
    }


def kalman_rows(
    reps_at_least: int, rng: np.random.Generator, lanes: tuple[int, ...] = LANES,
    columns: tuple[str, ...] = COLUMNS,
) -> tuple[dict[int, dict[str, float]], str]:  # fmt: skip
    """Seconds per lane of the ``columns`` of COLUMNS at each B of ``lanes`` (the others NaN;
    hand C is always measured), and a line describing the run."""
    Y = rng.normal(size=(80, 2)).cumsum(axis=0)
    inputs = {"Y": ndvm.const(Y)}
    f64 = ndvm.compile(KALMAN, inputs=("Y",), backend="native")
    f32 = ndvm.compile(KALMAN, inputs=("Y",), backend="native", dtype="float32")
    ceil, check = ceiling(Y, rng.normal(scale=0.3, size=(256, 2)))
    want_jax = bool({"jax", "jax 2x2"} & set(columns))
    jx = jax_kalman(Y, closed_form=False) if want_jax else None
    jc = jax_kalman(Y, closed_form=True) if want_jax else None
    jax_state = "yes" if jx else "not installed" if want_jax else "not timed"
    about = (f"kalman80 forward+gradient, us per lane; hand C: {ceil and ceil * 1e6:.2f} us/lane "
             f"(lane 0 of the C: {check}); jax: {jax_state}")  # fmt: skip
    rows: dict[int, dict[str, float]] = {}
    for B in lanes:
        theta = rng.normal(scale=0.3, size=(B, 2))
        t = rows[B] = dict.fromkeys(COLUMNS, float("nan"))
        # best of at least 1000 lanes' worth: a B = 1 evaluation (about 12 us) timed 30 times
        # moved its core/C between 4 and 8.6 from one run to the next on a shared machine
        reps = max(reps_at_least, 1000 // B)
        for col, build in _timers((f64, f32), (jx, jc), theta, inputs).items():
            if col in columns:
                t[col] = best_of(build(), reps) / B
        t["hand C"] = ceil or float("nan")
    return rows, about


RATIOS = (
    ("core/C", "f64 core", "hand C"),
    ("walk/C", "walk core", "hand C"),
    ("vm/C", "vm core", "hand C"),
    ("walk/core", "walk core", "f64 core"),
    ("vm/walk", "vm core", "walk core"),
    ("api/C", "f64 api", "hand C"),
    ("api/jax", "f64 api", "jax"),
    ("api/jax2", "f64 api", "jax 2x2"),
    ("f64/f32", "f64 core", "f32 core"),
)
TARGETS = ("core: the core as the API runs it (float64; the walker, replaying its trace), walk: "
           "the tree walker without replay, vm: the bytecode VM without replay; "
           "f64/f32: core float64 / core float32. Targets at B=256: core/C <= 0.5, api/jax < 1, "
           "f64/f32 >= 1.8; at B=1: core/C <= 3")  # fmt: skip


def kalman_table(
    reps: int, rng: np.random.Generator, markdown: bool = False, lanes: tuple[int, ...] = LANES,
    columns: tuple[str, ...] = COLUMNS,
) -> dict[str, Any]:  # fmt: skip
    """The Kalman-80 table: microseconds per lane and the ratios, as text or as Markdown;
    returns the seconds per lane by B and column (NaN: not timed)."""
    rows, about = kalman_rows(reps, rng, lanes, columns)
    names = [*COLUMNS, *(r[0] for r in RATIOS)]
    print(about)
    if markdown:
        print("| B | " + " | ".join(names) + " |")
        print("|---:" * (len(names) + 1) + "|")
    else:
        print(f"{'B':>5} " + " ".join(f"{n:>9}" for n in names))
    for B, t in rows.items():
        cells = [f"{t[c] * 1e6:.2f}" for c in COLUMNS]
        cells += [f"{t[a] / t[b]:.2f}" for _, a, b in RATIOS]
        if markdown:
            print(f"| {B} | " + " | ".join(cells) + " |")
        else:
            print(f"{B:5d} " + " ".join(f"{c:>9}" for c in cells))
    print(TARGETS)
    return {"about": about, "seconds_per_lane": {str(B): t for B, t in rows.items()}}


def sr_and_reference(reps: int, rng: np.random.Generator) -> dict[str, Any]:
    """Native vs reference backend, forward+gradient through the public API, at B = 1 and
    256; returns the seconds per lane of each, by program and B."""
    out: dict[str, Any] = {}
    x = np.linspace(0.0, 4.0, 44)
    Y = rng.normal(size=(80, 2)).cumsum(axis=0)
    loads = {"sr44": (SR, {"x": x}, 4), "kalman80": (KALMAN, {"Y": ndvm.const(Y)}, 2)}
    for name, (src, inputs, P) in loads.items():
        nat = ndvm.compile(src, inputs=tuple(inputs), backend="native", free_params=True)
        ref = ndvm.compile(src, inputs=tuple(inputs), backend="reference", free_params=True)
        per: dict[int, float] = {}
        for B in (1, 256):
            theta = rng.normal(scale=0.3, size=(B, P))
            per[B] = best_of(partial(nat.value_and_grad, theta, **inputs), reps) / B
            refr = best_of(partial(ref.value_and_grad, theta, **inputs), 3, budget=5.0) / B
            out.setdefault(name, {})[str(B)] = {"native": per[B], "reference": refr}
            print(f"{name}: B={B:4d} native {per[B] * 1e6:8.2f} us/lane, reference / native "
                  f"{refr / per[B]:6.1f}x")  # fmt: skip
        print(f"{name}: amortization B=1 -> 256: {per[1] / per[256]:.1f}x")
    return out


def first_gradient(quick: bool) -> dict[str, float]:
    """Source text of a new 10-node program -> first gradient, split into its stages."""
    x = np.linspace(0.0, 4.0, 44)
    totals: dict[str, list[float]] = {"compile": [], "first_run": [], "total": []}
    for k in range(5 if quick else 20):
        src = f"(* a (exp (- (* b x {1.0 + k * 1e-3!r}))) (cos (+ (* c x) d)))"
        t0 = time.perf_counter()
        prog = ndvm.compile(src, inputs=("x",), backend="native")
        t1 = time.perf_counter()
        prog.value_and_grad(np.array([1.0, 0.5, 2.0, 0.1]), x=x)
        t2 = time.perf_counter()
        totals["compile"].append(t1 - t0)
        totals["first_run"].append(t2 - t1)
        totals["total"].append(t2 - t0)
    fg = {k: float(np.median(v)) for k, v in totals.items()}
    print(
        f"first gradient of a new 10-node program: {fg['total'] * 1e6:.0f} us (ndvm.compile: read, "
        f"expand, resolve, lower {fg['compile'] * 1e6:.0f} us + first value_and_grad "
        f"{fg['first_run'] * 1e6:.0f} us)"
    )
    return fg


def profile(B: int, reps: int, dtype: str, client: str, replay: bool) -> None:
    """One warm-up and `reps` core Kalman evaluations at B lanes (for callgrind)."""
    rng = np.random.default_rng(0)
    Y = rng.normal(size=(80, 2)).cumsum(axis=0)
    prog = ndvm.compile(KALMAN, inputs=("Y",), backend="native", dtype=dtype)
    theta = rng.normal(scale=0.3, size=(B, 2))
    run = core_runner(prog, theta, {"Y": ndvm.const(Y)}, dtype, client, replay)
    for _ in range(reps + 1):
        run()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--profile", type=int, metavar="B", help="only the core Kalman run at B")
    ap.add_argument("--reps", type=int, default=3, help="evaluations with --profile")
    ap.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    ap.add_argument("--client", default="native", choices=tuple(CLIENTS), help="with --profile")
    ap.add_argument("--no-replay", action="store_true", help="with --profile: walk every time")
    ap.add_argument("--table", action="store_true", help="only the Kalman table, as Markdown")
    ap.add_argument("--reference", action="store_true", help="only native vs reference")
    ap.add_argument("--lanes", default=",".join(map(str, LANES)), help="B of the Kalman table")
    ap.add_argument("--columns", default=",".join(COLUMNS), help="the table's timed columns")
    ap.add_argument("--json", default=None, help="also write the measured seconds (JSON)")
    args = ap.parse_args()
    if args.profile:
        return profile(args.profile, args.reps, args.dtype, args.client, not args.no_replay)
    reps = 5 if args.quick else 30
    rng = np.random.default_rng(0)
    lanes = tuple(int(b) for b in args.lanes.split(","))
    columns = tuple(c for c in args.columns.split(",") if c)
    if unknown := set(columns) - set(COLUMNS):
        ap.error(f"unknown column(s) {', '.join(sorted(unknown))}; choose from {COLUMNS}")
    out: dict[str, Any] = {"options": vars(args)}
    if args.table:
        out["kalman"] = kalman_table(reps, rng, True, lanes, columns)
    elif args.reference:
        out["reference"] = sr_and_reference(reps, rng)
    else:
        print(f"backends: {registry.available()}")
        out["kalman"] = kalman_table(reps, rng, False, lanes, columns)
        print()
        out["reference"] = sr_and_reference(reps, rng)
        out["first_gradient"] = first_gradient(args.quick)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
