"""Reference reverse-mode tape: numeric operations only.

Each record is ``(vjp, out, ins, args, ans, mask, shapes)``: the VJP rule of the operation,
its output node id, input node ids (-1 for constants), the payloads it saw, its result, the
lane mask active when it ran (cotangents outside the mask are zeroed, so garbage computed on
inactive lanes can never leak NaN into active ones) and each input's payload shape.
Structural work (symbols, tags, branches, calls) never adds a record.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ndvm.payload import mask_for, unbroadcast

Vjp = Callable[..., tuple[Any, ...]]
TICK_EVERY = 256  # records between two deadline checks of the reverse sweep


class Tape:
    __slots__ = ("records", "n_nodes", "shapes")

    def __init__(self) -> None:
        self.records: list[tuple[Any, ...]] = []
        self.n_nodes = 0
        self.shapes: list[tuple[int, ...]] = []

    def leaf(self, shape: tuple[int, ...]) -> int:
        self.shapes.append(shape)
        self.n_nodes += 1
        return self.n_nodes - 1

    def record(
        self,
        vjp: Vjp,
        ins: tuple[int, ...],
        args: tuple[Any, ...],
        ans: np.ndarray,
        mask: np.ndarray | None,
        in_shapes: tuple[tuple[int, ...], ...],
    ) -> int:
        out = self.leaf(ans.shape)
        self.records.append((vjp, out, ins, args, ans, mask, in_shapes))
        return out

    def backward(
        self, seeds: dict[int, np.ndarray], tick: Callable[[], None] | None = None
    ) -> list[np.ndarray | None]:
        """Adjoints of every node given output cotangents ``seeds``. ``tick`` (the
        evaluation's deadline check, which raises) runs every ``TICK_EVERY`` records."""
        adj: list[Any] = [None] * self.n_nodes
        for node, g in seeds.items():
            adj[node] = (
                unbroadcast(g, self.shapes[node])
                if adj[node] is None
                else (adj[node] + unbroadcast(g, self.shapes[node]))
            )
        for k, (vjp, out, ins, args, ans, mask, in_shapes) in enumerate(reversed(self.records)):
            if tick is not None and k % TICK_EVERY == 0:
                tick()
            g = adj[out]
            if g is None:
                continue
            cts = vjp(g, ans, *args)
            for node, ct, shape in zip(ins, cts, in_shapes):
                if node < 0 or ct is None:
                    continue
                ct = np.asarray(ct, dtype=np.float64)
                if mask is not None:
                    ct = np.where(_fit_mask(mask, ct.shape, len(shape)), ct, 0.0)
                ct = unbroadcast(ct, shape)
                if shape != self.shapes[node]:  # a scalar aligned against a vector
                    ct = ct.reshape(self.shapes[node])
                adj[node] = ct if adj[node] is None else adj[node] + ct
        return adj


def _fit_mask(mask: np.ndarray, ct_shape: tuple[int, ...], ndim: int) -> np.ndarray:
    """The lane mask for a cotangent: a lane axis the cotangent does not vary over (size 1,
    already summed over those lanes) takes the mask's ``any`` over that axis, so masking never
    broadcasts a summed cotangent back over lanes (which would count it once per lane)."""
    for axis in (0, 1):
        if len(ct_shape) > axis and ct_shape[axis] == 1 and mask.shape[axis] > 1:
            mask = mask.any(axis=axis, keepdims=True)
    return mask_for(mask, max(len(ct_shape), ndim))
