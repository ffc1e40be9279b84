"""Structural and predicate primitives of the tagged-tensor interpreter (``tagged.py``).

Every function takes the ``Interpreter`` and ``[L, 14]`` tagged tensors and returns one; lists
are pairs in the interpreter's write-once heap. Tensor work goes through tensor methods and the
interpreter's helpers, so this module does not import torch itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ndvm.errors import ShapeError

Tensor = Any  # torch.Tensor; kept loose so this module stays torch-free
(NUM, BOOL, NULL, PAIR, SYMBOL, STRING, CLOSURE, PRIM, VECTOR, VOIDTAG) = range(10)
PAY = 10


class Diverged(Exception):
    """Lanes disagree on a branch (or a structural index); the run falls back to single lanes."""


def make_list(it: Any, items: list[Tensor], tail: Tensor | None = None) -> Tensor:
    out = it.struct(NULL) if tail is None else tail
    for x in reversed(items):
        out = it.cons(x, out)
    return out


def elements(it: Any, lst: Tensor, who: str) -> list[Tensor]:
    out = []
    while (tag := it.tag(lst)) == PAIR:
        car, cdr = (int(f) for f in it.fields(lst)[:2])
        out.append(it.heap[car])
        lst = it.heap[cdr]
    if tag != NULL:
        raise it.error(f"{who}: expected a proper list")
    return out


def index(it: Any, v: Tensor, who: str) -> int:
    """A lane-uniform integer argument (list index, size, count)."""
    if it.tag(v) != NUM:
        raise it.error(f"{who}: expected an integer, got {it.type_name(v)}")
    col = v[:, PAY]
    first = float(col[0])
    if not bool((col == first).all()):
        raise Diverged
    if not first.is_integer():
        raise it.error(f"{who}: expected an integer, got {first!r}")
    return int(first)


def _num_col(it: Any, v: Tensor, who: str) -> Tensor:
    if it.tag(v) != NUM:
        raise it.error(f"{who}: expected a number, got {it.type_name(v)}")
    return v[:, PAY]


def predicate(it: Any, impl: Callable[..., Tensor], name: str, args: list[Tensor]) -> Tensor:
    """A PREDICATE primitive (its formula ``impl``) on the numbers of ``args``."""
    return it.boolean(impl(*(_num_col(it, a, name) for a in args)))


def _same(it: Any, a: Tensor, b: Tensor, deep: bool) -> Any:
    """Per-lane equality mask (or a bool) for ``eqv?`` (deep False) and ``equal?``."""
    ta, tb = it.tag(a), it.tag(b)
    if ta != tb:
        return False
    if ta in (NUM, BOOL):
        return a[:, PAY] == b[:, PAY]
    if ta in (NULL, VOIDTAG):
        return True
    if deep and ta == PAIR:
        fa, fb = it.fields(a), it.fields(b)
        car = _same(it, it.heap[int(fa[0])], it.heap[int(fb[0])], True)
        return _same(it, it.heap[int(fa[1])], it.heap[int(fb[1])], True) & car
    if deep and ta == VECTOR:
        (pa, sa), (pb, sb) = it.unbox_vector(a), it.unbox_vector(b)
        return sa == sb and (pa == pb).reshape(it.L, -1).all(dim=1)
    return it.fields(a) == it.fields(b)


def _cxr(path: str) -> Callable[..., Tensor]:
    def impl(it: Any, x: Tensor) -> Tensor:
        for step in reversed(path):
            if it.tag(x) != PAIR:
                raise it.error(f"c{path}r: expected a pair, got {it.type_name(x)}")
            f = it.fields(x)
            x = it.heap[int(f[0] if step == "a" else f[1])]
        return x

    return impl


def _append(it: Any, *xs: Tensor) -> Tensor:
    if not xs:
        return it.struct(NULL)
    out = xs[-1]
    for lst in reversed(xs[:-1]):
        out = make_list(it, elements(it, lst, "append"), out)
    return out


def _list_tail(it: Any, x: Tensor, k: Tensor) -> Tensor:
    for _ in range(index(it, k, "list-tail")):
        if it.tag(x) != PAIR:
            raise it.error("list-tail: list too short")
        x = it.heap[int(it.fields(x)[1])]
    return x


def _list_ref(it: Any, x: Tensor, k: Tensor) -> Tensor:
    x = _list_tail(it, x, k)
    if it.tag(x) != PAIR:
        raise it.error("list-ref: index out of range")
    return it.heap[int(it.fields(x)[0])]


def _iota(it: Any, n: Tensor, start: Tensor | None = None, step: Tensor | None = None) -> Tensor:
    count = index(it, n, "iota")
    s0 = 0.0 if start is None else _num_col(it, start, "iota")
    ds = 1.0 if step is None else _num_col(it, step, "iota")
    return make_list(it, [it.num(s0 + k * ds) for k in range(count)])


def _rank(it: Any, v: Tensor) -> int:
    if it.tag(v) != VECTOR:
        return 0
    return 1 if it.fields(v)[3] < 0 else 2


def _is_list(it: Any, x: Tensor) -> bool:
    while it.tag(x) == PAIR:
        x = it.heap[int(it.fields(x)[1])]
    return it.tag(x) == NULL


def _vec(it: Any, *xs: Tensor) -> Tensor:
    cols = [_num_col(it, x, "vec") for x in xs]
    return it.vector(it.stack(cols, 1) if cols else it.full((0,), 0.0))


def _row(it: Any, x: Tensor) -> Tensor:
    if _rank(it, x) == 1:
        return it.unbox_vector(x)[0]
    if it.tag(x) in (PAIR, NULL):
        return it.unbox_vector(_vec(it, *elements(it, x, "mat")))[0]
    raise it.error(f"mat: each row must be a vector or a list, got {it.type_name(x)}")


def _mat(it: Any, *rows: Tensor) -> Tensor:
    payloads = [_row(it, r) for r in rows]
    if len({tuple(p.shape) for p in payloads}) > 1:
        raise it.error("mat: rows of different lengths", ShapeError)
    return it.vector(it.stack(payloads, 1))


def _filled(value: float) -> Callable[..., Tensor]:
    def impl(it: Any, n: Tensor, m: Tensor | None = None) -> Tensor:
        dims = (index(it, n, "zeros"),) + (() if m is None else (index(it, m, "zeros"),))
        return it.vector(it.full(dims, value))

    return impl


def _make_vector(it: Any, n: Tensor, fill: Tensor | None = None) -> Tensor:
    size = index(it, n, "make-vector")
    if fill is None:
        return it.vector(it.full((size,), 0.0))
    return _vec(it, *([fill] * size))


def _ref(it: Any, v: Tensor, i: Tensor, j: Tensor | None = None) -> Tensor:
    rank = _rank(it, v)
    if rank == 0:
        raise it.error(f"ref: expected a vector or matrix, got {it.type_name(v)}")
    base, _, rows, cols = (int(f) for f in it.fields(v))
    ii = index(it, i, "ref")
    if not 0 <= ii < rows:
        raise it.error(f"ref: index {ii} out of range for length {rows}")
    if rank == 1:
        return it.heap[base + ii]
    if j is None:
        return it.vector(it.stack([it.heap[base + ii * cols + k][:, PAY] for k in range(cols)], 1))
    jj = index(it, j, "ref")
    if not 0 <= jj < cols:
        raise it.error(f"ref: index {jj} out of range for length {cols}")
    return it.heap[base + ii * cols + jj]


def _dims(it: Any, v: Tensor, rank: int, who: str) -> list[float]:
    if _rank(it, v) != rank:
        raise it.error(f"{who}: expected a {'vector' if rank == 1 else 'matrix'}")
    return it.fields(v)


def _vector_to_list(it: Any, v: Tensor) -> Tensor:
    base, n = (int(f) for f in _dims(it, v, 1, "vector->list")[:2])
    return make_list(it, [it.heap[base + k] for k in range(n)])


def _type(test: Callable[[Any, Tensor], bool]) -> Callable[..., Tensor]:
    return lambda it, x: it.boolean(test(it, x))


def _tag_is(*tags: int) -> Callable[..., Tensor]:
    return _type(lambda it, x: it.tag(x) in tags)


STRUCTURAL: dict[str, Callable[..., Tensor]] = {
    "cons": lambda it, a, b: it.cons(a, b),
    "list": lambda it, *xs: make_list(it, list(xs)),
    "length": lambda it, x: it.num(float(len(elements(it, x, "length")))),
    "append": _append,
    "reverse": lambda it, x: make_list(it, elements(it, x, "reverse")[::-1]),
    "list-ref": _list_ref,
    "list-tail": _list_tail,
    "iota": _iota,
    "number?": _tag_is(NUM),
    "boolean?": _tag_is(BOOL),
    "symbol?": _tag_is(SYMBOL),
    "string?": _tag_is(STRING),
    "pair?": _tag_is(PAIR),
    "null?": _tag_is(NULL),
    "procedure?": _tag_is(CLOSURE, PRIM),
    "vector?": _type(lambda it, x: _rank(it, x) == 1),
    "matrix?": _type(lambda it, x: _rank(it, x) == 2),
    "list?": _type(_is_list),
    "not": lambda it, x: it.boolean(x[:, PAY] == 0 if it.tag(x) == BOOL else False),
    "eq?": lambda it, a, b: it.boolean(_same(it, a, b, False)),
    "eqv?": lambda it, a, b: it.boolean(_same(it, a, b, False)),
    "equal?": lambda it, a, b: it.boolean(_same(it, a, b, True)),
    "vec": _vec,
    "mat": _mat,
    "make-vector": _make_vector,
    "zeros": _filled(0.0),
    "ones": _filled(1.0),
    "eye": lambda it, n: it.vector(it.eye(index(it, n, "eye"))),
    "ref": _ref,
    "vlen": lambda it, v: it.num(_dims(it, v, 1, "vlen")[2]),
    "rows": lambda it, m: it.num(_dims(it, m, 2, "rows")[2]),
    "cols": lambda it, m: it.num(_dims(it, m, 2, "cols")[3]),
    "vector->list": _vector_to_list,
    "list->vector": lambda it, x: _vec(it, *elements(it, x, "list->vector")),
    "void": lambda it, *xs: it.struct(VOIDTAG),
}
for _i, _path in enumerate(["a", "d", "aa", "ad", "da", "dd", "aaa", "aad", "ada", "add",
                            "daa", "dad", "dda", "ddd"]):  # fmt: skip
    STRUCTURAL[f"c{_path}r"] = _cxr(_path)


def to_python(it: Any, v: Tensor, lane: int) -> Any:
    """Lane ``lane`` of a tagged value as plain Python data (as the reference reports it)."""
    tag = it.tag(v)
    if tag == NUM:
        return float(v[lane, PAY])
    if tag == BOOL:
        return bool(v[lane, PAY] != 0)
    if tag == NULL:
        return []
    if tag == PAIR:
        out: list[Any] = []
        while it.tag(v) == PAIR:
            car, cdr = (int(f) for f in it.fields(v)[:2])
            out.append(to_python(it, it.heap[car], lane))
            v = it.heap[cdr]
        if it.tag(v) != NULL:
            out += [".", to_python(it, v, lane)]
        return out
    if tag in (SYMBOL, STRING):
        atom = it.atoms[int(it.fields(v)[0])]
        return atom.name if tag == SYMBOL else atom.text
    if tag == VECTOR:
        return it.unbox_vector(v)[0][lane].detach().numpy().copy()
    if tag == VOIDTAG:
        return None
    return "#<procedure>"


def tensor_to_python(t: Tensor) -> Any:
    return float(t) if t.dim() == 0 else t.detach().numpy().copy()


def error_message(it: Any, args: list[Tensor]) -> str:
    parts = [to_python(it, a, 0) for a in args]
    return " ".join(str(p) for p in parts) or "error"
