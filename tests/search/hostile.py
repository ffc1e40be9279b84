"""A hostile OpenAI-compatible endpoint on 127.0.0.1: scripted misbehaviour per request.

Each entry of ``plan`` answers one request (the last one repeats when the plan runs out):

- ``("ok", content, delay)``: a normal chat-completions reply after ``delay`` seconds
  (``content`` a string, or a function of the number of requests served so far);
- ``("redirect", code, location)``;
- ``("huge", nbytes[, announced])``: a 200 with ``nbytes`` of filler, announced by
  ``Content-Length`` unless ``announced`` is False (then the end is the connection's close);
- ``("endless",)``: a chunked 200 that never ends;
- ``("drip", interval, "body" | "headers")``: one byte per ``interval`` seconds, forever;
- ``("raw", data)``: ``data`` as the whole response (status line included), then close;
- ``("body", data)``: a 200 whose body is ``data``;
- ``("truncated",)``: ``Content-Length: 1000``, 10 bytes, then close;
- ``("reset",)``: close the connection with a RST, no response.

``requests`` records (path, headers by lower-case name) of each request; ``busy()`` the
seconds during which at least one request was being answered (the server's busy time).
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FILLER = b" " * 2**20


def chat(content: str) -> bytes:
    return json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}
                      ).encode()  # fmt: skip


class Hostile:
    def __init__(self) -> None:
        self.plan: list[tuple[Any, ...]] = [("ok", "```scheme\n(* a x)\n```", 0.0)]
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.lock = threading.Lock()
        self.active, self.since, self.peak = 0, 0.0, 0  # peak: most requests at once
        self.spans: list[tuple[float, float]] = []  # closed busy intervals (time.monotonic())
        self.served = 0
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with stub.lock:
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    stub.requests.append((self.path, headers))
                    step = stub.plan[min(stub.served, len(stub.plan) - 1)]
                    stub.served += 1
                stub._enter()
                try:
                    stub.answer(self, step)
                except OSError:  # the client gave up (cap, deadline): expected
                    pass
                finally:
                    stub._leave()
                    self.close_connection = True

            do_GET = do_POST

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.url = f"{self.origin}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _enter(self) -> None:
        with self.lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
            if self.active == 1:
                self.since = time.monotonic()

    def _leave(self) -> None:
        with self.lock:
            self.active -= 1
            if self.active == 0:
                self.spans.append((self.since, time.monotonic()))

    def busy(self, start: float = 0.0, end: float = float("inf")) -> float:
        """Seconds within [start, end] with at least one request being answered."""
        with self.lock:
            spans = self.spans + ([(self.since, time.monotonic())] if self.active else [])
        return sum(max(0.0, min(b, end) - max(a, start)) for a, b in spans)

    def answer(self, h: BaseHTTPRequestHandler, step: tuple[Any, ...]) -> None:
        kind, args = step[0], step[1:]
        out = h.wfile
        if kind == "ok":
            time.sleep(args[1] if len(args) > 1 else 0.0)
            content = args[0](self.served) if callable(args[0]) else args[0]
            self.send(h, 200, chat(content))
        elif kind == "body":
            self.send(h, 200, args[0])
        elif kind == "redirect":
            h.send_response(args[0])
            h.send_header("Location", args[1])
            h.send_header("Content-Length", "0")
            h.end_headers()
        elif kind == "huge":
            h.send_response(200)
            if len(args) < 2 or args[1]:
                h.send_header("Content-Length", str(args[0]))
            h.end_headers()
            left = args[0]
            while left > 0:
                out.write(FILLER[: min(left, len(FILLER))])
                left -= len(FILLER)
        elif kind == "endless":
            h.send_response(200)
            h.send_header("Transfer-Encoding", "chunked")
            h.end_headers()
            while True:
                out.write(b"%x\r\n%s\r\n" % (len(FILLER), FILLER))
        elif kind == "drip":
            self.drip(h, args[0], args[1])
        elif kind == "raw":
            out.write(args[0])
        elif kind == "truncated":
            out.write(b'HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n{"choices"')
        elif kind == "reset":
            h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        out.flush()

    @staticmethod
    def send(h: BaseHTTPRequestHandler, code: int, body: bytes) -> None:
        h.send_response(code)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    @staticmethod
    def drip(h: BaseHTTPRequestHandler, interval: float, phase: str) -> None:
        head = b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n"
        if phase == "body":
            h.wfile.write(head)
            head = b""
        data = head + b'{"choices": ' + b" " * 10**6
        for i in range(len(data)):
            h.wfile.write(data[i : i + 1])
            h.wfile.flush()
            time.sleep(interval)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
