"""Calibration throughput: sr-damped (1 and 256 starts), kalman-80, and ndvm vs staged JAX.

    PYTHONPATH=src python benchmarks/bench_calibrate.py [--backends reference,native]
        [--repeat 3] [--jax-steps 1,10,100,1000] [--out results.json]

All ratios come from this one run on this machine. JAX pays trace+compile once per new program
structure (each timing uses a fresh structure), ndvm pays none; the crossover is the step count
above which JAX's compile is amortized.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import ndvm
from ndvm import tasks
from ndvm.backends import registry

# seconds: from the calibration issue (sr1), and the latency issue's compile + fit of a new
# structure and Kalman-80 30-step fit (the calibration issue's was 5 ms)
TARGETS = {"sr1": 1e-3, "kalman": 1e-3, "srnew": 0.3e-3}
REFERENCE_SYSTEM = {"sr1": 22e-3, "kalman": (26e-3, 35e-3)}


def best_of(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def bench_sr(backend: str, starts: int, repeat: int, steps: int = 50) -> float:
    task = tasks.get("sr-damped")
    program = task.compile(backend=backend)
    task.calibrate(program, starts=starts, steps=2)  # warm caches (imports, replay trace)
    return best_of(lambda: task.calibrate(program, starts=starts, steps=steps), repeat)


def bench_sr_new(backend: str, repeat: int) -> float:
    """A never-seen sr-damped structure (a new literal each call): ``ndvm.compile`` of its
    source, then the task's 50-step calibration (the JAX comparison's model and salt)."""
    task = tasks.get("sr-damped")
    task.calibrate(SR_SALTED.format(salt=-1.0), backend=backend, steps=2)  # warm caches
    salts = iter(range(10**6))
    return best_of(
        lambda: task.calibrate(SR_SALTED.format(salt=1e-9 * next(salts)), backend=backend),
        repeat,
    )


SR_SALTED = "(+ (* a (exp (* b x)) (cos (+ (* c x) d))) {salt!r})"


def bench_kalman(backend: str, repeat: int) -> float:
    task = tasks.get("kalman-80")
    program = task.compile(backend=backend)
    task.calibrate(program, steps=1)
    return best_of(lambda: task.calibrate(program, steps=30), repeat)


def jax_fit(steps: int, salt: float) -> float:
    """The sr-damped calibration (1 start, Adam lr 0.05, MSE) staged in JAX, compile included.

    ``salt`` is baked into the model as a literal, so every call is a new structure to compile.
    """
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    data = tasks.get("sr-damped").data()
    x = jnp.asarray(data.train_inputs["x"])
    y = jnp.asarray(data.train_target)
    theta0 = jnp.asarray(0.3 * np.random.default_rng(0).standard_normal(4))

    def model(t: Any) -> Any:
        a, b, c, d = t[0], t[1], t[2], t[3]
        return a * jnp.exp(b * x) * jnp.cos(c * x + d) + salt

    def loss(t: Any) -> Any:
        return jnp.mean((model(t) - y) ** 2)

    vg = jax.value_and_grad(loss)

    @jax.jit
    def fit(t: Any, n: Any) -> Any:
        def body(i: Any, s: Any) -> Any:
            t, m, v = s
            _, g = vg(t)
            k = i + 1.0
            m = m + 0.1 * (g - m)
            v = 0.999 * v + 0.001 * g * g
            den = jnp.sqrt(v) / jnp.sqrt(1 - 0.999**k) + 1e-8
            return t - (0.05 / (1 - 0.9**k)) * m / den, m, v

        z = jnp.zeros_like(t)
        t, _, _ = jax.lax.fori_loop(0, n, body, (t, z, z))
        return loss(t)

    t0 = time.perf_counter()
    fit(theta0, steps).block_until_ready()
    return time.perf_counter() - t0


def ndvm_fit(backend: str, steps: int, repeat: int) -> float:
    task = tasks.get("sr-damped")
    program = task.compile(backend=backend)
    return best_of(lambda: task.calibrate(program, steps=steps), repeat)


def crossover(step_counts: list[int], ndvm_t: list[float], jax_t: list[float]) -> str:
    """First step count where staged JAX (compile included) is faster, by linear models."""
    n = np.asarray(step_counts, dtype=float)
    a_n, b_n = np.polyfit(n, ndvm_t, 1)
    a_j, b_j = np.polyfit(n, jax_t, 1)
    if a_n <= a_j:
        return "never (ndvm's per-step cost is not above JAX's)"
    return f"~{(b_j - b_n) / (a_n - a_j):.0f} steps"


def manifest() -> dict[str, Any]:
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        commit = "unknown"
    versions = {"numpy": np.__version__, "ndvm": ndvm.__version__}
    for mod in ("jax", "torch"):
        try:
            versions[mod] = __import__(mod).__version__
        except ImportError:
            pass
    return {
        "commit": commit,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "versions": versions,
        "backends": list(registry.available()),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default=",".join(registry.available()))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--jax-steps", default="1,10,100,1000")
    ap.add_argument("--no-jax", action="store_true")
    ap.add_argument("--out", default=None, help="write results + environment manifest (JSON)")
    args = ap.parse_args(argv)
    backends = [b for b in args.backends.split(",") if b]
    res: dict[str, Any] = {"manifest": manifest(), "rows": []}

    print(f"{'benchmark':44s} {'backend':10s} {'time':>12s} {'vs target':>10s}")
    for b in backends:
        kalman_repeat = 1 if b == "reference" else args.repeat  # the reference: ~1.6 s a fit
        rows = [
            ("sr-damped 1 Adam step, 1 start (per fit)", "sr1x1", bench_sr(b, 1, 30, 1), 1),
            ("sr-damped 50 Adam, 1 start", "sr1", bench_sr(b, 1, args.repeat), 1),
            ("sr-damped 50 Adam, 256 starts (per start)", "sr256", bench_sr(b, 256, 1), 256),
            ("sr-damped new structure: compile + 50 Adam", "srnew", bench_sr_new(b, 30), 1),
            ("kalman-80 30 Adam steps", "kalman", bench_kalman(b, kalman_repeat), 1),
        ]
        for label, key, t, per in rows:
            per_t = t / per
            tgt = TARGETS.get(key)
            ratio = f"{per_t / tgt:9.2f}x" if tgt else ""
            print(f"{label:44s} {b:10s} {per_t * 1e3:9.3f} ms {ratio:>10s}")
            res["rows"].append({"bench": key, "backend": b, "seconds": per_t})
        sr1 = next(r["seconds"] for r in res["rows"] if r["bench"] == "sr1" and r["backend"] == b)
        sr256 = next(
            r["seconds"] for r in res["rows"] if r["bench"] == "sr256" and r["backend"] == b
        )
        print(f"{'  256-start speed-up per start':44s} {b:10s} {sr1 / sr256:9.1f}x")
        print(f"{'  vs reference system sr-damped (22 ms)':44s} {b:10s} {22e-3 / sr1:9.2f}x")

    if not args.no_jax:
        steps = [int(s) for s in args.jax_steps.split(",")]
        print(
            f"\n{'steps':>6s} " + " ".join(f"{'ndvm-' + b:>16s}" for b in backends) + " "
            f"{'jax(+compile)':>16s}"
        )
        jax_t = [jax_fit(n, salt=1e-9 * (i + 1)) for i, n in enumerate(steps)]
        nd = {b: [ndvm_fit(b, n, 1) for n in steps] for b in backends}
        for i, n in enumerate(steps):
            cells = " ".join(f"{nd[b][i] * 1e3:13.2f} ms" for b in backends)
            print(f"{n:6d} {cells} {jax_t[i] * 1e3:13.2f} ms")
        for b in backends:
            print(f"crossover ndvm-{b} vs JAX: {crossover(steps, nd[b], jax_t)}")
        res["jax"] = {"steps": steps, "jax": jax_t, "ndvm": nd}
    print("\nmanifest:", json.dumps(res["manifest"]))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(res, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
