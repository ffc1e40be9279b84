"""Value helpers that work for torch tensors and numpy arrays alike (torch imported lazily)."""

from __future__ import annotations

from typing import Any

import numpy as np


def _is_torch(v: Any) -> bool:
    return type(v).__module__.startswith("torch")


def copy_value(v: Any) -> Any:
    """A copy that shares no storage with ``v`` (tensors are detached and cloned)."""
    if _is_torch(v):
        return v.detach().clone()
    if isinstance(v, np.ndarray):
        return v.copy()
    return v


def zeros_like(v: Any) -> Any:
    if _is_torch(v):
        import torch

        return torch.zeros_like(v)
    return np.zeros_like(v)


def mean_like(v: Any, axis: int = 0) -> Any:
    """The mean over ``axis``, broadcast back to ``v``'s shape (mean ablation)."""
    if _is_torch(v):
        return v.mean(dim=axis, keepdim=True).expand_as(v).clone()
    return np.broadcast_to(v.mean(axis=axis, keepdims=True), v.shape).copy()


def permute_axis(v: Any, perm: np.ndarray, axis: int = 0) -> Any:
    """``v`` with its ``axis`` permuted by ``perm`` (resample ablation within a batch)."""
    if _is_torch(v):
        import torch

        return v.index_select(axis, torch.as_tensor(perm, dtype=torch.long, device=v.device))
    return np.take(v, perm, axis=axis)


def size_along(v: Any, axis: int) -> int:
    return int(v.shape[axis])
