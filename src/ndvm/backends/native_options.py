"""The options objects of the native core's in-runtime optimizers (``Context.optimize``):
Adam, Levenberg–Marquardt and L-BFGS, from ``ndvm.calibrate``'s optimizer fields."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

try:
    from ndvm import _core
except ImportError:  # pragma: no cover - exercised only without the extension
    _core = None


def _f64(x: Any, shape: Any = -1) -> np.ndarray | None:
    return None if x is None else np.ascontiguousarray(x, dtype=np.float64).reshape(shape)


def lm_options(
    weight: float,
    steps: int,
    options: Mapping[str, Any],
    box: tuple[np.ndarray | None, np.ndarray | None],
    target: np.ndarray,
    time_limit: float | None,
) -> Any:
    """The core's options for Levenberg–Marquardt (``ndvm.calibrate.lm.LM``'s fields, the
    per-entry residual weights ``options["residual_weight"]`` and the adaptive starts
    ``options["wave"]``: (first wave's starts, its iterations, starts that must agree))."""
    opt = adam_options(weight, steps, {}, box, None, None, target, time_limit)
    opt.lm = True
    for key in ("ftol", "xtol", "gtol", "lambda0"):
        if key in options:
            setattr(opt, key, float(options[key]))
    if options.get("residual_weight") is not None:
        opt.residual_weight = _f64(options["residual_weight"])
    wave = options.get("wave")
    if wave is not None:  # adaptive starts in the runtime: (starts, iterations, agreeing)
        opt.wave, opt.wave_steps, opt.agree = (int(v) for v in wave)
    return opt


def lbfgs_options(
    weight: float,
    steps: int,
    options: Mapping[str, Any],
    box: tuple[np.ndarray | None, np.ndarray | None],
    early_stop: tuple[float, float, int] | None,
    target: np.ndarray | None,
) -> Any:
    """The core's options for L-BFGS (``ndvm.calibrate.optim.LBFGS``'s fields)."""
    opt = adam_options(weight, steps, {}, box, early_stop, None, target, None)
    opt.lbfgs = True
    opt.memory = int(options.get("memory", 10))
    opt.max_ls = int(options.get("max_ls", 15))
    opt.c1 = float(options.get("c1", 1e-4))
    opt.c2 = float(options.get("c2", 0.9))
    opt.lbfgs_gtol = float(options.get("gtol", 1e-10))
    opt.lbfgs_ftol = float(options.get("ftol", 1e-13))
    return opt


def adam_options(
    weight: float,
    steps: int,
    options: Mapping[str, Any],
    box: tuple[np.ndarray | None, np.ndarray | None],
    early_stop: tuple[float, float, int] | None,
    lr_schedule: np.ndarray | None,
    target: np.ndarray | None,
    time_limit: float | None,
) -> Any:
    """The core's ``AdamOptions`` (a target [B, N] is per lane, any other shape shared);
    what is None keeps the core's default (none)."""
    opt = _core.AdamOptions()
    opt.weight, opt.steps = float(weight), int(steps)
    opt.lr, opt.eps = float(options.get("lr", 0.05)), float(options.get("eps", 1e-8))
    b1, b2 = options.get("betas", (0.9, 0.999))
    opt.beta1, opt.beta2 = float(b1), float(b2)
    if box[0] is not None:
        opt.lower = _f64(box[0])
    if box[1] is not None:
        opt.upper = _f64(box[1])
    if early_stop is not None:
        opt.early_stop = True
        opt.rtol, opt.atol, opt.patience = (
            float(early_stop[0]),
            float(early_stop[1]),
            int(early_stop[2]),
        )
    if lr_schedule is not None:
        opt.lr_schedule = _f64(lr_schedule)
    if target is not None:
        opt.target = _f64(target, np.shape(target) if np.ndim(target) == 2 else -1)
    if time_limit:
        opt.time_limit = float(time_limit)
    return opt
