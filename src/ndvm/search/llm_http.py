"""Transports for the LLM proposer: one chat-completions request, its retries, one reason.

``make_transport(config)`` returns the official ``openai`` client (the ``ndvm[llm]`` extra)
when it is importable, else a standard-library client (``http.client``); both go through the
same guards and the same retry rule. ``complete(body, end)`` returns the reply's JSON object
or raises :class:`~ndvm.errors.RequestFailed` whose message is a one-line reason (``timeout
after 5s``, ``HTTP 500: ...``, ``connection failed: [Errno 111] Connection refused``,
``malformed reply: ...``, ``reply larger than the 16 MB cap``).

Guards, for both clients:

- **One origin.** No redirect is followed: a 3xx is a failure naming its ``Location``, so the
  key (a bearer token) and the prompt only ever go to the configured ``base_url``.
- **A size cap.** The body is read in 64 KiB pieces and the request fails as soon as it passes
  ``config.max_reply_bytes`` (16 MiB by default; a larger ``Content-Length`` fails before any
  of the body is read), so an endless chunked reply ends at the cap. Error bodies: 200 bytes.
- **A wall-clock deadline per request** (``end``, a ``time.monotonic()`` instant; default
  ``config.timeout`` seconds from now), retries and their waits included: a watchdog shuts the
  connection's socket down at the deadline, whatever phase the request is in (connect, headers,
  a body that drips one byte at a time).
- **Every malformed reply is a RequestFailed**: not UTF-8, not JSON, JSON nested too deeply,
  a broken status line, a truncated body.

Retried (up to ``config.max_retries`` times, waiting 0.5 s, 1 s, 2 s, ... at most 8 s, or the
server's ``Retry-After`` up to 120 s, while the deadline leaves time for the wait): connection
errors (refused, reset, closed early), truncated bodies (``IncompleteRead``) and the statuses
408, 409, 429 and >= 500. Never retried: other statuses, redirects, malformed or oversized
replies, a ``Retry-After`` beyond 120 s, and the deadline itself.
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from ndvm.errors import RequestFailed

RETRY_STATUS = frozenset({408, 409, 429})
FIRST_DELAY, MAX_DELAY, MAX_RETRY_AFTER = 0.5, 8.0, 120.0
MAX_REPLY = 16 * 2**20  # default reply size cap (bytes)
PIECE = 65536  # bytes per read
ERROR_EXCERPT = 200  # bytes of an error status's body kept in the reason


class TransportConfig(Protocol):
    """What a transport reads of its configuration (``ndvm.search.llm.LLMConfig`` has it)."""

    transport: str
    base_url: str
    api_key: str | None
    timeout: float
    max_retries: int
    max_reply_bytes: int


class Transport(Protocol):
    """Sends one chat-completions request body; returns the reply's JSON."""

    name: str

    def complete(self, body: dict[str, Any], end: float | None = None) -> Any: ...

    def close(self) -> None: ...


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
    if wait != wait or wait > MAX_RETRY_AFTER:
        return None
    if wait > 0.0:
        return wait
    return min(FIRST_DELAY * 2.0**attempt, MAX_DELAY)


def root_cause(exc: BaseException) -> str:
    """The innermost cause's message (``[Errno 111] Connection refused``, not a wrapper's)."""
    seen = {id(exc)}
    while True:
        nxt = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
        if nxt is None or id(nxt) in seen:
            return one_line(str(exc) or type(exc).__name__)
        seen.add(id(nxt))
        exc = nxt


def one_line(text: str, most: int = 200) -> str:
    """``text`` on one line (whitespace runs made one space), at most ``most`` characters."""
    return " ".join(text.split())[:most]


def size_text(n: int) -> str:
    return f"{n / 2**20:g} MB" if n >= 2**20 else f"{n} bytes"


def parse_json(raw: bytes) -> Any:
    """The JSON value of a reply body, or RequestFailed (not UTF-8, not JSON, too deep)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestFailed(f"malformed reply: not UTF-8 (byte {exc.start})") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise RequestFailed("malformed reply: JSON nested too deeply") from None
    except ValueError as exc:
        raise RequestFailed(f"malformed reply: not JSON ({exc}): {text[:80]!r}") from None


class _Retry(Exception):
    """A failure worth retrying: ``reason``, and the server's Retry-After header if any."""

    def __init__(self, reason: str, retry_after: str | None = None) -> None:
        super().__init__(reason)
        self.reason, self.retry_after = reason, retry_after


def check_status(code: int, header: Callable[[str], str | None], excerpt: str) -> None:
    """Nothing for a 2xx; else RequestFailed (redirects, other 4xx) or _Retry (transient)."""
    if 200 <= code < 300:
        return
    if 300 <= code < 400:
        where = one_line(header("Location") or "(no Location)")
        raise RequestFailed(f"HTTP {code}: redirect to {where!r} not followed (requests go "
                            "only to the configured --llm-base-url)")  # fmt: skip
    reason = f"HTTP {code}: {one_line(excerpt)}"
    if code in RETRY_STATUS or code >= 500:
        raise _Retry(reason, header("Retry-After"))
    raise RequestFailed(reason)


def read_capped(pieces: Iterator[bytes], cap: int, end: float, why: str) -> bytes:
    """The concatenated ``pieces``; RequestFailed past ``cap`` bytes, _Retry past ``end``."""
    buf = bytearray()
    for piece in pieces:
        buf += piece
        if len(buf) > cap:
            raise RequestFailed(f"reply larger than the {size_text(cap)} cap")
        if time.monotonic() >= end:
            raise _Retry(why)
    return bytes(buf)


def check_headers(header: Callable[[str], str | None], cap: int) -> None:
    """RequestFailed when a 2xx reply announces more than ``cap`` bytes, or a compressed
    body (never asked for: its decoded size would escape the cap)."""
    coding = (header("Content-Encoding") or "identity").strip().lower()
    if coding != "identity":
        raise RequestFailed(f"malformed reply: Content-Encoding {one_line(coding, 40)!r} "
                            "(asked for identity)")  # fmt: skip
    value = header("Content-Length")
    if value is not None and value.strip().isdigit() and int(value) > cap:
        raise RequestFailed(f"reply larger than the {size_text(cap)} cap "
                            f"(Content-Length {int(value)})")  # fmt: skip


class Watchdog:
    """Shuts a socket down at a deadline (or on :meth:`fire`), waking any thread blocked on it:
    the request then fails at once, whatever it was waiting for."""

    def __init__(self, seconds: float) -> None:
        self.fired = False
        self.sock: socket.socket | None = None
        self.lock = threading.Lock()
        self.timer = threading.Timer(max(seconds, 0.0), self.fire)
        self.timer.daemon = True
        self.timer.start()

    def arm(self, sock: socket.socket | None) -> None:
        with self.lock:
            self.sock = sock
            if self.fired:
                self._shut()

    def fire(self) -> None:
        with self.lock:
            self.fired = True
            self._shut()

    def _shut(self) -> None:
        if self.sock is not None:
            try:  # the plain socket's shutdown, also under TLS: it wakes a blocked reader
                socket.socket.shutdown(self.sock, socket.SHUT_RDWR)
            except OSError:
                pass

    def cancel(self) -> None:
        self.timer.cancel()


class _Guarded:
    """The retry loop and deadline both transports share; ``_once`` sends one attempt."""

    name = "guarded"

    def __init__(
        self, config: TransportConfig, *, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self.config = config
        self.sleep = sleep
        self.cap = int(getattr(config, "max_reply_bytes", MAX_REPLY))
        self.closed = False
        self.dogs: set[Watchdog] = set()  # the attempts in flight (close() ends them)
        self.lock = threading.Lock()

    def complete(self, body: dict[str, Any], end: float | None = None) -> Any:
        """The reply's JSON; ``end``: the request's deadline (default: ``timeout`` from now)."""
        now = time.monotonic()
        limit = now + self.config.timeout
        why = f"timeout after {self.config.timeout:g}s"
        if end is not None and end < limit:
            limit, why = end, "deadline reached: the search's time budget ran out"
        attempt = 0
        while True:
            try:
                return parse_json(self._attempt(body, limit, why))
            except _Retry as exc:
                wait = retry_delay(attempt, exc.retry_after)
                if attempt >= self.config.max_retries or wait is None or exc.reason == why:
                    raise RequestFailed(exc.reason) from None
                if time.monotonic() + wait >= limit:
                    raise RequestFailed(f"{exc.reason} (no time left for a retry)") from None
                self.sleep(wait)
                attempt += 1

    def _attempt(self, body: dict[str, Any], end: float, why: str) -> bytes:
        left = end - time.monotonic()
        if left <= 0:
            raise _Retry(why)
        dog = Watchdog(left)
        with self.lock:
            if self.closed:
                dog.cancel()
                raise RequestFailed("the client was closed")
            self.dogs.add(dog)
        try:
            return self._once(body, end, why, dog)
        except RequestFailed:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever the wire did: one reason, no traceback
            if self.closed:
                raise RequestFailed("the client was closed") from None
            if isinstance(exc, _Retry):
                raise
            if dog.fired:
                raise _Retry(why) from None
            raise self._classify(exc, why) from None
        finally:
            dog.cancel()
            with self.lock:
                self.dogs.discard(dog)

    def _classify(self, exc: Exception, why: str) -> Exception:
        """A reason for an exception the wire raised: transient ones as _Retry (a socket
        timeout is the deadline: the sockets wait at most until it)."""
        if isinstance(exc, http.client.IncompleteRead):
            got = len(exc.partial) if isinstance(exc.partial, (bytes, bytearray)) else 0
            return _Retry(f"truncated reply ({got} bytes read)")
        if isinstance(exc, (TimeoutError, socket.timeout)):
            return _Retry(why)
        if isinstance(exc, ssl.SSLCertVerificationError):  # not transient
            return RequestFailed(f"connection failed: {root_cause(exc)}")
        if isinstance(exc, OSError):  # refused, reset, closed early
            return _Retry(f"connection failed: {root_cause(exc)}")
        if isinstance(exc, http.client.HTTPException):
            return RequestFailed(f"malformed reply: {type(exc).__name__}: {root_cause(exc)}")
        return RequestFailed(f"request failed: {type(exc).__name__}: {root_cause(exc)}")

    def _once(self, body: dict[str, Any], end: float, why: str, dog: Watchdog) -> bytes:
        raise NotImplementedError

    def close(self) -> None:
        """End the attempts in flight (their sockets shut down) and refuse new ones."""
        with self.lock:
            self.closed = True
            dogs = list(self.dogs)
        for dog in dogs:
            dog.fire()


class UrllibTransport(_Guarded):
    """The standard-library client (``http.client``: it follows no redirect by itself)."""

    name = "urllib"

    def __init__(
        self, config: TransportConfig, *, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        super().__init__(config, sleep=sleep)
        self.url = f"{config.base_url}/chat/completions"
        self.headers = {"Content-Type": "application/json", "Accept": "application/json",
                        "Accept-Encoding": "identity"}  # fmt: skip
        if config.api_key:
            self.headers["Authorization"] = f"Bearer {config.api_key}"

    def _once(self, body: dict[str, Any], end: float, why: str, dog: Watchdog) -> bytes:
        problem = url_problem(self.url)
        if problem:
            raise RequestFailed(problem)
        url = urllib.parse.urlsplit(self.url)
        https = url.scheme == "https"
        cls = http.client.HTTPSConnection if https else http.client.HTTPConnection
        conn = cls(url.hostname or "", url.port, timeout=max(end - time.monotonic(), 0.001))
        try:
            conn.connect()
            dog.arm(conn.sock)
            path = url.path + (f"?{url.query}" if url.query else "")
            conn.request("POST", path, json.dumps(body).encode(), self.headers)
            resp = conn.getresponse()
            if not 200 <= resp.status < 300:
                check_status(resp.status, resp.getheader, _excerpt(resp.read(ERROR_EXCERPT)))
            check_headers(resp.getheader, self.cap)
            data = read_capped(iter(lambda: resp.read1(PIECE), b""), self.cap, end, why)
            if dog.fired:  # the watchdog's shutdown reads as the end of the body
                raise _Retry(why)
            if resp.length:  # the connection closed before Content-Length bytes came
                raise _Retry(f"truncated reply ({len(data)} bytes of {len(data) + resp.length})")
            return data
        finally:
            conn.close()


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be requested (not http(s), no host, a bad port), or None."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError as exc:
        return f"invalid URL {url!r}: {exc}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"invalid URL {url!r}: not http(s)://host/..."
    return None


def _excerpt(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


class OpenAITransport(_Guarded):
    """The official ``openai`` client (``ndvm[llm]``), one client per attempt (a fresh
    connection the watchdog can reach), redirects off, its own retries off (the shared retry
    loop keeps the deadline), every body read through the size cap and the deadline."""

    name = "openai"

    def __init__(
        self, config: TransportConfig, *, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        import openai

        super().__init__(config, sleep=sleep)
        self.openai = openai

    def _client(self, end: float, why: str, dog: Watchdog) -> Any:
        oa, cap = self.openai, self.cap

        def trace(event: str, info: dict[str, Any]) -> None:
            if event.endswith("connect_tcp.complete"):
                stream = info.get("return_value")
                get = getattr(stream, "get_extra_info", None)
                dog.arm(get("socket") if callable(get) else None)

        def on_request(request: Any) -> None:
            request.extensions["trace"] = trace

        def on_response(response: Any) -> None:
            if 200 <= response.status_code < 300:
                check_headers(response.headers.get, cap)
            response.stream = capped_stream(response.stream, cap, end, why)

        left = max(end - time.monotonic(), 0.001)
        http_client = oa.DefaultHttpxClient(
            follow_redirects=False, timeout=left, headers={"Accept-Encoding": "identity"},
            event_hooks={"request": [on_request], "response": [on_response]},
        )  # fmt: skip
        # The client insists on a key; an endpoint without authentication ignores this one.
        return oa.OpenAI(base_url=self.config.base_url, api_key=self.config.api_key or "no-key",
                         timeout=left, max_retries=0, http_client=http_client)  # fmt: skip

    def _once(self, body: dict[str, Any], end: float, why: str, dog: Watchdog) -> bytes:
        oa = self.openai
        client = self._client(end, why, dog)
        try:
            raw = client.chat.completions.with_raw_response.create(**body)
            return bytes(raw.http_response.content)
        except oa.APIStatusError as exc:
            resp = exc.response
            check_status(exc.status_code, resp.headers.get, resp.text[:ERROR_EXCERPT])
            raise RequestFailed(f"HTTP {exc.status_code}") from None
        except oa.APITimeoutError:
            raise _Retry(why) from None
        except oa.APIConnectionError as exc:
            inner = _guard_cause(exc)
            if inner is not None:
                raise inner from None
            if dog.fired:
                raise _Retry(why) from None
            raise _Retry(f"connection failed: {root_cause(exc)}") from None
        except oa.OpenAIError as exc:
            raise RequestFailed(one_line(f"{type(exc).__name__}: {exc}", 300)) from None
        finally:
            client.close()


def _guard_cause(exc: BaseException) -> Exception | None:
    """A guard's own failure (size cap, deadline) that a client wrapped, if any."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, (RequestFailed, _Retry)):
            return cur
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return None


def capped_stream(inner: Any, cap: int, end: float, why: str) -> Any:
    """An httpx byte stream of the same library as ``inner`` that stops at ``cap`` bytes (a
    RequestFailed) or at ``end`` (a _Retry) while it is read."""
    base = next(c for c in type(inner).__mro__ if c.__name__ == "SyncByteStream")
    return _capped_class(base)(inner, cap, end, why)


_CAPPED: dict[type, type] = {}


def _capped_class(base: type) -> type:
    if base not in _CAPPED:

        class Capped(base):  # type: ignore[misc, valid-type]
            def __init__(self, inner: Any, cap: int, end: float, why: str) -> None:
                self.inner, self.cap, self.end, self.why = inner, cap, end, why

            def __iter__(self) -> Iterator[bytes]:
                total = 0
                for piece in self.inner:
                    total += len(piece)
                    if total > self.cap:
                        raise RequestFailed(f"reply larger than the {size_text(self.cap)} cap")
                    if time.monotonic() >= self.end:
                        raise _Retry(self.why)
                    yield piece

            def close(self) -> None:
                self.inner.close()

        _CAPPED[base] = Capped
    return _CAPPED[base]
