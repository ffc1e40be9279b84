"""LLM proposer: an OpenAI-compatible chat-completions client (``ndvm[llm]`` = httpx; falls
back to urllib). Configuration from the environment:

- ``NDVM_LLM_BASE_URL`` (or ``OPENAI_BASE_URL``), e.g. ``http://127.0.0.1:8000/v1``;
- ``NDVM_LLM_MODEL`` (or ``OPENAI_MODEL``);
- ``NDVM_LLM_API_KEY`` (or ``OPENAI_API_KEY``), sent as a bearer token when set;
- ``NDVM_LLM_TIMEOUT`` seconds per request (default 60).

The prompt states the task, the grammar, the best programs so far (with held-out R²) and the
latest failures with their reasons. Every fenced code block of the reply is one candidate,
checked with ndvm's reader; a reply without code blocks, an HTTP error or a timeout becomes
one rejected candidate carrying the reason (the search continues).
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from typing import Any

from ndvm.errors import NdvmError
from ndvm.lang.reader import read
from ndvm.search.candidate import Candidate
from ndvm.search.state import SearchState
from ndvm.tasks.base import Task

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.S)


def _env(*names: str, default: str | None = None) -> str | None:
    for n in names:
        if os.environ.get(n):
            return os.environ[n]
    return default


def parse_reply(text: str) -> list[Candidate | str]:
    """Candidates from the fenced code blocks of ``text``, or error strings for bad blocks."""
    out: list[Candidate | str] = []
    blocks = [b.strip() for _, b in _FENCE.findall(text)]
    if not blocks:
        return ["no fenced code block in the reply"]
    for block in blocks:
        if not block:
            continue
        try:
            read(block)
        except NdvmError as exc:
            out.append(f"reply block does not read: {exc}")
            continue
        out.append(Candidate(block, None, "llm"))
    return out or ["only empty code blocks in the reply"]


def build_prompt(task: Task, state: SearchState, n: int) -> list[dict[str, str]]:
    """Chat messages: system (grammar, format) and user (the task's prompt, never the law that
    generated its data; best so far; failures)."""
    assert task.search is not None
    system = (
        "You propose candidate scientific models as programs in a small Scheme (ndvm). "
        "Answer with each program in its own ```scheme fenced code block, nothing else.\n"
        "Grammar:\n" + task.search.grammar.describe()
    )
    lines = [f"Task: {task.search.prompt}", ""]
    best = state.best(5, key="validation")
    if best:
        lines.append("Best programs so far (validation loss, train MSE):")
        for r in best:
            ev = r.evaluation
            assert ev is not None
            lines.append(
                f"  {r.candidate.src}    ; val={ev.selection_loss:.3g} mse={ev.train_loss:.3g}"
            )
    fails = state.failures(5)
    if fails:
        lines.append("Recent failures (do not repeat them):")
        for r in fails:
            reason = r.evaluation.reason if r.evaluation else ""
            lines.append(f"  {r.candidate.src or '<no program>'}    ; {reason[:160]}")
    lines.append(f"Propose {n} new, structurally different programs.")
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]


class LLMProposer:
    """Asks the model for ``n`` programs per batch."""

    def __init__(
        self,
        task: Task,
        *,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
        temperature: float = 0.8,
    ) -> None:
        self.task = task
        self.base_url = (
            base_url or _env("NDVM_LLM_BASE_URL", "OPENAI_BASE_URL", default="")
        ).rstrip("/")
        self.model = model or _env("NDVM_LLM_MODEL", "OPENAI_MODEL", default="") or ""
        self.api_key = api_key or _env("NDVM_LLM_API_KEY", "OPENAI_API_KEY")
        self.timeout = timeout or float(_env("NDVM_LLM_TIMEOUT", default="60") or 60)
        self.temperature = temperature
        self.name = f"llm:{self.model or 'default'}"
        if not self.base_url:
            raise ValueError("llm proposer: set NDVM_LLM_BASE_URL (OpenAI-compatible /v1 URL)")

    def propose(self, state: SearchState, n: int) -> list[Candidate]:
        body = {
            "model": self.model,
            "messages": build_prompt(self.task, state, n),
            "temperature": self.temperature,
        }
        try:
            reply = self._post(body)
            text = reply["choices"][0]["message"]["content"]
            if not isinstance(text, str):
                raise TypeError("message content is not text")
        except TimeoutError:
            return [Candidate("", origin="llm", error=f"timeout after {self.timeout}s")]
        except (OSError, KeyError, IndexError, TypeError, ValueError) as exc:
            return [Candidate("", origin="llm", error=f"request failed: {exc}"[:300])]
        out = []
        for item in parse_reply(text)[: max(n, 1)]:
            if isinstance(item, str):
                out.append(Candidate(text[:300], origin="llm", error=item))
            else:
                out.append(item)
        return out

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.base_url}/chat/completions"
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        try:
            import httpx
        except ImportError:
            httpx = None  # type: ignore[assignment]
        if httpx is not None:
            try:
                r = httpx.post(url, json=body, headers=headers, timeout=self.timeout)
            except httpx.TimeoutException as exc:
                raise TimeoutError(str(exc)) from None
            except httpx.HTTPError as exc:
                raise OSError(str(exc)) from None
            if r.status_code != 200:
                raise OSError(f"HTTP {r.status_code}: {r.text[:200]}")
            return dict(r.json())
        req = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return dict(json.loads(resp.read().decode()))
        except urllib.error.HTTPError as exc:
            raise OSError(f"HTTP {exc.code}: {exc.read()[:200]!r}") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise TimeoutError(str(exc)) from None
            raise OSError(str(exc)) from None
