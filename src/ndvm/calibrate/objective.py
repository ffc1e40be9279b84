"""Objectives: theta ``[B, D]`` -> per-lane loss, gradient and failure, one evaluate per call.

``ProgramObjective`` drives a built-in loss (one ``Program.evaluate`` per call, the loss gradient
entering as the cotangent); ``TorchObjective`` drives an arbitrary torch loss through
``ndvm.torch`` (forward, torch loss, backward = one more evaluate).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ndvm.api import Program
from ndvm.calibrate.losses import Prepared, lane_reasons


@dataclass
class Eval:
    """loss [B]; grad [B, D] (None when not requested); failed [B] bool; reasons per lane;
    sq [B, N]: the squared residuals per lane, where the objective formed them (else None)."""

    loss: np.ndarray
    grad: np.ndarray | None
    failed: np.ndarray
    reasons: list[str | None]
    sq: np.ndarray | None = None


class Objective(Protocol):
    dim: int

    def __call__(self, theta: np.ndarray, grad: bool = True) -> Eval: ...


def _failures(
    loss: np.ndarray, grad: np.ndarray | None, reasons: list[str | None]
) -> tuple[np.ndarray, list[str | None]]:
    ok = np.isfinite(loss)
    if grad is not None:
        ok &= np.isfinite(grad).all(axis=1)
    failed = ~ok
    out = list(reasons)
    for b in np.nonzero(failed)[0].tolist() if failed.any() else ():
        if out[b] is None:
            out[b] = "non-finite loss" if not np.isfinite(loss[b]) else "non-finite gradient"
    return failed, out


@dataclass
class ProgramObjective:
    """A built-in loss over a (possibly loss-augmented) program; extra params follow the P."""

    prepared: Prepared

    @property
    def n_params(self) -> int:
        return self._P

    @property
    def dim(self) -> int:
        return self.n_params + len(self.prepared.extra0)

    def __call__(self, theta: np.ndarray, grad: bool = True) -> Eval:
        prep = self.prepared
        if prep.per_lane:
            return self._per_lane(theta, grad)
        P = self.n_params
        extra = theta[:, P:]
        if grad:
            # a per-lane cotangent needs the value grid's rank: probed once (B=1)
            ct = prep.cotangent(extra, len(self._shape(theta)) if prep.lane_cotangent else 1)
            res = prep.program.evaluate(theta[:, :P], prep.inputs, grad=True, cotangent=ct)
        else:
            res = prep.program.evaluate(theta[:, :P], prep.inputs)
        value = np.asarray(res.value, dtype=np.float64) if res.numeric else None
        B = theta.shape[0]
        reasons = lane_reasons(res)
        if value is None:
            loss = np.full(B, np.nan)
            reasons = [r or "result is not numeric" for r in reasons]
            g = np.full((B, self.dim), np.nan) if grad else None
            failed, reasons = _failures(loss, g, reasons)
            return Eval(loss, g, failed, reasons)
        loss, gextra = prep.reduce(value, extra)
        g = None
        if grad:
            assert res.grad is not None
            g = np.concatenate([res.grad, gextra], axis=1) if gextra.shape[1] else res.grad
        failed, reasons = _failures(loss, g, reasons)
        return Eval(loss, g, failed, reasons, value.reshape(B, -1) if prep.squares else None)

    def _per_lane(self, theta: np.ndarray, grad: bool) -> Eval:
        """One target series per lane: value walk, residual in NumPy, then the VJP walk."""
        prep = self.prepared
        assert prep.target is not None
        P = self.n_params
        B = theta.shape[0]
        extra = theta[:, P:]
        res = prep.model.evaluate(theta[:, :P], prep.model_inputs)
        reasons = lane_reasons(res)
        value = np.asarray(res.value, dtype=np.float64) if res.numeric else None
        flat = None if value is None else value.reshape(B, -1)
        # one number per lane (a model without data lanes) predicts each entry of its series
        spread = flat is not None and flat.shape[1] == 1 != prep.target.shape[1]
        if flat is None or (flat.shape != prep.target.shape and not spread):
            why = "result is not numeric" if value is None else "value does not match target"
            loss = np.full(B, np.nan)
            g = np.full((B, self.dim), np.nan) if grad else None
            failed, reasons = _failures(loss, g, [r or why for r in reasons])
            return Eval(loss, g, failed, reasons)
        r = flat - prep.target
        sq = r * r
        loss, gextra = prep.reduce(sq, extra)
        g = None
        if grad:
            wr = prep.cotangent(extra, 2) * r  # the tape of (* r r), as the runtime's
            ct = wr + wr
            ct = (ct.sum(axis=1) if spread else ct).reshape(value.shape)
            back = prep.model.evaluate(theta[:, :P], prep.model_inputs, grad=True, cotangent=ct)
            assert back.grad is not None
            g = np.concatenate([back.grad, gextra], axis=1) if gextra.shape[1] else back.grad
        failed, reasons = _failures(loss, g, reasons)
        return Eval(loss, g, failed, reasons, sq)

    def _shape(self, theta: np.ndarray) -> tuple[int, ...]:
        if self._trailing is None:
            probe = self.prepared.program.evaluate(theta[:1, : self.n_params], self.prepared.inputs)
            self._trailing = tuple(np.shape(probe.value)[1:])
        return (theta.shape[0], *self._trailing)

    def __post_init__(self) -> None:
        self._trailing: tuple[int, ...] | None = None
        self._P = len(self.prepared.model.param_specs)


@dataclass
class TorchObjective:
    """An arbitrary torch loss ``fn(value, target) -> [B]`` through the ``ndvm.torch`` op."""

    program: Program
    inputs: Mapping[str, Any]
    target: Any
    fn: Callable[..., Any]

    def __post_init__(self) -> None:
        from ndvm.extras import require

        require("ndvm.calibrate(loss=<callable>)", "torch")

    @property
    def dim(self) -> int:
        return len(self.program.params)

    def __call__(self, theta: np.ndarray, grad: bool = True) -> Eval:
        import torch

        from ndvm.torch import op

        f = op(self.program.with_options(strict=False), **self.inputs)
        th = torch.tensor(theta, dtype=torch.float64, requires_grad=grad)
        tgt = None if self.target is None else torch.as_tensor(self.target, dtype=torch.float64)
        with torch.set_grad_enabled(grad):
            out = self.fn(f(th), tgt)
            loss = out if out.ndim == 1 else out.reshape(theta.shape[0], -1).sum(dim=1)
            g = None
            if grad:
                (gt,) = torch.autograd.grad(loss.sum(), th, allow_unused=True)
                g = np.zeros_like(theta) if gt is None else gt.detach().numpy().copy()
        lv = loss.detach().numpy().astype(np.float64).copy()
        failed, reasons = _failures(lv, g, [None] * theta.shape[0])
        return Eval(lv, g, failed, reasons)
