"""The sandbox as an LLM provider: OpenAI's chat completions and Anthropic's messages.

``POST /v1/chat/completions`` answers as OpenAI documents it and ``POST /v1/messages`` as
Anthropic does: the answer's ``usage``, each provider's quota headers on every answer and its
429 body over a quota (https://platform.openai.com/docs/guides/rate-limits,
https://docs.anthropic.com/en/api/rate-limits). The quotas (:class:`LlmLimits`) are fixed
windows of requests, tokens, input tokens and output tokens, shared by both routes of a run.

Token counts come from a stand-in tokenizer, deterministic and deliberately not the
four-characters-a-token estimate a client makes: every run of up to four word characters and
every punctuation mark is a token, and each message adds :data:`MESSAGE_TOKENS` (once more for
the reply). The answer's text is ``max_tokens`` times ``output_share`` tokens long; with
``"stream": true`` it comes as the provider's server-sent events.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from retrybudget._clock import Clock
from retrybudget.core.tokens import (
    QuotaDimension,
    TokenEstimate,
    TokenUsage,
    token_charges,
    token_corrections,
)
from retrybudget.sandbox._config import LlmLimits

__all__ = ["MESSAGE_TOKENS", "LlmProvider", "count_tokens", "go_duration"]

MESSAGE_TOKENS = 3
"""Tokens each message adds to the prompt besides its text (and once for the reply)."""

_TOKEN = re.compile(r"\w{1,4}|[^\w\s]")
_HISTORY = 1000  # windows kept per run for ``GET /_llm/{run_id}``

Dialect = Literal["openai", "anthropic"]
Dimension = QuotaDimension
_LABELS: dict[Dimension, str] = {"requests": "requests per min (RPM)",
                                 "tokens": "tokens per min (TPM)",
                                 "input-tokens": "input tokens per minute",
                                 "output-tokens": "output tokens per minute"}


def count_tokens(text: str) -> int:
    """The sandbox tokenizer: runs of up to four word characters and punctuation marks."""
    return len(_TOKEN.findall(text))


def _content_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(_content_text(part) for part in content)
    if isinstance(content, dict):
        if isinstance(content.get("text"), str):
            return str(content["text"])
        return _content_text(content.get("content", json.dumps(content, default=str)))
    return "" if content is None else json.dumps(content, default=str)


def prompt_tokens(body: dict[str, Any]) -> int:
    """The prompt's tokens: the messages', the system prompt's and the tools' (as JSON)."""
    messages = body.get("messages")
    texts = [_content_text(m.get("content") if isinstance(m, dict) else m)
             for m in (messages if isinstance(messages, list) else [])]
    if "system" in body:
        texts.append(_content_text(body["system"]))
    if body.get("tools") is not None:
        texts.append(json.dumps(body["tools"], default=str))
    return sum(count_tokens(text) for text in texts) + MESSAGE_TOKENS * (len(texts) + 1)


def go_duration(seconds: float) -> str:
    """A duration as Go prints it and OpenAI sends it: ``20ms``, ``1.2s``, ``6m0s``, ``1h0m0s``."""
    ms = max(0, math.ceil(seconds * 1000))
    if ms < 1000:
        return f"{ms}ms"
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    text = f"{rest / 1000:.3f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{hours}h{minutes}m{text}"
    return f"{minutes}m{text}" if minutes else text


def _rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _Window:
    """One run's current window: what each dimension has been charged in it."""

    index: int
    used: dict[Dimension, int]


@dataclass(frozen=True, slots=True)
class _Quota:
    dimension: Dimension
    limit: int
    remaining: int
    reset_epoch: float


class _Runs:
    """Every run's windows and their history, behind one lock."""

    def __init__(self, limits: LlmLimits) -> None:
        self.limits = limits
        self._lock = threading.Lock()
        self._current: dict[str, _Window] = {}
        self._history: dict[str, dict[int, dict[str, int]]] = {}
        self._rejected: dict[str, int] = {}

    def _limit(self, dimension: Dimension) -> int | None:
        return {"requests": self.limits.rpm, "tokens": self.limits.tpm,
                "input-tokens": self.limits.input_tpm,
                "output-tokens": self.limits.output_tpm}[dimension]

    def _window(self, run_id: str, now: float) -> _Window:
        index = math.floor(now / self.limits.window_s)
        window = self._current.get(run_id)
        if window is None or window.index != index:
            window = _Window(index, {"requests": 0, "tokens": 0, "input-tokens": 0,
                                     "output-tokens": 0})
            self._current[run_id] = window
            history = self._history.setdefault(run_id, {})
            history[index] = {"requests": 0, "tokens": 0, "input_tokens": 0, "output_tokens": 0}
            while len(history) > _HISTORY:
                del history[min(history)]
        return window

    def _charge(self, run_id: str, window: _Window, costs: dict[Dimension, int]) -> None:
        history = self._history[run_id][window.index]
        for dimension, cost in costs.items():
            window.used[dimension] += cost
            history[dimension.replace("-", "_")] += cost

    def admit(
        self, run_id: str, costs: dict[Dimension, int], now: float
    ) -> tuple[Dimension | None, int, list[_Quota]]:
        """Charge ``costs`` if every quota has room: the quota that refused (or ``None``), the
        window's index and every quota's state after."""
        with self._lock:
            window = self._window(run_id, now)
            refused = next((d for d, cost in costs.items()
                            if (limit := self._limit(d)) is not None
                            and window.used[d] + cost > limit), None)
            if refused is None:
                self._charge(run_id, window, costs)
            else:
                self._rejected[run_id] = self._rejected.get(run_id, 0) + 1
            return refused, window.index, self._quotas(window)

    def correct(self, run_id: str, index: int, corrections: dict[Dimension, int],
                now: float) -> list[_Quota]:
        """Add ``corrections`` (negative: unused output given back) to window ``index`` if it
        is still current."""
        with self._lock:
            window = self._window(run_id, now)
            if window.index == index:
                self._charge(run_id, window, corrections)
            return self._quotas(window)

    def _quotas(self, window: _Window) -> list[_Quota]:
        reset = (window.index + 1) * self.limits.window_s
        quotas = []
        for dimension, used in window.used.items():
            limit = self._limit(dimension)
            if limit is not None:
                quotas.append(_Quota(dimension, limit, max(0, limit - used), reset))
        return quotas

    def report(self, run_id: str) -> dict[str, Any]:
        """What ``GET /_llm/{run_id}`` answers: the limits and every window's charges."""
        with self._lock:
            history = self._history.get(run_id, {})
            windows = [{"start": index * self.limits.window_s, **charged}
                       for index, charged in sorted(history.items())]
            limits = self.limits
            return {"run_id": run_id, "window_s": limits.window_s, "rejected": self._rejected.get(run_id, 0),
                    "limits": {"requests": limits.rpm, "tokens": limits.tpm,
                               "input_tokens": limits.input_tpm, "output_tokens": limits.output_tpm},
                    "windows": windows}


def _headers(dialect: Dialect, quotas: list[_Quota], now: float) -> dict[str, str]:
    headers: dict[str, str] = {}
    for quota in quotas:
        if dialect == "openai" and quota.dimension in ("requests", "tokens"):
            kind = quota.dimension
            headers[f"x-ratelimit-limit-{kind}"] = str(quota.limit)
            headers[f"x-ratelimit-remaining-{kind}"] = str(quota.remaining)
            headers[f"x-ratelimit-reset-{kind}"] = go_duration(quota.reset_epoch - now)
        elif dialect == "anthropic":
            prefix = f"anthropic-ratelimit-{quota.dimension}"
            headers[f"{prefix}-limit"] = str(quota.limit)
            headers[f"{prefix}-remaining"] = str(quota.remaining)
            headers[f"{prefix}-reset"] = _rfc3339(quota.reset_epoch)
    return headers


def _error(dialect: Dialect, status: int, kind: str, message: str,
           headers: dict[str, str] | None = None, code: str | None = None) -> Response:
    if dialect == "openai":
        body: dict[str, Any] = {"error": {"message": message, "type": kind, "param": None,
                                          "code": code}}
    else:
        body = {"type": "error", "error": {"type": kind, "message": message}}
    return JSONResponse(body, status, headers)


def _sse(event: str | None, data: object) -> str:
    text = data if isinstance(data, str) else json.dumps(data)
    return (f"event: {event}\n" if event else "") + f"data: {text}\n\n"


def _events(dialect: Dialect, answer: dict[str, Any], body: dict[str, Any]) -> str:
    """The answer as the provider streams it (server-sent events, the text in one delta):
    OpenAI's ``chat.completion.chunk`` objects (``usage`` in a last chunk when
    ``stream_options.include_usage`` is set) and ``[DONE]``; Anthropic's message events, the
    input tokens in ``message_start`` and the output tokens in ``message_delta``."""
    if dialect == "openai":
        choice = answer["choices"][0]
        chunk = {key: answer[key] for key in ("id", "created", "model")}
        chunk["object"] = "chat.completion.chunk"
        deltas = [{"role": "assistant", "content": ""}, {"content": choice["message"]["content"]}, {}]
        events = [_sse(None, {**chunk, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                                      "finish_reason": choice["finish_reason"]
                                                      if index == 2 else None}]})
                  for index, delta in enumerate(deltas)]
        options = body.get("stream_options")
        if isinstance(options, dict) and options.get("include_usage") is True:
            events.append(_sse(None, {**chunk, "choices": [], "usage": answer["usage"]}))
        return "".join(events) + _sse(None, "[DONE]")
    usage = answer["usage"]
    start = {**answer, "content": [], "stop_reason": None,
             "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 1}}
    return "".join([
        _sse("message_start", {"type": "message_start", "message": start}),
        _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": {"type": "text", "text": ""}}),
        _sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "text_delta", "text": answer["content"][0]["text"]}}),
        _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _sse("message_delta", {"type": "message_delta",
                               "delta": {"stop_reason": answer["stop_reason"], "stop_sequence": None},
                               "usage": {"output_tokens": usage["output_tokens"]}}),
        _sse("message_stop", {"type": "message_stop"}),
    ])


class LlmProvider:
    """The LLM routes of one sandbox app and its ``GET /_llm/{run_id}`` report.

    Args:
        limits: the quotas.
        clock: where the wall time of every window comes from.
        run_of: the run a request belongs to (the sandbox's ``X-Sandbox-Run``).
    """

    def __init__(self, limits: LlmLimits, clock: Clock, run_of: Callable[[Request], str]) -> None:
        self.limits = limits
        self.clock = clock
        self.run_of = run_of
        self.runs = _Runs(limits)
        self._ids = 0

    async def chat_completions(self, request: Request) -> Response:
        """``POST /v1/chat/completions``: an OpenAI chat completion."""
        return await self._answer(request, "openai")

    async def messages(self, request: Request) -> Response:
        """``POST /v1/messages``: an Anthropic message."""
        return await self._answer(request, "anthropic")

    async def report(self, request: Request) -> Response:
        """``GET /_llm/{run_id}``: the quotas and what each window was charged."""
        return JSONResponse(self.runs.report(request.path_params["run_id"]))

    def _read(self, dialect: Dialect, raw: bytes) -> tuple[dict[str, Any], int] | str:
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):
            return "the body must be JSON"
        if not isinstance(body, dict):
            return "the body must be a JSON object"
        if not isinstance(body.get("model"), str) or not isinstance(body.get("messages"), list):
            return "model (a string) and messages (a list) are required"
        names = ("max_tokens",) if dialect == "anthropic" else ("max_completion_tokens", "max_tokens")
        given = next((body[name] for name in names if body.get(name) is not None), None)
        if given is None:
            if dialect == "anthropic":
                return "max_tokens: Field required"
            given = self.limits.default_max_tokens
        if isinstance(given, bool) or not isinstance(given, int) or given < 1:
            return f"max_tokens must be a positive integer, got {given!r}"
        return body, given

    async def _answer(self, request: Request, dialect: Dialect) -> Response:
        read = self._read(dialect, await request.body())
        if isinstance(read, str):
            return _error(dialect, 400, "invalid_request_error", read)
        body, max_tokens = read
        prompt = prompt_tokens(body)
        reserved = TokenEstimate(prompt, max_tokens)
        costs = token_charges(reserved)
        run_id = self.run_of(request)
        now = self.clock.wall()
        refused, index, quotas = self.runs.admit(run_id, costs, now)
        if refused is not None:
            return self._rejection(dialect, body["model"], refused, costs[refused], quotas, now)
        output = max(1, round(max_tokens * self.limits.output_share)) if self.limits.output_share else 0
        if output < max_tokens:
            quotas = self.runs.correct(run_id, index, token_corrections(reserved, TokenUsage(prompt, output)),
                                       self.clock.wall())
        self._ids += 1
        text = " ".join(["tok"] * output)
        finish = output >= max_tokens
        headers = _headers(dialect, quotas, now)
        if dialect == "openai":
            answer: dict[str, Any] = {
                "id": f"chatcmpl-sandbox{self._ids}", "object": "chat.completion",
                "created": int(now), "model": body["model"],
                "choices": [{"index": 0, "logprobs": None,
                             "finish_reason": "length" if finish else "stop",
                             "message": {"role": "assistant", "content": text, "refusal": None}}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": output,
                          "total_tokens": prompt + output}}
        else:
            answer = {
                "id": f"msg_sandbox{self._ids}", "type": "message", "role": "assistant",
                "model": body["model"], "content": [{"type": "text", "text": text}],
                "stop_reason": "max_tokens" if finish else "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": prompt, "output_tokens": output}}
        if body.get("stream") is True:
            return Response(_events(dialect, answer, body), 200, headers, media_type="text/event-stream")
        return JSONResponse(answer, 200, headers)

    def _rejection(self, dialect: Dialect, model: str, refused: Dimension, cost: int,
                   quotas: list[_Quota], now: float) -> Response:
        quota = next(q for q in quotas if q.dimension == refused)
        wait = max(quota.reset_epoch - now, 0.001)
        headers = _headers(dialect, quotas, now)
        headers["retry-after"] = str(max(1, math.ceil(wait)))
        too_large = cost > quota.limit
        if dialect == "openai":
            headers["retry-after-ms"] = str(math.ceil(wait * 1000))
            used = quota.limit - quota.remaining
            what = "Request too large" if too_large else "Rate limit reached"
            message = (f"{what} for {model} in organization org-sandbox on {_LABELS[refused]}: "
                       f"Limit {quota.limit}, Used {used}, Requested {cost}. "
                       f"Please try again in {go_duration(wait)}.")
            kind = "requests" if refused == "requests" else "tokens"
            return _error(dialect, 429, kind, message, headers,
                          code="rate_limit_exceeded")
        message = (f"This request would exceed the rate limit for your organization of "
                   f"{quota.limit} {_LABELS[refused]}.")
        if too_large:
            message += " The request is larger than the limit: reduce the prompt or max_tokens."
        return _error(dialect, 429, "rate_limit_error", message, headers)
