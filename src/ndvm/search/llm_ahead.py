"""Requests issued ahead: the LLM proposer's small pool of request threads.

The search asks for a batch, calibrates it, asks for the next: with one request at a time the
endpoint idles while a batch calibrates and the calibrator idles while the endpoint thinks.
:class:`Lookahead` keeps up to ``width`` requests in flight on threads (a bounded queue: the
proposer tops it up after each batch it takes, so at most ``width`` replies ever wait), and
measures both sides: how long at least one request was in flight (the endpoint's busy time)
and how long the search waited for a reply (the time the calibrator had nothing to do).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LLMUsage:
    """How busy each side was over ``seconds`` of search (``busy`` + idle = ``seconds``)."""

    requests: int  # requests sent (retries not counted)
    seconds: float  # wall time from the search's start to now (or its end)
    endpoint_busy: float  # seconds with at least one request in flight
    waited: float  # seconds the search waited for a reply (nothing to calibrate meanwhile)

    @property
    def endpoint_fraction(self) -> float:
        return self.endpoint_busy / self.seconds if self.seconds > 0 else 0.0

    @property
    def calibrator_fraction(self) -> float:
        """The share of the search not spent waiting for the LLM (calibrating, bookkeeping)."""
        return 1.0 - self.waited / self.seconds if self.seconds > 0 else 0.0

    def line(self, ahead: int) -> str:
        n = f"{self.requests} request{'s' * (self.requests != 1)}"
        return (
            f"llm: {n} ({ahead} ahead) in {self.seconds:.1f}s: endpoint "
            f"busy {100 * self.endpoint_fraction:.0f}%, waited for replies "
            f"{100 * (1 - self.calibrator_fraction):.0f}% (calibrator busy "
            f"{100 * self.calibrator_fraction:.0f}%)"
        )


class Lookahead:
    """Runs ``send(body)`` on up to ``width`` threads; :meth:`take` returns the oldest
    request's reply (or raises its error), waiting for it if it is still in flight."""

    def __init__(self, send: Callable[[dict[str, Any]], Any], width: int) -> None:
        self.send = send
        self.pool = ThreadPoolExecutor(max_workers=max(width, 1), thread_name_prefix="ndvm-llm")
        self.queue: deque[Future[Any]] = deque()
        self.lock = threading.Lock()
        self.active = 0  # requests in flight now
        self.since = 0.0  # when the current busy interval began
        self.busy = 0.0  # closed busy intervals, seconds
        self.waited = 0.0
        self.first_wait: float | None = None  # the wait for the first reply (always waited)
        self.sent = 0
        self.t0 = time.monotonic()  # the measured window: t0 to t_end (close), or to now
        self.t_end: float | None = None

    def __len__(self) -> int:
        return len(self.queue)

    def submit(self, body: dict[str, Any]) -> None:
        self.sent += 1
        self.queue.append(self.pool.submit(self._run, body))

    def _run(self, body: dict[str, Any]) -> Any:
        with self.lock:
            self.active += 1
            if self.active == 1:
                self.since = time.monotonic()
        try:
            return self.send(body)
        finally:
            with self.lock:
                self.active -= 1
                if self.active == 0:
                    self.busy += time.monotonic() - self.since

    def take(self) -> Any:
        fut = self.queue.popleft()
        t = time.monotonic()
        try:
            return fut.result()
        finally:
            self.waited += time.monotonic() - t
            if self.first_wait is None:
                self.first_wait = time.monotonic() - t

    def usage(self) -> LLMUsage:
        now = time.monotonic() if self.t_end is None else self.t_end
        with self.lock:
            busy = self.busy + (now - self.since if self.active else 0.0)
        return LLMUsage(self.sent, now - self.t0, min(busy, now - self.t0), self.waited)

    def close(self) -> None:
        """Stop: requests not yet started are dropped; those in flight are the transport's
        to end (``Transport.close``). The measured usage stops here."""
        if self.t_end is None:
            self.t_end = time.monotonic()
        for fut in self.queue:
            fut.cancel()
        self.queue.clear()
        self.pool.shutdown(wait=False, cancel_futures=True)
