"""Starts from the data: parameters that shift, scale or oscillate an input start at its scale.

A fit's jittered starts are drawn around the declared initial values (``N(0, 1)`` for a
parameter declared at 0), which cannot reach the centre of a peak at wavelength 520 or an
onset at t = 45: from there the model is flat (``exp`` of a large negative number) and no
gradient leads to it. Four roles of a free parameter ``p`` next to an input ``x`` get their
natural values from ``x``'s observed range ``[lo, hi]`` (or, for a frequency, from the data)
instead:

- *location*: ``(- x p)``, ``(- p x)``, ``(+ x p)``, ``(+ p x)`` — ``p`` is drawn uniformly
  over ``[lo, hi]`` (for ``+`` with a random sign: ``x + p`` is zero at ``p = -x``, but
  ``(+ K S)`` may as well be Michaelis–Menten's positive constant);
- *width*: ``(/ x p)`` or ``(/ S p)`` with ``S`` a location form of ``x`` — ``|p|`` is drawn
  log-uniformly between ``(hi - lo) / 30`` and ``hi - lo``;
- *inverse width*: ``(* p S)`` or ``(* S p)`` with ``S`` a location form of ``x`` — ``1/p``
  is drawn as a width, with a random sign;
- *frequency*: ``(* p x)`` as the argument of ``sin`` or ``cos``, alone or plus or minus a
  phase — the m-th such parameter starts at the m-th strongest peak of the target's
  periodogram against ``x`` (``frequencies``);
- the same behind constant factors (``factored_roles``, read from the parsed forms): a
  frequency ``c·p·x`` or a *period* ``c·x/p`` inside ``sin``/``cos`` (``(* 2 pi (/ t P))``,
  ``(/ (* 2 pi t) P)``, ``(/ t P)``: ``P = c / ω``), a width ``(/ S (* c p))``, a location
  ``(- x (* c p))``; the role's value is divided by ``c`` (a period: ``c`` over it).

``place_roles`` draws them in every other start, the odd ones, after the jitter: half of the
starts keep the jitter, and programs without these roles draw exactly the random numbers they
drew before. A parameter takes its first role in the source text. Programs with binding forms
(``let``, ``lambda``, ``define``, ``do``, ``loop``) are left alone: an input's name there may
be rebound. Any other product with a bare input (``(* b x)``, a rate) is not a role: its
useful values do not follow from ``x``'s range.
"""

from __future__ import annotations

import hashlib
import math
import re
import sys
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

# (parameter, input, "loc+" | "loc-" | "width" | "inv" | "freq" | "period"[, factor c]): the
# role's natural value v (a location, a width, an angular frequency) is c·p ("period": c/p);
# without c, c = 1
Role = tuple[Any, ...]

_BINDER = re.compile(r"\(\s*(?:let\*?|letrec\*?|lambda|define|do|loop)[\s()]")
_A = r"([^\s()\[\]\"';]+)"  # an atom
_LOC = rf"\(\s*([-+])\s+{_A}\s+{_A}\s*\)"
_ROLE = re.compile(
    rf"{_LOC}"  # 1 op, 2, 3: a location form
    rf"|\(\s*/\s+(?:{_A}|{_LOC})\s+{_A}\s*\)"  # 4 x | 5 op, 6, 7 ; 8 p: a width
    rf"|\(\s*\*\s+{_A}\s+{_LOC}\s*\)"  # 9 p ; 10 op, 11, 12: an inverse width
    rf"|\(\s*\*\s+{_LOC}\s+{_A}\s*\)"  # 13 op, 14, 15 ; 16 p
)
_FREQ = re.compile(  # (sin (* p x)), (cos (+ (* p x) q)), (sin (- q (* x p))), ...
    rf"\(\s*(?:sin|cos)\s+(?:\(\s*[-+]\s+(?:{_A}\s+)?)?\(\s*\*\s+{_A}\s+{_A}\s*\)"
)
WIDTH_DECADES = 1.5  # a width's draw spans (hi - lo) / 10**WIDTH_DECADES to hi - lo


def roles(source: str, inputs: Collection[str], params: Sequence[str]) -> tuple[Role, ...]:
    """The roles of the parameters in a program's source text, ordered by parameter."""
    if _BINDER.search(source):
        return ()
    index = {name: i for i, name in enumerate(params)}
    found: dict[int, Role] = {}

    def add(p: str, x: str | None, kind: str, c: float = 1.0) -> None:
        i = index.get(p)
        if i is not None and x is not None and i not in found:
            found[i] = (i, x, kind) if c == 1.0 and kind != "period" else (i, x, kind, c)

    def located(a: str, b: str) -> tuple[str | None, str | None]:
        """(the input, the other operand) of a location form's operands, if one is an input."""
        if a in inputs:
            return a, b
        return (b, a) if b in inputs else (None, None)

    factored = factored_roles(source, inputs, index)
    for p, x, kind, c in factored:  # a period or frequency inside sin/cos comes first
        if kind in ("freq", "period"):
            add(p, x, kind, c)
    for m in _FREQ.finditer(source):
        a, b = m.group(2), m.group(3)
        x, p = (a, b) if a in inputs else (b, a)
        add(p, x if x in inputs else None, "freq")
    for m in _ROLE.finditer(source):
        g = m.groups()
        if g[0] is not None:  # (op a b)
            x, p = located(g[1], g[2])
            add(p or "", x, "loc-" if g[0] == "-" else "loc+")
        elif g[7] is not None:  # (/ x p) or (/ (op a b) p)
            x = g[3] if g[3] in inputs else located(g[5], g[6])[0] if g[4] else None
            add(g[7], x, "width")
            if g[4]:
                x, p = located(g[5], g[6])
                add(p or "", x, "loc-" if g[4] == "-" else "loc+")
        else:  # (* p (op a b)) or (* (op a b) p)
            op, a, b, p = g[9:12] + (g[8],) if g[8] is not None else g[12:16]
            x, q = located(a, b)
            add(p, x, "inv")
            add(q or "", x, "loc-" if op == "-" else "loc+")
    for p, x, kind, c in factored:
        add(p, x, kind, c)
    return tuple(found[i] for i in sorted(found))


_TOKEN = re.compile(r";[^\n]*|\(|\)|[^\s()]+")


def _parse(source: str) -> list[Any]:
    """The program's forms as nested lists of atoms (strings); [] if it does not parse."""
    stack: list[list[Any]] = [[]]
    for tok in _TOKEN.findall(source):
        if tok.startswith(";"):
            continue
        if tok == "(":
            stack.append([])
        elif tok == ")":
            if len(stack) == 1:
                return []
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(tok)
    return stack[0] if len(stack) == 1 else []


_NAME = re.compile(_A)
_ATOMS: dict[str, Any] = {}  # atom -> its monomial (shared: read only), for up to 4,096 atoms


def _monomial(e: Any) -> tuple[float, dict[str, int]] | None:
    """``e`` as ``c · Π name^k`` (numbers, ``pi``, names, ``*``, ``/``, unary ``-``), else
    None."""
    if isinstance(e, str):
        m = _ATOMS.get(e, _MISSING)
        if m is _MISSING:
            if len(_ATOMS) >= 4096:
                _ATOMS.clear()
            m = _ATOMS[e] = _atom(e)
        return m  # type: ignore[no-any-return]
    if not e or e[0] not in ("*", "/", "-") or (e[0] == "-" and len(e) != 2):
        return None
    parts = [_monomial(a) for a in e[1:]]
    if any(m is None for m in parts) or not parts:
        return None
    c, powers = 1.0, {}
    for k, m in enumerate(parts):
        assert m is not None
        sign = -1 if e[0] == "/" and (k > 0 or len(parts) == 1) else 1
        c = c * m[0] if sign > 0 else (c / m[0] if m[0] != 0 else np.nan)
        for name, n in m[1].items():
            powers[name] = powers.get(name, 0) + sign * n
    if e[0] == "-":
        c = -c
    return c, {k: v for k, v in powers.items() if v}


def _atom(e: str) -> tuple[float, dict[str, int]] | None:
    if e == "pi":
        return np.pi, {}
    try:
        return float(e), {}
    except ValueError:
        return (1.0, {e: 1}) if _NAME.fullmatch(e) else None


def _one(m: Any, names: Collection[str], power: int | None = None) -> tuple[str, int] | None:
    """(name, power) when the monomial ``m`` has exactly one name, of ``names`` (and
    ``power``), with a finite nonzero constant."""
    if m is None or len(m[1]) != 1 or not (math.isfinite(m[0]) and m[0] != 0):
        return None
    (name, k), = m[1].items()
    return (name, k) if name in names and (power is None or k == power) else None


def _walk(e: Any) -> Any:
    if isinstance(e, list):
        yield e
        for a in e:
            yield from _walk(a)


def factored_roles(
    source: str, inputs: Collection[str], params: Collection[str]
) -> list[tuple[str, str, str, float]]:
    """Roles behind constant factors, in source order: a frequency written as ``c·p·x`` or a
    period as ``c·x/p`` inside ``sin``/``cos`` (alone, or plus or minus a phase: ``(* 2 pi (/
    t P))``, ``(/ t P)``, ``(/ (* 2 pi t) P)``); a width ``(/ S (* c p))`` (S an input, a
    location form of one, or ``c'·x``); a location ``(- x (* c p))``. (parameter, input,
    kind, c) as ``Role``."""
    out: list[tuple[str, str, str, float]] = []
    for e in _walk(_parse(source)):
        head = e[0] if e else None
        if head in ("sin", "cos") and len(e) == 2:
            arg = e[1]
            if isinstance(arg, list) and len(arg) == 3 and arg[0] in ("+", "-"):
                has = [t for t in arg[1:] if _one_input(t, inputs)]
                arg = has[0] if len(has) == 1 else arg
            m = _monomial(arg)
            if m is not None and len(m[1]) == 2 and math.isfinite(m[0]) and m[0] != 0:
                xs = [k for k, v in m[1].items() if k in inputs and v == 1]
                ps = [k for k, v in m[1].items() if k in params and abs(v) == 1]
                if len(xs) == 1 and len(ps) == 1 and xs[0] != ps[0]:
                    kind = "freq" if m[1][ps[0]] == 1 else "period"
                    out.append((ps[0], xs[0], kind, abs(m[0])))
        elif head == "/" and len(e) == 3:
            m = _monomial(e[2])
            den = _one(m, params, 1)
            x, cx = _scaled_input(e[1], inputs) if den is not None else (None, 1.0)
            if den is not None and x is not None:
                out.append((den[0], x, "width", abs(m[0] / cx)))  # type: ignore[index]
        elif head in ("-", "+") and len(e) == 3:
            for a, b in ((e[1], e[2]), (e[2], e[1])):
                if not (isinstance(a, str) and a in inputs):
                    continue
                m = _monomial(b)
                q = _one(m, params, 1)
                if q is not None:
                    out.append((q[0], a, "loc-" if head == "-" else "loc+", m[0]))  # type: ignore[index]
    return out


def _one_input(e: Any, inputs: Collection[str]) -> bool:
    """Whether ``e`` mentions an input."""
    return any(isinstance(t, str) and t in inputs for t in _atoms(e))


def _atoms(e: Any) -> Any:
    if isinstance(e, str):
        yield e
    else:
        for a in e:
            yield from _atoms(a)


def _scaled_input(e: Any, inputs: Collection[str]) -> tuple[str | None, float]:
    """(x, c') when ``e`` is an input, a location form of one, or ``c'·x``; else (None, 1)."""
    if isinstance(e, list) and len(e) == 3 and e[0] in ("-", "+"):
        xs = [a for a in e[1:] if isinstance(a, str) and a in inputs]
        return (xs[0], 1.0) if len(xs) == 1 else (None, 1.0)
    m = _monomial(e)
    one = _one(m, inputs, 1)
    return (one[0], abs(m[0])) if one is not None else (None, 1.0)  # type: ignore[index]


def input_range(values: Any) -> tuple[float, float] | None:
    """``(min, max)`` of the finite entries of a real input array; None for anything else
    (a scalar, a complex or non-numeric array, no finite entry). Not cached: a cache would
    keep the caller's arrays alive, and one pass over the data is small beside a fit."""
    if not (isinstance(values, np.ndarray) and values.ndim >= 1 and values.dtype.kind in "fiu"):
        return None
    if values.size:  # two reductions; the mask only when one of them is not finite
        lo, hi = float(values.min()), float(values.max())
        if math.isfinite(lo) and math.isfinite(hi):
            return lo, hi
    v = values[np.isfinite(values)] if values.dtype.kind == "f" else values
    if not v.size:
        return None
    lo, hi = float(v.min()), float(v.max())
    return (lo, hi) if np.isfinite(lo) and np.isfinite(hi) else None


class RoleData:
    """What ``place_roles`` reads of a fit's training data: each input's range
    (``input_range``) and the periodogram peaks of the target against it (``frequencies``),
    each computed on first use and kept. ``place_roles`` makes one per call; a caller that
    places the roles of many programs on the same data, which it does not change in place,
    makes one and passes it as the inputs (the search's worker, once per task data)."""

    __slots__ = ("inputs", "target", "_spans", "_peaks")

    def __init__(self, inputs: Mapping[str, Any], target: Any = None) -> None:
        self.inputs, self.target = inputs, target
        self._spans: dict[str, Any] = {}
        self._peaks: dict[str, Any] = {}

    def span(self, x: str) -> tuple[float, float] | None:
        """``input_range`` of input ``x``."""
        got = self._spans.get(x, _MISSING)
        if got is _MISSING:
            got = self._spans[x] = input_range(self.inputs.get(x))
        return got  # type: ignore[no-any-return]

    def peaks(self, x: str, k: int) -> np.ndarray | None:
        """``frequencies(inputs[x], target, k)``: the first ``k`` of the peaks kept."""
        got = self._peaks.get(x, _MISSING)
        if got is _MISSING:
            got = self._peaks[x] = frequencies(self.inputs.get(x), self.target, sys.maxsize)
        return None if got is None else got[:k]


def place_roles(
    theta: np.ndarray, K: int, found: Sequence[Role], inputs: Mapping[str, Any] | RoleData,
    rng: np.random.Generator, target: Any = None,
) -> np.ndarray:  # fmt: skip
    """Draw each role's parameter in the odd starts of ``theta [series * K, P]``
    (series-major, in place); unchanged when ``K < 2``, without roles, or where an input's
    range is unknown (or, for a width, empty). The m-th frequency parameter starts at the
    m-th strongest peak of the periodogram of ``target`` (its first series) against its
    input in every odd start (their other parameters differ: a peak tried from several
    phases); none without a target of one number per point of a 1-D input. ``inputs``: the
    training inputs by name, or a ``RoleData`` of them and their target (``target`` unused)."""
    if K < 2 or not found:
        return theta
    data = inputs if type(inputs) is RoleData else RoleData(inputs, target)
    if theta.shape[0] == K:  # one series: the odd rows as a slice (no index arrays)
        rows: Any = slice(1, K, 2)
        n = K // 2
    else:
        rows = np.arange(theta.shape[0])
        rows = rows[rows % K % 2 == 1]
        n = rows.size
    n_freq = 0
    for i, x, kind, *factor in found:
        c = factor[0] if factor else 1.0
        if kind in ("freq", "period"):  # frequencies checks the input (no range needed)
            peaks = data.peaks(x, n_freq + 1)
            if peaks is not None:  # the m-th frequency parameter: the m-th strongest peak
                w = peaks[min(n_freq, peaks.size - 1)]
                theta[rows, i] = w / c if kind == "freq" else c / w
                n_freq += 1
            continue
        span = data.span(x)
        if span is None:
            continue
        lo, hi = span
        if kind.startswith("loc"):
            value = lo + (hi - lo) * rng.random(n)
            if kind == "loc+":  # a shift (x + p = 0 at p = -x) or an offset (K + S)
                value *= np.where(rng.random(n) < 0.5, -1.0, 1.0)
            theta[rows, i] = value if c == 1.0 else value / c
        elif hi > lo:
            width = (hi - lo) * 10.0 ** (-WIDTH_DECADES * rng.random(n))
            if kind == "width":
                theta[rows, i] = width if c == 1.0 else width / c
            else:
                theta[rows, i] = np.where(rng.random(n) < 0.5, -1.0, 1.0) / width
    return theta


_PERIODOGRAMS: dict[Any, Any] = {}  # content key of (x, y) (_digest) -> peaks (or None)


def frequencies(x: Any, y: Any, k: int) -> np.ndarray | None:
    """The angular frequencies of the ``k`` highest local maxima of the periodogram
    ``|Σ r exp(-i ω x)|²``, ``r`` the residual of ``y`` from a straight line in ``x`` (1-D,
    the same length; ``y`` may be ``[S, N]``, its first row counts), from half a cycle over
    ``x``'s range to ``N / 2`` cycles (``_periodogram_peaks``); None without such data. Kept
    by the arrays' contents (``_digest``), for the last 8."""
    if isinstance(y, np.ndarray) and y.ndim == 2:
        y = y[0]
    ok = isinstance(x, np.ndarray) and isinstance(y, np.ndarray) and x.ndim == y.ndim == 1
    if not ok or x.shape != y.shape or x.dtype.kind not in "fiu" or y.dtype.kind not in "fiu":
        return None
    key = _digest(x, y)
    peaks = _PERIODOGRAMS.get(key, _MISSING)
    if peaks is _MISSING:
        peaks = _periodogram_peaks(x.astype(np.float64), y.astype(np.float64))
        if len(_PERIODOGRAMS) >= 8:
            _PERIODOGRAMS.pop(next(iter(_PERIODOGRAMS)))
        _PERIODOGRAMS[key] = peaks
    return None if peaks is None else peaks[:k]


_MISSING = object()


DIGEST_BYTES = 1 << 14  # arrays up to this many bytes in all are their own key


def _digest(*arrays: np.ndarray) -> Any:
    """A key of the arrays' contents (dtype, shape and bytes): a buffer refilled in place
    is new data (``y[:] = data[i]`` in a loop), a copy of the same data is not. Small arrays
    (``DIGEST_BYTES`` in all) are keyed by their dtypes, shapes and bytes themselves (a tuple:
    no hash to compute; a dict lookup compares them), larger ones by a BLAKE2b digest."""
    if sum(a.nbytes for a in arrays) <= DIGEST_BYTES:
        return tuple(v for a in arrays for v in (a.dtype.str, a.shape, a.tobytes()))
    h = hashlib.blake2b(digest_size=20)
    for a in arrays:
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(np.ascontiguousarray(a).view(np.uint8).reshape(-1).data)
    return h.digest()


def _periodogram_peaks(x: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """The periodogram's local maxima, strongest first: ``y`` less its least-squares line
    (a trend's power is at low frequencies), summed into ``4N`` bins of ``x``'s range (a
    phase error of at most π/8 at the highest frequency kept), its FFT zero-padded twice
    (frequency steps of half a peak's width); frequencies from half a cycle over the range
    to ``N / 2`` cycles."""
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    n = x.size
    span = float(x.max() - x.min()) if n else 0.0
    if n < 8 or not span > 0:
        return None
    m = 4 * n
    dx = span / (m - 1)
    bins = np.rint((x - x.min()) / dx).astype(np.int64)
    xc, yc = x - x.mean(), y - y.mean()
    resid = yc - (xc @ yc) / (xc @ xc) * xc
    grid = np.bincount(bins, weights=resid, minlength=m)
    power = np.abs(np.fft.rfft(grid, 2 * m)) ** 2
    omega = 2 * np.pi * np.arange(power.size) / (2 * m * dx)
    keep = (omega >= np.pi / span) & (omega <= np.pi * n / span)
    omega, power = omega[keep], power[keep]
    top = np.flatnonzero((power[1:-1] > power[:-2]) & (power[1:-1] >= power[2:])) + 1
    if not top.size:
        return None
    return omega[top[np.argsort(-power[top], kind="stable")]]


_ROLES: dict[tuple[Any, ...], tuple[Role, ...]] = {}  # (source, inputs, params, free) ->
CACHED_SOURCE = 2000  # sources up to this many characters keep their roles (1,024 of them)


def program_roles(program: Any) -> tuple[Role, ...]:
    """The roles of ``program``'s (an ``ndvm.Program``) free (unconstrained) parameters."""
    free = tuple(s.constraint == "free" for s in program.param_specs)
    key = (program.source, tuple(program.inputs), program.params, free)
    found = _ROLES.get(key)
    if found is None:
        found = tuple(r for r in roles(*key[:3]) if free[r[0]])
        if len(key[0]) <= CACHED_SOURCE:
            if len(_ROLES) >= 1024:
                _ROLES.pop(next(iter(_ROLES)))
            _ROLES[key] = found
    return found
