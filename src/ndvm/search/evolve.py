"""Evolutionary proposer: mutation and crossover of program ASTs (reader datums).

Each batch is a generation: parents are the best calibrated candidates so far (by validation
loss, or training loss for a task without a validation split, lightly penalized by size; test
data is never used), chosen by tournament, or (diversity) the best program of a uniformly
drawn complexity, so that simple structures keep breeding while complex ones lead; children
come from crossover and the mutations swap operator, insert subtree, delete subtree, replace
subtree, wrap in a unary op, add a parameter, square a subexpression, add a term (a fresh
parameter times one or two variables) to a sum, add a bounded loop, change a loop's depth and
point-mutate a leaf. With ``islands=K`` the parents of batch ``g`` are island ``g % K``'s
(``search.population``). A child is put in canonical form (``simplify.canonical``: parameter-only
subtrees folded into one parameter, ``+``/``*`` flattened and ordered) before it is
deduplicated and scored. Everything follows the task's ``Grammar``. The generator for batch ``g``
is seeded by ``(seed, g)``, so proposals depend only on the seed and the evaluated records.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import numpy as np

from ndvm.identity import ByIdentity
from ndvm.lang.datum import Datum, Num, SList, Sym, symbols_in, to_source
from ndvm.lang.front import skeleton
from ndvm.lang.reader import read
from ndvm.search.candidate import Candidate, skeleton_hash
from ndvm.search.funnel import complexity
from ndvm.search.population import Pool, Population
from ndvm.search.simplify import canonical
from ndvm.search.state import SearchState
from ndvm.tasks.grammar import Grammar

Path = tuple[int, ...]
_VARIADIC = frozenset({"+", "-", "*", "/", "min", "max"})


@dataclass(frozen=True)
class Site:
    path: Path
    scope: frozenset[str]  # local variables visible here (loop state, let* names)


def S(name: str) -> Sym:
    return Sym(name)


def L(*items: Datum) -> SList:
    return SList(tuple(items))


def lit(v: float) -> Num:
    """A literal whose value is its text's (what reading the printed program gives)."""
    text = f"{v:g}"
    return Num(float(text), text)


def get(d: Datum, path: Path) -> Datum:
    for i in path:
        assert isinstance(d, SList)
        d = d.items[i]
    return d


def put(d: Datum, path: Path, new: Datum) -> Datum:
    if not path:
        return new
    assert isinstance(d, SList)
    items = list(d.items)
    items[path[0]] = put(items[path[0]], path[1:], new)
    return SList(tuple(items), d.tail)


def _is_sym(d: Datum, name: str) -> bool:
    return isinstance(d, Sym) and d.name == name


def loop_parts(d: Datum) -> tuple[str, Datum, Datum, int] | None:
    """``(state-var, INIT, NEW, N)`` if ``d`` is the grammar's bounded iterated map."""
    try:
        assert isinstance(d, SList) and _is_sym(d.items[0], "loop") and len(d.items) == 3
        (s_b, k_b) = d.items[1].items  # type: ignore[union-attr]
        s, init = s_b.items  # type: ignore[union-attr]
        body = d.items[2]
        assert isinstance(body, SList) and _is_sym(body.items[0], "if")
        test, _, rec = body.items[1:4]
        n = test.items[2]  # type: ignore[union-attr]
        assert isinstance(n, Num) and isinstance(s, Sym) and isinstance(rec, SList)
        return s.name, init, rec.items[1], int(n.value)
    except (AssertionError, AttributeError, ValueError, IndexError, TypeError):
        return None


def uses_loop_state(d: Datum) -> bool:
    """True if ``d`` holds a bounded iterated map whose new state reads the state variable
    (a real iterated map, not a loop whose state never feeds back)."""
    stack = [d]
    while stack:
        x = stack.pop()
        parts = loop_parts(x)
        if parts is not None and parts[0] in symbols_in([parts[2]]):
            return True
        if isinstance(x, SList):
            stack.extend(x.items)
    return False


def make_loop(init: Datum, new: Datum, n: int, var: str = "s") -> SList:
    k = S("k")
    return L(
        S("loop"),
        L(L(S(var), init), L(k, lit(0))),
        L(S("if"), L(S("="), k, lit(n)), S(var), L(S("recur"), new, L(S("+"), k, lit(1)))),
    )


def sites(d: Datum, g: Grammar, path: Path = (), scope: frozenset[str] = frozenset()) -> list[Site]:
    """Positions where an expression may be replaced, with the local names in scope."""
    out = [Site(path, scope)]
    if not isinstance(d, SList) or not d.items or not isinstance(d.items[0], Sym):
        return out
    head = d.items[0].name
    lp = loop_parts(d)
    if lp is not None:
        out += sites(lp[1], g, path + (1, 0, 1), scope)
        out += sites(lp[2], g, path + (2, 3, 1), scope | {lp[0]})
    elif head == "let*" and len(d.items) >= 3 and isinstance(d.items[1], SList):
        inner = scope
        for j, b in enumerate(d.items[1].items):
            if isinstance(b, SList) and len(b.items) == 2 and isinstance(b.items[0], Sym):
                out += sites(b.items[1], g, path + (1, j, 1), inner)
                inner = inner | {b.items[0].name}
        for i in range(2, len(d.items)):
            out += sites(d.items[i], g, path + (i,), inner)
    elif head in g.binary or head in g.unary or head in ("min", "max"):
        for i in range(1, len(d.items)):
            out += sites(d.items[i], g, path + (i,), scope)
    return out


class Builder:
    """Random grammar expressions with a seeded generator."""

    def __init__(self, g: Grammar, rng: np.random.Generator) -> None:
        self.g, self.rng = g, rng

    def pick(self, seq: tuple[str, ...] | list[str]) -> str:
        return seq[int(self.rng.integers(len(seq)))]

    def leaf(self, scope: frozenset[str], used: set[str]) -> Datum:
        r = self.rng.random()
        if scope and r < 0.3:
            return S(self.pick(sorted(scope)))
        if r < 0.55:
            return S(self.pick(self.g.inputs))
        if r < 0.9:
            return S(self.pick(self.g.params))
        return lit(self.g.literals[int(self.rng.integers(len(self.g.literals)))])

    def expr(self, depth: int, scope: frozenset[str] = frozenset(), used: set[str] | None = None):
        used = used if used is not None else set()
        if depth <= 0 or self.rng.random() < 0.25:
            return self.leaf(scope, used)
        if self.rng.random() < 0.3:
            return L(S(self.pick(self.g.unary)), self.expr(depth - 1, scope, used))
        op = self.pick(self.g.binary)
        return L(S(op), self.expr(depth - 1, scope, used), self.expr(depth - 1, scope, used))

    def param_term(self, inner: Datum) -> Datum:
        """``(* p inner)``: a parameter-scaled copy of ``inner``."""
        return L(S("*"), S(self.pick(self.g.params)), inner)

    def loop_depth(self) -> int:
        lo, hi = self.g.loop_depth
        return int(self.rng.integers(lo, hi + 1))

    def loop(self, init: Datum | None = None) -> SList:
        init = init if init is not None else self.expr(1)
        step = L(S("+"), S("s"), self.param_term(self.expr(2, frozenset({"s"}))))
        return make_loop(init, step, self.loop_depth())


def _has_loop(d: Datum) -> bool:
    return "loop" in symbols_in([d])


class _Taken:
    """Skeleton hashes already calibrated (the state's, read in place) or proposed now."""

    def __init__(self, calibrated: AbstractSet[str]) -> None:
        self.calibrated, self.new = calibrated, set[str]()

    def __contains__(self, h: str) -> bool:
        return h in self.new or h in self.calibrated

    def add(self, h: str) -> None:
        self.new.add(h)


class EvolveProposer:
    """Tournament selection, crossover and mutation over the task grammar."""

    def __init__(
        self,
        grammar: Grammar,
        seeds: tuple[str, ...] = (),
        *,
        population: int = 24,
        tournament: int = 3,
        crossover: float = 0.3,
        parsimony: float = 0.01,
        random_fraction: float = 0.1,
        niches: float = 0.3,
        islands: int = 1,
        migration: float = 0.1,
        per_niche: int = 1,
        terms: bool = True,
    ) -> None:
        self.name = "evolve"
        self.g = grammar
        self.seeds = seeds
        self.population, self.tournament = population, tournament
        self.p_cross, self.parsimony, self.p_random = crossover, parsimony, random_fraction
        self.p_niche, self.p_migrate = niches, migration
        self._parents = Population(population, parsimony, islands, per_niche)
        self.terms = terms
        self._site_memo = ByIdentity(4096)  # parent -> sites(parent)

    # -- the protocol -----------------------------------------------------------------
    def propose(self, state: SearchState, n: int) -> list[Candidate]:
        rng = np.random.default_rng([state.seed, state.next_batch, 0xE7])
        b = Builder(self.g, rng)
        seen = _Taken(state.seen)
        pool = self._parents.pool(state)
        out: list[Candidate] = []
        if state.next_batch == 0:
            for src in self.seeds:
                try:
                    data = read(src)
                except Exception:  # noqa: BLE001 - a seed that does not read is skipped
                    continue
                self._accept(data, seen, out, "seed", src)
        tries = 0
        while len(out) < n and tries < 50 * n:
            tries += 1
            if not pool or rng.random() < self.p_random:
                child, how = self._fresh(b), "random"
            elif rng.random() < self.p_cross and len(pool) > 1:
                child, how = self._crossover(b, self._select(b, pool), self._select(b, pool))
            else:
                child, how = self._mutate(b, self._select(b, pool))
            if child is not None:
                self._accept((child,), seen, out, how)
        return out[:n]

    # -- population and selection -------------------------------------------------------
    def _select(self, b: Builder, pool: Pool) -> Datum:
        """A parent: from a uniformly drawn complexity niche (with probability ``niches``),
        so that simple structures keep breeding next to the fittest; else by tournament among
        the island's fittest, or (with probability ``migration``, and while the island has
        none) among the fittest of all islands."""
        if pool.niches and b.rng.random() < self.p_niche:
            niche = pool.niches[int(b.rng.integers(len(pool.niches)))]
            return niche[int(b.rng.integers(len(niche)))] if len(niche) > 1 else niche[0]
        ranked = pool.ranked
        if not ranked or (self._parents.islands > 1 and b.rng.random() < self.p_migrate):
            ranked = pool.migrants
        picks = b.rng.integers(len(ranked), size=min(self.tournament, len(ranked)))
        return ranked[int(min(picks))]  # ranked is sorted: the lowest index is the fittest

    def _fresh(self, b: Builder) -> Datum:
        e = b.expr(int(b.rng.integers(1, 4)))
        if self.g.require_loop:
            return b.loop(b.expr(1))
        return e

    def _accept(
        self, data: tuple[Datum, ...], seen: _Taken, out: list[Candidate], how: str,
        src: str | None = None,
    ) -> None:  # fmt: skip
        """Propose ``data`` (a seed's text ``src`` is kept when it is canonical already)."""
        # parsimony before scoring: (/ x x) -> 1, (exp a) -> a, (* x a) -> (* a x)
        simpler = tuple(canonical(d, self.g.params) for d in data)
        if src is None or simpler != data:
            data, src = simpler, " ".join(to_source(d) for d in simpler)
        if complexity(data) > self.g.max_size:
            return
        if self.g.require_loop and not any(uses_loop_state(d) for d in data):
            return
        skel = skeleton(data, set(self.g.params))
        h = skeleton_hash(skel, src)
        if h in seen:
            return
        seen.add(h)
        out.append(Candidate(src, None, f"evolve:{how}", skel, key=h))  # the worker's hash

    # -- variation ----------------------------------------------------------------------
    def _sites(self, parent: Datum) -> list[Site]:
        """``sites(parent)``, once per parent (parents breed again and again); read only."""
        hit = self._site_memo.get(parent)
        return hit if hit is not None else self._site_memo.put(parent, sites(parent, self.g))

    def _crossover(self, b: Builder, p1: Datum, p2: Datum) -> tuple[Datum | None, str]:
        s1, s2 = self._sites(p1), self._sites(p2)
        target = s1[int(b.rng.integers(len(s1)))]
        for _ in range(10):
            donor = s2[int(b.rng.integers(len(s2)))]
            sub = get(p2, donor.path)
            local = symbols_in([sub]) & donor.scope
            if local <= target.scope and not (_has_loop(sub) and _has_loop(p1)):
                return put(p1, target.path, sub), "crossover"
        return None, "crossover"

    def _mutate(self, b: Builder, p: Datum) -> tuple[Datum | None, str]:
        ops: list[tuple[str, Callable[[Builder, Datum], Datum | None]]] = [
            ("swap", self._m_swap),
            ("insert", self._m_insert),
            ("delete", self._m_delete),
            ("replace", self._m_replace),
            ("wrap", self._m_wrap),
            ("param", self._m_param),
            ("leaf", self._m_leaf),
        ]
        if "*" in self.g.binary:
            ops.append(("square", self._m_square))
            if "+" in self.g.binary and self.terms:
                ops.append(("term", self._m_term))
        if self.g.loop:
            ops.append(("loop", self._m_loop))
            if _has_loop(p):
                ops.append(("depth", self._m_depth))
        name, fn = ops[int(b.rng.integers(len(ops)))]
        return fn(b, p), name

    def _site(
        self, b: Builder, p: Datum, pred: Callable[[Datum], bool] | None = None
    ) -> Site | None:
        ss = [s for s in self._sites(p) if pred is None or pred(get(p, s.path))]
        return ss[int(b.rng.integers(len(ss)))] if ss else None

    def _is_op(self, d: Datum) -> bool:
        return (
            isinstance(d, SList)
            and bool(d.items)
            and isinstance(d.items[0], Sym)
            and (d.items[0].name in self.g.binary or d.items[0].name in self.g.unary)
        )

    def _m_swap(self, b: Builder, p: Datum) -> Datum | None:
        s = self._site(b, p, self._is_op)
        if s is None:
            return None
        d = get(p, s.path)
        assert isinstance(d, SList)
        pool = self.g.unary if len(d.items) == 2 else self.g.binary
        if len(d.items) > 3:  # a flattened (+ e f g): only operators taking any number
            pool = tuple(op for op in pool if op in _VARIADIC)
        if not pool:
            return None
        return put(p, s.path, SList((S(b.pick(pool)),) + d.items[1:]))

    def _m_insert(self, b: Builder, p: Datum) -> Datum | None:
        s = self._site(b, p)
        assert s is not None
        d, new = get(p, s.path), b.expr(int(b.rng.integers(0, 3)), s.scope)
        args = (d, new) if b.rng.random() < 0.5 else (new, d)
        return put(p, s.path, L(S(b.pick(self.g.binary)), *args))

    def _m_delete(self, b: Builder, p: Datum) -> Datum | None:
        s = self._site(b, p, lambda d: isinstance(d, SList))
        if s is None:
            return None
        inner = [t for t in sites(get(p, s.path), self.g, (), s.scope)[1:] if t.scope == s.scope]
        if inner and b.rng.random() < 0.8:
            return put(p, s.path, get(get(p, s.path), inner[int(b.rng.integers(len(inner)))].path))
        return put(p, s.path, b.leaf(s.scope, set()))

    def _m_replace(self, b: Builder, p: Datum) -> Datum | None:
        s = self._site(b, p)
        assert s is not None
        return put(p, s.path, b.expr(int(b.rng.integers(1, 3)), s.scope))

    def _m_wrap(self, b: Builder, p: Datum) -> Datum | None:
        s = self._site(b, p)
        assert s is not None
        inner = get(p, s.path)
        if b.rng.random() < 0.5:
            inner = b.param_term(inner) if isinstance(inner, Sym) else inner
        return put(p, s.path, L(S(b.pick(self.g.unary)), inner))

    def _m_param(self, b: Builder, p: Datum) -> Datum | None:
        free = [q for q in self.g.params if q not in symbols_in([p])]
        if not free:
            return None
        q = S(free[int(b.rng.integers(len(free)))])
        nums = self._site(b, p, lambda d: isinstance(d, Num))
        if nums is not None and b.rng.random() < 0.3:
            return put(p, nums.path, q)
        s = self._site(b, p)
        assert s is not None
        d = get(p, s.path)
        form = L(S("*"), q, d) if b.rng.random() < 0.5 else L(S("+"), d, q)
        return put(p, s.path, form)

    def _m_square(self, b: Builder, p: Datum) -> Datum | None:
        """A subexpression times itself: ``(- x2 x1)`` -> ``(* (- x2 x1) (- x2 x1))`` (squares
        are common in laws; two independent edits rarely make both factors equal)."""
        s = self._site(b, p, lambda d: not isinstance(d, Num))
        if s is None:
            return None
        d = get(p, s.path)
        return put(p, s.path, L(S("*"), d, d))

    def _m_term(self, b: Builder, p: Datum) -> Datum | None:
        """One more term of a sum, a parameter times one or two variables: ``(+ e f)`` ->
        ``(+ e f (* q x y))``; at any other site ``e`` -> ``(+ e (* q x))`` (laws are often
        sums of products, which single edits reach only through a poorer intermediate)."""
        s = self._site(b, p, lambda d: isinstance(d, SList) and bool(d.items)
                       and _is_sym(d.items[0], "+"))  # fmt: skip
        if s is None or b.rng.random() < 0.3:
            s = self._site(b, p)
        free = [q for q in self.g.params if q not in symbols_in([p])]
        if s is None or not free:
            return None
        names = sorted(set(self.g.inputs) | s.scope)
        factors = [S(b.pick(names)) for _ in range(int(b.rng.integers(1, 3)))]
        term = L(S("*"), S(b.pick(free)), *factors)
        d = get(p, s.path)
        if isinstance(d, SList) and d.items and _is_sym(d.items[0], "+"):
            return put(p, s.path, SList(d.items + (term,)))
        return put(p, s.path, L(S("+"), d, term))

    def _m_leaf(self, b: Builder, p: Datum) -> Datum | None:
        s = self._site(b, p, lambda d: not isinstance(d, SList))
        return None if s is None else put(p, s.path, b.leaf(s.scope, set()))

    def _m_loop(self, b: Builder, p: Datum) -> Datum | None:
        if _has_loop(p):
            s = self._site(b, p, lambda d: loop_parts(d) is not None)
            if s is None:
                return None
            lp = loop_parts(get(p, s.path))
            assert lp is not None
            new = L(S("+"), lp[2], b.param_term(b.expr(1, frozenset({lp[0]}))))
            return put(p, s.path + (2, 3, 1), new)
        return b.loop(p)

    def _m_depth(self, b: Builder, p: Datum) -> Datum | None:
        s = self._site(b, p, lambda d: loop_parts(d) is not None)
        return None if s is None else put(p, s.path + (2, 1, 2), lit(b.loop_depth()))
