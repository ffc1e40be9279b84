"""Lane payloads for the Python backends: numbers over the B x N lane grid.

A number is either a Python ``float`` (one value for every lane: a constant) or an ``Arr``
whose ``val`` has shape ``(R, D, *struct)`` with R in {1, B} (parameter lanes) and D in {1, N}
(data lanes); a value that does not depend on the data keeps D = 1. Booleans are ``bool`` or a
``BoolArr`` of shape ``(R, D)``. Masks are boolean arrays over the full grid ``(B, Ng)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# Numeric payload memory of one evaluation is capped at 2 GiB of float64 (the native core's
# kMaxPayloadDoubles); beyond it the evaluation stops with HeapLimitExceeded.
MAX_PAYLOAD_DOUBLES = 1 << 28
PAYLOAD_LIMIT_MESSAGE = f"payload memory limit of {MAX_PAYLOAD_DOUBLES * 8 >> 20} MiB exceeded"


class Arr:
    """A lane-batched number, vector (rank 1) or matrix (rank 2); ``node`` >= 0 if taped."""

    __slots__ = ("val", "node", "rank")

    def __init__(self, val: np.ndarray, node: int = -1, rank: int = 0) -> None:
        self.val = val
        self.node = node
        self.rank = rank

    @property
    def struct(self) -> tuple[int, ...]:
        return self.val.shape[2:]

    def __repr__(self) -> str:
        return f"Arr(rank={self.rank}, shape={self.val.shape}, node={self.node})"


class BoolArr:
    """Per-lane booleans (the result of a comparison on lane-batched numbers)."""

    __slots__ = ("val",)

    def __init__(self, val: np.ndarray) -> None:
        self.val = val

    def __repr__(self) -> str:
        return f"BoolArr(shape={self.val.shape})"


def is_number(x: Any) -> bool:
    t = type(x)
    return t is float or (t is Arr and x.rank == 0)


def lanes_of(val: np.ndarray, rank: int) -> np.ndarray:
    """The lane part of a payload (drops struct axes by taking the first element)."""
    return val.reshape(val.shape[:2] + (-1,))[..., 0] if rank else val


def unbroadcast(ct: Any, shape: tuple[int, ...]) -> Any:
    """Sum a cotangent back to ``shape`` (undo NumPy broadcasting)."""
    ct = np.asarray(ct, dtype=np.float64)
    if ct.shape == shape:
        return ct
    extra = ct.ndim - len(shape)
    if extra > 0:
        ct = ct.sum(axis=tuple(range(extra)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and ct.shape[i] != 1)
    if axes:
        ct = ct.sum(axis=axes, keepdims=True)
    if ct.shape != shape:
        ct = np.broadcast_to(ct, shape).copy()
    return ct


def mask_for(mask: np.ndarray, ndim: int) -> np.ndarray:
    """Reshape a (B, Ng) lane mask to broadcast against a payload with ``ndim`` dims."""
    return mask.reshape(mask.shape + (1,) * (ndim - 2)) if ndim > 2 else mask


def uniform_under(val: np.ndarray, mask: np.ndarray | None) -> tuple[bool, Any]:
    """Whether a lane array holds one value on the active lanes, and that value."""
    if mask is None:
        flat = val.reshape(-1)
    else:
        flat = np.broadcast_to(val, np.broadcast_shapes(val.shape, mask.shape))[
            np.broadcast_to(mask, np.broadcast_shapes(val.shape, mask.shape))
        ]
    if flat.size == 0:
        return True, None
    first = flat[0]
    if isinstance(first, np.floating) and np.isnan(first):
        return bool(np.isnan(flat).all()), float("nan")
    return bool((flat == first).all()), first.item()
