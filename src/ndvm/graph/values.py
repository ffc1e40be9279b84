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


def bitwise_equal(a: Any, b: Any) -> bool:
    """Same shape, dtype and bits (NaNs with equal payload compare equal)."""
    if _is_torch(a) or _is_torch(b):
        import torch

        if not (_is_torch(a) and _is_torch(b)) or a.dtype != b.dtype or a.shape != b.shape:
            return False
        return bool(
            torch.equal(
                a.contiguous().view(-1).view(torch.uint8), b.contiguous().view(-1).view(torch.uint8)
            )
        )
    a_arr, b_arr = np.asarray(a), np.asarray(b)
    if a_arr.dtype != b_arr.dtype or a_arr.shape != b_arr.shape:
        return False
    return a_arr.tobytes() == b_arr.tobytes()
