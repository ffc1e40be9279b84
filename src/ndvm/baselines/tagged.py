"""Tagged-tensor interpreter: the DMCI representation, an eager PyTorch baseline.

Every runtime value (number, boolean, symbol, pair, closure, heap address) is a ``[L, 14]`` torch
tensor, one row per lane: a 10-way one-hot tag plus 4 payload floats. Pairs, vector elements and
environment frames live in a write-once heap (a dict from address to such a tensor); addresses are
floats inside payloads and are read back with a device sync. Tail calls go through a trampoline;
gradients come from torch autograd. All lanes walk together (structure is read from lane 0); a
branch on which lanes disagree reruns the program lane by lane (``B x N`` single-lane walks).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from ndvm.backends.base import STATUS_NONFINITE, RunResult
from ndvm.backends.inputs import classify_inputs
from ndvm.baselines import tagged_structural as _st
from ndvm.baselines.kernels import numeric_impls, predicate_impls
from ndvm.baselines.tagged_structural import (
    BOOL,
    CLOSURE,
    NULL,
    NUM,
    PAIR,
    PAY,
    PRIM,
    STRING,
    SYMBOL,
    VECTOR,
    VOIDTAG,
    Diverged,
)  # fmt: skip
from ndvm.errors import (
    DepthLimitExceeded,
    HeapLimitExceeded,
    NdvmError,
    ProgramError,
    ShapeError,
    StepLimitExceeded,
)
from ndvm.eval.limits import Limits
from ndvm.export.namespaces import torch_namespace
from ndvm.lang import ir
from ndvm.lang.ir import CompiledProgram
from ndvm.prims import PRIMS, Kind, Shape
from ndvm.prims.constraints import constraint
from ndvm.values import NIL, VOID, Pair, String, Symbol

Tensor = torch.Tensor
TAG_NAMES = ("number", "boolean", "nil", "pair", "symbol", "string", "closure", "primitive",
             "vector", "void")  # fmt: skip
WIDTH = 14  # 10 tag columns, then 4 payload columns from PAY
_PY_RECURSION = 50_000


_TorchOps = torch_namespace()
TORCH_IMPLS = numeric_impls(_TorchOps)
TORCH_PREDICATES = predicate_impls(_TorchOps)
_UNSUPPORTED_STRUCTURAL = {"%any-null"}


class _Tail:
    __slots__ = ("fn", "args")

    def __init__(self, fn: Tensor, args: list[Tensor]) -> None:
        self.fn = fn
        self.args = args


class Interpreter:
    """One walk over ``L`` lanes; owns the heap and the interned symbol/string tables."""

    def __init__(self, L: int, limits: Limits, dtype: torch.dtype = torch.float64) -> None:
        self.L = L
        self.dtype = dtype
        self.limits = limits
        self.heap: dict[int, Tensor] = {}
        self.next_addr = 0
        self.steps = 0
        eye = torch.eye(10, dtype=dtype)
        self.tag_rows = [eye[t].expand(L, 10) for t in range(10)]
        self.pad3 = torch.zeros(L, 3, dtype=dtype)
        self.lambdas: list[ir.Lambda] = []
        self.lambda_ids: dict[int, int] = {}
        self.atoms: list[Any] = []  # interned symbols and strings; payload 0 is the index
        self.atom_ids: dict[Any, int] = {}
        self.params: list[Tensor] = []
        self.inputs: list[Tensor] = []
        self.node: Any = None

    # -- boxing -------------------------------------------------------------------------
    def num(self, x: Any) -> Tensor:
        if not isinstance(x, Tensor):
            x = torch.full((self.L,), float(x), dtype=self.dtype)
        elif x.dim() == 0 or x.shape[0] != self.L:
            x = x.expand(self.L)
        return torch.cat([self.tag_rows[NUM], x[:, None], self.pad3], dim=1)

    def boolean(self, mask: Any) -> Tensor:
        if not isinstance(mask, Tensor):
            mask = torch.full((self.L,), 1.0 if mask else 0.0, dtype=self.dtype)
        return torch.cat([self.tag_rows[BOOL], mask.to(self.dtype)[:, None], self.pad3], dim=1)

    def struct(self, tag: int, *fields: float) -> Tensor:
        out = torch.zeros(self.L, WIDTH, dtype=self.dtype)
        out[:, tag] = 1.0
        if fields:
            out[:, PAY : PAY + len(fields)] = torch.tensor(fields, dtype=self.dtype)
        return out

    def stack(self, payloads: list[Tensor], dim: int) -> Tensor:
        return torch.stack(payloads, dim=dim)

    def full(self, struct: tuple[int, ...], value: float) -> Tensor:
        return torch.full((self.L, *struct), value, dtype=self.dtype)

    def eye(self, n: int) -> Tensor:
        return torch.eye(n, dtype=self.dtype).expand(self.L, n, n)

    def atom(self, tag: int, key: Any) -> Tensor:
        idx = self.atom_ids.get(key)
        if idx is None:
            idx = self.atom_ids[key] = len(self.atoms)
            self.atoms.append(key)
        return self.struct(tag, float(idx))

    # -- reading structure (a device sync each: the representation tax) ------------------
    @staticmethod
    def tag(v: Tensor) -> int:
        return int(torch.argmax(v[0, :PAY]))

    @staticmethod
    def fields(v: Tensor) -> list[float]:
        return v[0, PAY:].tolist()

    def type_name(self, v: Tensor) -> str:
        return TAG_NAMES[self.tag(v)]

    def error(self, msg: str, cls: type[ProgramError] = ProgramError) -> ProgramError:
        line = getattr(self.node, "line", None) or None
        return cls(msg, line, getattr(self.node, "column", None) if line else None)

    # -- write-once heap -----------------------------------------------------------------
    def alloc(self, n: int) -> int:
        base = self.next_addr
        self.next_addr += n
        if self.next_addr > self.limits.max_heap:
            raise HeapLimitExceeded(f"heap limit of {self.limits.max_heap} cells exceeded")
        return base

    def write(self, addr: int, v: Tensor) -> None:
        if addr in self.heap:
            raise RuntimeError(f"heap cell {addr} written twice")
        self.heap[addr] = v

    def cons(self, car: Tensor, cdr: Tensor) -> Tensor:
        base = self.alloc(2)
        self.write(base, car)
        self.write(base + 1, cdr)
        return self.struct(PAIR, float(base), float(base + 1))

    def vector(self, payload: Tensor) -> Tensor:
        """Box ``payload [L, *struct]`` (rank 1 or 2) as heap cells, one per element."""
        struct = tuple(payload.shape[1:])
        n = int(np.prod(struct))
        base = self.alloc(n)
        flat = payload.reshape(self.L, n)
        for i in range(n):
            self.write(base + i, self.num(flat[:, i]))
        rows, cols = (struct[0], -1) if len(struct) == 1 else struct
        return self.struct(VECTOR, float(base), float(n), float(rows), float(cols))

    def unbox_vector(self, v: Tensor) -> tuple[Tensor, tuple[int, ...]]:
        base, n, rows, cols = (int(f) for f in self.fields(v))
        struct = (rows,) if cols < 0 else (rows, cols)
        if n == 0:
            return torch.zeros(self.L, *struct, dtype=self.dtype), struct
        cells = [self.heap[base + i][:, PAY] for i in range(n)]
        return torch.stack(cells, dim=1).reshape(self.L, *struct), struct

    # -- environments: a frame is a header cell (parent, size) followed by its slots -----
    def frame(self, parent: int, values: list[Tensor], size: int) -> int:
        h = self.alloc(size + 1)
        self.write(h, self.struct(PAIR, float(h + 1), float(size), float(parent)))
        for i, v in enumerate(values):
            self.write(h + 1 + i, v)
        return h

    def lookup(self, env: int, node: ir.Local) -> Tensor:
        addr = env
        for _ in range(node.depth):
            addr = int(self.fields(self.heap[addr])[2])
        v = self.heap.get(addr + 1 + node.index)
        if v is None:
            self.node = node
            raise self.error(f"variable {node.name!r} used before its definition")
        return v

    # -- constants -----------------------------------------------------------------------
    def const(self, value: Any) -> Tensor:
        t = type(value)
        if t is float or t is int:
            return self.num(float(value))
        if t is bool:
            return self.boolean(value)
        if t is Symbol:
            return self.atom(SYMBOL, value)
        if t is String:
            return self.atom(STRING, value)
        if value is NIL:
            return self.struct(NULL)
        if value is VOID:
            return self.struct(VOIDTAG)
        if t is Pair:
            return self.cons(self.const(value.car), self.const(value.cdr))
        raise NdvmError(f"tagged baseline: unsupported constant {value!r}")

    # -- evaluation ----------------------------------------------------------------------
    def truthy(self, v: Tensor) -> bool:
        if self.tag(v) != BOOL:
            return True
        col = v[:, PAY]
        yes = bool(col.all())
        if not yes and bool(col.any()):
            raise Diverged
        return yes

    def value(self, node: Any, env: int) -> Tensor:
        r = self.eval(node, env)
        if type(r) is _Tail:
            return self.apply(r.fn, r.args)
        return r

    def eval(self, node: Any, env: int) -> Any:  # noqa: C901 - one dispatch on node type
        self.steps += 1
        if self.steps > self.limits.max_steps:
            raise StepLimitExceeded(f"step limit of {self.limits.max_steps} exceeded")
        t = type(node)
        if t is ir.Local:
            return self.lookup(env, node)
        if t is ir.Const:
            return self.const(node.value)
        if t is ir.PrimCall:
            args = [self.value(a, env) for a in node.args]
            self.node = node
            return self.prim(node.code, args)
        if t is ir.Param:
            return self.params[node.index]
        if t is ir.Input:
            return self.inputs[node.index]
        if t is ir.If:
            test = self.value(node.test, env)
            return self.eval(node.then if self.truthy(test) else node.orelse, env)
        if t is ir.Let:
            vals = [self.value(i, env) for i in node.inits]
            return self.eval(node.body, self.frame(env, vals, len(vals)))
        if t is ir.Call:
            fn = self.value(node.fn, env)
            args = [self.value(a, env) for a in node.args]
            self.node = node
            return _Tail(fn, args) if node.tail else self.apply(fn, args)
        if t is ir.Letrec:
            h = self.frame(env, [], len(node.inits))
            for i, init in enumerate(node.inits):
                self.write(h + 1 + i, self.value(init, h))
            return self.eval(node.body, h)
        if t is ir.Lambda:
            lid = self.lambda_ids.get(id(node))
            if lid is None:
                lid = self.lambda_ids[id(node)] = len(self.lambdas)
                self.lambdas.append(node)
            return self.struct(CLOSURE, float(lid), float(env))
        if t is ir.Seq or t is ir.Or:
            for e in node.exprs[:-1]:
                v = self.value(e, env)
                if t is ir.Or and self.truthy(v):
                    return v
            return self.eval(node.exprs[-1], env)
        if t is ir.PrimRef:
            return self.struct(PRIM, float(node.code))
        if t is ir.Assert:
            if not self.truthy(self.value(node.expr, env)):
                self.node = node
                raise self.error(f"assertion failed: {node.text}")
            return self.struct(VOIDTAG)
        raise NdvmError(f"tagged baseline: unknown IR node {t.__name__}")

    def apply(self, fn: Tensor, args: list[Tensor]) -> Tensor:
        """Trampoline: a tail call in the body comes back as ``_Tail`` and loops here."""
        while True:
            tag = self.tag(fn)
            if tag == PRIM:
                prim = PRIMS.by_code(int(self.fields(fn)[0]))
                if not prim.arity.accepts(len(args)):
                    raise self.error(f"{prim.name}: expected {prim.arity.describe()} arguments")
                return self.prim(prim.code, args)
            if tag != CLOSURE:
                raise self.error(f"attempt to call a {TAG_NAMES[tag]}, not a procedure")
            lid, env = (int(f) for f in self.fields(fn)[:2])
            lam = self.lambdas[lid]
            if len(args) < lam.nreq or (len(args) > lam.nreq and not lam.rest):
                raise self.error(f"{lam.name}: expected {lam.nreq} arguments, got {len(args)}")
            vals = args[: lam.nreq]
            if lam.rest:
                vals.append(_st.make_list(self, args[lam.nreq :]))
            r = self.eval(lam.body, self.frame(env, vals, lam.frame_size))
            if type(r) is not _Tail:
                return r
            fn, args = r.fn, r.args

    # -- primitives ----------------------------------------------------------------------
    def prim(self, code: int, args: list[Tensor]) -> Tensor:
        p = PRIMS.by_code(code)
        if p.kind is Kind.NUMERIC:
            return self.numeric(code, args)
        if p.kind is Kind.PREDICATE:
            return _st.predicate(self, TORCH_PREDICATES[p.code], p.name, args)
        if p.kind is Kind.CONTROL:
            if p.name == "apply":
                return self.apply(args[0], args[1:-1] + _st.elements(self, args[-1], "apply"))
            raise self.error(_st.error_message(self, args))
        impl = _st.STRUCTURAL.get(p.name)
        if impl is None:
            raise NdvmError(f"tagged baseline: primitive {p.name!r} is not supported")
        return impl(self, *args)

    def numeric(self, code: int, args: list[Tensor]) -> Tensor:
        prim = PRIMS.by_code(code)
        payloads: list[Tensor] = []
        structs: list[tuple[int, ...]] = []
        for a in args:
            tag = self.tag(a)
            if tag == NUM:
                payloads.append(a[:, PAY])
                structs.append(())
            elif tag == VECTOR:
                p, s = self.unbox_vector(a)
                payloads.append(p)
                structs.append(s)
            else:
                raise self.error(f"{prim.name}: expected a number, got {TAG_NAMES[tag]}")
        if prim.shape is Shape.CUSTOM:
            assert prim.shape_rule is not None
            try:
                prim.shape_rule(*structs)
            except ShapeError as exc:
                raise self.error(exc.message, ShapeError) from None
        elif any(structs):
            shape = next(s for s in structs if s)
            if any(s and s != shape for s in structs):
                raise self.error(f"{prim.name}: shapes {structs} do not match", ShapeError)
            pad = (1,) * len(shape)
            payloads = [p.reshape(self.L, *pad) if not s else p for p, s in zip(payloads, structs)]
        try:
            out = TORCH_IMPLS[code](*payloads)
        except RuntimeError as exc:  # singular matrix and friends
            raise self.error(f"{prim.name}: {exc}") from None
        if not isinstance(out, Tensor) or out.dim() <= 1:
            return self.num(out)
        return self.vector(out)


def _run_walk(
    program: CompiledProgram,
    theta_lanes: Tensor,
    kinds: list[tuple[str, np.ndarray]],
    data_lane: np.ndarray,
    limits: Limits,
) -> Any:
    """One walk over the lanes of ``theta_lanes`` ([L, P]); ``data_lane[l]`` indexes data."""
    L = theta_lanes.shape[0]
    interp = Interpreter(L, limits, theta_lanes.dtype)
    for i, spec in enumerate(program.params):
        col = theta_lanes[:, i]
        fn = constraint(spec.constraint).forward_in(_TorchOps)
        interp.params.append(interp.num(fn(col) if fn else col))
    for kind, arr in kinds:
        if kind == "scalar":
            interp.inputs.append(interp.num(float(arr)))
        elif kind == "data":
            col = torch.as_tensor(arr[data_lane], dtype=theta_lanes.dtype)
            interp.inputs.append(interp.num(col))
        else:
            pay = torch.as_tensor(arr, dtype=theta_lanes.dtype).expand(L, *arr.shape)
            interp.inputs.append(interp.vector(pay))
    result = interp.value(program.body, -1)
    tag = interp.tag(result)
    if tag == NUM:
        return result[:, PAY]
    if tag == VECTOR:
        return interp.unbox_vector(result)[0]
    return [_st.to_python(interp, result, lane) for lane in range(L)]


class TaggedBackend:
    """Backend-shaped entry point (``run`` as in ``ndvm.backends.base.Backend``)."""

    name = "tagged"

    def run(
        self,
        program: CompiledProgram,
        theta: np.ndarray,
        inputs: Mapping[str, Any],
        *,
        grad: bool,
        cotangent: np.ndarray | None = None,
        limits: Limits | None = None,
        dialect: str | None = None,
    ) -> RunResult:
        if dialect is not None:
            raise NdvmError(f"tagged baseline: dialect {dialect!r} is not supported")
        limits = limits or Limits()
        kinds, n_data = classify_inputs(program.inputs, inputs)
        B, Ng = theta.shape[0], n_data or 1
        th = torch.tensor(np.asarray(theta, dtype=np.float64), requires_grad=grad)
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old, _PY_RECURSION))
        try:
            with torch.set_grad_enabled(grad):
                value = _walk_all(program, th, kinds, B, Ng, limits)
        except RecursionError:
            raise DepthLimitExceeded("tagged baseline: Python recursion too deep") from None
        finally:
            sys.setrecursionlimit(old)
        if isinstance(value, list):
            out = np.empty((B, Ng), dtype=object)
            out.reshape(-1)[:] = value
            return RunResult(out, np.zeros((B, Ng), np.int8), [], None, n_data is not None, False)
        value = value.reshape(B, Ng, *value.shape[1:])
        g = None
        if grad:
            ct = torch.ones_like(value) if cotangent is None else torch.as_tensor(cotangent)
            if value.requires_grad:
                (value * ct).sum().backward()
            g = th.grad.numpy().copy() if th.grad is not None else np.zeros(theta.shape)
        val = value.detach().numpy().copy()
        bad = ~np.isfinite(val.reshape(B, Ng, -1)).all(axis=2)
        status = np.where(bad, STATUS_NONFINITE, 0).astype(np.int8)
        return RunResult(val, status, [], g, n_data is not None, True)


def _walk_all(
    program: CompiledProgram,
    th: Tensor,
    kinds: list[tuple[str, np.ndarray]],
    B: int,
    Ng: int,
    limits: Limits,
) -> Any:
    lanes = th.repeat_interleave(Ng, dim=0)  # lane l = b * Ng + n
    data_lane = np.tile(np.arange(Ng), B)
    try:
        return _run_walk(program, lanes, kinds, data_lane, limits)
    except Diverged:
        pass
    parts = [
        _run_walk(program, lanes[lane : lane + 1], kinds, data_lane[lane : lane + 1], limits)
        for lane in range(B * Ng)
    ]
    if all(isinstance(p, Tensor) for p in parts) and len({p.shape for p in parts}) == 1:
        return torch.cat(parts, dim=0)
    return [p[0] if isinstance(p, list) else _st.tensor_to_python(p[0]) for p in parts]
