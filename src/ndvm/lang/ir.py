"""Core IR: immutable records (never mutated after construction) with names already resolved.

Variables are lexical addresses ``Local(depth, index)`` (depth = frames to walk up), program
parameters ``Param(i)``, data inputs ``Input(i)``; known primitives are opcodes. Every node
keeps the source position of the form it came from. Frames are created by ``Lambda`` calls,
``Let`` and ``Letrec``; nothing else binds.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from ndvm.lang.datum import record


@record
class Const:
    value: Any  # float, bool, Symbol, String, NIL, VOID or a constant Pair chain
    line: int = 0
    column: int = 0


@record
class Local:
    depth: int
    index: int
    name: str
    line: int = 0
    column: int = 0


@record
class Param:
    index: int
    name: str
    line: int = 0
    column: int = 0


@record
class Input:
    index: int
    name: str
    line: int = 0
    column: int = 0


@record
class PrimRef:
    code: int
    name: str
    line: int = 0
    column: int = 0


@record
class If:
    test: Node
    then: Node
    orelse: Node
    line: int = 0
    column: int = 0


@record
class Seq:
    exprs: tuple[Node, ...]
    line: int = 0
    column: int = 0


@record
class Or:
    exprs: tuple[Node, ...]
    line: int = 0
    column: int = 0


@record
class Lambda:
    nreq: int
    rest: bool
    body: Node
    name: str = "lambda"
    line: int = 0
    column: int = 0

    @property
    def frame_size(self) -> int:
        return self.nreq + (1 if self.rest else 0)


@record
class Let:
    inits: tuple[Node, ...]
    body: Node
    line: int = 0
    column: int = 0


@record
class Letrec:
    """Sequential (``letrec*``) binding: init i sees slots 0..i-1 and itself unassigned."""

    inits: tuple[Node, ...]
    body: Node
    names: tuple[str, ...] = ()
    line: int = 0
    column: int = 0


@record
class Call:
    fn: Node
    args: tuple[Node, ...]
    tail: bool = False
    line: int = 0
    column: int = 0


@record
class PrimCall:
    code: int
    args: tuple[Node, ...]
    name: str = ""
    line: int = 0
    column: int = 0


@record
class Assert:
    expr: Node
    text: str
    line: int = 0
    column: int = 0


Node = Const | Local | Param | Input | PrimRef | If | Seq | Or | Lambda | Let | Letrec | Call
Node = Node | PrimCall | Assert


@record
class ParamSpec:
    """A declared parameter: initial value (in constrained space) and constraint kind."""

    name: str
    init: float = 0.0
    constraint: str = "free"  # free | positive | unit | signed-unit
    line: int = 0
    column: int = 0


CONSTRAINTS = ("free", "positive", "unit", "signed-unit")
# open interval of the values each constraint admits (its transform's range)
CONSTRAINT_RANGES = {
    "free": (float("-inf"), float("inf")),
    "positive": (0.0, float("inf")),
    "unit": (0.0, 1.0),
    "signed-unit": (-1.0, 1.0),
}


@record
class CompiledProgram:
    """The resolved program: IR plus the names the host binds."""

    body: Node
    params: tuple[ParamSpec, ...]
    inputs: tuple[str, ...]
    source: str
    has_header: bool = False
    prelude: tuple[str, ...] = field(default=())
    # (line, column) of each input's first use in the source ((0, 0): unused)
    input_positions: tuple[tuple[int, int], ...] = field(default=())
    dialect: str | None = None  # "dmci": compiled with that dialect's (sequential) let
