# ruff: noqa: E501  (the recorded messages are long lines)
"""The front end against recorded answers: 3,281 + 15,470 sources, read or compiled.

``data/front_cases.jsonl.gz`` holds, per source, what the front end answered when it was
written in Python (the reader, expander and resolver of commit 7708aab), recorded before the
native front end replaced it: the data read (a digest of their repr, positions included, and
the symbol names), and the compiled program (a digest of the IR's repr, the parameter specs,
the header flag, the prelude bound and the inputs' first positions), or the error (class,
message, line, column), under the default limits, under small ones, and in the dmci dialect.
The sources are every example, golden, hostile-corpus program and prelude definition, a
hand-written case per form and per error, each of those mutated six ways (tokens deleted,
inserted or spliced from an alphabet of troublesome tokens) and 600 token soups.
``data/front_cases_extra.jsonl.gz`` holds the sources the native stages were checked on against
the Python ones while both existed, with the Python answers (see ``EXTRA``).
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
from ndvm.lang.ir import ParamSpec
from ndvm.lang.reader import read_with_symbols

CASES = [
    json.loads(line)
    for line in gzip.open(Path(__file__).parent / "data" / "front_cases.jsonl.gz", "rt")
]
# the sources the differential tests of the native stages ran against the Python ones (every
# reader, expander and resolver message, limits at their boundaries, Unicode whitespace,
# expansion order, generated surface forms), with the Python answers: ``read`` under the
# given limits, or ``compile`` with the given inputs and dialect
EXTRA = [
    json.loads(line)
    for line in gzip.open(Path(__file__).parent / "data" / "front_cases_extra.jsonl.gz", "rt")
]
SMALL = Limits(max_source_chars=400, max_forms=40)


def _sha(x: object) -> str:
    return hashlib.sha256(repr(x).encode("utf-8", "surrogatepass")).hexdigest()[:20]


def _err(e: NdvmError) -> list[Any]:
    return ["err", type(e).__name__, e.message, e.line, e.column]


def read_answer(src: str, lim: Limits, allow_empty: bool = False) -> list[Any]:
    try:
        data, syms = read_with_symbols(src, limits=lim, allow_empty=allow_empty)
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


@pytest.mark.parametrize("chunk", range(8))
def test_recorded_answers_of_the_stage_tests(chunk: int) -> None:
    bad = []
    for case in EXTRA[chunk::8]:
        src = case["source"]
        if "read" in case:
            chars, forms = case["limits"]
            lim = Limits(max_source_chars=chars, max_forms=forms)
            got, want = read_answer(src, lim, case["allow_empty"]), case["read"]
        else:
            got = compile_answer(src, tuple(case["inputs"]), Limits(), case["dialect"])
            want = case["compile"]
        if got != want:
            bad.append((src[:200], want, got))
    assert not bad, f"{len(bad)} differ; first: {bad[:3]}"


# the host's ``params`` argument and input names, with the answers the Python front end gave
PARAMS_CASES: list[tuple[str, tuple[Any, ...], Any, tuple[Any, ...]]] = [
    ("(+ a b x)", ("x",), ["a", "b"], ("ok", (("a", 0.0, "free", 0, 0), ("b", 0.0, "free", 0, 0)))),
    ("(+ a b x)", ("x",), ["b", "a"], ("ok", (("b", 0.0, "free", 0, 0), ("a", 0.0, "free", 0, 0)))),
    (
        "(+ a b x)",
        ("x",),
        ["a"],
        (
            "err",
            "CompileError",
            "unbound variable 'b' (not a parameter, input, primitive or local binding)",
            1,
            6,
        ),
    ),
    ("(params (a 1 positive)) (+ a x)", ("x",), ["a"], ("ok", (("a", 1.0, "positive", 1, 9),))),
    (
        "(params (a 1 positive)) (+ a x)",
        ("x",),
        ["b"],
        (
            "err",
            "CompileError",
            "unbound variable 'a' (not a parameter, input, primitive or local binding)",
            1,
            28,
        ),
    ),
    (
        "(params (a 1 positive) b) (+ a b x)",
        ("x",),
        ["b", "a"],
        ("ok", (("b", 0.0, "free", 1, 24), ("a", 1.0, "positive", 1, 9))),
    ),
    (
        "(+ a b x)",
        ("x",),
        {"a": 1.0, "b": (2.0, "positive")},
        ("ok", (("a", 1.0, "free", 0, 0), ("b", 2.0, "positive", 0, 0))),
    ),
    (
        "(+ a b x)",
        ("x",),
        {"a": 1.0, "b": (2.0, "postive")},
        (
            "err",
            "CompileError",
            "parameter 'b': unknown constraint 'postive' (did you mean 'positive'? one of free, positive, unit, signed-unit)",
            None,
            None,
        ),
    ),
    (
        "(+ a b x)",
        ("x",),
        {"a": 1.0, "b": (-2.0, "positive")},
        (
            "err",
            "CompileError",
            "params: initial value -2.0 of 'b' is outside its constraint positive (0.0, inf)",
            None,
            None,
        ),
    ),
    (
        "(+ a x)",
        ("x",),
        ["a", "a"],
        ("err", "CompileError", "parameter 'a' given twice", None, None),
    ),
    ("(+ a x)", ("x",), [("a", 0.5, "unit")], ("ok", (("a", 0.5, "unit", 0, 0),))),
    (
        "(+ a x)",
        ("x",),
        [("a", 2, "unit")],
        (
            "err",
            "CompileError",
            "params: initial value 2.0 of 'a' is outside its constraint unit (0.0, 1.0)",
            None,
            None,
        ),
    ),
    ("(+ a x)", ("x",), [("a",)], ("ok", (("a", 0.0, "free", 0, 0),))),
    (
        "(+ a x)",
        ("x",),
        [ParamSpec(name="a", init=0.25, constraint="signed-unit", line=3, column=4)],
        ("ok", (("a", 0.25, "signed-unit", 3, 4),)),
    ),
    (
        "(+ a x)",
        ("x",),
        "a",
        (
            "err",
            "CompileError",
            "params must be a sequence of names, not a single string",
            None,
            None,
        ),
    ),
    ("(+ a x)", ("x",), [3], ("err", "CompileError", "bad parameter spec 3", None, None)),
    (
        "(+ a x)",
        ("x",),
        ["x"],
        ("err", "CompileError", "'x' is declared both as a parameter and as an input", None, None),
    ),
    (
        "(+ a x)",
        ("x",),
        [],
        (
            "err",
            "CompileError",
            "unbound variable 'a' (not a parameter, input, primitive or local binding)",
            1,
            4,
        ),
    ),
    ("(+ a x", ("x",), [3], ("err", "ReadError", "unbalanced '(': missing ')'", 1, 1)),
    (
        "(params a) (+ a x)",
        ("x",),
        [3],
        ("err", "CompileError", "bad parameter spec 3", None, None),
    ),
    (
        "(params (a 1 bad)) (+ a x)",
        ("x",),
        [3],
        (
            "err",
            "CompileError",
            "params: constraint must be one of free, positive, unit, signed-unit",
            1,
            14,
        ),
    ),
    (
        "(params a) (+ a x)",
        ("a",),
        None,
        ("err", "CompileError", "'a' is declared both as a parameter and as an input", None, None),
    ),
    ("(+ a x)", ("x", "x"), None, ("ok", (("a", 0.0, "free", 0, 0),))),
    (
        "(+ a x)",
        ("x", ""),
        None,
        ("err", "CompileError", "input names must be non-empty strings, got ''", None, None),
    ),
    (
        "(+ a x)",
        ("x", 3),
        None,
        ("err", "CompileError", "input names must be non-empty strings, got 3", None, None),
    ),
]


@pytest.mark.parametrize(("source", "inputs", "params", "want"), PARAMS_CASES)
def test_params_argument(source: str, inputs: tuple[Any, ...], params: Any, want: Any) -> None:
    try:
        c = compile_source(source, params, inputs)
    except NdvmError as e:
        got: tuple[Any, ...] = ("err", type(e).__name__, e.message, e.line, e.column)
    else:
        got = ("ok", tuple((s.name, s.init, s.constraint, s.line, s.column) for s in c.params))
    assert got == want
