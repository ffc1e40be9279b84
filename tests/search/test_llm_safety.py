"""The LLM client against a hostile endpoint (``hostile.py``) on 127.0.0.1: the key never
leaves the configured origin, replies are capped while read, a request ends at its wall-clock
deadline, every malformed or truncated reply is a RequestFailed with a one-line reason (the
transient ones retried), and no traceback escapes ``ndvm search``.

Tests taking ``transport`` run with the standard-library client and, when the ``llm`` extra
is installed, with the official ``openai`` client.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest
from tests.search.hostile import Hostile

from ndvm.errors import RequestFailed
from ndvm.search.llm import LLMConfig
from ndvm.search.llm_http import make_transport

BODY = {"model": "stub", "messages": [{"role": "user", "content": "hi"}]}
KEY = "sk-secret-123"


@pytest.fixture(params=["urllib", pytest.param("openai", marks=pytest.mark.llm)])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def hostile():
    s = Hostile()
    yield s
    s.close()


def client(url: str, transport: str, **kw: object):
    kw.setdefault("max_retries", 0)
    cfg = LLMConfig(base_url=url, model="stub", transport=transport, api_key=KEY, **kw)
    return make_transport(cfg)


def fails(tr, match: str, end: float | None = None) -> str:
    with pytest.raises(RequestFailed, match=match) as info:
        tr.complete(BODY, end)
    msg = str(info.value)
    assert "\n" not in msg and len(msg) < 400, msg
    return msg


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_no_redirect_is_followed_and_the_key_stays_home(hostile, transport, code):
    other = Hostile()  # a second origin that records what reaches it
    try:
        hostile.plan = [("redirect", code, f"{other.url}/chat/completions")]
        msg = fails(client(hostile.url, transport), f"HTTP {code}: redirect to")
        assert other.url in msg and "not followed" in msg
        assert other.requests == []  # nothing at all reached the second origin
        assert hostile.requests[0][1].get("authorization") == f"Bearer {KEY}"
    finally:
        other.close()


@pytest.mark.parametrize("where", ["file:///etc/passwd", "http://127.0.0.1:99999/x", ""])
def test_redirects_to_odd_places_are_one_line_failures(hostile, transport, where):
    hostile.plan = [("redirect", 302, where)]
    fails(client(hostile.url, transport), "HTTP 302: redirect to .* not followed")


def test_invalid_urls_are_request_failures():
    for url in ("http://127.0.0.1:99999/v1", "file:///etc/passwd", "http://[::1/v1"):
        cfg = SimpleNamespace(transport="urllib", base_url=url, api_key=None, timeout=2.0,
                              max_retries=0, max_reply_bytes=2**20)  # fmt: skip
        fails(make_transport(cfg), "invalid URL")


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _peak_rss_during(fn) -> float:
    """The growth of this process's resident set while ``fn`` runs (sampled every 5 ms)."""
    base, peak, done = _rss_mb(), [0.0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _rss_mb())
            time.sleep(0.005)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        fn()
    finally:
        done.set()
        t.join()
    return max(peak[0], _rss_mb()) - base


@pytest.mark.parametrize(
    "step", [("huge", 400 * 2**20), ("huge", 400 * 2**20, False), ("endless",)]
)
def test_a_huge_reply_ends_at_the_cap_with_bounded_memory(hostile, transport, step):
    """400 MB announced (refused before reading), 400 MB unannounced (read until the cap),
    an endless chunked reply (read until the cap)."""
    hostile.plan = [step]
    tr = client(hostile.url, transport, timeout=30)
    t0 = time.monotonic()
    grew = _peak_rss_during(lambda: fails(tr, "reply larger than the 16 MB cap"))
    assert grew < 100, f"RSS grew {grew:.0f} MB on a 400 MB reply"
    assert time.monotonic() - t0 < 10


def test_the_cap_is_configurable(hostile, transport):
    hostile.plan = [("body", b'{"choices": []}' + b" " * 5000)]
    fails(client(hostile.url, transport, max_reply_bytes=4096), "larger than the 4096 bytes cap")
    hostile.plan = [("ok", "```scheme\n(* a x)\n```")]
    assert client(hostile.url, transport, max_reply_bytes=4096).complete(BODY)["choices"]


@pytest.mark.parametrize("phase", ["body", "headers"])
def test_a_drip_ends_at_the_request_deadline(hostile, transport, phase):
    hostile.plan = [("drip", 0.3, phase)]
    tr = client(hostile.url, transport, timeout=1.5, max_retries=3)
    t0 = time.monotonic()
    fails(tr, "timeout after 1.5s")
    # the drip never ends by itself (a byte each 0.3 s): any bound well below that shows the
    # deadline ended it, with room for a loaded machine
    assert 1.4 < time.monotonic() - t0 < 1.5 + 5.0
    assert len(hostile.requests) == 1  # the deadline is not retried


def test_the_search_budget_ends_a_request_first(hostile, transport):
    hostile.plan = [("drip", 0.3, "body")]
    tr = client(hostile.url, transport, timeout=60)
    t0 = time.monotonic()
    fails(tr, "deadline reached", end=t0 + 1.0)
    assert time.monotonic() - t0 < 1.0 + 5.0  # not the 60 s timeout, nor the endless drip


def test_close_ends_requests_in_flight(hostile, transport):
    hostile.plan = [("drip", 0.3, "body")]
    tr = client(hostile.url, transport, timeout=60)
    threading.Timer(0.5, tr.close).start()
    t0 = time.monotonic()
    fails(tr, "closed")
    assert time.monotonic() - t0 < 0.5 + 5.0  # not the 60 s timeout, nor the endless drip


GOOD = ("ok", "```scheme\n(* a x)\n```")


@pytest.mark.parametrize(
    ("step", "match"),
    [
        (("body", b"[" * 100_000 + b"]" * 100_000), "nested too deeply"),
        (("body", b'{"choices": "\xff\xfe"}'), "not UTF-8"),
        (("body", b"{not json"), "not JSON"),
        (("raw", b"garbage\r\n\r\n"), "malformed reply|connection failed"),
        (("raw", b"HTTP/1.1 200 OK\r\n" + b"X: " + b"y" * 70_000 + b"\r\n\r\n"),
         "malformed reply|connection failed"),
    ],
)  # fmt: skip
def test_malformed_replies_are_request_failures(hostile, transport, step, match):
    hostile.plan = [step]
    fails(client(hostile.url, transport, max_retries=2), match)
    # not retried; the openai client may read a broken status line or header as a broken
    # connection (httpx's RemoteProtocolError, also its truncated body): retried
    assert len(hostile.requests) in ((1, 3) if transport == "openai" and step[0] == "raw" else (1,))


@pytest.mark.parametrize("step", [("truncated",), ("reset",), ("status", 503)])
def test_transient_failures_are_retried(hostile, transport, step):
    first = ("raw", b"HTTP/1.1 503 Busy\r\nContent-Length: 4\r\n\r\nbusy")
    hostile.plan = [first if step[0] == "status" else step, GOOD]
    tr = client(hostile.url, transport, max_retries=2)
    tr.sleep = lambda s: None
    assert tr.complete(BODY)["choices"][0]["message"]["content"].startswith("```")
    assert len(hostile.requests) == 2
    hostile.plan, hostile.served = [first if step[0] == "status" else step], 0
    msg = fails(tr, "truncated|connection failed|HTTP 503")
    assert len(hostile.requests) == 2 + 3, msg  # the first try and two retries


def test_no_retry_when_the_deadline_leaves_no_time(hostile, transport):
    hostile.plan = [("raw", b"HTTP/1.1 503 Busy\r\nRetry-After: 5\r\nContent-Length: 0\r\n\r\n")]
    tr = client(hostile.url, transport, max_retries=3, timeout=2)
    waits: list[float] = []
    tr.sleep = waits.append  # a retry would wait first (the server asks for 5 s)
    fails(tr, r"HTTP 503.*no time left for a retry")
    assert waits == [] and len(hostile.requests) == 1


@pytest.mark.parametrize(
    "step",
    [("body", b"[" * 100_000), ("redirect", 302, "file:///etc/passwd"), ("drip", 0.3, "body"),
     ("endless",), ("truncated",), ("body", b"\xff")],
)  # fmt: skip
def test_no_traceback_escapes_the_cli(hostile, tmp_path, step):
    """A hostile reply after a good one: the search records it, goes on, ends; exit 0 or 1."""
    hostile.plan = [GOOD, step]
    cmd = [sys.executable, "-m", "ndvm", "search", "--task", "sr-damped", "--proposer", "llm",
           "--llm-base-url", hostile.url, "--llm-model", "m", "--llm-retries", "1",
           "--llm-timeout", "2", "--budget", "4", "--batch-size", "2", "--llm-max-failures", "2",
           "--db", str(tmp_path / "d.db"), "--quiet"]  # fmt: skip
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr and "Error:" not in proc.stderr.replace("Failed", "")
    assert "ndvm search: llm: " in proc.stderr, proc.stderr  # the busy line, also after a stop
    assert time.monotonic() - t0 < 60


def test_a_reason_never_recurses_into_a_deep_reply():
    from ndvm.search.llm import brief, reply_text

    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    assert brief(deep) == "(nested too deeply to show)"
    with pytest.raises(RequestFailed, match="choice without text content: .nested too deeply"):
        reply_text({"choices": [deep]})


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--llm-ahead", "-1"], "--llm-ahead must be in"),
        (["--llm-ahead", "17"], "--llm-ahead must be in"),
        (["--llm-max-reply-mb", "0"], "--llm-max-reply-mb must be positive"),
        (["--llm-max-reply-mb", "0.0001"], "at least 1 KB"),
        (["--llm-base-url", "http://[::1/v1"], "invalid URL"),
        (["--llm-base-url", "http://h:99999/v1"], "invalid URL"),
    ],
)
def test_bad_client_options_are_config_errors(argv, match):
    import argparse

    from ndvm.errors import ConfigError
    from ndvm.search.llm import add_llm_arguments

    parser = argparse.ArgumentParser()
    add_llm_arguments(parser)
    args = parser.parse_args(["--llm-base-url", "http://h/v1", "--llm-model", "m", *argv])
    with pytest.raises(ConfigError, match=match):
        LLMConfig.from_args(args, env={})


def test_client_options_reach_the_config():
    import argparse

    from ndvm.search.llm import add_llm_arguments

    parser = argparse.ArgumentParser()
    add_llm_arguments(parser)
    base = ["--llm-base-url", "http://h/v1", "--llm-model", "m"]
    cfg = LLMConfig.from_args(parser.parse_args(base), env={})
    assert (cfg.ahead, cfg.max_reply_bytes) == (2, 16 * 2**20)
    argv = [*base, "--llm-ahead", "0", "--llm-max-reply-mb", "0.5"]
    cfg = LLMConfig.from_args(parser.parse_args(argv), env={})
    assert (cfg.ahead, cfg.max_reply_bytes) == (0, 2**19)
