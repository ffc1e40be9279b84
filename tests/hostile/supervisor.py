"""Supervisor of the hostile corpus: runs the cases in a worker process, one JSON line per
case, and turns a worker that dies (a crash: a signal, an abort, a non-zero exit) or stays
silent past a case's allowance (a hang) into that case's verdict, then restarts the worker
after it. ``python -m tests.hostile.supervisor [BACKEND ...]`` prints a summary."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.hostile.corpus import CASES, LIMITS, Case

ROOT = Path(__file__).resolve().parents[2]
MARGIN = 20.0  # seconds past a case's deadline before it counts as a hang (CI is noisy)


def allowance(case: Case) -> float:
    if case.hang_after is not None:
        return case.hang_after
    deadline = case.limits.get("deadline", LIMITS["deadline"])
    return float(deadline) * (2 if case.grad else 1) + MARGIN


class _Lines:
    """Lines of a pipe, each awaited with a timeout."""

    def __init__(self, stream: Any) -> None:
        self.fd = stream.fileno()
        self.buf = b""
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.fd, selectors.EVENT_READ)

    def next(self, timeout: float) -> str | None:
        """The next line; None when the writer closed the pipe or ``timeout`` passed."""
        end = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            if left <= 0 or not self.sel.select(left):
                return None
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()


def _worker(backend: str, first: int) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.Popen(
        [sys.executable, "-m", "tests.hostile.worker", backend, str(first)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )


def run_corpus(backend: str, cases: list[Case] = CASES) -> list[dict[str, Any]]:
    """One result per case of ``CASES``: the worker's line, or a crash/hang verdict."""
    results: list[dict[str, Any]] = []
    while len(results) < len(cases):
        proc = _worker(backend, len(results))
        lines = _Lines(proc.stdout)
        try:
            while len(results) < len(cases):
                case = cases[len(results)]
                line = lines.next(allowance(case))
                if line is not None:
                    results.append(json.loads(line))
                    continue
                if proc.poll() is None:
                    verdict = {"outcome": "hang", "cls": ["Hang"]}
                else:
                    verdict = {"outcome": "crash", "cls": ["Crash"], "rc": proc.returncode}
                results.append({**verdict, "name": case.name, "line": None})
                break
        finally:
            proc.kill()
            proc.wait()
            assert proc.stdout is not None
            proc.stdout.close()
    return results


def main() -> int:
    from ndvm.backends import registry

    bad = 0
    for backend in sys.argv[1:] or registry.available():
        t0 = time.monotonic()
        results = run_corpus(backend)
        worst = max((r.get("elapsed", 0.0) for r in results), default=0.0)
        for r in results:
            if r["outcome"] in ("untyped", "hang", "crash"):
                bad += 1
                print(f"{backend}: {r['name']}: {r['outcome']} {r.get('message', '')}")
        print(
            f"{backend}: {len(results)} cases in {time.monotonic() - t0:.1f} s, "
            f"slowest {worst:.2f} s"
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
