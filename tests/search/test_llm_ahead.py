"""Keeping the LLM busy: requests in flight while earlier batches calibrate (``llm_ahead``),
the search budget as every request's deadline, and a prompt stop of what is still in flight."""

from __future__ import annotations

import threading
import time

import pytest
from tests.search.hostile import Hostile

from ndvm.errors import RequestFailed
from ndvm.search import Budget, run_search
from ndvm.search.llm import LLMConfig, LLMProposer
from ndvm.search.llm_ahead import LLMUsage, Lookahead
from ndvm.tasks import get


@pytest.fixture
def hostile():
    s = Hostile()
    yield s
    s.close()


def distinct(served: int) -> str:
    """A reply of two programs that no other reply has (distinct skeletons: no duplicates)."""
    u = ("exp", "sin", "cos", "sqrt", "abs", "log")
    a, b = u[served % 6], u[(served // 6) % 6]
    return (f"```scheme\n(+ (* a ({a} (* b x))) (* c ({b} (* d x))))\n```\n"
            f"```scheme\n(* a ({a} (+ (* b x) (* c ({b} x)))))\n```")  # fmt: skip


def proposer(url: str, ahead: int, **kw: object) -> LLMProposer:
    cfg = LLMConfig(base_url=url, model="stub", transport="urllib", ahead=ahead, max_retries=0,
                    **kw)  # type: ignore[arg-type]  # fmt: skip
    return LLMProposer(get("sr-damped"), cfg)


def test_lookahead_keeps_order_and_measures_busy_time():
    def send(body: dict) -> int:
        time.sleep(body["s"])
        if body["n"] == 2:
            raise RequestFailed("boom")
        return int(body["n"])

    pool = Lookahead(send, 3)
    for n, s in ((0, 1.0), (1, 0.3), (2, 0.3)):
        pool.submit({"n": n, "s": s})
    assert pool.take() == 0  # the oldest first, although a younger one finished earlier
    assert pool.take() == 1
    with pytest.raises(RequestFailed, match="boom"):
        pool.take()
    use = pool.usage()
    pool.close()
    # the three overlapped (one after another: 1.6 s); the margins leave a loaded machine
    # time to start the threads
    assert use.requests == 3 and 0.98 < use.endpoint_busy < 1.5
    assert 0.98 < use.waited <= use.seconds
    assert 0.0 <= use.calibrator_fraction < 0.2
    assert LLMUsage(4, 10.0, 9.0, 1.0).line(2) == (
        "llm: 4 requests (2 ahead) in 10.0s: endpoint busy 90%, waited for replies 10% "
        "(calibrator busy 90%)"
    )


def test_requests_are_in_flight_while_batches_calibrate(hostile, tmp_path):
    """Latency 0.4 s, six batches: one request at a time never has two at the server; with
    two ahead the requests overlap (the server holds several at once) and the calibrator
    waits less. No tight timing: the machine may be loaded."""
    hostile.plan = [("ok", distinct, 0.4)]
    runs = {}
    for ahead in (0, 2):
        hostile.served, hostile.requests, hostile.peak = 0, [], 0
        prop = proposer(hostile.url, ahead)
        st = run_search("sr-damped", prop, tmp_path / f"a{ahead}.db", budget=Budget(batches=6),
                        batch_size=2)  # fmt: skip
        use, pool = prop.usage(), prop.ahead
        assert pool is not None and pool.t_end is not None
        runs[ahead] = (use, hostile.peak, len(hostile.requests))
        assert st.next_batch == 6 and sum(r.status == "ok" for r in st.records) >= 6
    (use0, peak0, n0), (use2, peak2, n2) = runs[0], runs[2]
    assert n0 == 6 and 6 <= n2 <= 6 + 2  # up to two were in flight when the search ended
    assert peak0 == 1 and peak2 >= 2, (peak0, peak2)
    assert use0.waited > 6 * 0.4 * 0.9  # six round trips waited for, one after another
    assert use2.waited < use0.waited, (use0, use2)


def test_the_search_budget_is_the_request_deadline(hostile, tmp_path):
    """A 30 s reply under a 1.5 s budget: the search ends at the budget, with the reason."""
    hostile.plan = [("ok", distinct, 30.0)]
    prop = proposer(hostile.url, 2, timeout=60)
    t0 = time.monotonic()
    st = run_search("sr-damped", prop, tmp_path / "b.db", budget=Budget(seconds=1.5))
    # far below the reply's 30 s (a loaded machine may take seconds to set the search up)
    assert time.monotonic() - t0 < 1.5 + 10.0 and len(st.records) == 0
    assert prop.stop_reason.startswith("search budget spent while waiting for the llm")
    assert "deadline reached" in prop.stop_reason


def test_requests_in_flight_end_with_the_search(hostile, tmp_path):
    """Two fast replies, then a slow one: the request sent ahead does not hold the search.
    (One ahead: requests reach the server in the order they are sent.)"""
    hostile.plan = [("ok", distinct, 0.1), ("ok", distinct, 0.1), ("ok", distinct, 30.0)]
    prop = proposer(hostile.url, 1, timeout=60)
    t0 = time.monotonic()
    run_search("sr-damped", prop, tmp_path / "c.db", budget=Budget(batches=2), batch_size=2)
    assert time.monotonic() - t0 < 15.0 and prop.requests == 3  # far below the third's 30 s
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and any(
        t.name.startswith("ndvm-llm") and t.is_alive() for t in threading.enumerate()
    ):
        time.sleep(0.05)
    assert not any(t.name.startswith("ndvm-llm") and t.is_alive() for t in threading.enumerate())


def test_the_first_request_goes_alone(hostile, tmp_path):
    """Until the endpoint has answered once, one request at a time (a dead or misconfigured
    endpoint costs one request, not ``ahead``)."""
    hostile.plan = [("raw", b"HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\nnope")]
    prop = proposer(hostile.url, 4)
    with pytest.raises(Exception, match="failed the first request: HTTP 404: nope"):
        run_search("sr-damped", prop, tmp_path / "d.db", budget=Budget(seconds=30))
    assert len(hostile.requests) == 1 and prop.requests == 1
