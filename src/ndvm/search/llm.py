"""LLM proposer: candidate programs from an OpenAI-compatible chat-completions endpoint.

Configuration (:class:`LLMConfig`) comes from command-line values with the environment as
fallback: ``--llm-base-url`` / ``NDVM_LLM_BASE_URL`` / ``OPENAI_BASE_URL`` (required),
``--llm-model`` / ``NDVM_LLM_MODEL`` / ``OPENAI_MODEL`` (required: an empty model is never
sent), the key from the variable ``--llm-api-key-env`` names (default ``NDVM_LLM_API_KEY``,
then ``OPENAI_API_KEY``; sent as a bearer token), ``--llm-timeout`` / ``NDVM_LLM_TIMEOUT``.

Each batch is one request (``llm_http``: the ``openai`` client when installed, else
``http.client``, both behind the same guards: no redirects, a reply size cap, a wall-clock
deadline per request that never passes the end of the search's time budget, retries with
backoff). ``config.ahead`` requests (``--llm-ahead``, default 2) stay in flight while answered
batches calibrate (``llm_ahead``, the first alone). The prompt carries the description (never
the law that generated its data), the grammar, the best programs so far ranked by validation
loss (train loss when records have no validation split; held-out/test metrics are never shown)
and the latest failures with their reasons. Every fenced code block of the reply is one
candidate; a reply without blocks or with an unreadable block becomes a rejected candidate
carrying the reason. A failed request (transport, timeout, HTTP status, malformed reply;
after its retries) raises :class:`~ndvm.errors.ProposerFailed` with the reason when it is the
first request of the process (a wrong URL, model or key, or an endpoint that is down, stops
the search at once); later ones are recorded like bad replies and the search goes on until
``max_consecutive_failures`` requests in a row have failed. After ``max_requests`` requests
the proposer has nothing more and the search ends.

With ``--llm-language numpy`` (``LLMConfig.language``) the prompt is LLM-SR's instead: Python
``def equation(..., params)`` skeletons over NumPy, the best so far with their scores
(``skeletons.numpy_prompt``); each block is translated by ``ndvm.from_numpy`` and its text
recorded beside the program (``Candidate.text``, the store's ``text`` column).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ndvm.errors import ConfigError, NdvmError, ProposerFailed, RequestFailed
from ndvm.lang.reader import read
from ndvm.search.candidate import Candidate, Record
from ndvm.search.llm_ahead import LLMUsage, Lookahead
from ndvm.search.llm_http import MAX_REPLY, Transport, make_transport, one_line, url_problem
from ndvm.search.skeletons import numpy_prompt, parse_numpy_reply
from ndvm.search.state import SearchState
from ndvm.tasks.base import Task

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.S)
BASE_URL_ENV = ("NDVM_LLM_BASE_URL", "OPENAI_BASE_URL")
MODEL_ENV = ("NDVM_LLM_MODEL", "OPENAI_MODEL")
KEY_ENV = ("NDVM_LLM_API_KEY", "OPENAI_API_KEY")
TIMEOUT_ENV = "NDVM_LLM_TIMEOUT"
TRANSPORTS = ("auto", "openai", "urllib")
LANGUAGES = ("scheme", "numpy")  # what the model is asked to write (numpy: ``skeletons``)


@dataclass(frozen=True)
class LLMConfig:
    """Where and how the LLM proposer asks. ``max_requests=None``: no cap (the budget rules);
    ``max_retries``: retries of one request on transient errors (``llm_http``)."""

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    api_key_env: str | None = None  # the variable the key was read from (shown, not the key)
    temperature: float = 0.8
    timeout: float = 60.0
    max_requests: int | None = None
    max_consecutive_failures: int = 5
    max_retries: int = 2
    transport: str = "auto"  # auto (openai when importable), openai or urllib
    max_reply_bytes: int = MAX_REPLY  # reply size cap (llm_http)
    ahead: int = 2  # requests kept in flight while batches calibrate (0: one at a time)
    language: str = "scheme"  # scheme (ndvm programs) or numpy (LLM-SR-style skeletons)

    def __post_init__(self) -> None:
        object.__setattr__(self, "base_url", self.base_url.strip().rstrip("/"))
        object.__setattr__(self, "model", self.model.strip())
        if not self.base_url:
            raise ConfigError(
                "llm proposer: no endpoint: pass --llm-base-url or set NDVM_LLM_BASE_URL "
                "(an OpenAI-compatible .../v1 URL)"
            )
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"llm proposer: --llm-base-url {self.base_url!r} is not http(s)")
        problem = url_problem(self.base_url)
        if problem:
            raise ConfigError(f"llm proposer: --llm-base-url: {problem}")
        if not self.model:
            raise ConfigError("llm proposer: no model: pass --llm-model or set NDVM_LLM_MODEL")
        checks = (
            (math.isfinite(self.temperature) and 0.0 <= self.temperature <= 2.0,
             f"--llm-temperature must be in [0, 2], not {self.temperature}"),
            (math.isfinite(self.timeout) and self.timeout > 0,
             f"--llm-timeout must be positive, not {self.timeout}"),
            (self.max_requests is None or self.max_requests >= 1,
             f"--llm-max-requests must be at least 1, not {self.max_requests}"),
            (self.max_consecutive_failures >= 1,
             f"--llm-max-failures must be at least 1, not {self.max_consecutive_failures}"),
            (self.max_retries >= 0, f"--llm-retries must be >= 0, not {self.max_retries}"),
            (self.transport in TRANSPORTS, f"transport must be one of {TRANSPORTS}"),
            (self.max_reply_bytes >= 1024,
             f"--llm-max-reply-mb must allow at least 1 KB, not {self.max_reply_bytes} bytes"),
            (0 <= self.ahead <= 16, f"--llm-ahead must be in [0, 16], not {self.ahead}"),
            (self.language in LANGUAGES,
             f"--llm-language must be one of {', '.join(LANGUAGES)}, not {self.language!r}"),
        )  # fmt: skip
        for ok, message in checks:
            if not ok:
                raise ConfigError(f"llm proposer: {message}")

    @classmethod
    def resolve(
        cls,
        *,
        base_url: str | None = None,
        model: str | None = None,
        api_key_env: str | None = None,
        temperature: float | None = None,
        timeout: float | None = None,
        max_requests: int | None = None,
        max_failures: int | None = None,
        max_retries: int | None = None,
        transport: str = "auto",
        max_reply_mb: float | None = None,
        ahead: int | None = None,
        language: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> LLMConfig:
        """Given values win; unset ones come from ``env`` (default ``os.environ``)."""
        env = os.environ if env is None else env
        if api_key_env:
            if not env.get(api_key_env):
                raise ConfigError(
                    f"llm proposer: environment variable {api_key_env} (--llm-api-key-env) "
                    "is not set"
                )
            key_var: str | None = api_key_env
        else:
            key_var = _first_set(env, KEY_ENV)
        timeout_text = env.get(TIMEOUT_ENV)
        if timeout is None and timeout_text:
            try:
                timeout = float(timeout_text)
            except ValueError:
                raise ConfigError(f"{TIMEOUT_ENV}={timeout_text!r} is not a number") from None
        return cls(
            base_url=base_url or _first_value(env, BASE_URL_ENV),
            model=model or _first_value(env, MODEL_ENV),
            api_key=env.get(key_var) if key_var else None,
            api_key_env=key_var,
            temperature=0.8 if temperature is None else temperature,
            timeout=60.0 if timeout is None else timeout,
            max_requests=max_requests,
            max_consecutive_failures=5 if max_failures is None else max_failures,
            max_retries=2 if max_retries is None else max_retries,
            transport=transport,
            max_reply_bytes=MAX_REPLY if max_reply_mb is None else _mb(max_reply_mb),
            ahead=2 if ahead is None else ahead,
            language=language or "scheme",
        )

    @classmethod
    def from_args(cls, args: argparse.Namespace, env: Mapping[str, str] | None = None) -> LLMConfig:
        """The configuration from the options :func:`add_llm_arguments` added."""
        return cls.resolve(
            base_url=args.llm_base_url,
            model=args.llm_model,
            api_key_env=args.llm_api_key_env,
            temperature=args.llm_temperature,
            timeout=args.llm_timeout,
            max_requests=args.llm_max_requests,
            max_failures=args.llm_max_failures,
            max_retries=args.llm_retries,
            max_reply_mb=getattr(args, "llm_max_reply_mb", None),
            ahead=getattr(args, "llm_ahead", None),
            language=getattr(args, "llm_language", None),
            env=env,
        )


def _mb(mb: float) -> int:
    if not (math.isfinite(mb) and mb > 0):
        raise ConfigError(f"llm proposer: --llm-max-reply-mb must be positive, not {mb}")
    return int(mb * 2**20)


def _first_set(env: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    return next((n for n in names if env.get(n)), None)


def _first_value(env: Mapping[str, str], names: tuple[str, ...]) -> str:
    return next((env[n] for n in names if env.get(n)), "")


def add_llm_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``--llm-*`` options of ``--proposer llm`` (unset: the environment, then defaults)."""
    g = parser.add_argument_group("LLM proposer (--proposer llm)")
    g.add_argument("--llm-base-url", metavar="URL",
                   help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 "
                   "(default: $NDVM_LLM_BASE_URL, $OPENAI_BASE_URL)")  # fmt: skip
    g.add_argument("--llm-model", metavar="NAME",
                   help="model name (default: $NDVM_LLM_MODEL, $OPENAI_MODEL)")  # fmt: skip
    g.add_argument("--llm-api-key-env", metavar="VAR",
                   help="environment variable holding the API key (default: "
                   "NDVM_LLM_API_KEY, then OPENAI_API_KEY; neither set: no key)")  # fmt: skip
    g.add_argument("--llm-temperature", type=float, metavar="T", help="default 0.8")
    g.add_argument("--llm-timeout", type=float, metavar="S",
                   help="wall-clock seconds per request, retries included (default: "
                   "$NDVM_LLM_TIMEOUT or 60; never past the end of --budget)")  # fmt: skip
    g.add_argument("--llm-max-requests", type=int, metavar="N",
                   help="stop proposing after N requests (default: no cap)")  # fmt: skip
    g.add_argument("--llm-max-failures", type=int, metavar="N",
                   help="stop the search after N failed requests in a row (default 5)")  # fmt: skip
    g.add_argument("--llm-retries", type=int, metavar="N",
                   help="retries of one request on transient errors (default 2)")  # fmt: skip
    g.add_argument("--llm-max-reply-mb", type=float, metavar="MB",
                   help="reply size cap in MB (default 16)")  # fmt: skip
    g.add_argument("--llm-ahead", type=int, metavar="N",
                   help="requests kept in flight while earlier batches calibrate "
                   "(default 2; 0: one request at a time)")  # fmt: skip
    g.add_argument("--llm-language", choices=LANGUAGES, metavar="LANG",
                   help="what the model writes: scheme (ndvm programs, default) or numpy "
                   "(LLM-SR-style Python skeletons, translated by ndvm.from_numpy)")  # fmt: skip


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


def reply_text(reply: Any) -> str:
    """The message content of a chat-completions reply, or :class:`RequestFailed`."""
    if not isinstance(reply, dict):
        raise RequestFailed(f"malformed reply: a JSON {type(reply).__name__}, not an object")
    choices = reply.get("choices")
    if not isinstance(choices, list) or not choices:
        raise RequestFailed(f"malformed reply: no choices: {brief(reply)}")
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        choice = brief(choices[0])
        raise RequestFailed(f"malformed reply: choice without text content: {choice}")
    return content


def brief(value: Any) -> str:
    """The start of ``value``'s text on one line (a deeply nested value: a note saying so)."""
    try:
        return one_line(str(value), 120)
    except RecursionError:
        return "(nested too deeply to show)"


def _metric(ev: Any, name: str) -> float:
    v = getattr(ev, name, None)
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else math.nan


def ranked(state: SearchState, k: int = 5) -> list[tuple[Record, str]]:
    """The ``k`` best calibrated programs by validation MSE (train MSE for records without a
    validation score), each with the metrics the prompt shows. Held-out metrics never."""
    rows = []
    for r in state.ok:
        ev = r.evaluation
        val, val_r2 = _metric(ev, "validation_mse"), _metric(ev, "validation_r2")
        train = _metric(ev, "train_loss")
        if math.isfinite(val):
            r2 = f"validation R²={val_r2:.4f}, " if math.isfinite(val_r2) else ""
            rows.append(((0, val, r.complexity, r.idx), r, f"{r2}validation MSE={val:.4g}"))
        elif math.isfinite(train):
            rows.append(((1, train, r.complexity, r.idx), r, f"train MSE={train:.4g}"))
    rows.sort(key=lambda row: row[0])
    return [(r, text) for _, r, text in rows[:k]]


def build_prompt(task: Task, state: SearchState, n: int) -> list[dict[str, str]]:
    """Chat messages: system (format, grammar) and user (the task's description, never the law
    that generated its data; the best programs so far; recent failures)."""
    spec = task.search
    assert spec is not None
    system = (
        "You propose candidate scientific models as programs in a small Scheme (ndvm). "
        "Answer with each program in its own ```scheme fenced code block, nothing else. "
        "Parameters are fitted to the data after you answer: use parameter names, not "
        "guessed constants.\nGrammar:\n" + spec.grammar.describe()
    )
    about = spec.prompt or f"Regression: find a model of y from {', '.join(task.inputs)}."
    lines = [f"Task: {about}", ""]
    best = ranked(state)
    if best:
        lines.append("Best programs so far (after calibration):")
        lines += [f"  {r.candidate.src}    ; complexity {r.complexity}, {m}" for r, m in best]
    fails = [r for r in state.failures(8) if r.candidate.src][-5:]
    if fails:
        lines.append("Recent failures (do not repeat them):")
        for r in fails:
            reason = r.evaluation.reason if r.evaluation else ""
            lines.append(f"  {r.candidate.src[:200]}    ; {reason[:160]}")
    lines.append(f"Propose {n} new programs, structurally different from those above.")
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]


class LLMProposer:
    """Asks the endpoint for ``n`` programs per batch (one request per batch), keeping
    ``config.ahead`` requests in flight while the batches already answered calibrate."""

    def __init__(
        self, task: Task, config: LLMConfig | None = None, *, transport: Transport | None = None
    ) -> None:
        self.task = task
        self.config = config if config is not None else LLMConfig.resolve()
        self.transport = transport if transport is not None else make_transport(self.config)
        self.name = f"llm:{self.config.model}"
        self.failures = 0  # consecutive failed requests
        self.answered = False  # the endpoint has answered a request of this process
        self.stop_reason = ""  # why propose returned nothing (the request cap, the budget)
        self.end: float | None = None  # the search's deadline (time.monotonic()), if any
        self.ahead: Lookahead | None = None

    @property
    def requests(self) -> int:
        """Requests sent by this process (retries not counted)."""
        return self.ahead.sent if self.ahead is not None else 0

    def start(self, end: float | None) -> None:
        """The search begins; no request may outlive ``end`` (a ``time.monotonic()`` instant,
        the end of its time budget; ``None``: no time budget)."""
        self.end = end
        self._pool()

    def _pool(self) -> Lookahead:
        if self.ahead is None:
            send = lambda body: self.transport.complete(body, self.end)  # noqa: E731
            self.ahead = Lookahead(send, max(self.config.ahead, 1))
        return self.ahead

    def usage(self) -> LLMUsage:
        """Both sides' busy time so far (:class:`~ndvm.search.llm_ahead.LLMUsage`)."""
        return self._pool().usage()

    def close(self) -> None:
        """The search is over: requests still in flight are abandoned (their sockets shut)."""
        if self.ahead is not None:
            self.ahead.close()
        close = getattr(self.transport, "close", None)
        if callable(close):
            close()

    def _fill(self, state: SearchState, n: int) -> None:
        """Send requests until ``ahead`` are in flight (one, until the endpoint answered)."""
        cfg, pool = self.config, self._pool()
        width = max(cfg.ahead, 1) if self.answered else 1
        while len(pool) < width and (cfg.max_requests is None or pool.sent < cfg.max_requests):
            prompt = numpy_prompt if cfg.language == "numpy" else build_prompt
            body = {"model": cfg.model, "messages": prompt(self.task, state, n),
                    "temperature": cfg.temperature}  # fmt: skip
            pool.submit(body)

    def propose(self, state: SearchState, n: int) -> list[Candidate]:
        cfg, pool = self.config, self._pool()
        self._fill(state, n)
        if not len(pool):
            self.stop_reason = f"llm request cap reached ({cfg.max_requests} requests)"
            return []
        try:
            text = reply_text(pool.take())
        except RequestFailed as exc:
            if self.end is not None and time.monotonic() >= self.end:
                self.stop_reason = f"search budget spent while waiting for the llm ({exc})"
                return []
            self.failures += 1
            if not self.answered:
                raise ProposerFailed(
                    f"llm proposer: {cfg.base_url} (model {cfg.model!r}) failed the first "
                    f"request: {exc.message}"
                ) from None
            if self.failures >= cfg.max_consecutive_failures:
                raise ProposerFailed(
                    f"llm proposer stopped after {self.failures} failed requests in a row to "
                    f"{cfg.base_url}: {exc.message}"
                ) from None
            if cfg.ahead:
                self._fill(state, n)
            return [Candidate("", origin="llm", error=f"request failed: {exc.message}"[:300])]
        self.failures, self.answered = 0, True
        if cfg.ahead:  # the next requests go out now, while this batch calibrates
            self._fill(state, n)
        if cfg.language == "numpy":  # each block a skeleton, translated; its text recorded
            blocks = [b for _, b in _FENCE.findall(text)]
            return parse_numpy_reply(text, blocks, self.task.inputs, n)
        out = []
        for item in parse_reply(text)[: max(n, 1)]:
            if isinstance(item, str):
                out.append(Candidate(text[:300], origin="llm", error=item))
            else:
                out.append(item)
        return out
