"""Lowering for the native backend: the resolved IR as the core's flat tables.

A node table (``kind op a b c kids nkids line column``, preorder ids, children after parents),
child lists, a constant pool (numbers, booleans, symbols, strings, quoted pairs children
first) and a string table; ``ndvm.backends.native`` builds the core's ``Program`` from them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ndvm.errors import BackendUnsupported
from ndvm.lang import ir
from ndvm.lang.ir import CompiledProgram
from ndvm.prims.constraints import constraint
from ndvm.values import NIL, VOID, Pair, String, Symbol


class NativeUnsupported(BackendUnsupported):
    """A program the native runtime cannot run (explicit ``backend="native"`` raises it)."""


# Node kinds (cpp/include/ndvm/program.hpp NodeKind) and constant kinds (ConstKind).
_CONST, _LOCAL, _PARAM, _INPUT, _PRIMREF, _IF, _SEQ, _OR = range(8)
_LAMBDA, _LET, _LETREC, _CALL, _PRIMCALL, _ASSERT = range(8, 14)
_C_NUM, _C_BOOL, _C_NIL, _C_VOID, _C_SYM, _C_STR, _C_PAIR = range(7)


class _Tables:
    def __init__(self) -> None:
        self.kids: list[int] = []
        self.aux: list[int] = []
        self.consts: list[list[int]] = []
        self.nums: list[float] = []
        self.strings: list[str] = []
        self._interned: dict[str, int] = {}
        self._const_ids: dict[Any, int] = {}

    def string(self, text: str) -> int:
        sid = self._interned.get(text)
        if sid is None:
            sid = self._interned[text] = len(self.strings)
            self.strings.append(text)
        return sid

    def fresh_string(self, text: str) -> int:
        self.strings.append(text)
        return len(self.strings) - 1

    def const(self, value: Any) -> int:
        """Constant-pool index of ``value`` (pairs lowered children first, iteratively)."""
        if type(value) is float:  # the common case: a numeric literal
            self.consts.append([_C_NUM, 0, 0])
            self.nums.append(value)
            return len(self.consts) - 1
        order: list[Any] = []
        stack = [value]
        while stack:
            v = stack.pop()
            order.append(v)
            if type(v) is Pair:
                stack.append(v.car)
                stack.append(v.cdr)
        index: dict[int, int] = {}
        for v in reversed(order):
            index[id(v)] = self._const_one(v, index)
        return index[id(value)]

    def _const_one(self, v: Any, index: dict[int, int]) -> int:
        t = type(v)
        if t is Pair:
            row = [_C_PAIR, index[id(v.car)], index[id(v.cdr)]]
            num = 0.0
        elif t is bool:
            row, num = [_C_BOOL, int(v), 0], 0.0
        elif t in (float, int):
            row, num = [_C_NUM, 0, 0], float(v)
        elif t is Symbol:
            row, num = [_C_SYM, self.string(v.name), 0], 0.0
        elif t is String:
            row, num = [_C_STR, self.fresh_string(v.text), 0], 0.0
        elif v is NIL:
            row, num = [_C_NIL, 0, 0], 0.0
        elif v is VOID:
            row, num = [_C_VOID, 0, 0], 0.0
        else:
            raise NativeUnsupported(f"native backend: unsupported constant {v!r}")
        self.consts.append(row)
        self.nums.append(num)
        return len(self.consts) - 1


def _node_row(t: _Tables, n: Any) -> tuple[list[int], tuple[Any, ...]]:
    """``[kind, op, a, b, c]`` and the children of IR node ``n``."""
    row = _ROWS.get(type(n))
    if row is None:
        raise NativeUnsupported(f"native backend: unsupported IR node {type(n).__name__}")
    return row(t, n)


def _letrec_row(t: _Tables, n: Any) -> tuple[list[int], tuple[Any, ...]]:
    names = list(n.names) or ["?"] * len(n.inits)
    off = len(t.aux)
    t.aux.extend(t.string(s) for s in names)
    return [_LETREC, 0, 0, off, 0], (*n.inits, n.body)


_Row = Callable[[_Tables, Any], tuple[list[int], tuple[Any, ...]]]
_ROWS: dict[type, _Row] = {
    ir.PrimCall: lambda t, n: ([_PRIMCALL, n.code, 0, 0, 0], n.args),
    ir.Param: lambda t, n: ([_PARAM, 0, n.index, 0, 0], ()),
    ir.Input: lambda t, n: ([_INPUT, 0, n.index, 0, 0], ()),
    ir.Const: lambda t, n: ([_CONST, 0, t.const(n.value), 0, 0], ()),
    ir.Local: lambda t, n: ([_LOCAL, 0, n.depth, n.index, t.string(n.name)], ()),
    ir.PrimRef: lambda t, n: ([_PRIMREF, n.code, 0, 0, 0], ()),
    ir.If: lambda t, n: ([_IF, 0, 0, 0, 0], (n.test, n.then, n.orelse)),
    ir.Seq: lambda t, n: ([_SEQ, 0, 0, 0, 0], tuple(n.exprs)),
    ir.Or: lambda t, n: ([_OR, 0, 0, 0, 0], tuple(n.exprs)),
    ir.Lambda: lambda t, n: ([_LAMBDA, 0, n.nreq, int(n.rest), t.string(n.name)], (n.body,)),
    ir.Let: lambda t, n: ([_LET, 0, 0, 0, 0], (*n.inits, n.body)),
    ir.Letrec: _letrec_row,
    ir.Call: lambda t, n: ([_CALL, 0, 0, 0, 0], (n.fn, *n.args)),
    ir.Assert: lambda t, n: ([_ASSERT, 0, 0, 0, t.string(n.text)], (n.expr,)),
}


_ZEROS = (0,) * 64
_LEAVES = {ir.Param: _PARAM, ir.Input: _INPUT}


def lower_tables(program: CompiledProgram) -> tuple[tuple[Any, ...], list[str], np.ndarray]:
    """The ``Program`` constructor arguments of ``program``, its strings and constraints.

    Preorder over an explicit stack; the commonest nodes (primitive calls, variables, numeric
    constants) are written inline, the rest through ``_ROWS``. The integer tables are packed
    into one list and converted once (NumPy's conversion, not the walk, dominates small
    programs).
    """
    t = _Tables()
    nodes: list[int] = []  # rows of 9 ints, flat
    kids = t.kids
    stack: list[tuple[Any, int]] = [(program.body, -1)]
    pop, push, extend = stack.pop, stack.append, nodes.extend
    prim_call, local, const, leaves = ir.PrimCall, ir.Local, ir.Const, _LEAVES
    while stack:
        node, slot = pop()
        if slot >= 0:
            kids[slot] = len(nodes) // 9
        tp = type(node)
        if tp is prim_call:
            children: tuple[Any, ...] = node.args
            n = len(children)
            off = len(kids)
            kids.extend(_ZEROS[:n] if n <= 64 else [0] * n)
            extend((_PRIMCALL, node.code, 0, 0, 0, off, n, node.line, node.column))
            for i in range(n - 1, -1, -1):
                push((children[i], off + i))
            continue
        if tp is local:
            row = (_LOCAL, 0, node.depth, node.index, t.string(node.name))
        elif tp is const and type(node.value) is float:
            t.consts.append([_C_NUM, 0, 0])
            t.nums.append(node.value)
            row = (_CONST, 0, len(t.consts) - 1, 0, 0)
        elif tp in leaves:
            row = (leaves[tp], 0, node.index, 0, 0)
        else:
            row, children = _node_row(t, node)
            n = len(children)
            if n:
                off = len(kids)
                kids.extend(_ZEROS[:n] if n <= 64 else [0] * n)
                extend(row)
                extend((off, n, node.line, node.column))
                for i in range(n - 1, -1, -1):
                    push((children[i], off + i))
                continue
        extend(row)
        extend((len(kids), 0, node.line, node.column))
    return _pack(program, t, nodes)


def _pack(program: CompiledProgram, t: _Tables, nodes: list[int]) -> tuple[Any, ...]:
    n_nodes, n_kids, n_aux = len(nodes), len(t.kids), len(t.aux)
    flat = nodes + t.kids + t.aux
    for row in t.consts:
        flat.extend(row)
    ints = np.array(flat, dtype=np.int32)
    a, b = n_nodes + n_kids, n_nodes + n_kids + n_aux
    args = (
        ints[:n_nodes].reshape(-1, 9),
        ints[n_nodes:a],
        ints[a:b],
        ints[b:].reshape(-1, 3),
        np.array(t.nums, dtype=np.float64),
        t.strings,
        0,
        len(program.params),
        len(program.inputs),
    )
    codes = [constraint(s.constraint).code for s in program.params]
    return args, t.strings, np.array(codes, dtype=np.int32)
