"""Built-in calibration losses as one-walk objectives: the residual is folded into the program.

``mse`` and ``gaussian_nll`` evaluate a loss-augmented program whose value is the squared
residual per data lane (built from the model's IR, or formed by the in-runtime optimizer), so
loss and gradient for every start come from ONE ``evaluate`` call with a cotangent known before
the walk. ``value`` uses the program's own output (e.g. a Kalman NLL).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

import numpy as np

from ndvm.api import Program
from ndvm.backends import registry as backend_registry
from ndvm.backends.base import RunResult
from ndvm.backends.inputs import Const, classify_inputs, is_complex
from ndvm.errors import NdvmError
from ndvm.frozen import frozen
from ndvm.identity import ByIdentity
from ndvm.lang import ir
from ndvm.prims import PRIMS

TARGET = "%ndvm-target"
_LOG_2PI = float(np.log(2.0 * np.pi))


class Loss(Protocol):
    """A loss over a program's lane grid; ``extra`` are loss-owned parameters (e.g. log noise)."""

    name: str
    extra_names: tuple[str, ...]

    def prepare(self, program: Program, inputs: Mapping[str, Any], target: Any) -> Prepared: ...


@frozen
class Prepared:
    """A loss bound to a program and data: what the optimizer's objective needs per step.

    model/model_inputs: the user's program and its inputs. target: the observed values of a
    residual loss (mse, gaussian_nll): ``[N]`` per data lane, ``[B, N]`` one series per
    parameter lane, or a scalar; None for ``value``. ``program``/``inputs`` are what the NumPy
    objective evaluates: the loss-augmented program (value = squared residual per data lane,
    compiled on first use only, since an in-runtime optimizer forms the residual itself) or,
    for ``value`` and per-lane targets, the model. cotangent(extra [B, E]) -> cotangent on the
    value grid (broadcasting to it); reduce(value grid, extra) -> (loss [B], d loss / d extra
    [B, E]).
    """

    model: Program
    model_inputs: dict[str, Any]
    weight: float
    kind: str
    sigma: float | None = None
    extra0: tuple[float, ...] = ()
    target: np.ndarray | None = field(default=None, compare=False)
    residual_weight: np.ndarray | None = field(default=None, compare=False)  # 1/sigma per entry

    @property
    def per_lane(self) -> bool:
        """One target series per parameter lane ([B, N]): the residual is formed in NumPy."""
        return self.target is not None and self.target.ndim == 2

    @property
    def squares(self) -> bool:
        """The objective's value grid is the squared residual entry for entry (a target
        ``[N]``)."""
        return self.target is not None and self.target.ndim == 1

    @cached_property
    def data_lanes(self) -> bool:
        """The model runs over data lanes (its inputs hold a data-lane array)."""
        return classify_inputs(self.model.inputs, self.model_inputs)[1] is not None

    @cached_property
    def program(self) -> Program:
        if self.target is None or self.per_lane:
            return self.model
        return augmented(self.model)

    @cached_property
    def inputs(self) -> dict[str, Any]:
        if self.target is None or self.per_lane:
            return self.model_inputs
        inp = dict(self.model_inputs)
        if self.target.ndim == 0:
            inp[TARGET] = float(self.target)
        elif self.data_lanes:  # one target entry per data lane
            inp[TARGET] = self.target
        else:  # a model without data lanes: its value against the target entry for entry
            inp[TARGET] = Const(self.target)
        return inp

    @property
    def lane_cotangent(self) -> bool:
        """The cotangent differs by lane (a learned noise scale); else it is one number."""
        return self.kind == "gaussian_nll" and self.sigma is None

    def cotangent(self, extra: np.ndarray, ndim: int = 1) -> np.ndarray:
        """The cotangent on a value grid ``[B, ...]`` of ``ndim`` dims, in a shape that
        broadcasts to it: one number, or ``[B, 1, ...]`` when ``lane_cotangent``."""
        if self.kind == "value":
            return np.asarray(1.0)
        if self.kind == "mse":
            return np.asarray(self.weight)
        if self.sigma is not None:  # gaussian_nll: d/d(sq) of mean(0.5 sq / s^2) = 0.5 / (s^2 M)
            return np.asarray(0.5 * self.weight * self.sigma**-2)
        inv_var = np.exp(-2.0 * extra[:, 0])
        return (0.5 * self.weight * inv_var).reshape((extra.shape[0],) + (1,) * (ndim - 1))

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

    def bind(self, program: Program, inputs: Mapping[str, Any] | None = None) -> Prepared:
        """This loss's data part (a built-in loss's ``data``: no model yet) bound to
        ``program`` (per-lane failures: strict=False), on ``inputs`` when given (the same
        values, e.g. laid out once for the program's input names)."""
        return Prepared(
            _lenient(program), self.model_inputs if inputs is None else inputs, self.weight,
            self.kind, self.sigma, self.extra0, self.target, self.residual_weight,
        )  # fmt: skip


def augmented(model: Program) -> Program:
    """The loss-augmented program ``(let ((r (- E target))) (* r r))``, built from the model's
    resolved IR (nothing is re-read or re-resolved); the target is a new last input. Errors
    keep the model's positions. Cached per model (calibrations repeat it)."""
    hit = _AUGMENTED_OF.get(model)
    if hit is not None:
        return hit
    key = (model.compiled.source, model.param_specs, model.inputs, model.backend, model.dtype,
           model.dialect, model.limits)  # fmt: skip
    hit = _AUGMENTED.get(key)
    if hit is None:
        c = model.compiled
        at = (c.body.line, c.body.column)
        target = ir.Input(len(c.inputs), TARGET, *at)
        sub, mul = PRIMS.by_name("-"), PRIMS.by_name("*")
        r = ir.Local(0, 0, "%ndvm-r", *at)
        body = ir.Let(
            (ir.PrimCall(sub.code, (c.body, target), sub.name, *at),),
            ir.PrimCall(mul.code, (r, r), mul.name, *at),
            *at,
        )
        compiled = c.replace(
            body=body, inputs=(*c.inputs, TARGET), input_positions=(*c.input_positions, at)
        )
        prepare = getattr(backend_registry.get(model.backend), "prepare", None)
        if prepare is not None:
            prepare(compiled)
        hit = Program(compiled, model.backend, model.dtype, model.dialect, model.limits, False)
        if len(_AUGMENTED) >= _AUGMENTED_MAX:
            _AUGMENTED.pop(next(iter(_AUGMENTED)))
        _AUGMENTED[key] = hit
    _AUGMENTED_OF.put(model, hit)
    return hit


_AUGMENTED: dict[tuple[Any, ...], Program] = {}
_AUGMENTED_MAX = 512
_AUGMENTED_OF = ByIdentity(_AUGMENTED_MAX)  # model -> augmented, before the structural key
_LENIENT = ByIdentity(512)  # program -> program.with_options(strict=False)


def _residual_target(target: Any) -> tuple:
    """(target array, weight 1/N) of a residual loss, validated."""
    if target is None:
        raise NdvmError("this loss needs a target (the observed data)")
    if is_complex(target):
        raise NdvmError("target must be real numbers, got complex values")
    try:
        tgt = np.asarray(target, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise NdvmError(f"target must be numeric: {exc}") from None
    if tgt.ndim > 2:
        raise NdvmError(
            f"target must be a scalar, [N] (one per data lane) or [starts, N] (one series per "
            f"start), got shape {tgt.shape}"
        )
    n = tgt.shape[-1] if tgt.ndim >= 1 else 1
    if n == 0:
        raise NdvmError("target is empty")
    return tgt, 1.0 / n


@dataclass(frozen=True)
class MSE:
    """Mean squared error over the data lanes: mean((f - y)^2)."""

    name: str = "mse"
    extra_names: tuple[str, ...] = ()

    def data(self, inputs: Mapping[str, Any], target: Any) -> Prepared:
        """The loss on ``inputs`` and ``target``, no program bound yet (``Prepared.bind``)."""
        tgt, w = _residual_target(target)
        return Prepared(_UNBOUND, dict(inputs), w, "mse", target=tgt)

    def prepare(self, program: Program, inputs: Mapping[str, Any], target: Any) -> Prepared:
        return self.data(inputs, target).bind(program)


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

    def data(self, inputs: Mapping[str, Any], target: Any) -> Prepared:
        """The loss on ``inputs`` and ``target``, no program bound yet (``Prepared.bind``)."""
        tgt, w = _residual_target(target)
        inp = dict(inputs)
        if self.sigma is not None:
            if not self.sigma > 0:
                raise NdvmError(f"gaussian_nll: sigma must be > 0, got {self.sigma}")
            return Prepared(_UNBOUND, inp, w, "gaussian_nll", sigma=float(self.sigma), target=tgt)
        spread = float(np.std(tgt)) or 1.0
        return Prepared(_UNBOUND, inp, w, "gaussian_nll", extra0=(float(np.log(spread)),),
                        target=tgt)  # fmt: skip

    def prepare(self, program: Program, inputs: Mapping[str, Any], target: Any) -> Prepared:
        return self.data(inputs, target).bind(program)


@dataclass(frozen=True)
class Value:
    """The program's own output is the loss (summed over data lanes), e.g. a negative loglik."""

    name: str = "value"
    extra_names: tuple[str, ...] = ()

    def data(self, inputs: Mapping[str, Any], target: Any) -> Prepared:
        """The loss on ``inputs``, no program bound yet (``Prepared.bind``)."""
        if target is not None:
            raise NdvmError("loss='value' takes no target: the program's output is the loss")
        return Prepared(_UNBOUND, dict(inputs), 1.0, "value")

    def prepare(self, program: Program, inputs: Mapping[str, Any], target: Any) -> Prepared:
        return self.data(inputs, target).bind(program)


def _lenient(program: Program) -> Program:
    """The program with per-lane failures (strict=False): a failing start fails alone."""
    if program.strict is False:
        return program
    hit = _LENIENT.get(program)
    if hit is None:
        hit = program.with_options(strict=False)
        _LENIENT.put(program, hit)
    return hit


BUILTIN = {"mse": MSE(), "gaussian_nll": GaussianNLL(), "value": Value()}
_UNBOUND: Any = None  # a loss's data part before ``Prepared.bind`` gives it its model


def loss_data(loss: Any, inputs: Mapping[str, Any], target: Any) -> Prepared | None:
    """A built-in loss's data part (its ``prepare`` is ``data`` then ``bind``), made once for
    every program fitted to the same data; None for any other loss (prepared per program)."""
    if type(loss) not in (MSE, GaussianNLL, Value):
        return None
    return loss.data(inputs, target)  # type: ignore[no-any-return]


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
