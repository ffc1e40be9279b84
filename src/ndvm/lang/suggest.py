""" "Did you mean": the known names closest to an unknown one, for the front end's errors."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

# Names other languages give a primitive, where spelling alone would point elsewhere
# (``sqr`` is closer to ``sqrt`` than to ``square``, but means square in Pascal and BASIC).
SYNONYMS = {
    "sqr": "square",
    "ln": "log",
    "fabs": "abs",
    "len": "length",
    "mod": "modulo",
    "fmod": "remainder",
    "rem": "remainder",
    "atan2": "atan",
    "arctan": "atan",
    "power": "expt",
    "sum": "vsum",
    "mean": "vmean",
}


def suggestions(name: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` known names close to ``name`` (difflib similarity at least 0.6 and within
    0.1 of the closest), best first; internal (``#``/``%``) names never appear."""
    pool = sorted({c for c in candidates if c and c[0] not in "#%" and c != name})
    synonym = SYNONYMS.get(name)
    if synonym is not None and synonym in pool:
        return [synonym]
    matcher = difflib.SequenceMatcher(b=name)
    scored = []
    for c in pool:
        matcher.set_seq1(c)
        score = matcher.ratio()
        if score >= 0.6:
            scored.append((-score, c))
    scored.sort()
    if not scored:
        return []
    best = -scored[0][0]
    return [c for s, c in scored[:n] if -s >= best - 0.1]


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """``did you mean 'a'?`` / ``did you mean 'a' or 'b'?``, or '' when nothing is close."""
    picks = [repr(p) for p in suggestions(name, candidates)]
    if not picks:
        return ""
    listed = picks[0] if len(picks) == 1 else f"{', '.join(picks[:-1])} or {picks[-1]}"
    return f"did you mean {listed}?"
