"""NumPy skeletons as search candidates: the LLM proposer's ``--llm-language numpy`` and the
replay proposer's skeleton corpora (docs/search.md, "NumPy skeletons").

A skeleton (``def equation(x, v, params): ...``, LLM-SR's form) becomes a ``Candidate`` whose
``src`` is its ndvm translation (``ndvm.lang.numpy_reader``; ``params[i]`` is the free name
``p{i}``, a parameter by the candidate contract) and whose ``text`` is the skeleton as written,
recorded beside the program in the search database. A skeleton that does not translate, or
whose arguments are not the task's inputs, is a rejected candidate carrying the reason.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path

from ndvm.errors import NdvmError
from ndvm.search.candidate import Candidate, Record
from ndvm.search.state import SearchState
from ndvm.tasks.base import Task

# lines an LLM adds that the reader refuses (imports) but that change nothing: dropped
_HARMLESS = frozenset({"import numpy as np", "import numpy", "import math"})
_TOP_DEF = re.compile(r"^def\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(")
MAX_CORPUS_BYTES = 64 << 20
MAX_NPARAMS = 10  # what the prompt allows (LLM-SR's MAX_NPARAMS)


def candidate_from_numpy(text: str, origin: str, inputs: Sequence[str] | None) -> Candidate:
    """The candidate of one skeleton (rejected, with the reason, when it does not translate or
    reads an argument that is not one of the task's ``inputs``)."""
    from ndvm.lang.numpy_reader import translate

    source = "\n".join(ln for ln in text.splitlines() if ln.strip() not in _HARMLESS)
    try:
        skel = translate(source)
        extra = [n for n in skel.inputs if inputs is not None and n not in inputs]
        if extra:
            raise NdvmError(f"argument {extra[0]!r} is not an input of the task {tuple(inputs)}")
    except NdvmError as exc:
        return Candidate(text[:300], origin=origin, error=f"skeleton: {exc}"[:300], text=text)
    return Candidate(skel.scheme, origin=origin, text=text)


def split_corpus(text: str) -> list[tuple[int, str]]:
    """A ``.py`` corpus -> ``(first line, skeleton text)``: each top-level ``def equation``
    closes a skeleton (with every line since the previous one: its helpers); a corpus without
    ``equation`` has one skeleton per top-level ``def``."""
    lines = text.splitlines()
    closing = "equation" if any(_name(ln) == "equation" for ln in lines) else None
    out: list[tuple[int, str]] = []
    start, inside = 0, False  # inside: in the body of a closing def
    for i, line in enumerate(lines):
        top = bool(line.strip()) and not line[0].isspace() and not line.startswith("#")
        if top and inside:
            out.append((start + 1, "\n".join(lines[start:i]).strip("\n") + "\n"))
            start, inside = i, False
        name = _name(line)
        if name is not None and (closing is None or name == closing):
            inside = True
    if inside:
        out.append((start + 1, "\n".join(lines[start:]).strip("\n") + "\n"))
    return out


def _name(line: str) -> str | None:
    m = _TOP_DEF.match(line)
    return m.group(1) if m else None


def read_corpus(path: Path, inputs: Sequence[str] | None = None) -> list[Candidate]:
    """The candidates of a ``.py`` skeleton corpus, in file order."""
    if path.stat().st_size > MAX_CORPUS_BYTES:
        raise NdvmError(f"skeleton corpus {path} is larger than {MAX_CORPUS_BYTES >> 20} MB")
    text = path.read_text(encoding="utf-8", errors="replace")
    return [candidate_from_numpy(chunk, f"{path.name}:{line}", inputs)
            for line, chunk in split_corpus(text)]


def parse_numpy_reply(
    text: str, blocks: list[str], inputs: Sequence[str], limit: int
) -> list[Candidate]:
    """One candidate per fenced block of a reply (``blocks``; the first ``limit`` that are
    not empty are translated); no block: one rejected candidate."""
    found = [b for b in blocks if b.strip()][: max(limit, 1)]
    if not found:
        return [Candidate(text[:300], origin="llm", error="no fenced code block in the reply",
                          text=text[:2000])]
    return [candidate_from_numpy(b, "llm", inputs) for b in found]


def _example(inputs: Sequence[str]) -> str:
    terms = " + ".join(f"params[{i}] * {name}" for i, name in enumerate(inputs))
    return (f"def equation({', '.join(inputs)}, params):\n"
            f"    return {terms} + params[{len(inputs)}]\n")


def _score(r: Record) -> tuple[float, str]:
    ev = r.evaluation
    val = getattr(ev, "validation_mse", math.nan)
    if isinstance(val, float) and math.isfinite(val):
        return val, f"validation MSE = {val:.6g}"
    train = getattr(ev, "train_loss", math.nan)
    return train, f"train MSE = {train:.6g}"


def numpy_prompt(task: Task, state: SearchState, n: int) -> list[dict[str, str]]:
    """An LLM-SR-style prompt: the problem's description and variables, the best skeletons so
    far with their scores (validation MSE, else train; never held-out) and recent failures."""
    inputs = task.inputs
    spec = task.search
    about = (spec.prompt if spec is not None and spec.prompt else task.description) or (
        f"find a model of the target from {', '.join(inputs)}")
    system = (
        "You are a helpful assistant tasked with discovering mathematical function structures "
        "for scientific systems. Write each candidate as a complete Python function "
        f"`def equation({', '.join(inputs)}, params):` over NumPy arrays, in its own ```python "
        "fenced block, nothing else. Use only arithmetic, ** and np. functions (exp, log, sqrt, "
        "sin, cos, tan, tanh, arctan, abs, power, clip, maximum, minimum, where, sign, pi, e); "
        f"constants to fit are params[0] ... params[{MAX_NPARAMS - 1}] (fitted to the data "
        "after you answer, from ones). Locals, helper functions and for loops over "
        "range(<integer>) are fine; no imports, no reductions (np.sum, np.mean), no while."
    )
    lines = [f"Problem: {about}", f"Inputs (arrays, one value per data point): "
             f"{', '.join(inputs)}. Output: the target.", ""]
    best = sorted((r for r in state.ok if r.candidate.text), key=lambda r: _score(r)[0])[:5]
    if best:
        lines.append("Best skeletons so far, scored after fitting params (lower MSE is better):")
        for r in reversed(best):  # the best last, next to the request, as LLM-SR orders them
            lines += [f"# {_score(r)[1]}", r.candidate.text.strip(), ""]
    else:
        lines += ["A starting point:", _example(inputs)]
    fails = [r for r in state.failures(8) if r.candidate.text][-3:]
    if fails:
        lines.append("Recent skeletons that failed (do not repeat them):")
        for r in fails:
            reason = r.evaluation.reason if r.evaluation else ""
            lines += [r.candidate.text.strip()[:400], f"# failed: {reason[:160]}", ""]
    lines.append(f"Propose {n} new equation functions, structurally different from those above.")
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]
