"""Uncertainty of fitted parameters: the Hessian of the loss at the optimum, as covariance.

The Hessian in theta space is central differences of the exact gradient, all ``2D`` shifted
points as lanes of ONE objective call. The covariance of the fitted values follows from it by
the loss's meaning:

- ``mse`` (``L = SSE / N``): ``s² (JᵀJ)⁻¹`` with ``s² = SSE / (N - D)`` and the Gauss-Newton
  ``JᵀJ ≈ N H / 2``, i.e. ``2 L / (N - D) · H⁻¹`` — ``scipy.optimize.curve_fit``'s ``pcov`` with
  ``absolute_sigma=False``.
- ``gaussian_nll`` (the mean per-point negative log-likelihood): ``(N H)⁻¹``, the inverse
  observed information.
- ``value`` (the program's output is a negative log-likelihood): ``H⁻¹``, as statsmodels' ``bse``.

Then the delta method maps theta to the constrained values: ``cov = J cov_theta Jᵀ`` with ``J``
the diagonal ``d value / d theta``. A callable (torch) loss has no known scale: no covariance.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ndvm.calibrate.objective import Objective


def hessian(objective: Objective, theta: np.ndarray, rel: float = 1e-5) -> np.ndarray | None:
    """Central differences of the exact gradient at ``theta [D]``: ``H [D, D]`` (symmetrized)."""
    D = theta.shape[0]
    h = rel * np.maximum(1.0, np.abs(theta))
    shifts = np.diag(h)
    lanes = np.concatenate([theta + shifts, theta - shifts], axis=0)
    ev = objective(lanes, grad=True)
    if ev.grad is None or bool(ev.failed.any()):
        return None
    g = np.asarray(ev.grad, dtype=np.float64)
    H = (g[:D] - g[D:]) / (2.0 * h[:, None])
    return 0.5 * (H + H.T)


def scale(kind: str, loss: float, n_obs: int, dim: int) -> float | None:
    """The factor turning ``H⁻¹`` into the covariance for a built-in loss (None: unknown)."""
    if kind == "mse":
        return 2.0 * loss / (n_obs - dim) if n_obs > dim else float("inf")
    if kind == "gaussian_nll":
        return 1.0 / n_obs
    if kind == "value":
        return 1.0
    return None


def covariance(H: np.ndarray, factor: float, jac: np.ndarray) -> np.ndarray:
    """``factor · H⁻¹`` mapped to the constrained values by the diagonal Jacobian ``jac``.

    NaN where the Hessian is not positive definite (not a minimum, or a flat direction)."""
    D = H.shape[0]
    try:
        np.linalg.cholesky(H)
    except np.linalg.LinAlgError:
        return np.full((D, D), np.nan)
    cov = factor * np.linalg.inv(H)
    return cov * np.outer(jac, jac)


def value_jacobian(program: Any, prepared: Any, theta: np.ndarray) -> np.ndarray:
    """Diagonal ``d value / d theta`` for the program's parameters and the loss's extras."""
    P = len(program.params)
    jac = np.ones(theta.shape[0])
    jac[:P] = program.constrain_jacobian(theta[:P])
    if theta.shape[0] > P and prepared is not None:
        jac[P:] = prepared.constrain_extra(theta[P:])  # sigma = exp(s): d sigma / d s = sigma
    return jac


def gauss_newton(
    jtj: np.ndarray, sse: float, n_obs: int, absolute_sigma: bool, jac: np.ndarray
) -> np.ndarray:
    """``curve_fit``'s ``pcov`` from the Gauss-Newton ``JᵀJ`` (of the residuals, weighted by
    ``1/sigma``, in theta space) at the optimum: ``(JᵀJ)⁻¹``, times ``SSE / (N - D)`` unless
    ``absolute_sigma``, mapped to the constrained values by the diagonal ``jac``. NaN when
    ``JᵀJ`` is singular (a parameter the residuals do not depend on), inf when ``N <= D``."""
    D = jtj.shape[0]
    try:
        c = np.linalg.cholesky(jtj)
    except np.linalg.LinAlgError:
        return np.full((D, D), np.nan)
    inv_c = np.linalg.inv(c)
    cov = inv_c.T @ inv_c
    if not absolute_sigma:
        cov = cov * (sse / (n_obs - D) if n_obs > D else np.inf)
    return cov * np.outer(jac, jac)
