"""Core IR: immutable records (never mutated after construction) with names already resolved.

Variables are lexical addresses ``Local(depth, index)`` (depth = frames to walk up), program
parameters ``Param(i)``, data inputs ``Input(i)``; known primitives are opcodes. Every node
keeps the source position of the form it came from. Frames are created by ``Lambda`` calls,
``Let`` and ``Letrec``; nothing else binds.
"""

from __future__ import annotations

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


class ParamSpecs(tuple):  # type: ignore[type-arg]
    """A program's parameter specs: a tuple of ``ParamSpec`` that computes its hash once (it
    keys the caches of what depends on the specs alone: the initial theta, the constraint
    codes), as a program's variants share one (``ndvm.lang.front``). What a program's first
    gradient needs from the specs alone (the constraint codes, the initial theta, the
    free-name message per inputs) is also kept in the instance dict, where the hot path reads
    it without a call (a cache keyed by the specs calls ``__hash__``)."""

    def __hash__(self) -> int:
        h: int | None = self.__dict__.get("hash")
        if h is None:
            h = self.__dict__["hash"] = tuple.__hash__(self)
        return h

    def __reduce__(self) -> tuple[Any, ...]:
        return (ParamSpecs, (tuple(self),))  # the hash is per process: not pickled


CONSTRAINTS = ("free", "positive", "unit", "signed-unit")
# open interval of the values each constraint admits (its transform's range)
CONSTRAINT_RANGES = {
    "free": (float("-inf"), float("inf")),
    "positive": (0.0, float("inf")),
    "unit": (0.0, 1.0),
    "signed-unit": (-1.0, 1.0),
}


class CompiledProgram:
    """The resolved program: IR plus the names the host binds.

    The front end (``ndvm.lang.front``) leaves the IR in the native tables it resolved to
    (``front``) and builds ``body`` from them on first use: the native backend lowers the
    tables themselves, so a program it runs never builds the records. A program built from
    records (``replace(body=...)``, as ``calibrate`` does to add its loss) has no tables.
    """

    __slots__ = (
        "_body", "front", "params", "inputs", "source", "has_header", "prelude",
        "input_positions", "dialect", "derived",
    )  # fmt: skip

    def __init__(
        self,
        body: Node | None = None,
        params: tuple[ParamSpec, ...] = (),
        inputs: tuple[str, ...] = (),
        source: str = "",
        has_header: bool = False,
        prelude: tuple[str, ...] = (),
        input_positions: tuple[tuple[int, int], ...] = (),
        dialect: str | None = None,  # "dmci": compiled with that dialect's (sequential) let
        front: Any = None,  # the native front end's FrontProgram (its tables)
    ) -> None:
        # (front is positional too: the front end passes it so, a keyword call costs more)
        if body is None and front is None:
            raise ValueError("CompiledProgram needs a body or the front end's tables")
        self._body = body
        self.front = front
        self.params = params
        self.inputs = inputs
        self.source = source
        self.has_header = has_header
        self.prelude = prelude
        # (line, column) of each input's first use in the source ((0, 0): unused)
        self.input_positions = input_positions
        self.dialect = dialect
        # what backends derive from the program (the native backend's lowered form), by the
        # backend's key: it lives as long as the program
        self.derived: dict[str, Any] = {}

    @property
    def body(self) -> Node:
        """The IR's root record (built from the front end's tables on first use)."""
        if self._body is None:
            self._body = self.front.body()
        return self._body  # type: ignore[return-value]

    def replace(self, **changes: Any) -> CompiledProgram:
        """A copy with ``changes``; a new ``body`` drops the tables."""
        fields = {n: getattr(self, n) for n in _FIELDS}
        front = None if "body" in changes else self.front
        fields["body"] = None if front is not None else self.body
        fields.update(changes)
        return CompiledProgram(**fields, front=front)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled as its fields and IR records (the front end's tables and what backends
        derived are rebuilt where it is unpickled)."""
        state = {n: getattr(self, n) for n in _FIELDS}
        state["body"] = self.body
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        CompiledProgram.__init__(self, **state)

    def _key(self) -> tuple[Any, ...]:
        return (self.params, self.inputs, self.source, self.has_header, self.prelude,
                self.input_positions, self.dialect)  # fmt: skip

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CompiledProgram):
            return NotImplemented
        if self._key() != other._key():
            return False
        # the front end is a function of the key: two programs it compiled need no IR
        return (self.front is not None and other.front is not None) or self.body == other.body

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"CompiledProgram(params={self.params!r}, inputs={self.inputs!r}, "
            f"source={self.source!r}, dialect={self.dialect!r})"
        )


_FIELDS = ("params", "inputs", "source", "has_header", "prelude", "input_positions", "dialect")
