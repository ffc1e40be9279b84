"""Stubs for the native core extension (built from cpp/ and bindings/module.cpp)."""

import enum
from typing import Any

import numpy as np

dtype: str  # "float64" (_core) or "float32" (_core32): the payload element type

def core_version() -> str: ...
def vector_math() -> str: ...  # "libmvec-avx2", "libmvec-sse2" or "libm"
def missing_kernels() -> list[int]: ...
def lower(
    body: Any,  # the resolved IR (ndvm.lang.ir records)
    n_params: int,
    n_inputs: int,
    node_types: tuple[type, ...],  # the 14 IR record classes, in NodeKind order
    value_types: tuple[Any, ...],  # Pair, Symbol, String, NIL, VOID
) -> tuple[Program, list[str]] | str: ...  # str: what the core cannot run

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

class ExportTag(enum.Enum):
    """Tag of one exported record (tag, a, b, c): a value in preorder, pairs car first."""

    NUM = 0  # a: array index, b: rank, c: 1 when lane-varying
    BOOL = 1  # a: 0 or 1
    BOOLS = 2  # a: array index of 0/1 per lane
    NIL = 3
    VOID = 4
    PAIR = 5  # followed by the car's records, then the cdr's
    SYMBOL = 6  # a: string id
    STRING = 7  # a: string id
    CLOSURE = 8  # a: string id of the procedure's name
    PRIMPROC = 9  # a: opcode
    OTHER = 10  # a value without an export form
    SHARED = 11  # a: record index of a pair exported earlier

class RunOptions:
    """Limits and dialect of one evaluation (zero limits raise NativeError)."""

    def __init__(
        self,
        *,
        max_steps: int = ...,
        max_heap: int = ...,
        max_depth: int = ...,
        deadline: float = 0.0,  # seconds; <= 0 for none
        dmci: bool = False,
        replay: bool = True,  # replay the recorded trace when it applies
        client: int = 0,  # 0: the tree walker, 1: the bytecode VM
        fused: bool = True,  # the fused lane forms (docs/native.md)
        block_rows: int = 0,  # parameter rows per lane block; 0: the runtime's choice
        chain_lanes: int = 0,  # fused chains' lanes; 0: the runtime's choice
        pairs: bool = True,  # fused pairs ("Fused pairs")
        updates: bool = True,  # fused Gaussian updates ("Fused updates")
    ) -> None: ...
    max_steps: int
    max_heap: int
    max_depth: int
    deadline: float
    dmci: bool
    replay: bool
    fused: bool
    block_rows: int
    chain_lanes: int
    pairs: bool
    updates: bool
    @property
    def client(self) -> int: ...

class AdamOptions:
    """Options of the in-runtime Adam fit; arrays are float64, C-contiguous, or None."""

    def __init__(self) -> None: ...
    weight: float  # loss_b = weight * sum(value[b, ...]) (or of squared residuals to target)
    steps: int
    lr: float
    beta1: float
    beta2: float
    eps: float
    lower: np.ndarray | None  # [P]: theta box, projected after each step
    upper: np.ndarray | None
    early_stop: bool
    rtol: float
    atol: float
    patience: int
    lr_schedule: np.ndarray | None  # [steps]: a lane's lr at its t-th step
    target: np.ndarray | None  # [B, N] per lane; any other shape: shared [N]
    time_limit: float  # seconds for the whole fit; <= 0 for none

class Run(tuple[Any, ...]):
    """One run's result (``Context.run``): a named tuple (C's struct sequence)."""

    numeric: bool  # the value is a number, vector or matrix in every lane
    value: np.ndarray | None  # float64 [B, Ng, *struct] (numeric results)
    status: np.ndarray  # int8 [B, Ng]: 0 ok, 1 non-finite, 2 error
    grad: np.ndarray | None  # float64 [B, P] (grad runs of numeric results)
    grad_needs_numeric: bool  # a gradient was asked of a non-numeric result
    errors: list[tuple[Any, ...]]  # (mask, class, message, line, column, lanes, error_prim,
    # irritants) per failing lane group
    groups: list[tuple[np.ndarray, Any]]  # non-numeric results: (mask, export) per group
    steps: int
    tape: int
    heap: int
    replayed: bool  # the result came from replaying the recorded trace
    blocks: int
    chains: int
    pairs: int
    updates: int

class Context:
    """Per-thread evaluator state (arenas reused across runs). Not shareable across threads."""

    def __init__(self) -> None: ...
    def run(
        self,
        program: Program,
        theta: np.ndarray,  # float64 [B, P], C-contiguous
        constraints: np.ndarray,  # int32 [P]: opcode of the constraint's transform, 0 free
        input_kinds: list[int],  # 0 scalar, 1 data lanes, 2 constant vector/matrix
        inputs: list[np.ndarray],
        n_data: int,
        options: RunOptions,
        grad: bool = False,
        cotangent: np.ndarray | None = None,  # broadcast to the value's shape; None: ones
    ) -> Run:
        """One evaluation; with ``grad`` also ``grad`` [B, P] of sum(cotangent * value).

        Returns a ``Run``: numeric, value, status, grad (None without grad or for a
        non-numeric result), grad_needs_numeric, errors, groups (non-numeric results: mask
        and export records), and the counters steps, tape, heap, replayed (the result came
        from replaying the trace), blocks, chains, pairs, updates.
        """
        ...
    def gradient(self, cotangent: np.ndarray | None, n_params: int) -> np.ndarray:
        """Gradient [B, P] of sum(cotangent * value) for the last run on this context."""
        ...
    def optimize(
        self,
        program: Program,
        theta0: np.ndarray,  # float64 [B, P], C-contiguous
        constraints: np.ndarray,
        input_kinds: list[int],
        inputs: list[np.ndarray],
        n_data: int,
        options: RunOptions,
        adam: AdamOptions,
    ) -> dict[str, Any]:
        """Adam (ndvm.calibrate.optim.Adam semantics) over theta0's lanes, all steps in C++.

        Returns theta, best_theta, best_loss, history [k, B], state int8 [B], reason int32 [B]
        (>= 0: index into errors; -2 non-finite loss; -3 non-finite gradient; -4 time limit;
        -1 none), errors (as in ``run``), evaluations, non_numeric, target_mismatch,
        timed_out, stopped_at.
        """
        ...
    @property
    def trace(self) -> dict[str, Any]:
        """The recorded trace: valid, guards, replays, failures (since the last replay)."""
        ...
