"""The LLM proposer against a stub OpenAI-compatible server on 127.0.0.1 (``conftest.py``):
recorded prompts, HTTP errors, timeouts, malformed replies, the failure stop, the request cap.

Tests taking ``transport`` run with the standard-library client and, when the ``llm`` extra
is installed, with the official ``openai`` client.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

import pytest
from tests.search.conftest import free_port

from ndvm.errors import ConfigError, NdvmError, ProposerFailed, RequestFailed
from ndvm.search import Budget, Candidate, Evaluation, Record, make_proposer, run_search
from ndvm.search.llm import LLMConfig, LLMProposer, add_llm_arguments, build_prompt, parse_reply
from ndvm.search.llm_http import UrllibTransport, retry_delay
from ndvm.search.state import SearchState
from ndvm.search.store import Store
from ndvm.tasks import get

GOOD = "```scheme\n(* a (cos (* b x)))\n```"
LAWS = {"sr-damped": ("exp(-0.3", "cos(2", "0.3 x"), "iterated-map": ("sin(1.2", "0.3 x")}


@pytest.fixture(params=["urllib", pytest.param("openai", marks=pytest.mark.llm)])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def config(url: str, transport: str = "urllib", **kw: object) -> LLMConfig:
    kw.setdefault("max_retries", 0)
    kw.setdefault("ahead", 0)  # one request at a time: replies map to batches in order
    return LLMConfig(base_url=url, model="stub", transport=transport, **kw)  # type: ignore[arg-type]


def search(tmp_path, prop: LLMProposer, batches: int | None = None, task: str = "sr-damped"):
    budget = Budget(batches=batches) if batches else Budget(seconds=120)
    return run_search(task, prop, tmp_path / "l.db", budget=budget, batch_size=2)


def test_parse_reply():
    text = "Here:\n```scheme\n(* a (sin x))\n```\nand\n```\n(+ a (* b x)\n```\n"
    items = parse_reply(text)
    assert isinstance(items[0], Candidate) and items[0].src == "(* a (sin x))"
    assert isinstance(items[1], str) and "does not read" in items[1]
    assert parse_reply("no code here") == ["no fenced code block in the reply"]
    assert parse_reply("```\n\n```") == ["only empty code blocks in the reply"]


def test_llm_against_stub(stub_llm, tmp_path, transport):
    stub_llm.replies = [
        "```scheme\n(* a (exp (* b x)) (cos (+ (* c x) d)))\n```\n```scheme\n(* a x)\n```",
        "I cannot help with that.",  # no code block
        "```scheme\n(+ a (* b x)\n```",  # unbalanced
        ("status", 500),
        ("raw", b"{not json"),
        ("sleep", 10.0),  # timeout (the others answer at once: 3 s is room for a loaded machine)
        GOOD,
    ]
    cfg = config(stub_llm.url, transport, api_key="k", timeout=3, temperature=0.3)
    prop = LLMProposer(get("sr-damped"), cfg)
    assert prop.transport.name == transport
    st = search(tmp_path, prop, batches=7)
    reasons = [r.evaluation.reason for r in st.records if r.evaluation]
    assert sum(r.status == "ok" for r in st.records) >= 3
    for expected in ("no fenced code block", "does not read", "HTTP 500", "not JSON", "timeout"):
        assert any(expected in x for x in reasons), (expected, reasons)
    assert len(stub_llm.requests) == 7
    path, body, headers = stub_llm.requests[-1]
    assert path == "/v1/chat/completions" and body["model"] == "stub"
    assert body["temperature"] == 0.3
    assert {k.lower(): v for k, v in headers.items()}.get("authorization") == "Bearer k"
    prompt = body["messages"][1]["content"]
    assert prompt.startswith("Task: " + get("sr-damped").search.prompt)
    assert "Best programs so far" in prompt and "Recent failures" in prompt
    assert "(* a x)" in prompt and "does not read" in prompt
    assert "Binary operators" in body["messages"][0]["content"]
    for _, body, _ in stub_llm.requests:  # the generating law never reaches the model
        text = " ".join(m["content"] for m in body["messages"])
        assert not any(law in text for law in LAWS["sr-damped"]), text


@pytest.mark.parametrize("name", sorted(LAWS))
def test_prompt_carries_the_description_not_the_law(name):
    task = get(name)
    messages = build_prompt(task, SearchState.of(name, 0, []), 4)
    text = " ".join(m["content"] for m in messages)
    assert f"Task: {task.search.prompt}" in text and "Propose 4 new programs" in text
    assert not any(law in text for law in LAWS[name]), text


@dataclass(frozen=True)
class _Ev(Evaluation):  # an evaluation with a validation split (as the driver records it)
    validation_mse: float = math.nan
    validation_r2: float = math.nan


def _ok(idx: int, src: str, train: float, heldout_r2: float, val: float, val_r2: float) -> Record:
    ev = _Ev("ok", train_loss=train, heldout_r2=heldout_r2, heldout_mse=0.71 + idx,
             validation_mse=val, validation_r2=val_r2)  # fmt: skip
    return Record(idx, 0, Candidate(src, origin="llm"), src, 1, 3 + idx, 0, ev)


def _prompt(records: list[Record]) -> str:
    return build_prompt(get("sr-damped"), SearchState.of("sr-damped", 0, records), 2)[1]["content"]


def test_prompt_ranks_by_validation_and_never_shows_heldout():
    dup = Evaluation("rejected", reason="duplicate: skeleton already evaluated")
    text = _prompt([
        _ok(0, "(* a x)", 0.01, 0.111111, 0.5, 0.41),
        _ok(1, "(* a (sin x))", 0.2, 0.222222, 0.02, 0.97),
        Record(2, 0, Candidate("(+ a x)", origin="llm"), "(+ a x)", 1, 3, 0, dup),
    ])  # fmt: skip
    assert text.index("(* a (sin x))") < text.index("(* a x)")  # validation, not train loss
    assert "validation R²=0.9700, validation MSE=0.02" in text
    assert not any(h in text for h in ("0.1111", "0.2222", "0.71", "0.72"))  # held-out
    assert "(+ a x)    ; duplicate: skeleton already evaluated" in text


def test_prompt_falls_back_to_train_loss():
    nan = math.nan
    text = _prompt([_ok(0, "(* a x)", 0.5, 0.333333, nan, nan),
                    _ok(1, "(* a (sin x))", 0.25, 0.1, nan, nan)])  # fmt: skip
    assert text.index("(* a (sin x))") < text.index("(* a x)")
    assert "train MSE=0.25" in text and "0.3333" not in text and "R²" not in text


def test_malformed_replies_are_rejected_with_reasons(stub_llm, tmp_path, transport):
    stub_llm.replies = [
        GOOD,
        ("raw", b"{not json"),
        ("raw", b'{"x": 1}'),
        ("raw", b'{"choices": []}'),
        ("raw", b"[1, 2]"),
        ("raw", b'{"choices": [{"message": {"content": null}}]}'),
        "```scheme\n(* a x)\n```",
    ]
    cfg = config(stub_llm.url, transport, max_consecutive_failures=6)
    st = search(tmp_path, LLMProposer(get("sr-damped"), cfg), batches=7)
    assert st.records[0].status == "ok" and st.records[6].status == "ok"
    reasons = [r.evaluation.reason for r in st.records[1:6]]
    assert all(x.startswith("proposal: request failed: malformed reply") for x in reasons)
    assert "not JSON" in reasons[0] and "no choices" in reasons[1] and "no choices" in reasons[2]
    assert "not an object" in reasons[3] and "without text content" in reasons[4]


def test_consecutive_failures_stop_with_the_reason(stub_llm, tmp_path, transport):
    stub_llm.replies = [GOOD, ("status", 500), GOOD, ("status", 503), ("status", 500),
                        ("status", 502), GOOD]  # fmt: skip
    cfg = config(stub_llm.url, transport, max_consecutive_failures=3)
    prop = LLMProposer(get("sr-damped"), cfg)
    with pytest.raises(ProposerFailed, match="3 failed requests in a row.*HTTP 502") as info:
        search(tmp_path, prop)
    assert isinstance(info.value, NdvmError) and prop.requests == len(stub_llm.requests) == 6
    store = Store(tmp_path / "l.db")  # what came before the stop is stored
    recs = store.records(store.latest_run()["run"])
    store.close()
    assert [r.status for r in recs] == ["ok", "rejected", "rejected", "rejected", "rejected"]
    assert recs[1].evaluation.reason == "proposal: request failed: HTTP 500: error"
    assert recs[2].evaluation.reason.startswith("duplicate:")  # GOOD again


def test_a_failed_first_request_stops_at_once(stub_llm, tmp_path, transport):
    stub_llm.replies = [("status", 404), GOOD]
    prop = LLMProposer(get("sr-damped"), config(stub_llm.url, transport))
    with pytest.raises(ProposerFailed, match="model 'stub'.* failed the first request: HTTP 404"):
        search(tmp_path, prop)
    assert len(stub_llm.requests) == 1


def test_dead_endpoint_stops_at_once_with_the_reason(tmp_path, transport):
    dead = f"http://127.0.0.1:{free_port()}/v1"
    prop = LLMProposer(get("sr-damped"), config(dead, transport, max_retries=1))
    with pytest.raises(ProposerFailed, match="failed the first request.*Connection refused"):
        search(tmp_path, prop)
    assert prop.requests == 1


def test_request_cap_ends_the_search(stub_llm, tmp_path, transport):
    stub_llm.replies = [GOOD, "```scheme\n(* a x)\n```", GOOD]
    prop = LLMProposer(get("sr-damped"), config(stub_llm.url, transport, max_requests=2))
    st = search(tmp_path, prop, batches=10)
    assert len(stub_llm.requests) == 2 and len(st.records) == 2
    assert prop.stop_reason == "llm request cap reached (2 requests)"


def test_urllib_retries_transient_errors_with_backoff(stub_llm):
    waits: list[float] = []
    stub_llm.replies = [("status", 500), ("status", 429), GOOD, ("status", 401),
                        ("status", 503, {"Retry-After": "0.25"}), GOOD,
                        ("status", 429, {"Retry-After": "600"}), GOOD]  # fmt: skip
    tr = UrllibTransport(config(stub_llm.url, max_retries=2), sleep=waits.append)
    reply = tr.complete({"model": "stub", "messages": []})
    assert reply["choices"][0]["message"]["content"] == GOOD and waits == [0.5, 1.0]
    with pytest.raises(RequestFailed, match="HTTP 401"):  # not retried
        tr.complete({"model": "stub", "messages": []})
    assert len(stub_llm.requests) == 4
    tr.complete({"model": "stub", "messages": []})
    assert waits == [0.5, 1.0, 0.25]  # the server's Retry-After
    with pytest.raises(RequestFailed, match="HTTP 429"):  # asks for too long: not retried
        tr.complete({"model": "stub", "messages": []})
    assert len(stub_llm.requests) == 7 and waits == [0.5, 1.0, 0.25]
    assert [retry_delay(k) for k in range(6)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert retry_delay(0, "3") == 3.0 and retry_delay(1, "soon") == retry_delay(1, "0") == 1.0
    assert retry_delay(0, "600") is None  # the server asks for too long: not retried


@pytest.mark.llm
def test_openai_client_retries(stub_llm, tmp_path):
    stub_llm.replies = [("status", 500), GOOD]
    prop = LLMProposer(get("sr-damped"), config(stub_llm.url, "openai", max_retries=1))
    st = search(tmp_path, prop, batches=1)
    assert len(stub_llm.requests) == 2 and prop.requests == 1 and st.records[0].status == "ok"


def test_config_from_arguments_and_environment(monkeypatch):
    parser = argparse.ArgumentParser()
    add_llm_arguments(parser)
    env = {"OPENAI_BASE_URL": "http://h:1/v1/", "OPENAI_MODEL": "m0", "OPENAI_API_KEY": "k0",
           "NDVM_LLM_TIMEOUT": "7"}  # fmt: skip
    cfg = LLMConfig.from_args(parser.parse_args([]), env=env)
    assert (cfg.base_url, cfg.model, cfg.api_key) == ("http://h:1/v1", "m0", "k0")
    assert cfg.api_key_env == "OPENAI_API_KEY" and cfg.timeout == 7.0 and cfg.temperature == 0.8
    assert cfg.max_requests is None and cfg.max_consecutive_failures == 5
    assert "k0" not in repr(cfg)
    argv = ["--llm-base-url", "http://x/v1", "--llm-model", "m1", "--llm-api-key-env", "MY_KEY",
            "--llm-temperature", "0.2", "--llm-max-requests", "9", "--llm-max-failures", "2",
            "--llm-timeout", "3", "--llm-retries", "0"]  # fmt: skip
    env = {**env, "NDVM_LLM_MODEL": "m2", "MY_KEY": "k1"}
    cfg = LLMConfig.from_args(parser.parse_args(argv), env=env)
    assert (cfg.base_url, cfg.model, cfg.api_key, cfg.temperature) == (
        "http://x/v1",
        "m1",
        "k1",
        0.2,
    )
    assert (cfg.max_requests, cfg.max_consecutive_failures) == (9, 2)
    assert (cfg.timeout, cfg.max_retries) == (3.0, 0)
    monkeypatch.setenv("NDVM_LLM_BASE_URL", "http://env/v1")
    monkeypatch.setenv("NDVM_LLM_MODEL", "envmodel")
    prop = make_proposer("llm", "sr-damped", llm=config("http://y/v1"))
    assert isinstance(prop, LLMProposer) and prop.config.base_url == "http://y/v1"
    assert make_proposer("llm", "sr-damped").config.model == "envmodel"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("kw", "env", "match"),
    [
        ({}, {"NDVM_LLM_MODEL": "m"}, "--llm-base-url"),
        ({"base_url": "http://h/v1"}, {}, "--llm-model"),  # never `model: ""`
        ({"base_url": "http://h/v1", "model": "  "}, {}, "--llm-model"),
        ({"base_url": "h:1/v1", "model": "m"}, {}, "not http"),
        ({"base_url": "http://h/v1", "model": "m", "api_key_env": "NOPE"}, {}, "NOPE"),
        ({"base_url": "http://h/v1", "model": "m", "temperature": -1.0}, {}, "temperature"),
        ({"base_url": "http://h/v1", "model": "m", "max_requests": 0}, {}, "max-requests"),
        ({"base_url": "http://h/v1", "model": "m", "max_failures": 0}, {}, "max-failures"),
        ({"base_url": "http://h/v1", "model": "m"}, {"NDVM_LLM_TIMEOUT": "x"}, "TIMEOUT"),
    ],
)
def test_bad_configuration_is_a_config_error(kw, env, match):
    with pytest.raises(ConfigError, match=match) as info:
        LLMConfig.resolve(env=env, **kw)
    assert isinstance(info.value, ValueError)  # the CLI's usage-error path


def test_cli_dead_endpoint_stops_with_the_reason(tmp_path):
    """A dead endpoint: one failed request, exit 1, the reason printed (no 3,870 requests)."""
    import subprocess
    import sys

    from tests.search.conftest import free_port

    url = f"http://127.0.0.1:{free_port()}/v1"
    cmd = [sys.executable, "-m", "ndvm", "search", "--task", "sr-damped", "--proposer", "llm",
           "--llm-base-url", url, "--llm-model", "m", "--llm-retries", "0", "--budget", "5",
           "--db", str(tmp_path / "d.db"), "--quiet"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "Connection refused" in proc.stderr and "Traceback" not in proc.stderr
