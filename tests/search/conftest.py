import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class StubLLM:
    """An OpenAI-compatible /v1/chat/completions stub with a queue of scripted replies.

    Each reply is a string (the message content), ``("status", code)`` or
    ``("status", code, headers)``, ``("sleep", s)`` or ``("raw", bytes)``; requests are
    recorded.
    """

    def __init__(self) -> None:
        self.replies: list = []
        self.requests: list = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # silence
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                stub.requests.append(
                    (self.path, json.loads(self.rfile.read(n)), dict(self.headers))
                )
                reply = stub.replies.pop(0) if stub.replies else "no more"
                if isinstance(reply, tuple) and reply[0] == "sleep":
                    time.sleep(reply[1])
                    reply = "```scheme\n(* a x)\n```"
                if isinstance(reply, tuple) and reply[0] == "status":
                    self.send_response(reply[1])
                    for k, v in (reply[2] if len(reply) > 2 else {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(b"error")
                    return
                if isinstance(reply, tuple) and reply[0] == "raw":
                    body = reply[1]
                else:
                    body = json.dumps(
                        {"choices": [{"message": {"role": "assistant", "content": reply}}]}
                    ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except BrokenPipeError:  # the client timed out
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub_llm():
    s = StubLLM()
    yield s
    s.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
