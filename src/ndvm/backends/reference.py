"""The reference backend: the Python/NumPy float64 machine, the oracle for every backend."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ndvm.backends.base import STATUS_ERROR, STATUS_NONFINITE, RunResult
from ndvm.backends.inputs import classify_inputs
from ndvm.errors import DeadlineExceeded, NdvmError
from ndvm.eval.export import Budget, object_grid
from ndvm.eval.limits import Limits
from ndvm.eval.runtime import Runtime
from ndvm.eval.treewalk import Machine
from ndvm.lang.ir import CompiledProgram
from ndvm.payload import Arr, mask_for
from ndvm.prims.constraints import constraint


class ReferenceBackend:
    name = "reference"

    def run(
        self,
        program: CompiledProgram,
        theta: np.ndarray,
        inputs: Mapping[str, Any],
        *,
        grad: bool,
        cotangent: np.ndarray | None,
        limits: Limits,
        dialect: str | None,
        dtype: str = "float64",
        replay: bool = True,
    ) -> RunResult:
        """One evaluation in float64 (``dtype`` is accepted; the API casts float32 results;
        ``replay`` is accepted: the reference walks every evaluation)."""
        kinds, n_data = classify_inputs(program.inputs, inputs, program.input_positions)
        B = theta.shape[0]
        Ng = n_data or 1
        rt = Runtime(B, Ng, limits.max_heap, dialect)
        leaves, params = _bind_params(rt, program, theta)
        values = [_bind_input(kind, arr) for kind, arr in kinds]
        with np.errstate(all="ignore"):
            machine = Machine(rt, params, values, limits)
            outcome = machine.run(program.body)
            budget = Budget(limits, machine.t0)
            result = _assemble(outcome.groups, outcome.errors, B, Ng, budget)
            result.data_lanes = n_data is not None
            result.stats = {"steps": outcome.steps, "tape": len(rt.tape.records), "heap": rt.heap}
            if grad:
                result.grad = _gradient(
                    rt, leaves, outcome.groups, result, cotangent, limits, machine.t0
                )
        return result


def _bind_params(
    rt: Runtime, program: CompiledProgram, theta: np.ndarray
) -> tuple[list[int], list[Any]]:
    leaves, params = [], []
    for i, spec in enumerate(program.params):
        val = np.ascontiguousarray(theta[:, i]).reshape(-1, 1)
        node = rt.tape.leaf(val.shape)
        leaves.append(node)
        raw = Arr(val, node, 0)
        prim = constraint(spec.constraint).prim
        params.append(raw if prim is None else rt.numeric(prim, (raw,)))
    return leaves, params


def _bind_input(kind: str, arr: np.ndarray) -> Any:
    if kind == "scalar":
        return float(arr)
    if kind == "data":
        return Arr(arr.reshape(1, -1), -1, 0)
    return Arr(arr.reshape((1, 1) + arr.shape), -1, arr.ndim)


def _struct_of(value: Any) -> tuple[int, ...] | None:
    if type(value) is float:
        return ()
    if type(value) is Arr:
        return value.struct
    return None


def _assemble(
    groups: list[tuple[np.ndarray, Any]],
    errors: list[tuple[np.ndarray, NdvmError]],
    B: int,
    Ng: int,
    budget: Budget,
) -> RunResult:
    status = np.zeros((B, Ng), dtype=np.int8)
    for mask, _ in errors:
        status[mask] = STATUS_ERROR
    structs = {_struct_of(v) for _, v in groups}
    if groups and len(structs) == 1 and None not in structs:
        struct = structs.pop()
        value = np.full((B, Ng, *struct), np.nan)  # type: ignore[misc]
        for mask, v in groups:
            payload = v if type(v) is float else v.val
            full = np.broadcast_to(payload, (B, Ng, *struct))  # type: ignore[misc]
            m = mask_for(mask, 2 + len(struct))  # type: ignore[arg-type]
            value = np.where(m, full, value)
        bad = ~np.isfinite(value).reshape(B, Ng, -1).all(axis=2)
        status[(status == 0) & bad] = STATUS_NONFINITE
        return RunResult(value, status, errors, numeric=True)
    if not groups:
        return RunResult(np.full((B, Ng), np.nan), status, errors, numeric=True)
    return RunResult(object_grid(groups, B, Ng, budget), status, errors, numeric=False)


def _gradient(
    rt: Runtime,
    leaves: list[int],
    groups: list[tuple[np.ndarray, Any]],
    result: RunResult,
    cotangent: np.ndarray | None,
    limits: Limits,
    t0: float,
) -> np.ndarray:
    B, Ng = result.status.shape
    P = len(leaves)
    grad = np.zeros((B, P))
    if not result.numeric:
        raise NdvmError("value_and_grad needs a numeric result (a number, vector or matrix)")
    shape = result.value.shape
    ct = np.ones(shape) if cotangent is None else np.broadcast_to(cotangent, shape)
    seeds: dict[int, np.ndarray] = {}
    for mask, v in groups:
        if type(v) is Arr and v.node >= 0:
            m = mask_for(mask, ct.ndim)
            seed = np.where(m, ct, 0.0)
            seeds[v.node] = seeds[v.node] + seed if v.node in seeds else seed
    failed = (result.status == STATUS_ERROR).any(axis=1)
    if seeds and not failed.all():  # no reverse sweep once every lane has failed
        try:
            adj = rt.tape.backward(seeds, _deadline_tick(limits, t0))
        except DeadlineExceeded as exc:
            _fail_lanes(result, exc)
            return np.full((B, P), np.nan)
        for i, node in enumerate(leaves):
            if adj[node] is not None:
                grad[:, i] = adj[node].reshape(B)
    grad[failed] = np.nan
    return grad


def reverse_grace(deadline: float) -> float:
    """Seconds a reverse sweep may run past the later of the deadline and its own start: a
    quarter of the deadline, at most 0.25 s (the native core's ``reverse_sweep`` uses the
    same), so a lane that finished before the deadline keeps a short sweep and no sweep runs
    long after the deadline."""
    return min(0.25, 0.25 * deadline)


def _deadline_tick(limits: Limits, t0: float) -> Callable[[], None] | None:
    """The reverse sweep's deadline check: past the later of the evaluation's deadline and
    the sweep's start, plus the grace (seconds from the evaluation's start)."""
    deadline = limits.deadline
    if deadline is None:
        return None
    stop = max(deadline, time.monotonic() - t0) + reverse_grace(deadline)

    def tick() -> None:
        if time.monotonic() - t0 > stop:
            raise DeadlineExceeded(
                f"evaluation exceeded its deadline of {deadline:g} s (in the reverse sweep)"
            )

    return tick


def _fail_lanes(result: RunResult, exc: DeadlineExceeded) -> None:
    """Every lane not failed yet fails with ``exc`` (its value is kept, its gradient NaN)."""
    B, Ng = result.status.shape
    lanes = np.broadcast_to((result.status != STATUS_ERROR).all(axis=1)[:, None], (B, Ng))
    lanes = lanes.copy()
    result.status[lanes] = STATUS_ERROR
    result.errors.append((lanes, exc))
