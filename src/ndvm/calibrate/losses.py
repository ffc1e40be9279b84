"""Built-in calibration losses as one-walk objectives: the residual is folded into the program.

``mse`` and ``gaussian_nll`` compile a loss-augmented program whose value is the squared residual
per data lane, so loss and gradient for every start come from ONE ``evaluate`` call with a
cotangent known before the walk. ``value`` uses the program's own output (e.g. a Kalman NLL).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

import numpy as np

from ndvm.api import Program
from ndvm.backends.base import RunResult
from ndvm.errors import NdvmError
from ndvm.lang.reader import read

TARGET = "%ndvm-target"
_LOG_2PI = float(np.log(2.0 * np.pi))


class Loss(Protocol):
    """A loss over a program's lane grid; ``extra`` are loss-owned parameters (e.g. log noise)."""

    name: str
    extra_names: tuple[str, ...]

    def prepare(self, program: Program, inputs: Mapping[str, Any], target: Any) -> Prepared: ...


@dataclass(frozen=True)
class Prepared:
    """A loss bound to a program and data: what the optimizer's objective needs per step.

    program/inputs: what to evaluate. cotangent(extra [B, E]) -> cotangent on the value grid.
    reduce(value grid, extra) -> (loss [B], d loss / d extra [B, E]). extra0: initial [E].
    constrain_extra: extra theta -> reported values.
    """

    program: Program
    inputs: dict[str, Any]
    weight: float
    kind: str
    sigma: float | None = None
    extra0: tuple[float, ...] = ()

    def cotangent(self, value_shape: tuple[int, ...], extra: np.ndarray) -> np.ndarray:
        B = value_shape[0]
        if self.kind == "value":
            return np.ones(value_shape)
        if self.kind == "mse":
            return np.full(value_shape, self.weight)
        # gaussian_nll: d/d(sq) of mean(0.5 sq / s^2) = 0.5 / (s^2 M)
        inv_var = np.exp(-2.0 * extra[:, 0]) if self.sigma is None else np.full(B, self.sigma**-2)
        shape = (B,) + (1,) * (len(value_shape) - 1)
        return np.broadcast_to((0.5 * self.weight * inv_var).reshape(shape), value_shape)

    def reduce(self, value: np.ndarray, extra: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        B = value.shape[0]
        flat = value.reshape(B, -1)
        total = flat.sum(axis=1)
        if self.kind == "value":
            return total, np.zeros((B, 0))
        msq = total * self.weight  # mean squared residual per lane
        if self.kind == "mse":
            return msq, np.zeros((B, 0))
        if self.sigma is not None:
            log_s = np.log(self.sigma)
            return 0.5 * msq / self.sigma**2 + log_s + 0.5 * _LOG_2PI, np.zeros((B, 0))
        s = extra[:, 0]
        inv_var = np.exp(-2.0 * s)
        loss = 0.5 * msq * inv_var + s + 0.5 * _LOG_2PI
        return loss, (1.0 - msq * inv_var)[:, None]

    def constrain_extra(self, extra: np.ndarray) -> np.ndarray:
        return np.exp(extra) if self.extra0 else extra


def augment_source(source: str) -> str:
    """Wrap the program's last form E as ``(let ((r (- E target))) (* r r))``, keeping lines."""
    data = read(source)
    last = data[-1]
    lines = source.splitlines(keepends=True)
    offset = sum(len(s) for s in lines[: last.line - 1]) + last.column - 1
    return (
        source[:offset]
        + "(let ((%ndvm-r (- "
        + source[offset:]
        + f"\n {TARGET}))) (* %ndvm-r %ndvm-r))\n"
    )


@lru_cache(maxsize=512)
def _augmented(
    source: str,
    specs: tuple[Any, ...],
    inputs: tuple[str, ...],
    backend: str,
    dtype: str,
    dialect: str | None,
    limits: Any,
) -> Program:
    """The loss-augmented program, compiled once per program (calibrations repeat it)."""
    import ndvm

    return ndvm.compile(
        augment_source(source),
        specs,
        inputs + (TARGET,),
        backend=backend,
        dtype=dtype,
        dialect=dialect,
        limits=limits,
        strict=False,
    )


def _residual_program(program: Program, inputs: Mapping[str, Any], target: Any) -> tuple:
    if target is None:
        raise NdvmError("this loss needs a target (the observed data)")
    tgt = np.asarray(target, dtype=np.float64)
    if tgt.ndim > 1:
        raise NdvmError(f"target must be a scalar or a 1-D array of data lanes, got {tgt.shape}")
    aug = _augmented(
        program.source,
        program.param_specs,
        tuple(program.inputs),
        program.backend,
        program.dtype,
        program.dialect,
        program.limits,
    )
    inp = dict(inputs)
    inp[TARGET] = tgt if tgt.ndim == 1 else float(tgt)
    n = tgt.shape[0] if tgt.ndim == 1 else 1
    return aug, inp, 1.0 / n


@dataclass(frozen=True)
class MSE:
    """Mean squared error over the data lanes: mean((f - y)^2)."""

    name: str = "mse"
    extra_names: tuple[str, ...] = ()

    def prepare(self, program: Program, inputs: Mapping[str, Any], target: Any) -> Prepared:
        aug, inp, w = _residual_program(program, inputs, target)
        return Prepared(aug, inp, w, "mse")


@dataclass(frozen=True)
class GaussianNLL:
    """Per-point Gaussian NLL mean(0.5 (f-y)^2/s^2 + log s + 0.5 log 2 pi).

    ``sigma=None`` learns the noise scale s = exp(extra) alongside the program's parameters.
    """

    sigma: float | None = None
    name: str = "gaussian_nll"

    @property
    def extra_names(self) -> tuple[str, ...]:
        return ("sigma",) if self.sigma is None else ()

    def prepare(self, program: Program, inputs: Mapping[str, Any], target: Any) -> Prepared:
        aug, inp, w = _residual_program(program, inputs, target)
        if self.sigma is not None:
            if not self.sigma > 0:
                raise NdvmError(f"gaussian_nll: sigma must be > 0, got {self.sigma}")
            return Prepared(aug, inp, w, "gaussian_nll", sigma=float(self.sigma))
        spread = float(np.std(np.asarray(target, dtype=np.float64))) or 1.0
        return Prepared(aug, inp, w, "gaussian_nll", extra0=(float(np.log(spread)),))


@dataclass(frozen=True)
class Value:
    """The program's own output is the loss (summed over data lanes), e.g. a negative loglik."""

    name: str = "value"
    extra_names: tuple[str, ...] = ()

    def prepare(self, program: Program, inputs: Mapping[str, Any], target: Any) -> Prepared:
        if target is not None:
            raise NdvmError("loss='value' takes no target: the program's output is the loss")
        return Prepared(program.with_options(strict=False), dict(inputs), 1.0, "value")


BUILTIN = {"mse": MSE(), "gaussian_nll": GaussianNLL(), "value": Value()}


def get_loss(loss: Any) -> Any:
    """A built-in loss by name, a Loss instance, or a callable (the torch path)."""
    if isinstance(loss, str):
        if loss not in BUILTIN:
            raise NdvmError(f"unknown loss {loss!r} (built-in: {', '.join(BUILTIN)})")
        return BUILTIN[loss]
    if hasattr(loss, "prepare"):
        return loss
    if callable(loss):
        return loss
    raise NdvmError(f"loss must be a name, a Loss or a callable, got {type(loss).__name__}")


def lane_reasons(result: RunResult) -> list[str | None]:
    """The first error message per parameter lane (None where the lane did not error)."""
    B = result.status.shape[0]
    out: list[str | None] = [None] * B
    for mask, err in result.errors:
        lanes = np.asarray(mask).reshape(B, -1).any(axis=1)
        for b in np.flatnonzero(lanes):
            if out[b] is None:
                out[b] = f"{type(err).__name__}: {err}"
    return out
