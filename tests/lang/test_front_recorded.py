"""The front end against recorded answers: 3,281 sources, each read and compiled.

``data/front_cases.jsonl.gz`` holds, per source, what the front end answered when it was
written in Python (the reader, expander and resolver of commit 7708aab), recorded before the
native front end replaced it: the data read (a digest of their repr, positions included, and
the symbol names), and the compiled program (a digest of the IR's repr, the parameter specs,
the header flag, the prelude bound and the inputs' first positions), or the error (class,
message, line, column), under the default limits, under small ones, and in the dmci dialect.
The sources are every example, golden, hostile-corpus program and prelude definition, a
hand-written case per form and per error, each of those mutated six ways (tokens deleted,
inserted or spliced from an alphabet of troublesome tokens) and 600 token soups.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from ndvm.errors import NdvmError
from ndvm.eval.limits import Limits
from ndvm.lang.front import compile_source
from ndvm.lang.reader import read_with_symbols

CASES = [
    json.loads(line)
    for line in gzip.open(Path(__file__).parent / "data" / "front_cases.jsonl.gz", "rt")
]
SMALL = Limits(max_source_chars=400, max_forms=40)


def _sha(x: object) -> str:
    return hashlib.sha256(repr(x).encode("utf-8", "surrogatepass")).hexdigest()[:20]


def _err(e: NdvmError) -> list[Any]:
    return ["err", type(e).__name__, e.message, e.line, e.column]


def read_answer(src: str, lim: Limits) -> list[Any]:
    try:
        data, syms = read_with_symbols(src, limits=lim)
    except NdvmError as e:
        return _err(e)
    return ["ok", _sha(data), sorted(syms)]


def compile_answer(
    src: str, inputs: tuple[str, ...], lim: Limits, dialect: str | None
) -> list[Any]:
    try:
        c = compile_source(src, None, inputs, lim, dialect)
    except NdvmError as e:
        return _err(e)
    specs = [[s.name, repr(s.init), s.constraint, s.line, s.column] for s in c.params]
    return ["ok", _sha(c.body), specs, c.has_header, list(c.prelude),
            [list(p) for p in c.input_positions]]  # fmt: skip


def test_corpus_covers_success_and_every_stage() -> None:
    kinds = {c["compile"][1] if c["compile"][0] == "err" else "ok" for c in CASES}
    assert {"ok", "ReadError", "CompileError", "UnsupportedForm"} <= kinds
    assert sum(c["compile"][0] == "ok" for c in CASES) >= 500


@pytest.mark.parametrize("chunk", range(8))
def test_recorded_answers(chunk: int) -> None:
    bad = []
    for case in CASES[chunk::8]:
        src, inputs = case["source"], tuple(case["inputs"])
        got = {
            "read": read_answer(src, Limits()),
            "compile": compile_answer(src, inputs, Limits(), None),
        }
        if "dmci" in case:
            got["dmci"] = compile_answer(src, inputs, Limits(), "dmci")
        if "small" in case:
            got["small"] = [read_answer(src, SMALL), compile_answer(src, (), SMALL, None)]
        for key, value in got.items():
            if value != case[key]:
                bad.append((src[:200], key, case[key], value))
    assert not bad, f"{len(bad)} differ; first: {bad[:3]}"
