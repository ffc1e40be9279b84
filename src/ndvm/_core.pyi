"""Stubs for the native core extension (built from cpp/ and bindings/module.cpp)."""

from typing import Any

import numpy as np

dtype: str  # "float64" (_core) or "float32" (_core32): the payload element type

def core_version() -> str: ...
def missing_kernels() -> list[int]: ...

class Program:
    """A lowered program (flat node/constant/string tables), immutable, shareable by threads."""

    def __init__(
        self,
        nodes: np.ndarray,  # int32 [n, 9]: kind op a b c kids nkids line column
        kids: np.ndarray,  # int32 [m]
        aux: np.ndarray,  # int32 [k]: letrec slot-name string ids
        consts: np.ndarray,  # int32 [c, 3]: kind a b
        nums: np.ndarray,  # float64 [c]
        strings: list[str],
        root: int,
        n_params: int,
        n_inputs: int,
    ) -> None: ...
    @property
    def n_nodes(self) -> int: ...

class Context:
    """Per-thread evaluator state (arenas reused across runs). Not shareable across threads."""

    def __init__(self) -> None: ...
    def run(
        self,
        program: Program,
        theta: np.ndarray,  # float64 [B, P], C-contiguous
        constraints: np.ndarray,  # int32 [P]: 0 free, 1 positive, 2 unit, 3 signed-unit
        input_kinds: list[int],  # 0 scalar, 1 data lanes, 2 constant vector/matrix
        inputs: list[np.ndarray],
        n_data: int,
        grad: bool,
        max_steps: int,
        max_heap: int,
        max_depth: int,
        deadline: float,  # seconds; <= 0 for none
        dmci: bool,
    ) -> dict[str, Any]: ...
    def gradient(self, cotangent: np.ndarray | None, n_params: int) -> np.ndarray: ...
    def optimize(
        self,
        program: Program,
        theta0: np.ndarray,  # float64 [B, P], C-contiguous
        constraints: np.ndarray,
        input_kinds: list[int],
        inputs: list[np.ndarray],
        n_data: int,
        max_steps: int,
        max_heap: int,
        max_depth: int,
        deadline: float,
        dmci: bool,
        weight: float,  # loss_b = weight * sum(value[b, ...])
        steps: int,
        lr: float,
        beta1: float,
        beta2: float,
        eps: float,
        lower: np.ndarray | None,  # float64 [P]
        upper: np.ndarray | None,
        early_stop: bool,
        rtol: float,
        atol: float,
        patience: int,
    ) -> dict[str, Any]:
        """Adam (ndvm.calibrate.optim.Adam semantics) over theta0's lanes, all steps in C++.

        Returns theta, best_theta, best_loss, history [k, B], state int8 [B], reason int32 [B]
        (>= 0: index into errors; -2 non-finite loss; -3 non-finite gradient; -1 none),
        errors (as in ``run``), evaluations, non_numeric.
        """
        ...
