"""Parsimony for proposers: identities, folding and canonical forms applied before scoring.

``simplify(datum)`` rewrites bottom-up: ``(/ e e)`` -> 1, ``(- e e)`` -> 0 (the language is
pure, so structurally equal operands are equal values), ``(* 1 e)``, ``(* e 1)``, ``(+ 0 e)``,
``(+ e 0)``, ``(- e 0)``, ``(/ e 1)``, ``(log (exp e))`` -> e, ``(* 0 e)`` -> 0, and
arithmetic on literals is folded. ``(sin (/ x x))`` thus becomes ``(sin 1)``, which the
funnel then rejects for having no parameter, instead of a bloated winner.

``canonical(datum, params)`` goes further (what ``evolve`` proposes): subtrees of parameters
and literals fold into one parameter, ``+``/``*`` are flattened and ordered, parameters are
renamed by first appearance; ``canonical_skeleton`` does the same on skeleton text, so that
deduplication (``candidate.skeleton_hash``) sees equivalent programs as one skeleton.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence

from ndvm.lang.datum import Datum, Num, SList, Sym, symbols_in, to_source

_FOLD = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}


def _num(v: float) -> Num:
    return Num(float(v), f"{v:g}" if float(v).is_integer() else repr(float(v)))


def _is(d: Datum, v: float) -> bool:
    return isinstance(d, Num) and d.value == v


def _binary(op: str, a: Datum, b: Datum, same: bool | None = None) -> Datum | None:
    if isinstance(a, Num) and isinstance(b, Num):
        try:
            v = _FOLD[op](a.value, b.value)
        except ZeroDivisionError:
            return None
        return _num(v) if math.isfinite(v) else None
    if same is None:
        same = to_source(a) == to_source(b)
    if op == "/" and same:
        return _num(1.0)
    if op == "-" and same:
        return _num(0.0)
    if op == "*":
        if _is(a, 0.0) or _is(b, 0.0):
            return _num(0.0)
        if _is(a, 1.0):
            return b
        if _is(b, 1.0):
            return a
    if op == "+":
        if _is(a, 0.0):
            return b
        if _is(b, 0.0):
            return a
    if op in ("-", "/") and _is(b, 0.0 if op == "-" else 1.0):
        return a
    return None


def simplify(d: Datum) -> Datum:
    """``d`` with the identities above applied, bottom-up (quoted data left alone)."""
    if not isinstance(d, SList) or not d.items or d.tail is not None:
        return d
    head = d.items[0]
    if isinstance(head, Sym) and head.name == "quote":
        return d
    items = tuple(simplify(x) for x in d.items)
    if isinstance(head, Sym) and head.name in _FOLD and len(items) == 3:
        out = _binary(head.name, items[1], items[2])
        if out is not None:
            return out
    if isinstance(head, Sym) and head.name == "log" and len(items) == 2:
        arg = items[1]  # (log (exp e)) -> e
        if isinstance(arg, SList) and len(arg.items) == 2 and _sym(arg.items[0], "exp"):
            return arg.items[1]
    return SList(items, None, d.line, d.column)


def _sym(d: Datum, name: str) -> bool:
    return isinstance(d, Sym) and d.name == name


# -- canonical forms: folding of constant subtrees, flattening and ordering -------------------
# Pure scalar functions: applied to parameters and literals only, they give a constant.
SCALAR_OPS = frozenset(
    "+ - * / abs acos acosh asin asinh atan cbrt cos cosh erf exp expm1 expt hypot log log1p "
    "logaddexp max min sigmoid sin sinh softplus sqrt square tan tanh floor ceiling round "
    "truncate sign".split()
)
_COMMUTATIVE = {"+": 0.0, "*": 1.0}  # flattened, ordered; the value is the op's identity
_UNARY = {
    "exp": math.exp, "log": math.log, "sqrt": math.sqrt, "sin": math.sin, "cos": math.cos,
    "tan": math.tan, "abs": abs, "tanh": math.tanh, "sinh": math.sinh, "cosh": math.cosh,
    "square": lambda v: v * v,
}  # fmt: skip
_INVERSE = {"-": "+", "/": "*"}  # a constant right operand moves into the commutative form
_FRESH = "%fold"  # prefix of a folded subtree's parameter before the names are assigned
SKELETON_PARAM, SKELETON_LITERAL = "P", "C"


class _Canon:
    """One canonicalization: which symbols are parameters, and the folded ones made so far."""

    def __init__(self, params: frozenset[str], *, skeleton: bool) -> None:
        self.params, self.skeleton, self.fresh = params, skeleton, 0
        self.witness: dict[str, Datum] = {}  # folded parameter -> the subtree it stands for
        self.memo: dict[int, tuple[Datum, tuple[str, str]]] = {}

    def is_param(self, d: Datum) -> bool:
        return isinstance(d, Sym) and (d.name in self.params or d.name.startswith(_FRESH))

    def is_literal(self, d: Datum) -> bool:
        return isinstance(d, Num) or (self.skeleton and _sym(d, SKELETON_LITERAL))

    def new_param(self, op: str, args: Sequence[Datum]) -> Sym:
        """A parameter standing for ``(op *args)`` (a subtree of parameters and literals)."""
        if self.skeleton:
            return Sym(SKELETON_PARAM)
        self.fresh += 1
        name = f"{_FRESH}{self.fresh}"
        self.witness[name] = SList((Sym(op), *(self.witness.get(str(a), a) for a in args)))
        return Sym(name)

    def texts(self, d: Datum) -> tuple[str, str]:
        """``(structure, source)`` of ``d``: the source with parameters printed as ``P``, and
        the source (memoized per node: sorting and identity checks read them often)."""
        hit = self.memo.get(id(d))
        if hit is not None and hit[0] is d:
            return hit[1]
        if isinstance(d, SList) and d.tail is None:
            parts = [self.texts(x) for x in d.items]
            out = ("(" + " ".join(p[0] for p in parts) + ")",
                   "(" + " ".join(p[1] for p in parts) + ")")  # fmt: skip
        elif isinstance(d, SList):
            out = (to_source(d, self.shape_atom), to_source(d))
        else:
            out = (self.shape_atom(d), str(d))
        self.memo[id(d)] = (d, out)  # the node is kept alive with its texts: ids stay unique
        return out

    def shape_atom(self, d: Datum) -> str:
        return SKELETON_PARAM if self.is_param(d) else str(d)

    def key(self, d: Datum) -> tuple[int, str, str]:
        """Argument order of a commutative form: parameters, symbols, literals, then lists,
        each by structure (parameter names do not matter), then by source."""
        if self.is_param(d):
            rank = 0
        else:
            rank = 2 if self.is_literal(d) else 1 if isinstance(d, Sym) else 3
        return (rank, *self.texts(d))

    def walk(self, d: Datum) -> Datum:
        if not isinstance(d, SList) or not d.items or d.tail is not None:
            return d
        head = d.items[0]
        if _sym(head, "quote"):
            return d
        items = (head, *[self.walk(x) for x in d.items[1:]])
        if not isinstance(head, Sym) or head.name not in SCALAR_OPS:
            return SList(items, None, d.line, d.column)
        if head.name in _COMMUTATIVE:
            return self.commutative(head.name, list(items[1:]))
        args = items[1:]
        if args and all(self.is_param(a) or self.is_literal(a) for a in args):
            if any(self.is_param(a) for a in args):
                return self.new_param(head.name, args)  # a parameter-only subtree: one
            folded = _fold_literals(head.name, args)
            if folded is not None:
                return folded
        if head.name in _INVERSE and len(args) == 2:
            moved = self.inverse(head.name, args[0], args[1])
            if moved is not None:
                return moved
        same = self.identity(head.name, args)
        if same is None and head.name == "-" and len(args) == 2:
            same = self.difference(args[0], args[1])
        return same or SList(items, None, d.line, d.column)

    def inverse(self, op: str, e: Datum, k: Datum) -> Datum | None:
        """``(- e k)`` -> ``(+ e k')``, ``(/ e k)`` -> ``(* e k')`` for a constant ``k``
        (``k'`` = ``-k`` or ``1/k``), so that the constant joins the commutative form."""
        if self.is_param(k):
            args = (k,) if op == "-" else (_num(1.0), k)
            return self.commutative(_INVERSE[op], [e, self.new_param(op, args)])
        if isinstance(k, Num) and not self.skeleton:
            inv = _fold_literals("-", (k,)) if op == "-" else _fold_literals("/", (_num(1.0), k))
            if inv is not None and k.value != 0.0:
                return self.commutative(_INVERSE[op], [e, inv])
        return None

    def identity(self, op: str, args: tuple[Datum, ...]) -> Datum | None:
        if op in _FOLD and len(args) == 2:
            a, b = args
            same = self.texts(a)[1] == self.texts(b)[1]
            if same and self.skeleton and (_has(a, SKELETON_PARAM) or _has(a, SKELETON_LITERAL)):
                return None  # (- P P) may be two parameters: not an identity here
            return _binary(op, a, b, same)
        if op == "log" and len(args) == 1:
            arg = args[0]
            if isinstance(arg, SList) and len(arg.items) == 2 and _sym(arg.items[0], "exp"):
                return arg.items[1]
        return None

    def difference(self, e: Datum, f: Datum) -> Datum | None:
        """``(- e f)`` as one sum when every term of ``f`` is a constant or a like term of
        ``e`` (``(- (+ a (* b S)) S)`` -> ``(+ a (* c S))``); None otherwise (kept as is)."""
        pos, neg = self.terms(e), self.terms(f)
        consts = [t for t in neg if self.is_param(t) or self.is_literal(t)]
        neg = [t for t in neg if not (self.is_param(t) or self.is_literal(t))]
        if not neg:
            return None  # a constant right operand: ``inverse``'s case
        bases = {self.texts(self.split(t)[1])[1] for t in pos}
        if any(self.texts(self.split(t)[1])[1] not in bases for t in neg):
            return None
        signed = [(1.0, t) for t in pos if not (self.is_param(t) or self.is_literal(t))]
        merged = self.like_terms(signed + [(-1.0, t) for t in neg])
        if merged is None:
            return None
        rest = [t for t in pos if self.is_param(t) or self.is_literal(t)]
        for k in consts:
            if self.is_param(k):
                rest.append(self.new_param("-", (k,)))
            elif isinstance(k, Num):
                rest.append(_num(-k.value))
            else:
                rest.append(k)
        return self.commutative("+", rest + merged) if rest + merged else _num(0.0)

    def terms(self, d: Datum) -> list[Datum]:
        if isinstance(d, SList) and d.items and _sym(d.items[0], "+"):
            return list(d.items[1:])
        return [d]

    def split(self, term: Datum) -> tuple[Datum | None, Datum]:
        """``(coefficient, base)`` of a term: ``(* k f ...)`` -> ``(k, (* f ...))`` for a
        constant ``k``; a term without one has coefficient None (1)."""
        if isinstance(term, SList) and term.items and _sym(term.items[0], "*"):
            factors = list(term.items[1:])
            ks = [f for f in factors if self.is_param(f) or self.is_literal(f)]
            if len(ks) == 1:
                rest = [f for f in factors if f is not ks[0]]
                base = rest[0] if len(rest) == 1 else SList((Sym("*"), *rest))
                return ks[0], base
        return None, term

    def like_terms(self, signed: list[tuple[float, Datum]]) -> list[Datum] | None:
        """Terms with the same base merged into one with the sum of their (signed)
        coefficients: a new parameter when one of them is a parameter, else the folded
        literal (a zero sum drops the term). None when no two terms share a base. On
        skeleton text a base holding ``P`` or ``C`` is never merged (they may differ)."""
        groups: dict[str, list[tuple[float, Datum | None, Datum]]] = {}
        first: dict[str, Datum] = {}  # the group's first term as it was
        for sign, t in signed:
            k, base = self.split(t)
            key = self.texts(base)[1]
            if self.skeleton and (_has(base, SKELETON_PARAM) or _has(base, SKELETON_LITERAL)):
                key = f"{key}#{len(groups)}"  # never merged
            groups.setdefault(key, []).append((sign, k, base))
            first.setdefault(key, t)
        if all(len(g) == 1 and g[0][0] > 0 for g in groups.values()):
            return None
        out: list[Datum] = []
        for key, group in groups.items():
            if len(group) == 1 and group[0][0] > 0:
                out.append(first[key])
                continue
            coef = self.coefficient(group)
            if coef is None:
                continue  # the terms cancel
            base = group[0][2]
            out.append(base if _is(coef, 1.0) else self.commutative("*", [coef, base]))
        return out

    def coefficient(self, group: list[tuple[float, Datum | None, Datum]]) -> Datum | None:
        """The merged coefficient of like terms (None: they cancel)."""
        ks = [(sign, _num(1.0) if k is None else k) for sign, k, _ in group]
        if any(self.is_param(k) for _, k in ks):
            if self.skeleton:
                return Sym(SKELETON_PARAM)
            self.fresh += 1
            name = f"{_FRESH}{self.fresh}"
            parts = [self.witness.get(str(k), k) for _, k in ks]
            signed = [p if sign > 0 else SList((Sym("-"), p)) for (sign, _), p in zip(ks, parts)]
            self.witness[name] = SList((Sym("+"), *signed))
            return Sym(name)
        if not all(isinstance(k, Num) for _, k in ks):
            return Sym(SKELETON_LITERAL)  # skeleton text: literals of unknown value
        value = math.fsum(sign * k.value for sign, k in ks)  # type: ignore[union-attr]
        return None if value == 0.0 else _num(value)

    def commutative(self, op: str, args: list[Datum]) -> Datum:
        flat: list[Datum] = []
        for a in args:
            nested = isinstance(a, SList) and a.items and _sym(a.items[0], op)
            flat.extend(a.items[1:] if nested else (a,))  # type: ignore[union-attr]
        consts, rest = [], []
        for a in flat:
            (consts if self.is_param(a) or self.is_literal(a) else rest).append(a)
        if op == "+" and len(rest) > 1:
            rest = self.like_terms([(1.0, t) for t in rest]) or rest
        unit = _COMMUTATIVE[op]
        if len(consts) == 1 and self.is_param(consts[0]):
            rest.append(consts[0])
        elif any(self.is_param(a) for a in consts):
            rest.append(self.new_param(op, consts))
        elif consts and all(isinstance(a, Num) for a in consts):
            value = math.fsum(a.value for a in consts) if op == "+" else math.prod(
                a.value for a in consts  # type: ignore[union-attr]
            )  # fmt: skip
            if op == "*" and value == 0.0:
                return _num(0.0)
            if value != unit:
                rest.append(_num(value))
        elif consts:
            rest.append(Sym(SKELETON_LITERAL))
        if not rest:
            return _num(unit)
        if len(rest) == 1:
            return rest[0]
        return SList((Sym(op), *sorted(rest, key=self.key)))


def _has(d: Datum, name: str) -> bool:
    return name in symbols_in([d])


def _fold_literals(op: str, args: tuple[Datum, ...]) -> Datum | None:
    """The literal value of ``op`` on literal ``args`` when finite (else None: left as is)."""
    values = [a.value for a in args if isinstance(a, Num)]
    if len(values) != len(args):
        return None
    try:
        if op in _FOLD and len(values) == 2:
            v = _FOLD[op](*values)
        elif op in _UNARY and len(values) == 1:
            v = _UNARY[op](values[0])
        elif op == "-" and len(values) == 1:
            v = -values[0]
        else:
            return None
    except (ArithmeticError, ValueError):
        return None
    return _num(v) if math.isfinite(v) else None


def _rename(d: Datum, names: dict[str, str]) -> Datum:
    if isinstance(d, Sym):
        return Sym(names[d.name], d.line, d.column) if d.name in names else d
    if isinstance(d, SList) and d.items and not _sym(d.items[0], "quote"):
        tail = None if d.tail is None else _rename(d.tail, names)
        return SList(tuple(_rename(x, names) for x in d.items), tail, d.line, d.column)
    return d


def _params_in_order(d: Datum, is_param: Callable[[Datum], bool]) -> list[str]:
    out: list[str] = []
    stack = [d]
    while stack:
        x = stack.pop()
        if is_param(x):
            name = x.name  # type: ignore[union-attr]
            if name not in out:
                out.append(name)
        elif isinstance(x, SList):
            stack.extend(reversed(x.items))
    return out


def canonical(d: Datum, params: Sequence[str]) -> Datum:
    """``d`` in canonical form, with the parameter names ``params``.

    Bottom-up: a subtree of pure scalar functions of parameters and literals only (``(exp a)``,
    ``(* c d)``, ``(sin c)``, ``(exp (exp a))``, ``(+ a 1)``) becomes one parameter; literal
    arithmetic is folded; ``(- e k)`` / ``(/ e k)`` of a constant ``k`` become ``(+ e k')`` /
    ``(* e k')``; ``+`` and ``*`` are flattened, their constant arguments merged into
    one parameter (or one literal) and their arguments ordered by structure; the identities of
    ``simplify`` apply. Parameters are then named ``params[0], params[1], ...`` by first
    appearance. The result's values are the original's for the parameter values the folded
    parameters take (``canonical_with_witness``; floating-point sums and products may round
    differently); where more parameters would be needed than ``params`` holds, only
    ``simplify`` is applied.
    """
    return canonical_with_witness(d, params)[0]


def canonical_with_witness(d: Datum, params: Sequence[str]) -> tuple[Datum, dict[str, Datum]]:
    """``(canonical(d, params), witness)``: ``witness`` maps each parameter of the result to
    an expression in ``d``'s parameters (and literals) whose value it takes to reproduce
    ``d``'s values."""
    canon = _Canon(frozenset(params), skeleton=False)
    out = canon.walk(d)
    order = _params_in_order(out, canon.is_param)
    if len(order) > len(params):
        out = simplify(d)
        return out, {n: Sym(n) for n in _params_in_order(out, canon.is_param)}
    names = dict(zip(order, params))
    witness = {names[n]: canon.witness.get(n, Sym(n)) for n in order}
    return _rename(out, names), witness


def _skeleton_atom(d: Datum) -> str:
    return repr(d.value) if isinstance(d, Num) else str(d)


def _with_literals(skel: Datum, src: Datum) -> Datum:
    """``skel`` (skeleton data) with each literal marker ``C`` replaced by the literal of
    ``src`` (the program's data) at the same place; where the two differ in shape, ``skel``."""
    if _sym(skel, SKELETON_LITERAL) and isinstance(src, Num):
        return src
    if (isinstance(skel, SList) and isinstance(src, SList) and skel.tail is None
            and src.tail is None and len(skel.items) == len(src.items)):  # fmt: skip
        return SList(tuple(_with_literals(a, b) for a, b in zip(skel.items, src.items)))
    return skel


def canonical_skeleton(skeleton_text: str, src: str = "") -> str:
    """A skeleton string (parameters ``P``, literals ``C``) in the canonical form above, so
    that equivalent programs share one skeleton; the text itself when it does not read.

    With the program's source ``src``, each literal keeps its value (``(* P (expt x 2))`` and
    ``(* P (expt x 3))`` are two skeletons, literal arithmetic is folded by value): the
    dedupe key of ``candidate.skeleton_hash``, under which two programs are one only when
    they are equal for some parameter values, so deduplication never loses a program."""
    from ndvm.lang.reader import read

    try:
        data = read(skeleton_text)
        if src:
            prog = read(src)
            if len(prog) == len(data):
                data = [_with_literals(a, b) for a, b in zip(data, prog)]
    except Exception:  # noqa: BLE001 - skeleton text of an unusual program: compare as is
        return skeleton_text
    canon = _Canon(frozenset({SKELETON_PARAM}), skeleton=True)
    try:
        return " ".join(to_source(canon.walk(x), _skeleton_atom) for x in data)
    except RecursionError:
        return skeleton_text
