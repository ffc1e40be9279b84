"""Lane-dependent tests of the reference machine: ``if``, ``or`` and ``assert`` on lane booleans.

A test that is the same on every active lane takes one arm; otherwise the lanes split into a
join (``Machine._split_masks``), each arm running under its mask.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ndvm.eval.frames import K_OR, SIMPLE
from ndvm.eval.runtime import Env
from ndvm.lang import ir
from ndvm.payload import BoolArr
from ndvm.values import VOID


class LaneTests:
    """Mixin of ``Machine`` (which provides ``rt``, ``all_lanes`` and ``_split_masks``)."""

    rt: Any
    all_lanes: np.ndarray
    _split_masks: Any

    def _truth(self, val: Any) -> bool | BoolArr:
        if val is False:
            return False
        if type(val) is BoolArr:
            return val
        return True

    def _branch(self, kont: list[Any], e: ir.If, env: Env | None, test: Any) -> tuple[Any, ...]:
        t = self._truth(test)
        if t is True:
            return e.then, env, None
        if t is False:
            return e.orelse, env, None
        lanes = np.broadcast_to(t.val, (self.rt.B, self.rt.Ng))  # type: ignore[union-attr]
        active = self.all_lanes if self.rt.mask is None else self.rt.mask
        yes = active & lanes
        n_yes = int(yes.sum())
        if n_yes == 0:
            return e.orelse, env, None
        if n_yes == int(active.sum()):
            return e.then, env, None
        no = active & ~lanes
        arms = [(yes, ("eval", e.then, env)), (no, ("eval", e.orelse, env))]
        if type(e.orelse) in SIMPLE and type(e.then) not in SIMPLE:
            arms.reverse()  # an arm that is a value finishes first (before a deadline)
        return self._split_masks(kont, active, arms)

    def _or(self, kont: list[Any], e: ir.Or, i: int, env: Env | None, val: Any) -> tuple[Any, ...]:
        t = self._truth(val)
        if t is True:
            return None, env, val
        if t is False:
            if i + 1 < len(e.exprs):
                kont.append((K_OR, e, i + 1, env))
            return e.exprs[i], env, None
        # lane-dependent: (or a b ...) == (let ((t a)) (if t t (or b ...)))
        rest = ir.Or(e.exprs[i:], e.line, e.column) if i + 1 < len(e.exprs) else e.exprs[i]
        lanes = np.broadcast_to(t.val, (self.rt.B, self.rt.Ng))  # type: ignore[union-attr]
        active = self.all_lanes if self.rt.mask is None else self.rt.mask
        yes = active & lanes
        no = active & ~lanes
        if not no.any():
            return None, env, val
        if not yes.any():
            return rest, env, None
        return self._split_masks(kont, active, [(yes, ("value", val)), (no, ("eval", rest, env))])

    def _assert(self, kont: list[Any], e: ir.Assert, val: Any) -> tuple[Any, ...]:
        self.rt.node = e
        t = self._truth(val)
        if t is True:
            return None, None, VOID
        if t is False:
            raise self.rt.error(f"assertion failed: {e.text}")
        lanes = np.broadcast_to(t.val, (self.rt.B, self.rt.Ng))  # type: ignore[union-attr]
        active = self.all_lanes if self.rt.mask is None else self.rt.mask
        bad = active & ~lanes
        if not bad.any():
            return None, None, VOID
        return self._split_masks(
            kont,
            active,
            [(active & lanes, ("value", VOID)), (bad, ("raise", f"assertion failed: {e.text}", e))],
        )
