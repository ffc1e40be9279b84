"""Lowering for the native backend: the resolved program to the core's ``Program``.

A program from the front end lowers from the tables the native resolver wrote. A program
built from IR records (``calibrate`` adds its loss that way) is lowered by the core walking
the records themselves (``_core.lower``, bindings/lower_ir.cpp) and writes
the tables it validates: a node table (``kind op a b c kids nkids line column``, preorder ids,
children after parents), child lists, a constant pool (numbers, booleans, symbols, strings,
quoted pairs children first) and a string table. This module names the record classes for it,
once, in the core's ``NodeKind`` order.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from ndvm.errors import BackendUnsupported
from ndvm.lang import ir
from ndvm.lang.ir import CompiledProgram
from ndvm.prims.constraints import constraint
from ndvm.values import NIL, VOID, Pair, String, Symbol


class NativeUnsupported(BackendUnsupported):
    """A program the native runtime cannot run (explicit ``backend="native"`` raises it)."""


# cpp/include/ndvm/program.hpp NodeKind, in order
NODE_TYPES = (
    ir.Const, ir.Local, ir.Param, ir.Input, ir.PrimRef, ir.If, ir.Seq, ir.Or, ir.Lambda,
    ir.Let, ir.Letrec, ir.Call, ir.PrimCall, ir.Assert,
)  # fmt: skip
VALUE_TYPES = (Pair, Symbol, String, NIL, VOID)


def lower_program(core: Any, program: CompiledProgram) -> tuple[Any, list[str]]:
    """``program`` as the ``Program`` of ``core`` (``_core`` or ``_core32``) and its strings;
    raises ``NativeUnsupported`` for what the core cannot run."""
    front = program.front
    if type(front) is core.FrontProgram:
        return front.lower()  # the front end's own tables
    out = core.lower(
        program.body, len(program.params), len(program.inputs), NODE_TYPES, VALUE_TYPES
    )
    if isinstance(out, str):
        raise NativeUnsupported(out)
    return out[0], out[1]


def constraint_codes(program: CompiledProgram) -> np.ndarray:
    """The opcode of each parameter's constraint transform (0: free), for the core."""
    return _codes(program.params)


@lru_cache(maxsize=256)
def _codes(specs: tuple[ir.ParamSpec, ...]) -> np.ndarray:
    out = np.array([constraint(s.constraint).code for s in specs], dtype=np.int32)
    out.flags.writeable = False  # shared between programs
    return out
