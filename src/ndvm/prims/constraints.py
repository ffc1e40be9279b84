"""Parameter constraints: the one definition of each map from theta to a parameter's value.

A parameter declared ``positive``, ``unit`` or ``signed-unit`` sees ``softplus``, ``sigmoid``
or ``tanh`` of its unconstrained theta; ``free`` sees theta. The forward map is a primitive of
the table, so every evaluator applies it with its own implementation of that primitive: the
reference machine tapes it (``rt.numeric``), the native core applies the opcode its wire code
names (``cpp/src/interp.cpp``, ``Interp::bind``; ``tests/native/test_native_constraints.py`` checks
the mirror), torch and JAX use the namespace formula (``ndvm.baselines.kernels``). The
derivative is the primitive's VJP; the inverse (values to theta) is here, the only place that
needs it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ndvm.lang.ir import CONSTRAINT_RANGES, CONSTRAINTS
from ndvm.prims.registry import Prim
from ndvm.prims.table import PRIMS


def _inv_softplus(v: np.ndarray) -> np.ndarray:
    return np.where(v > 30, v, np.log(np.expm1(np.minimum(v, 30))))


def _logit(v: np.ndarray) -> np.ndarray:
    return np.log(v) - np.log1p(-v)


@dataclass(frozen=True, slots=True)
class Constraint:
    """One constraint kind: its forward primitive, open range and inverse."""

    name: str
    prim_name: str | None  # the primitive applied to theta; None: the identity
    inverse_fn: Callable[[np.ndarray], np.ndarray]

    @property
    def code(self) -> int:
        """What the native core is sent: the forward primitive's opcode (0: the identity)."""
        prim = self.prim
        return 0 if prim is None else prim.code

    @property
    def prim(self) -> Prim | None:
        return None if self.prim_name is None else PRIMS.by_name(self.prim_name)

    @property
    def bounds(self) -> tuple[float, float]:
        """The open interval of values this constraint admits."""
        return CONSTRAINT_RANGES[self.name]

    def forward(self, theta: Any) -> Any:
        """Values for theta (float64 NumPy, the table's reference rule)."""
        prim = self.prim
        return theta if prim is None or prim.ref is None else prim.ref(theta)

    def forward_in(self, ns: Any) -> Callable[[Any], Any] | None:
        """The forward map over an array namespace (torch, jax.numpy); None for the identity."""
        return None if self.prim_name is None else getattr(ns, self.prim_name)

    def derivative(self, theta: np.ndarray) -> np.ndarray:
        """d value / d theta, elementwise (the primitive's VJP with a unit cotangent)."""
        prim = self.prim
        if prim is None or prim.ref is None or prim.vjp is None:
            return np.ones_like(theta)
        (ct,) = prim.vjp(np.ones_like(theta), prim.ref(theta), theta)
        return np.broadcast_to(ct, np.shape(theta)).astype(np.float64)

    def inverse(self, values: np.ndarray, who: str = "value") -> np.ndarray:
        """Theta for ``values``; ValueError for a value outside the open range."""
        lo, hi = self.bounds
        if self.prim_name is None:
            return values
        if np.any((values <= lo) | (values >= hi)):
            raise ValueError(f"parameter {who!r} must be in ({lo:g}, {hi:g})")
        with np.errstate(all="ignore"):
            return self.inverse_fn(values)


_TABLE = (
    Constraint("free", None, lambda v: v),
    Constraint("positive", "softplus", _inv_softplus),
    Constraint("unit", "sigmoid", _logit),
    Constraint("signed-unit", "tanh", np.arctanh),
)
BY_NAME: dict[str, Constraint] = {c.name: c for c in _TABLE}
assert tuple(BY_NAME) == CONSTRAINTS, "one Constraint per constraint kind of the language"


def constraint(name: str) -> Constraint:
    return BY_NAME[name]


def _columns(specs: Any) -> tuple[tuple[int, Constraint], ...]:
    """The columns of ``specs`` whose constraint is not ``free``, with their constraint."""
    return _columns_of(tuple(s.constraint for s in specs))


@functools.lru_cache(maxsize=1024)
def _columns_of(kinds: tuple[str, ...]) -> tuple[tuple[int, Constraint], ...]:
    return tuple((i, BY_NAME[k]) for i, k in enumerate(kinds) if BY_NAME[k].prim_name)


def constrain(specs: Any, theta: Any) -> np.ndarray:
    """Values the program sees for theta ``[..., P]`` (``specs``: the ``ParamSpec``s)."""
    t = np.array(theta, dtype=np.float64)
    for i, c in _columns(specs):
        t[..., i] = c.forward(t[..., i])
    return t


def constrain_jacobian(specs: Any, theta: Any) -> np.ndarray:
    """d value / d theta per parameter (diagonal)."""
    t = np.array(theta, dtype=np.float64)
    out = np.ones_like(t)
    for i, c in _columns(specs):
        out[..., i] = c.derivative(t[..., i])
    return out


def unconstrain(specs: Any, values: Any) -> np.ndarray:
    """Inverse of ``constrain``; ValueError for values outside a constraint."""
    v = np.array(values, dtype=np.float64)
    for i, c in _columns(specs):
        v[..., i] = c.inverse(v[..., i], specs[i].name)
    return v


@functools.lru_cache(maxsize=1024)
def _init_theta(specs: tuple[Any, ...]) -> np.ndarray:
    theta = unconstrain(specs, [s.init for s in specs])
    theta.setflags(write=False)
    return theta


def init_theta(specs: tuple[Any, ...]) -> np.ndarray:
    """Theta ``[P]`` of the declared initial values (a new array)."""
    return _init_theta(specs).copy()
