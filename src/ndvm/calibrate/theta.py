"""A calibration's starts in theta space: the seeded stream, the first starts and restarts, box
bounds and pinned (``fixed``) parameters, per program (``ndvm.calibrate.fitplan``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ndvm.api import Program
from ndvm.calibrate import optim
from ndvm.calibrate.starts import place_roles, program_roles
from ndvm.errors import NdvmError
from ndvm.prims.constraints import constraint


class _Seed(np.random.SeedSequence):
    """An int seed's ``SeedSequence`` that hashes its entropy into a bit generator's state
    once (``PCG64(seed)`` asks for the same four words on every call); the same stream."""

    def generate_state(self, n_words: int, dtype: Any = np.uint32) -> np.ndarray:
        key = (n_words, np.dtype(dtype).str)
        cache = self.__dict__.setdefault("_states", {})
        state = cache.get(key)
        if state is None:
            state = cache[key] = super().generate_state(n_words, dtype)
        return state.copy()


_SEEDS: dict[int, _Seed] = {}  # seed -> its SeedSequence


def seeded(seed: Any) -> np.random.Generator:
    """``np.random.default_rng(seed)``, the same stream; an int seed's entropy hashed once."""
    if type(seed) is not int or seed < 0:
        return np.random.default_rng(seed)
    seq = _SEEDS.get(seed)
    if seq is None or seq.n_children_spawned:  # spawned from: no longer as new
        if len(_SEEDS) >= 1024:
            _SEEDS.clear()
        seq = _SEEDS[seed] = _Seed(seed)
    return np.random.Generator(np.random.PCG64(seq))


def init_theta(
    program: Program, init: Any, starts: int, rng: np.random.Generator,
    inputs: Mapping[str, Any] | None = None, target: Any = None,
) -> tuple[np.ndarray, optim.Sampler]:  # fmt: skip
    """Unconstrained [starts, P] starts and the sampler used for restarts. Without ``init``:
    the declared values, then jittered starts, of which the odd ones start each parameter
    that shifts, scales or oscillates an input from the data (``ndvm.calibrate.starts``)."""
    P = len(program.param_specs)
    if callable(init):

        def sample(r: np.random.Generator, n: int) -> np.ndarray:
            return program.unconstrain(np.asarray(init(r, (n, P)), dtype=np.float64))

        return sample(rng, starts), sample

    def jitter(r: np.random.Generator, n: int) -> np.ndarray:
        base = program.init_theta()  # (drawn only for restarts when ``init`` is given)
        z = r.standard_normal((n, P))
        z *= np.maximum(1.0, np.abs(base))  # jitter in proportion to each declared init
        z += base  # base + scale * z, bitwise
        return z

    if init is None:
        theta = np.empty((starts, P))
        theta[0] = program.init_theta()
        if starts > 1:
            theta[1:] = jitter(rng, starts - 1)
            if inputs:
                place_roles(theta, starts, program_roles(program), inputs, rng, target)
        return theta, jitter
    if isinstance(init, Mapping):
        unknown = set(init) - set(program.params)
        if unknown:
            raise NdvmError(f"init: unknown parameter(s) {sorted(unknown)}")
        vals = np.array([init.get(s.name, s.init) for s in program.param_specs], dtype=float)
        init = vals
    vals = np.asarray(init, dtype=np.float64)
    if vals.shape == (P,):
        center = program.unconstrain(vals)
        theta = np.tile(center, (starts, 1))
        if starts > 1:
            theta[1:] += np.maximum(1.0, np.abs(center)) * rng.standard_normal((starts - 1, P))
        return theta, jitter
    if vals.shape == (starts, P):
        return program.unconstrain(vals), jitter
    raise NdvmError(f"init must have shape [{P}] or [{starts}, {P}], got {vals.shape}")


def theta_bound(program: Program, i: int, value: float | None, side: float) -> float:
    """Parameter ``i``'s bound ``value`` (constrained space) in theta space; ``side`` = -inf
    or inf for None or a bound at/after the edge of the parameter's own constraint."""
    if value is None:
        return side
    spec = program.param_specs[i]
    row = np.array([s.init for s in program.param_specs], dtype=np.float64)  # valid elsewhere
    row[i] = value
    try:
        return float(program.unconstrain(row)[i])
    except ValueError:  # outside the constraint's open range: the constraint is the bound
        lo, hi = constraint(spec.constraint).bounds
        if (side < 0 and value <= lo) or (side > 0 and value >= hi):
            return side
        raise NdvmError(
            f"constraints: bound {value} for {spec.name!r} is outside its {spec.constraint} range"
        ) from None


def projector(program: Program, constraints: Any) -> optim.Project | None:
    """Box bounds {name: (lo, hi)} in the constrained space, enforced by projection on theta."""
    if not constraints:
        return None
    P = len(program.params)
    lo = np.full(P, -np.inf)
    hi = np.full(P, np.inf)
    for name, bounds in dict(constraints).items():
        if name not in program.params:
            raise NdvmError(
                f"constraints: unknown parameter {name!r} (parameters: {', '.join(program.params)})"
            )
        a, b = bounds
        if a is not None and b is not None and not a <= b:
            raise NdvmError(f"constraints: {name!r} has lower bound {a} > upper bound {b}")
        i = program.params.index(name)
        lo[i] = theta_bound(program, i, a, -np.inf)
        hi[i] = theta_bound(program, i, b, np.inf)

    return optim.Box(lo, hi)


def _checked_fixed(program: Program, fixed: Mapping[str, float] | None) -> dict[str, float]:
    """``fixed`` checked: known parameter names, finite numbers inside each constraint."""
    out: dict[str, float] = {}
    for name, value in dict(fixed or {}).items():
        if name not in program.params:
            raise NdvmError(
                f"fixed: unknown parameter {name!r} (parameters: {', '.join(program.params)})"
            )
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise NdvmError(f"fixed: {name!r} must be a number, got {value!r}") from None
        if not np.isfinite(v):
            raise NdvmError(f"fixed: {name!r} must be finite, got {v}")
        i = program.params.index(name)
        theta_bound(program, i, v, 0.0)  # inside the parameter's constraint
        out[name] = v
    return out


def pin(
    program: Program, fixed: Any, constraints: Any, theta0: np.ndarray, sampler: optim.Sampler
) -> tuple[dict[str, float], Any, np.ndarray, optim.Sampler]:
    """(the checked ``fixed``, the box bounds with each pinned parameter's equal bounds, the
    starts and restarts with the pinned parameters at their values (theta space))."""
    pinned = _checked_fixed(program, fixed)
    if not pinned:
        return pinned, constraints, theta0, sampler
    box = {**dict(constraints or {}), **{k: (v, v) for k, v in pinned.items()}}
    cols = [program.params.index(k) for k in pinned]
    vals = [theta_bound(program, i, pinned[program.params[i]], 0.0) for i in cols]

    def hold(th: np.ndarray) -> np.ndarray:
        th[:, cols] = vals
        return th

    def sample(r: np.random.Generator, n: int) -> np.ndarray:
        return hold(sampler(r, n))

    return pinned, box, hold(theta0), sample
