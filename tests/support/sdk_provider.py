"""A loopback provider that answers as OpenAI, Anthropic, Stripe and GitHub document, for the
tests that run the official SDKs (``base_url=`` pointed at it, the SDK's own retries off).

Each test starts its own on port 0 with a script: one :class:`Answer` per request, in order
(the last one repeats). Every request is recorded with its arrival time, so a test reads how
long the retrier waited between attempts and what each attempt carried.

The answers follow each provider's documentation:

- OpenAI: ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` (resets as ``1s``/``6m0s``),
  ``retry-after-ms``, ``x-should-retry``, ``{"error": {"message", "type", "code"}}`` bodies,
  server-sent events for ``stream=True``.
  https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers
- Anthropic: 429 ``rate_limit_error`` with ``retry-after`` and ``anthropic-ratelimit-*-reset``
  RFC 3339 times; 529 ``overloaded_error``; ``{"type": "error", "error": {...}}`` bodies; the
  message stream's events. https://docs.anthropic.com/en/api/rate-limits,
  https://docs.anthropic.com/en/api/errors, https://docs.anthropic.com/en/api/messages-streaming
- Stripe: 429 ``rate_limit`` errors, ``Stripe-Should-Retry``, ``Request-Id``.
  https://docs.stripe.com/rate-limits, https://docs.stripe.com/error-low-level
- GitHub: 403/429 with ``x-ratelimit-remaining: 0``, ``x-ratelimit-reset`` (epoch seconds) or
  ``retry-after``. https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Answer:
    """One scripted answer: its status, headers and body (``chunks``: sent one by one, as a
    stream of server-sent events is)."""

    status: int
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    chunks: tuple[bytes, ...] = ()


@dataclass(frozen=True)
class Seen:
    """One request the provider received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic() when its headers had arrived
    wall: float  # time.time() then


@dataclass
class FakeProvider:
    """A running loopback provider: ``url``, and every request it received in ``requests``."""

    url: str
    script: list[Answer]
    requests: list[Seen] = field(default_factory=list)

    def gaps(self) -> list[float]:
        """Seconds between consecutive requests' arrivals."""
        return [b.at - a.at for a, b in zip(self.requests, self.requests[1:], strict=False)]


def _json(status: int, payload: object, headers: Sequence[tuple[str, str]] = ()) -> Answer:
    return Answer(status, (("content-type", "application/json"), *headers),
                  json.dumps(payload).encode())


def _sse(events: Sequence[tuple[str | None, object]], headers: Sequence[tuple[str, str]] = ()) -> Answer:
    def event(name: str | None, data: object) -> bytes:
        text = data if isinstance(data, str) else json.dumps(data)
        return ((f"event: {name}\n" if name else "") + f"data: {text}\n\n").encode()
    chunks = tuple(event(name, data) for name, data in events)
    return Answer(200, (("content-type", "text/event-stream"), *headers), chunks=chunks)


SECOND_ROUNDING = 0.001
"""The most an RFC 3339 time with milliseconds lies past the instant it was made for."""


def rfc3339(seconds_from_now: float) -> str:
    """An RFC 3339 time ``seconds_from_now`` ahead (with milliseconds), as Anthropic sends."""
    at = datetime.now(timezone.utc) + timedelta(seconds=seconds_from_now)
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# OpenAI ------------------------------------------------------------------------------------

def openai_error(status: int, message: str, kind: str, code: str | None,
                 headers: Sequence[tuple[str, str]] = ()) -> Answer:
    return _json(status, {"error": {"message": message, "type": kind, "param": None, "code": code}},
                 (("x-request-id", "req_fake"), *headers))


def openai_rate_limited(retry_after_ms: int) -> Answer:
    """429: the request limit reached; ``retry-after-ms`` and the reset name the wait."""
    return openai_error(429, "Rate limit reached for requests", "requests", "rate_limit_exceeded", (
        ("x-ratelimit-limit-requests", "60"), ("x-ratelimit-remaining-requests", "0"),
        ("x-ratelimit-reset-requests", f"{retry_after_ms}ms"),
        ("retry-after-ms", str(retry_after_ms))))


def openai_server_error(status: int = 500) -> Answer:
    return openai_error(status, "The server had an error while processing your request.",
                        "server_error", None)


def openai_bad_request() -> Answer:
    return openai_error(400, "Invalid 'messages': empty array.", "invalid_request_error",
                        "empty_array")


def openai_chat(text: str = "hello") -> Answer:
    return _json(200, {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}},
        (("x-ratelimit-remaining-requests", "59"), ("x-ratelimit-reset-requests", "1s")))


def openai_model() -> Answer:
    return _json(200, {"id": "gpt-4o-mini", "object": "model", "created": 1, "owned_by": "openai"})


def openai_chat_stream(words: Sequence[str]) -> Answer:
    def chunk(delta: dict[str, str], finish: str | None) -> dict[str, Any]:
        return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                "model": "gpt-4o-mini",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    events: list[tuple[str | None, object]] = [(None, chunk({"role": "assistant"}, None))]
    events += [(None, chunk({"content": w}, None)) for w in words]
    events += [(None, chunk({}, "stop")), (None, "[DONE]")]
    return _sse(events)


# Anthropic ---------------------------------------------------------------------------------

def anthropic_error(status: int, kind: str, message: str,
                    headers: Sequence[tuple[str, str]] = ()) -> Answer:
    return _json(status, {"type": "error", "error": {"type": kind, "message": message},
                          "request_id": "req_fake"}, (("request-id", "req_fake"), *headers))


def anthropic_rate_limited(*, retry_after: int | None = None,
                           reset_in: float | None = None) -> Answer:
    """429 ``rate_limit_error``: ``retry-after`` seconds and/or the requests reset (RFC 3339)."""
    headers = [("anthropic-ratelimit-requests-limit", "50"),
               ("anthropic-ratelimit-requests-remaining", "0")]
    if reset_in is not None:
        headers.append(("anthropic-ratelimit-requests-reset", rfc3339(reset_in)))
    if retry_after is not None:
        headers.append(("retry-after", str(retry_after)))
    return anthropic_error(429, "rate_limit_error",
                           "This request would exceed your rate limit.", headers)


def anthropic_overloaded() -> Answer:
    return anthropic_error(529, "overloaded_error", "Overloaded")


def anthropic_bad_request() -> Answer:
    return anthropic_error(400, "invalid_request_error", "max_tokens: field required")


def anthropic_message(text: str = "hello") -> Answer:
    return _json(200, {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
        "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}},
        (("request-id", "req_fake"), ("anthropic-ratelimit-requests-remaining", "49")))


def anthropic_model() -> Answer:
    return _json(200, {"type": "model", "id": "claude-sonnet-4-5", "display_name": "Claude",
                       "created_at": "2025-09-29T00:00:00Z"}, (("request-id", "req_fake"),))


def anthropic_message_stream(words: Sequence[str]) -> Answer:
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
               "content": [], "stop_reason": None, "stop_sequence": None,
               "usage": {"input_tokens": 1, "output_tokens": 0}}
    events: list[tuple[str | None, object]] = [
        ("message_start", {"type": "message_start", "message": message}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}})]
    events += [("content_block_delta", {"type": "content_block_delta", "index": 0,
                                        "delta": {"type": "text_delta", "text": w}}) for w in words]
    events += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
               ("message_delta", {"type": "message_delta",
                                  "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                  "usage": {"output_tokens": len(words)}}),
               ("message_stop", {"type": "message_stop"})]
    return _sse(events)


# Stripe ------------------------------------------------------------------------------------

def stripe_error(status: int, kind: str, message: str, code: str | None = None,
                 headers: Sequence[tuple[str, str]] = ()) -> Answer:
    error = {"type": kind, "message": message, **({"code": code} if code else {})}
    return _json(status, {"error": error}, (("request-id", "req_fake"), *headers))


def stripe_rate_limited() -> Answer:
    """429 ``rate_limit``: Stripe names no time to come back."""
    return stripe_error(429, "invalid_request_error",
                        "Too many requests hit the API too quickly.", "rate_limit")


def stripe_server_error() -> Answer:
    return stripe_error(500, "api_error", "An unknown error occurred",
                        headers=(("stripe-should-retry", "true"),))


def stripe_customer() -> Answer:
    return _json(200, {"id": "cus_1", "object": "customer", "email": "a@example.com"},
                 (("request-id", "req_fake"),))


# GitHub ------------------------------------------------------------------------------------

def github_rate_limited(*, reset_in: int | None = None, retry_after: int | None = None,
                        status: int = 403) -> Answer:
    headers = [("x-ratelimit-limit", "5000"), ("x-ratelimit-remaining", "0"),
               ("x-ratelimit-used", "5000"), ("x-ratelimit-resource", "core")]
    if reset_in is not None:
        headers.append(("x-ratelimit-reset", str(int(time.time()) + reset_in)))
    if retry_after is not None:
        headers.append(("retry-after", str(retry_after)))
    return _json(status, {"message": "API rate limit exceeded for user ID 1.",
                          "documentation_url": "https://docs.github.com/rest/rate-limit"}, headers)


def github_not_found() -> Answer:
    return _json(404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})


def github_server_error() -> Answer:
    return _json(502, {"message": "Server Error"})


def github_issue(title: str = "hello") -> Answer:
    return _json(201, {"id": 1, "number": 1, "title": title, "state": "open"})


def github_repo() -> Answer:
    return _json(200, {"id": 1, "name": "hello", "full_name": "octo/hello",
                       "owner": {"login": "octo", "id": 1}},
                 (("x-ratelimit-remaining", "4999"), ("x-ratelimit-limit", "5000")))


# The server --------------------------------------------------------------------------------

class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    provider: FakeProvider
    lock: threading.Lock

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _answer(self) -> None:
        at, wall = time.monotonic(), time.time()
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        with self.lock:
            provider = self.provider
            provider.requests.append(Seen(self.command, self.path,
                                          {k.lower(): v for k, v in self.headers.items()}, body, at,
                                          wall))
            script = provider.script
            answer = script.pop(0) if len(script) > 1 else script[0]
        self.send_response(answer.status)
        for name, value in answer.headers:
            self.send_header(name, value)
        if answer.chunks:
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for chunk in answer.chunks:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.send_header("content-length", str(len(answer.body)))
            self.end_headers()
            self.wfile.write(answer.body)

    do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = _answer


@contextmanager
def serve(*script: Answer) -> Iterator[FakeProvider]:
    """A provider answering ``script`` on a free loopback port, for the ``with`` block."""
    provider = FakeProvider("", list(script))
    handler = type("Handler", (_Handler,), {"provider": provider, "lock": threading.Lock()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    provider.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield provider
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


DOC_SCRIPTS: dict[str, tuple[Answer, ...]] = {
    "openai": (openai_rate_limited(200), openai_chat("Hello!")),
    "openai-limited": (openai_rate_limited(90_000),),
    "openai-stream": (openai_server_error(503), openai_chat_stream(["Hel", "lo!"])),
    "anthropic": (anthropic_overloaded(), anthropic_message("Hello!")),
    "anthropic-model": (anthropic_overloaded(), anthropic_model()),
    "anthropic-limited": (anthropic_rate_limited(retry_after=90, reset_in=90),),
    "anthropic-stream": (anthropic_rate_limited(retry_after=1), anthropic_message_stream(["Hel", "lo!"])),
    "stripe": (stripe_server_error(), stripe_customer()),
    "stripe-limited": (stripe_rate_limited(),),
    "github": (github_server_error(), github_repo()),
    "github-limited": (github_rate_limited(reset_in=3600),),
}
"""The loopback provider's script for each ``<!-- example: sdk NAME -->`` block of the docs."""
