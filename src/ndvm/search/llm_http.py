"""Transports for the LLM proposer: one chat-completions request, its retries, one reason.

``make_transport(config)`` returns the official ``openai`` client (the ``ndvm[llm]`` extra:
its retries, exponential backoff and timeouts) when it is importable, else a standard-library
client with the same retry rule. ``complete(body)`` returns the reply's JSON object or raises
:class:`~ndvm.errors.RequestFailed` whose message is the reason (``timeout after 5s``,
``HTTP 500: ...``, ``connection failed: [Errno 111] Connection refused``, ``malformed
reply: ...``). Retried (up to ``config.max_retries`` times, waiting 0.5 s, 1 s, 2 s, ... at
most 8 s, or the server's ``Retry-After`` up to 120 s): connection errors, timeouts and the
statuses 408, 409, 429 and >= 500. Never retried: other statuses, malformed replies and a
``Retry-After`` beyond 120 s.
"""

from __future__ import annotations

import importlib.util
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, Protocol

from ndvm.errors import RequestFailed

RETRY_STATUS = frozenset({408, 409, 429})
FIRST_DELAY, MAX_DELAY, MAX_RETRY_AFTER = 0.5, 8.0, 120.0


class TransportConfig(Protocol):
    """What a transport reads of its configuration (``ndvm.search.llm.LLMConfig`` has it)."""

    transport: str
    base_url: str
    api_key: str | None
    timeout: float
    max_retries: int


class Transport(Protocol):
    """Sends one chat-completions request body; returns the reply's JSON."""

    name: str

    def complete(self, body: dict[str, Any]) -> Any: ...


def openai_available() -> bool:
    return importlib.util.find_spec("openai") is not None


def make_transport(config: TransportConfig) -> Transport:
    """The transport ``config.transport`` names (``auto``: openai when importable)."""
    kind = config.transport
    if kind == "auto":
        kind = "openai" if openai_available() else "urllib"
    if kind == "openai":
        return OpenAITransport(config)
    return UrllibTransport(config)


def retry_delay(attempt: int, retry_after: str | None = None) -> float | None:
    """Seconds to wait before retry ``attempt`` (0-based): the server's ``Retry-After`` when
    it is a number of seconds in (0, 120], else 0.5 s doubled per attempt, at most 8 s;
    ``None`` (do not retry) when the server asks for more than 120 s."""
    try:
        wait = float(retry_after) if retry_after is not None else 0.0
    except ValueError:
        wait = 0.0
    if wait > MAX_RETRY_AFTER:
        return None
    if wait > 0.0:
        return wait
    return min(FIRST_DELAY * 2.0**attempt, MAX_DELAY)


def root_cause(exc: BaseException) -> str:
    """The innermost cause's message (``[Errno 111] Connection refused``, not a wrapper's)."""
    if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, BaseException):
        exc = exc.reason
    seen = {id(exc)}
    while True:
        nxt = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
        if nxt is None or id(nxt) in seen:
            return str(exc) or type(exc).__name__
        seen.add(id(nxt))
        exc = nxt


def parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise RequestFailed(f"malformed reply: not JSON ({exc}): {text[:80]!r}") from None


class _Retry(Exception):
    """A failure worth retrying: ``reason``, and the server's Retry-After header if any."""

    def __init__(self, reason: str, retry_after: str | None = None) -> None:
        super().__init__(reason)
        self.reason, self.retry_after = reason, retry_after


class UrllibTransport:
    """Standard-library HTTP client with the retry rule of the module docstring."""

    name = "urllib"

    def __init__(
        self, config: TransportConfig, *, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self.config = config
        self.sleep = sleep
        self.url = f"{config.base_url}/chat/completions"
        self.headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if config.api_key:
            self.headers["Authorization"] = f"Bearer {config.api_key}"

    def complete(self, body: dict[str, Any]) -> Any:
        data = json.dumps(body).encode()
        for attempt in range(self.config.max_retries + 1):
            try:
                return parse_json(self._once(data))
            except _Retry as exc:
                wait = retry_delay(attempt, exc.retry_after)
                if attempt == self.config.max_retries or wait is None:
                    raise RequestFailed(exc.reason) from None
                self.sleep(wait)
        raise AssertionError("unreachable")

    def _once(self, data: bytes) -> str:
        req = urllib.request.Request(self.url, data, self.headers, method="POST")
        timeout = self.config.timeout
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return str(resp.read().decode("utf-8", errors="replace"))
        except urllib.error.HTTPError as exc:
            reason = f"HTTP {exc.code}: {exc.read()[:200].decode('utf-8', errors='replace')}"
            if exc.code in RETRY_STATUS or exc.code >= 500:
                raise _Retry(reason, exc.headers.get("Retry-After")) from None
            raise RequestFailed(reason) from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise _Retry(f"timeout after {timeout:g}s") from None
            raise _Retry(f"connection failed: {root_cause(exc)}") from None
        except TimeoutError:
            raise _Retry(f"timeout after {timeout:g}s") from None
        except OSError as exc:  # reset, remote disconnected
            raise _Retry(f"connection failed: {root_cause(exc)}") from None


class OpenAITransport:
    """The official ``openai`` client (``ndvm[llm]``); it does the retries and backoff."""

    name = "openai"

    def __init__(self, config: TransportConfig) -> None:
        import openai

        self.openai = openai
        self.timeout = config.timeout
        # The client insists on a key; an endpoint without authentication ignores this one.
        self.client = openai.OpenAI(
            base_url=config.base_url,
            api_key=config.api_key or "no-key",
            timeout=config.timeout,
            max_retries=config.max_retries,
        )

    def complete(self, body: dict[str, Any]) -> Any:
        oa = self.openai
        try:
            raw = self.client.chat.completions.with_raw_response.create(**body)
            return parse_json(raw.text)
        except oa.APITimeoutError:
            raise RequestFailed(f"timeout after {self.timeout:g}s") from None
        except oa.APIStatusError as exc:
            text = exc.response.text[:200] if exc.response is not None else ""
            raise RequestFailed(f"HTTP {exc.status_code}: {text}") from None
        except oa.APIConnectionError as exc:
            raise RequestFailed(f"connection failed: {root_cause(exc)}") from None
        except oa.OpenAIError as exc:
            raise RequestFailed(f"{type(exc).__name__}: {exc}"[:300]) from None
