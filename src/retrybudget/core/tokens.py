"""Token costs of LLM requests: an estimate before the call, the actual usage after it.

Providers of large language models limit tokens per minute as well as requests per minute.
To pace on tokens a caller needs a cost before the request is sent and the true cost once it
has been answered. This module gives both, from the standard library only:

- :func:`estimate_tokens` reads an OpenAI chat-completions or Anthropic messages request body
  and estimates its cost: the prompt at :data:`CHARS_PER_TOKEN` characters a token, plus the
  output it may produce (``max_tokens``). It is an estimate, not a tokenizer: a real one
  (``tiktoken``, Anthropic's token counting) gives the exact prompt size.
- :func:`usage_from_body` reads what an answer's ``usage`` says was spent, and
  :class:`UsageReader` reads it from a body's bytes as they pass (a JSON answer, or a stream
  of server-sent events), in bounded memory.
- :func:`quota_readings` reads every quota dimension (requests, tokens, input and output tokens)
  from OpenAI's ``x-ratelimit-*`` and Anthropic's ``anthropic-ratelimit-*`` headers, and
  :func:`tokens_spent_between` what two such readings of one window say was spent between them.

Every function is total: any JSON value or header set gives a value (``None`` where nothing is
said), never an exception.
"""

from __future__ import annotations

import json
import math
import re
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from retrybudget.core.headers import HeaderInput, normalize_headers, parse_duration, parse_rfc3339

__all__ = [
    "CHARS_PER_TOKEN",
    "DEFAULT_MAX_TOKENS",
    "MESSAGE_OVERHEAD_TOKENS",
    "QuotaDimension",
    "QuotaReading",
    "TokenEstimate",
    "TokenUsage",
    "UsageReader",
    "estimate_tokens",
    "quota_readings",
    "token_charges",
    "token_corrections",
    "tokens_spent_between",
    "usage_from_body",
]

CHARS_PER_TOKEN = 4
"""Characters a token, the rule of thumb OpenAI and Anthropic give for English text."""

MESSAGE_OVERHEAD_TOKENS = 3
"""Tokens added for each message (its role and separators) and once for the reply's priming,
as OpenAI's cookbook counts them."""

DEFAULT_MAX_TOKENS = 4096
"""The output reserved for a request that names no ``max_tokens`` (OpenAI's is optional; the
model's own ceiling then applies, which a caller should name instead)."""

_MAX_CHOICES = 128  # OpenAI's ``n`` is at most 128

QuotaDimension = Literal["requests", "tokens", "input-tokens", "output-tokens"]
"""One quota a provider publishes: requests, tokens, and Anthropic's input and output tokens."""

_DIMENSIONS: tuple[QuotaDimension, ...] = ("requests", "tokens", "input-tokens", "output-tokens")


@dataclass(frozen=True, slots=True)
class _TokenCount:
    input_tokens: int
    output_tokens: int

    @property
    def total(self) -> int:
        """Input and output together: what a tokens-per-minute quota is charged."""
        return self.input_tokens + self.output_tokens


class TokenEstimate(_TokenCount):
    """The cost of a request before it is sent.

    Attributes:
        input_tokens: the prompt's estimated size (messages, system prompt and tools).
        output_tokens: the most the answer may produce (``max_tokens`` times ``n``).
    """

    __slots__ = ()


class TokenUsage(_TokenCount):
    """What an answer says was spent.

    Attributes:
        input_tokens: prompt tokens (OpenAI ``prompt_tokens``; Anthropic ``input_tokens`` plus
            ``cache_creation_input_tokens``).
        output_tokens: generated tokens (OpenAI ``completion_tokens``, Anthropic
            ``output_tokens``).
    """

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class QuotaReading:
    """One quota dimension as one response's headers state it.

    Attributes:
        dimension: which quota.
        limit: its size per window, if stated.
        remaining: what is left of it, if stated.
        reset_at: the epoch second it is full again, if stated.
    """

    dimension: QuotaDimension
    limit: int | None
    remaining: int | None
    reset_at: float | None


def _count(value: object) -> int | None:
    """A non-negative whole number from JSON (a bool is no number), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return int(value)


def _text_chars(value: object) -> int:
    """Characters of text in a message's content: a string, or a list of parts whose ``text``
    (or, for other parts, their JSON) counts."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list):
        return sum(_text_chars(part) for part in value)
    if isinstance(value, dict):
        text = value.get("text")
        if isinstance(text, str):
            return len(text)
        if "content" in value:  # Anthropic tool_result blocks nest their content
            return _text_chars(value["content"])
        return _json_chars(value)
    return 0 if value is None else len(str(value))


def _json_chars(value: object) -> int:
    try:
        return len(json.dumps(value, separators=(",", ":"), default=str))
    except (ValueError, TypeError, RecursionError):  # cycles, NaN in strict mode, depth
        return 0


def _prompt_tokens(body: Mapping[str, object]) -> int:
    chars = 0
    messages = body.get("messages")
    count = 0
    if isinstance(messages, list):
        for message in messages:
            count += 1
            chars += _text_chars(message.get("content") if isinstance(message, dict) else message)
    for name in ("system", "prompt", "input", "instructions"):
        if name in body:
            count += 1
            chars += _text_chars(body[name])
    tools = body.get("tools")
    if tools is not None:
        chars += _json_chars(tools)
    overhead = MESSAGE_OVERHEAD_TOKENS * (count + 1) if count else 0
    return math.ceil(chars / CHARS_PER_TOKEN) + overhead


def _max_output(body: Mapping[str, object], default_max_tokens: int) -> int:
    reserved = None
    for name in ("max_completion_tokens", "max_tokens", "max_output_tokens"):
        reserved = _count(body.get(name))
        if reserved is not None:
            break
    if reserved is None:
        reserved = default_max_tokens
    choices = _count(body.get("n"))
    return reserved * (min(max(choices, 1), _MAX_CHOICES) if choices is not None else 1)


def estimate_tokens(body: object, *, default_max_tokens: int = DEFAULT_MAX_TOKENS) -> TokenEstimate:
    """Estimate what an LLM request will be charged, from its JSON body.

    Reads an OpenAI chat-completions body (``messages``, ``tools``, ``max_completion_tokens``
    or ``max_tokens``, ``n``) or an Anthropic messages body (``system``, ``messages``,
    ``tools``, ``max_tokens``); ``prompt``, ``input`` and ``instructions`` (completions and
    responses bodies) count as prompt text too. The prompt is estimated at
    :data:`CHARS_PER_TOKEN` characters a token (text parts by their text, other parts and tools
    by their JSON) plus :data:`MESSAGE_OVERHEAD_TOKENS` per message; the output is the
    ``max_tokens`` asked for (:data:`default_max_tokens` when none is named), times ``n``.
    Accepts the body as parsed JSON or as its text or bytes; never raises: a body that is not
    a JSON object costs only the default output.

    >>> estimate_tokens({"model": "m", "max_tokens": 100,
    ...                  "messages": [{"role": "user", "content": "Hello, how are you?"}]})
    TokenEstimate(input_tokens=11, output_tokens=100)
    """
    if default_max_tokens < 0:
        raise ValueError(f"default_max_tokens must not be negative, got {default_max_tokens!r}")
    if isinstance(body, (bytes, bytearray, str)):
        try:
            body = json.loads(body)
        except (ValueError, RecursionError):
            body = None
    if not isinstance(body, dict):
        return TokenEstimate(0, default_max_tokens)
    return TokenEstimate(_prompt_tokens(body), _max_output(body, default_max_tokens))


def usage_from_body(body: object) -> TokenUsage | None:
    """What an answer's ``usage`` says was spent, or ``None`` if it says nothing usable.

    OpenAI chat completions: ``prompt_tokens`` and ``completion_tokens`` (``total_tokens`` less
    the prompt when only those two are given); Anthropic messages and OpenAI responses:
    ``input_tokens`` (plus Anthropic's ``cache_creation_input_tokens``, which its input quota
    counts; cache reads are not counted) and ``output_tokens``. Accepts parsed JSON, text or
    bytes; never raises.

    >>> usage_from_body({"usage": {"prompt_tokens": 12, "completion_tokens": 30, "total_tokens": 42}})
    TokenUsage(input_tokens=12, output_tokens=30)
    """
    if isinstance(body, (bytes, bytearray, str)):
        try:
            body = json.loads(body)
        except (ValueError, RecursionError):
            return None
    usage = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(usage, dict):
        return None
    prompt, completion = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    total = _count(usage.get("total_tokens"))
    if prompt is not None and completion is None and total is not None and total >= prompt:
        completion = total - prompt
    if prompt is not None and completion is not None:
        return TokenUsage(prompt, completion)
    given, output = _count(usage.get("input_tokens")), _count(usage.get("output_tokens"))
    if given is None or output is None:
        return None
    created = _count(usage.get("cache_creation_input_tokens")) or 0
    return TokenUsage(given + created, output)


_JSON_WHOLE = 1 << 16  # bytes of a JSON answer parsed whole
_JSON_TAIL = 1 << 16  # bytes of the end of a longer one kept (its usage comes last)
_SSE_EVENT = 1 << 20  # bytes of one server-sent event read (a longer one is skipped)
_PIECE = 1 << 16  # bytes decompressed at a time
_USAGE_KEY = re.compile(r'(?<!\\)"usage"\s*:\s*')
_EVENT_END = re.compile(rb"\n\r?\n")


class UsageReader:
    r"""The usage an answer's body states, read from its bytes as they pass.

    Fed the body's bytes in any pieces (:meth:`feed`), as sent (``gzip`` and ``deflate``
    decoded; another encoding is not read), it keeps only what it needs: a JSON answer whole
    up to 64 KiB (a longer one: its last 64 KiB, where OpenAI and Anthropic put ``usage``:
    the last ``"usage"`` key there is read), or of a ``text/event-stream`` only the events
    that mention ``usage``:
    OpenAI's last chunk (``stream_options.include_usage``), Anthropic's ``message_start``
    and ``message_delta`` (its output tokens so far), or an OpenAI responses stream's
    ``response.completed``. :meth:`usage` says what was read; never raises.

    >>> reader = UsageReader("text/event-stream")
    >>> reader.feed(b'event: message_start\ndata: {"type": "message_start", "message": ')
    >>> reader.feed(b'{"usage": {"input_tokens": 12, "output_tokens": 1}}}\n\n')
    >>> reader.feed(b'data: {"type": "message_delta", "usage": {"output_tokens": 30}}\n\n')
    >>> reader.usage()
    TokenUsage(input_tokens=12, output_tokens=30)
    """

    __slots__ = ("_buffer", "_decoder", "_delta", "_found", "_mode", "_parts", "_skip", "_spilled")

    def __init__(self, content_type: str | None, content_encoding: str | None = None) -> None:
        kind = (content_type or "").split(";", 1)[0].strip().lower()
        coding = (content_encoding or "").strip().lower()
        self._mode = ("sse" if kind == "text/event-stream"
                      else "json" if kind.endswith("json") else None)
        self._decoder = None
        if coding in ("gzip", "x-gzip", "deflate"):
            self._decoder = zlib.decompressobj(zlib.MAX_WBITS | 32)  # either header
        elif coding not in ("", "identity"):
            self._mode = None
        self._buffer = bytearray()
        self._parts: dict[str, object] = {}
        self._found: TokenUsage | None = None
        self._skip = self._spilled = self._delta = False

    def feed(self, data: bytes) -> None:
        """Read the next bytes of the body."""
        if self._mode is None or not data:
            return
        decoder = self._decoder
        if decoder is None:
            self._take(data)
            return
        try:
            piece = decoder.decompress(data, _PIECE)
            while piece:
                self._take(piece)
                piece = decoder.decompress(decoder.unconsumed_tail, _PIECE)
        except zlib.error:
            self._mode = None

    def _take(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        if self._mode == "json":
            if len(buffer) > _JSON_WHOLE:
                self._spilled = True
                del buffer[:-_JSON_TAIL]
            return
        # the events complete so far (a blank line in what came now), looked into only when
        # one states a usage
        start = max(len(buffer) - len(data) - 2, 0)
        cut = max(buffer.rfind(b"\n\n", start), buffer.rfind(b"\n\r\n", start))
        if cut < 0:
            if len(buffer) > _SSE_EVENT:
                self._skip = True  # an event too long to read: skipped to its end
                buffer.clear()
            return
        cut += 2 if buffer[cut + 1] == 10 else 3  # past its blank line
        events = bytes(buffer[:cut])
        del buffer[:cut]
        if self._skip:
            self._skip = False
            events = _EVENT_END.split(events, 1)[-1]  # the rest of the event skipped
        self._events(events)

    def _events(self, events: bytes) -> None:
        """Read the usage of whole events (each ended by a blank line)."""
        if events.count(b'"usage"') <= events.count(b'"usage":null'):
            return  # none states one (OpenAI sends ``"usage":null`` in every other chunk)
        for event in _EVENT_END.split(events):
            data = [line[6:] if line[5:6] == b" " else line[5:]
                    for line in event.replace(b"\r", b"").split(b"\n")
                    if line.startswith(b"data:")]
            if data:
                self._dispatch(b"\n".join(data))

    def _dispatch(self, data: bytes) -> None:
        if b'"usage"' not in data:
            return
        try:
            event = json.loads(data)
        except (ValueError, RecursionError):
            return
        if not isinstance(event, dict):
            return
        kind = event.get("type")
        if kind in ("message_start", "message_delta"):  # Anthropic: the usage in parts
            usage = event.get("message") if kind == "message_start" else event
            usage = usage.get("usage") if isinstance(usage, dict) else None
            if isinstance(usage, dict):
                self._parts.update(usage)
                self._delta = self._delta or kind == "message_delta"
            return
        if kind == "response.completed":  # OpenAI responses: the response, usage in it
            event = event.get("response")
        found = usage_from_body(event)
        if found is not None:
            self._found = found

    def usage(self) -> TokenUsage | None:
        """What the body read so far said was spent, or ``None`` if it said nothing usable
        (an answer read only in part, say)."""
        if self._mode == "json":
            if not self._spilled:
                return usage_from_body(bytes(self._buffer))
            text = bytes(self._buffer).decode("utf-8", "replace")
            keys = list(_USAGE_KEY.finditer(text))
            if not keys:
                return None
            try:
                usage, _ = json.JSONDecoder().raw_decode(text, keys[-1].end())
            except (ValueError, RecursionError):
                return None
            return usage_from_body({"usage": usage})
        if self._mode == "sse":
            if self._found is None and self._delta:  # message_start's output is a stand-in
                return usage_from_body({"usage": self._parts})
            return self._found
        return None

    def hand(self, late: Callable[[TokenUsage], None] | None) -> None:
        """Give the usage read so far to ``late`` (a late correction), when there is one and
        the body stated one."""
        if late is not None:
            usage = self.usage()
            if usage is not None:
                late(usage)


def token_charges(cost: TokenEstimate | TokenUsage) -> dict[QuotaDimension, int]:
    """What one request spends of each quota dimension: one request, its tokens in all, its
    input tokens and its output tokens.

    >>> token_charges(TokenEstimate(input_tokens=10, output_tokens=100))
    {'requests': 1, 'tokens': 110, 'input-tokens': 10, 'output-tokens': 100}
    """
    return {"requests": 1, "tokens": cost.total, "input-tokens": cost.input_tokens,
            "output-tokens": cost.output_tokens}


def token_corrections(estimate: TokenEstimate, usage: TokenUsage) -> dict[QuotaDimension, int]:
    """What to add to each dimension's ledger once a request's usage is known: the usage less
    the estimate charged for it (negative: tokens to give back; the request itself is not
    charged again). Adding them to the estimate's :func:`token_charges` gives the usage's, so a
    ledger corrected this way never drifts from what was really spent.

    >>> token_corrections(TokenEstimate(10, 100), TokenUsage(12, 30))
    {'requests': 0, 'tokens': -68, 'input-tokens': 2, 'output-tokens': -70}
    """
    charged, spent = token_charges(estimate), token_charges(usage)
    return {dimension: spent[dimension] - charged[dimension] for dimension in _DIMENSIONS}


def _header_names(dimension: QuotaDimension) -> tuple[tuple[str, str, str], tuple[str, str, str]]:
    openai = (f"x-ratelimit-limit-{dimension}", f"x-ratelimit-remaining-{dimension}",
              f"x-ratelimit-reset-{dimension}")
    anthropic = (f"anthropic-ratelimit-{dimension}-limit",
                 f"anthropic-ratelimit-{dimension}-remaining",
                 f"anthropic-ratelimit-{dimension}-reset")
    return openai, anthropic


def _whole(text: str | None) -> int | None:
    if text is None or not text.strip().isdigit():
        return None
    return int(text.strip())


def quota_readings(headers: HeaderInput, now_wall: float) -> dict[QuotaDimension, QuotaReading]:
    """Every quota dimension one response's headers state, by dimension.

    OpenAI states ``requests`` and ``tokens`` (``x-ratelimit-{limit,remaining,reset}-*``, resets
    as durations such as ``6m0s`` or ``1.2s``, measured from ``now_wall``); Anthropic states
    ``requests``, ``tokens``, ``input-tokens`` and ``output-tokens``
    (``anthropic-ratelimit-*-{limit,remaining,reset}``, resets as RFC 3339 times). A dimension
    no header mentions is absent; a value that does not parse is ``None``. Never raises.
    """
    found: dict[str, str] = {}
    try:
        pairs = normalize_headers(headers)
    except (TypeError, ValueError):
        return {}
    for name, value in pairs:
        found.setdefault(name, value)
    readings: dict[QuotaDimension, QuotaReading] = {}
    for dimension in _DIMENSIONS:
        for dialect, (limit, remaining, reset) in enumerate(_header_names(dimension)):
            if not ({limit, remaining, reset} & found.keys()):
                continue
            reset_text = found.get(reset)
            reset_at = None
            if reset_text is not None:
                if dialect == 0:
                    delay = parse_duration(reset_text)
                    reset_at = now_wall + delay if delay is not None and delay >= 0 else None
                else:
                    reset_at = parse_rfc3339(reset_text)
            readings[dimension] = QuotaReading(
                dimension, _whole(found.get(limit)), _whole(found.get(remaining)), reset_at
            )
            break
    return readings


def tokens_spent_between(
    earlier: QuotaReading, later: QuotaReading, *, tolerance_s: float = 1.0
) -> int | None:
    """What was spent of one quota between two readings of the same window, or ``None``.

    The drop in ``remaining`` from ``earlier`` to ``later`` is what every client of the quota
    spent in between (this one's request included). ``None`` when either reading lacks a
    ``remaining``, when the readings are of different dimensions or limits, when their resets
    differ by more than ``tolerance_s`` (another window), or when ``remaining`` rose (the window
    rolled over, or the provider credited unused output back).
    """
    if earlier.dimension != later.dimension or earlier.remaining is None or later.remaining is None:
        return None
    if earlier.limit is not None and later.limit is not None and earlier.limit != later.limit:
        return None
    if (earlier.reset_at is not None and later.reset_at is not None
            and abs(earlier.reset_at - later.reset_at) > tolerance_s):
        return None
    spent = earlier.remaining - later.remaining
    return spent if spent >= 0 else None
