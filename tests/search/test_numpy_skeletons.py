"""NumPy skeletons as search candidates: ``.py`` / JSONL corpora for the replay proposer and
``--llm-language numpy`` against the stub server; the skeleton's text is recorded beside the
program in the store."""

from __future__ import annotations

import argparse
import json

import pytest

from ndvm.errors import ConfigError
from ndvm.search import Budget, Candidate, Evaluation, Record, make_proposer, run_search
from ndvm.search.llm import LLMConfig, LLMProposer, add_llm_arguments
from ndvm.search.skeletons import candidate_from_numpy, numpy_prompt, split_corpus
from ndvm.search.state import SearchState
from ndvm.search.store import Store
from ndvm.tasks import get

CORPUS = '''"""Skeletons for sr-damped."""
import numpy as np


def envelope(x, params):
    return params[0] * np.exp(-params[1] * x)


def equation(x, params):
    return envelope(x, params) * np.cos(params[2] * x)


def equation(x: np.ndarray, params: np.ndarray) -> np.ndarray:
    a = params[0] * x
    return a + params[1]

def equation(x, params):
    return np.sum(x) * params[0]

def equation(z, params):
    return params[0] * z
'''


def test_split_corpus_keeps_helpers_with_the_equation_after_them() -> None:
    chunks = split_corpus(CORPUS)
    assert [line for line, _ in chunks] == [1, 13, 17, 20]
    assert "def envelope" in chunks[0][1] and "np.cos(params[2] * x)" in chunks[0][1]
    assert chunks[1][1].startswith("def equation(x: np.ndarray")
    assert split_corpus("def f(x, params):\n    return x\ndef g(x, params):\n    return 1\n") \
        == [(1, "def f(x, params):\n    return x\n"), (3, "def g(x, params):\n    return 1\n")]


def test_candidates_translate_or_carry_the_reason() -> None:
    good = candidate_from_numpy("import numpy as np\ndef equation(x, params):\n"
                                "    return params[0] * x\n", "t", ("x",))
    assert good.src == "(* p0 x)" and not good.error and good.text.startswith("import numpy")
    bad = candidate_from_numpy("def equation(z, params):\n    return z\n", "t", ("x",))
    assert "'z' is not an input" in bad.error
    hostile = candidate_from_numpy("def equation(x, params):\n    return __import__('os')\n",
                                   "t", ("x",))
    assert "dunder" in hostile.error


def _stored(db) -> list:
    store = Store(db)
    return store.records(store.latest_run()["run"])


def test_replay_of_a_py_corpus_records_the_text(tmp_path) -> None:
    path = tmp_path / "skeletons.py"
    path.write_text(CORPUS)
    prop = make_proposer(f"replay:{path}", "sr-damped")
    state = run_search("sr-damped", prop, tmp_path / "s.db", budget=Budget(batches=1),
                       batch_size=4)
    recs = state.records
    assert len(recs) == 4
    assert recs[0].status == "ok" and "np.cos(params[2] * x)" in recs[0].candidate.text
    assert recs[0].evaluation.train_loss < 0.01  # the damped cosine fits sr-damped's data
    assert recs[1].status == "ok"
    assert recs[2].status == "rejected" and "reduces over the data" in recs[2].evaluation.reason
    assert recs[3].status == "rejected" and "not an input" in recs[3].evaluation.reason
    stored = {r.idx: r for r in _stored(tmp_path / "s.db")}
    assert stored[0].candidate.text == recs[0].candidate.text
    assert stored[0].candidate.src == recs[0].candidate.src


def test_replay_of_jsonl_numpy_lines(tmp_path) -> None:
    path = tmp_path / "c.jsonl"
    lines = [{"numpy": "def equation(x, params):\n    return params[0] * np.sin(params[1] * x)\n"},
             {"src": "(* a x)"}, {"numpy": 3}]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    prop = make_proposer(f"replay:{path}", "sr-damped")
    assert prop.items[0].src == "(* p0 (sin (* p1 x)))" and prop.items[0].text
    assert prop.items[1].src == "(* a x)" and not prop.items[1].text
    assert "must be a string" in prop.items[2].error or "'numpy'" in prop.items[2].error


REPLY = """Here are two:
```python
import numpy as np
def equation(x, params):
    decay = np.exp(-params[1] * x)
    return params[0] * decay * np.cos(params[2] * x + params[3])
```
```python
def equation(x, params):
    return params[0] * x + np.sum(x)
```
"""


def test_llm_numpy_language_against_stub(stub_llm, tmp_path) -> None:
    stub_llm.replies = [REPLY, "```python\ndef equation(x, params):\n    return params[0]\n```"]
    cfg = LLMConfig(base_url=stub_llm.url, model="stub", transport="urllib", language="numpy",
                    ahead=0)  # replies in order: the second prompt sees the first batch
    prop = LLMProposer(get("sr-damped"), cfg)
    state = run_search("sr-damped", prop, tmp_path / "l.db", budget=Budget(batches=2),
                       batch_size=2)
    first = state.records[0]
    assert first.status == "ok" and first.candidate.text.startswith("import numpy as np")
    assert "reduces over the data" in state.records[1].evaluation.reason
    system = stub_llm.requests[0][1]["messages"][0]["content"]
    user = stub_llm.requests[0][1]["messages"][1]["content"]
    assert "def equation(x, params):" in system and "```python" in system
    assert user.startswith("Problem: " + get("sr-damped").search.prompt)
    assert "A starting point:" in user
    second = stub_llm.requests[1][1]["messages"][1]["content"]
    assert "np.sum(x)" in second and "reduces over the data" in second  # a failure, its reason
    stored = _stored(tmp_path / "l.db")
    assert stored[0].candidate.text == first.candidate.text


def _ok(idx: int, text: str, train: float, heldout: float) -> Record:
    ev = Evaluation("ok", train_loss=train, heldout_mse=heldout)
    return Record(idx, 0, Candidate("(* p0 x)", origin="llm", text=text), "(* P x)", 1, 3, 0, ev)


def test_numpy_prompt_shows_the_best_skeletons_with_scores_best_last() -> None:
    task = get("sr-damped")
    empty = numpy_prompt(task, SearchState.of("sr-damped", 0, []), 3)[1]["content"]
    assert "Propose 3 new equation functions" in empty
    assert "A starting point:\ndef equation(x, params):\n    return params[0] * x + params[1]" \
        in empty
    records = [_ok(0, "def equation(x, params):\n    return params[0] * x\n", 0.5, 123.0),
               _ok(1, "def equation(x, params):\n    return params[0] * np.cos(x)\n", 0.02, 7.0),
               _ok(2, "", 0.001, 1.0)]  # a Scheme candidate: not shown in a NumPy prompt
    text = numpy_prompt(task, SearchState.of("sr-damped", 0, records), 2)[1]["content"]
    assert "Best skeletons so far" in text and "A starting point" not in text
    first, second = text.index("# train MSE = 0.5"), text.index("# train MSE = 0.02")
    assert first < text.index("params[0] * x\n") < second < text.index("np.cos(x)")
    assert "123" not in text and "7.0" not in text  # held-out scores are never shown


def test_llm_language_option() -> None:
    parser = argparse.ArgumentParser()
    add_llm_arguments(parser)
    args = parser.parse_args(["--llm-base-url", "http://127.0.0.1:9/v1", "--llm-model", "m",
                              "--llm-language", "numpy"])
    assert LLMConfig.from_args(args, env={}).language == "numpy"
    args = parser.parse_args(["--llm-base-url", "http://127.0.0.1:9/v1", "--llm-model", "m"])
    assert LLMConfig.from_args(args, env={}).language == "scheme"
    with pytest.raises(ConfigError, match="--llm-language"):
        LLMConfig(base_url="http://127.0.0.1:9/v1", model="m", language="python")


def test_a_reply_with_many_blocks_translates_only_what_was_asked() -> None:
    from ndvm.search.skeletons import parse_numpy_reply

    block = "def equation(x, params):\n    return params[0] * x\n"
    out = parse_numpy_reply("...", [block] * 100_000, ("x",), 3)
    assert len(out) == 3 and all(c.src == "(* p0 x)" for c in out)
    assert "no fenced code block" in parse_numpy_reply("hi", ["  "], ("x",), 3)[0].error
