"""Scoring a regression candidate on the held-out splits (test, and validation when there
is one) from one evaluation of the joined splits' inputs at the best start (``Task.score`` of
``from_arrays`` tasks and of the built-in regression tasks)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ndvm.backends import lean
from ndvm.backends.inputs import Prepared, prepared
from ndvm.identity import ByIdentity
from ndvm.tasks.series import r2_of


def regression_score(cal: Any, data: Any) -> dict[str, float]:
    """Train MSE; test (held-out) MSE and R^2; validation MSE and R^2 when there is a split."""
    assert data.test_inputs is not None and data.test_target is not None
    out = {"train_mse": float(cal.loss)}
    plan = _score_plan(data)
    preds = _predict_splits(cal, plan)
    with np.errstate(all="ignore"):
        for (_, target, ss_tot), pred, (mse, r2, clean) in zip(plan.splits, preds, plan.keys):
            d = pred - target
            sq = float(d @ d if d.shape == target.shape and d.ndim == 1 else (d**2).sum())
            out[mse] = sq / max(d.size, 1)
            # a finite sum of squares against a finite target: every prediction is finite
            finite = (clean and math.isfinite(sq)) or bool(np.isfinite(pred).all())
            out[r2] = r2_of(sq, ss_tot, finite)
    return out


@dataclass(frozen=True)
class _Plan:
    """Scoring a task's data, once per data object: splits (name, target, total sum of
    squares), their inputs, and those joined for one evaluation when all are 1-D (one split
    alone: a copy of its inputs, evaluated the same way); per split its metric names and
    whether its target is finite."""

    data: Any
    splits: list[tuple[str, np.ndarray, float]]
    inputs: list[Mapping[str, Any]]
    joint: dict[str, np.ndarray] | None
    cuts: list[int]  # where each split's points end in the joined inputs
    keys: list[tuple[str, str, bool]] = field(default_factory=list)
    # ``joint`` checked and laid out once per program inputs (``Prepared``; ``joint`` itself
    # when it does not fit them: the evaluation then raises what it raises)
    prepared: dict[tuple[str, ...], Mapping[str, Any]] = field(default_factory=dict)


_PLANS = ByIdentity(64)  # task data -> its scoring plan


def _score_plan(data: Any) -> _Plan:
    plan = _PLANS.get(data)
    if plan is not None:
        return plan  # type: ignore[no-any-return]
    named = [("test", data.test_inputs, data.test_target)]
    if data.valid_inputs is not None and data.valid_target is not None:
        named.append(("validation", data.valid_inputs, data.valid_target))
    splits = [(n, np.asarray(y, dtype=np.float64)) for n, _, y in named]
    splits = [(n, y, float(((y - y.mean()) ** 2).sum())) for n, y in splits]
    inputs = [dict(x or {}) for _, x, _ in named]
    joint, cuts = None, np.cumsum([len(y) for _, y, _ in splits]).tolist()
    one_d = all(np.ndim(v) == 1 for s in inputs for v in s.values())
    if len({tuple(sorted(s)) for s in inputs}) == 1 and one_d:  # (one split: its own inputs)
        joint = {k: np.concatenate([np.asarray(s[k]) for s in inputs]) for k in inputs[0]}
    keys = [(f"{n}_mse", f"{n}_r2", bool(np.isfinite(y).all())) for n, y, _ in splits]
    return _PLANS.put(data, _Plan(data, splits, inputs, joint, cuts, keys))  # type: ignore[no-any-return]


def _predict_splits(cal: Any, plan: _Plan) -> list[np.ndarray]:
    """The best start's predictions on each split (one evaluation of the joined inputs)."""
    if plan.joint is not None:
        pred = _joint_values(cal, prepared(plan.prepared, cal.program.inputs, plan.joint))
        cuts = plan.cuts
        if pred.shape[0] == cuts[-1]:  # one value per point
            if len(cuts) == 1:  # one split: its predictions as they are
                return [pred]
            return [pred[a:b] for a, b in zip([0, *cuts[:-1]], cuts)]
    return [np.asarray(cal.predict(s), dtype=np.float64) for s in plan.inputs]


def _joint_values(cal: Any, joint: Mapping[str, Any]) -> np.ndarray:
    """``cal.predict(joint)`` flattened to float64: for a float64 program with a numeric
    value, from the evaluation's raw result (no per-call reshaping of the lane grid into a
    ``LaneArray``: ``backends.lean.values`` on prepared inputs when no lane failed, else
    ``Program.evaluate``), else through ``predict``."""
    prog = cal.program
    if prog.dtype == "float64":
        theta = cal.theta[None, : len(prog.params)]
        got = lean.values(prog, theta, joint)  # what ``evaluate`` gives when no lane failed
        if got is not None and not got[2]:
            value = got[0][0] if got[1] else got[0][0, 0]
            if type(value) is np.ndarray and value.ndim == 1 and value.dtype == np.float64:
                return value  # (what the conversion below gives: the same array)
            return np.asarray(value, dtype=np.float64).reshape(-1)
        res = prog.evaluate(theta, joint)
        if res.numeric:
            value = res.value[0] if res.data_lanes else res.value[0, 0]
            return np.asarray(value, dtype=np.float64).reshape(-1)
    if type(joint) is Prepared:
        joint = dict(joint)
    return np.asarray(cal.predict(joint), dtype=np.float64).reshape(-1)
