"""The token cost of LLM requests (core.tokens): estimates, usage and quota readings."""

from __future__ import annotations

import itertools
import json
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import retrybudget as rb
from retrybudget.core.tokens import (
    CHARS_PER_TOKEN,
    DEFAULT_MAX_TOKENS,
    MESSAGE_OVERHEAD_TOKENS,
    UsageReader,
)
from tests.support.strategies import assert_reached, examples, reached, tried

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=True)
    | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=5)
    | st.dictionaries(st.sampled_from(["messages", "content", "text", "system", "tools",
                                       "max_tokens", "max_completion_tokens", "n", "usage",
                                       "prompt_tokens", "completion_tokens", "total_tokens",
                                       "input_tokens", "output_tokens", "role", "type", "x"]),
                      inner, max_size=6),
    max_leaves=30,
)
usages = st.fixed_dictionaries({"usage": st.dictionaries(
    st.sampled_from(["prompt_tokens", "completion_tokens", "total_tokens", "input_tokens",
                     "output_tokens", "cache_creation_input_tokens"]),
    st.integers(-5, 10**6) | st.floats(allow_nan=True) | st.booleans() | st.text(max_size=3),
    max_size=4)})
contents = st.text(max_size=200) | st.lists(
    st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=100)}), max_size=3)
messages = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]),
                                           "content": contents}), min_size=1, max_size=5)


def chat(msgs: list[dict[str, Any]], max_tokens: int | None, *, system: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "m", "messages": msgs}
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if system is not None:
        body["system"] = system
    return body


def test_an_openai_chat_body_costs_its_prompt_at_four_characters_a_token_and_its_max_tokens() -> None:
    body = {"model": "gpt-4o-mini", "max_completion_tokens": 50, "max_tokens": 999,
            "messages": [{"role": "system", "content": "x" * 40},
                         {"role": "user", "content": [{"type": "text", "text": "y" * 41}]}]}
    estimate = rb.estimate_tokens(body)
    # 81 characters -> 21 tokens; two messages and the reply's priming -> 9 more
    assert estimate == rb.TokenEstimate(21 + 3 * MESSAGE_OVERHEAD_TOKENS, 50)
    assert estimate.total == 80
    assert rb.estimate_tokens(json.dumps(body).encode()) == estimate  # bytes read as JSON
    assert rb.estimate_tokens({**body, "n": 3}).output_tokens == 150


def test_an_anthropic_body_counts_its_system_prompt_and_tools() -> None:
    tools = [{"name": "get_weather", "input_schema": {"type": "object"}}]
    bare = rb.estimate_tokens({"max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]})
    full = rb.estimate_tokens({"max_tokens": 10, "system": "s" * 400, "tools": tools,
                               "messages": [{"role": "user", "content": "hi"}]})
    tools_chars = len(json.dumps(tools, separators=(",", ":")))
    assert full.input_tokens - bare.input_tokens == (
        -(-(402 + tools_chars) // CHARS_PER_TOKEN) - 1 + MESSAGE_OVERHEAD_TOKENS)


def test_a_body_without_max_tokens_reserves_the_default_and_a_non_object_only_that() -> None:
    assert rb.estimate_tokens({"messages": []}).output_tokens == DEFAULT_MAX_TOKENS
    assert rb.estimate_tokens({"messages": []}, default_max_tokens=256).output_tokens == 256
    assert rb.estimate_tokens(b"not json") == rb.TokenEstimate(0, DEFAULT_MAX_TOKENS)
    assert rb.estimate_tokens({"max_tokens": True}).output_tokens == DEFAULT_MAX_TOKENS
    with pytest.raises(ValueError, match="default_max_tokens"):
        rb.estimate_tokens({}, default_max_tokens=-1)


def test_usage_is_read_in_both_dialects() -> None:
    openai = {"usage": {"prompt_tokens": 12, "completion_tokens": 30, "total_tokens": 42}}
    assert rb.usage_from_body(openai) == rb.TokenUsage(12, 30)
    assert rb.usage_from_body({"usage": {"prompt_tokens": 12, "total_tokens": 42}}) == rb.TokenUsage(12, 30)
    anthropic = {"usage": {"input_tokens": 20, "output_tokens": 7, "cache_creation_input_tokens": 5,
                           "cache_read_input_tokens": 100}}
    assert rb.usage_from_body(json.dumps(anthropic)) == rb.TokenUsage(25, 7)
    assert rb.usage_from_body({"usage": {"input_tokens": 1}}) is None
    assert rb.usage_from_body({"usage": {"prompt_tokens": -1, "completion_tokens": 2}}) is None
    assert rb.usage_from_body(b"<html>") is None


def test_quota_readings_read_every_dimension_of_both_dialects() -> None:
    openai = rb.quota_readings({"x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "59",
                                "x-ratelimit-reset-requests": "1s", "x-ratelimit-limit-tokens": "1000",
                                "x-ratelimit-remaining-tokens": "400",
                                "x-ratelimit-reset-tokens": "6m0s"}, 1000.0)
    assert openai == {"requests": rb.QuotaReading("requests", 60, 59, 1001.0),
                      "tokens": rb.QuotaReading("tokens", 1000, 400, 1360.0)}
    anthropic = rb.quota_readings([("Anthropic-RateLimit-Input-Tokens-Limit", "500"),
                                   ("anthropic-ratelimit-input-tokens-remaining", "120"),
                                   ("anthropic-ratelimit-input-tokens-reset", "2030-01-01T00:00:00Z"),
                                   ("anthropic-ratelimit-output-tokens-remaining", "x")], 0.0)
    assert anthropic["input-tokens"] == rb.QuotaReading("input-tokens", 500, 120, 1893456000.0)
    assert anthropic["output-tokens"] == rb.QuotaReading("output-tokens", None, None, None)
    assert set(anthropic) == {"input-tokens", "output-tokens"}


def test_tokens_spent_between_two_readings_of_one_window() -> None:
    before = rb.QuotaReading("tokens", 1000, 900, 60.0)
    assert rb.tokens_spent_between(before, rb.QuotaReading("tokens", 1000, 650, 60.4)) == 250
    assert rb.tokens_spent_between(before, rb.QuotaReading("tokens", 1000, 650, 120.0)) is None
    assert rb.tokens_spent_between(before, rb.QuotaReading("tokens", 1000, 950, 60.0)) is None
    assert rb.tokens_spent_between(before, rb.QuotaReading("tokens", 2000, 650, 60.0)) is None
    assert rb.tokens_spent_between(before, rb.QuotaReading("requests", 1000, 650, 60.0)) is None


@given(json_values | usages | st.fixed_dictionaries(
    {"messages": st.lists(json_values, min_size=1, max_size=4)}, optional={"max_tokens": json_values}))
@settings(max_examples=examples(300, cap=3000))
def test_every_reader_is_total_and_never_negative(value: object) -> None:
    tried("tokens-total")
    for form in (value, json.dumps(value, allow_nan=True), json.dumps(value, allow_nan=True).encode()):
        estimate = rb.estimate_tokens(form)
        assert estimate.input_tokens >= 0
        assert estimate.output_tokens >= 0
        usage = rb.usage_from_body(form)
        if usage is not None:
            reached("tokens-total", "usage read")
            assert usage.input_tokens >= 0
            assert usage.output_tokens >= 0
    if isinstance(value, dict) and isinstance(value.get("messages"), list) and value["messages"]:
        reached("tokens-total", "messages read")
    headers = {"x-ratelimit-remaining-tokens": str(value), "anthropic-ratelimit-tokens-reset": str(value)}
    assert all(r.remaining is None or r.remaining >= 0 for r in rb.quota_readings(headers, 0.0).values())


def test_every_reader_is_total_reached() -> None:
    assert_reached("tokens-total", ("usage read", "messages read"), minimum=3)


@given(messages, st.integers(0, 2000), st.text(max_size=100), st.integers(0, 10_000),
       st.integers(0, 10_000), st.booleans())
@settings(max_examples=examples(300, cap=3000))
def test_the_estimate_is_monotone_in_prompt_length_and_max_tokens(
    msgs: list[dict[str, Any]], index: int, more: str, small: int, extra: int, system: bool
) -> None:
    base = rb.estimate_tokens(chat(msgs, small, system="s" if system else None))
    longer = [dict(m) for m in msgs]
    target = longer[index % len(longer)]
    content = target["content"]
    part = {"type": "text", "text": more}
    target["content"] = content + more if isinstance(content, str) else [*content, part]
    grown = rb.estimate_tokens(chat(longer, small + extra, system="s" if system else None))
    assert grown.input_tokens >= base.input_tokens
    assert grown.output_tokens == small + extra >= base.output_tokens == small
    if len(more) >= CHARS_PER_TOKEN * 2:
        assert grown.input_tokens > base.input_tokens  # a prompt 2 tokens longer costs more
    added = rb.estimate_tokens(chat([*msgs, {"role": "user", "content": more}], small))
    assert added.input_tokens > rb.estimate_tokens(chat(msgs, small)).input_tokens


@given(st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**6), st.floats(0, 100))
@settings(max_examples=examples(200, cap=2000))
def test_tokens_spent_is_never_negative_nor_more_than_was_remaining(
    limit: int, first: int, second: int, drift: float
) -> None:
    spent = rb.tokens_spent_between(rb.QuotaReading("tokens", limit, first, 10.0),
                                    rb.QuotaReading("tokens", limit, second, 10.0 + drift))
    if spent is not None:
        assert 0 <= spent <= first
        assert spent == first - second
    else:
        assert second > first or drift > 1.0


counts = st.integers(0, 10**6)
pairs = st.lists(st.tuples(counts, counts, counts, counts), max_size=30)


@given(pairs)
@settings(max_examples=examples(200, cap=2000))
def test_a_ledger_corrected_by_usage_never_drifts_from_what_was_spent(
    calls: list[tuple[int, int, int, int]]
) -> None:
    """Charge every call its estimate and correct it by its usage: each dimension then holds
    exactly what the usages add up to, whatever the estimates were."""
    ledger = dict.fromkeys(rb.token_charges(rb.TokenEstimate(0, 0)), 0)
    for estimated_in, estimated_out, used_in, used_out in calls:
        estimate, usage = rb.TokenEstimate(estimated_in, estimated_out), rb.TokenUsage(used_in, used_out)
        for dimension, amount in rb.token_charges(estimate).items():
            ledger[dimension] += amount
        corrections = rb.token_corrections(estimate, usage)
        assert corrections["requests"] == 0
        for dimension, amount in corrections.items():
            ledger[dimension] += amount
    assert ledger == {"requests": len(calls),
                      "tokens": sum(i + o for _, _, i, o in calls),
                      "input-tokens": sum(i for _, _, i, _ in calls),
                      "output-tokens": sum(o for _, _, _, o in calls)}


# The usage read from a body's bytes as they pass (UsageReader) ------------------------------


def pieces(data: bytes, cuts: list[int]) -> list[bytes]:
    """``data`` cut at each of ``cuts`` (positions, any order, repeats allowed)."""
    at = sorted({min(max(cut, 0), len(data)) for cut in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(at)]


def read_usage(data: bytes, content_type: str | None, cuts: tuple[int, ...] | list[int] = (),
               encoding: str | None = None) -> rb.core.tokens.TokenUsage | None:
    """What a reader fed ``data`` cut at ``cuts`` says was spent."""
    reader = UsageReader(content_type, encoding)
    for piece in pieces(data, list(cuts)):
        reader.feed(piece)
    return reader.usage()


def sse(*events: tuple[str | None, object]) -> bytes:
    return b"".join((f"event: {name}\n" if name else "").encode()
                    + b"data: " + json.dumps(data).encode() + b"\n\n" for name, data in events)


OPENAI_STREAM = sse(
    (None, {"object": "chat.completion.chunk", "choices": [{"delta": {"content": "hi"}}],
            "usage": None}),
    (None, {"object": "chat.completion.chunk", "choices": [],
            "usage": {"prompt_tokens": 12, "completion_tokens": 30, "total_tokens": 42}}),
) + b"data: [DONE]\n\n"
ANTHROPIC_STREAM = sse(
    ("message_start", {"type": "message_start", "message": {
        "usage": {"input_tokens": 12, "cache_creation_input_tokens": 3, "output_tokens": 1}}}),
    ("content_block_delta", {"type": "content_block_delta", "delta": {"text": '"usage": 9'}}),
    ("message_delta", {"type": "message_delta", "usage": {"output_tokens": 30}}),
    ("message_stop", {"type": "message_stop"}),
)
ANSWER = json.dumps({"id": "x", "choices": [{"message": {"content": 'say "usage": {}'}}],
                     "usage": {"input_tokens": 5, "output_tokens": 7}}).encode()


@given(st.lists(st.integers(0, 2000), max_size=12))
@settings(max_examples=examples(200, cap=2000))
def test_the_usage_read_as_bytes_pass_is_the_bodys_in_any_pieces(cuts: list[int]) -> None:
    """However the body is cut into pieces, the reader reads what the whole body says."""
    assert read_usage(ANSWER, "application/json", cuts) == rb.core.tokens.TokenUsage(5, 7)
    assert read_usage(OPENAI_STREAM, "text/event-stream", cuts) == (
        rb.core.tokens.TokenUsage(12, 30))
    assert read_usage(ANTHROPIC_STREAM, "text/event-stream; charset=utf-8", cuts) == (
        rb.core.tokens.TokenUsage(15, 30))
    crlf = OPENAI_STREAM.replace(b"\n", b"\r\n")
    assert read_usage(crlf, "text/event-stream", cuts) == rb.core.tokens.TokenUsage(12, 30)


def test_a_compressed_body_is_read_decompressed() -> None:
    packed = zlib.compressobj(wbits=31)  # gzip
    gzipped = packed.compress(ANSWER) + packed.flush()
    assert read_usage(gzipped, "application/json", [7, 40], "gzip") == (
        rb.core.tokens.TokenUsage(5, 7))
    assert read_usage(zlib.compress(OPENAI_STREAM), "text/event-stream", [3],
                      "deflate") == rb.core.tokens.TokenUsage(12, 30)
    assert read_usage(b"\x1f\x8b broken", "application/json", [], "gzip") is None
    assert read_usage(ANSWER, "application/json", [], "br") is None  # not read: no usage


def test_a_body_read_in_part_or_of_another_kind_says_nothing() -> None:
    assert read_usage(ANSWER[:-3], "application/json") is None
    started = ANTHROPIC_STREAM[:ANTHROPIC_STREAM.index(b"event: content_block_delta")]
    assert read_usage(started, "text/event-stream") is None  # message_start's output: a stand-in
    assert read_usage(OPENAI_STREAM[:40], "text/event-stream") is None
    assert read_usage(ANSWER, "text/plain") is None
    assert read_usage(ANSWER, None) is None


def test_a_long_answer_keeps_only_its_tail_and_still_finds_its_usage() -> None:
    text = "x" * (3 << 20)
    long_answer = json.dumps({"choices": [{"message": {"content": text}}],
                              "usage": {"prompt_tokens": 9, "completion_tokens": 800_000}})
    reader = UsageReader("application/json")
    for at in range(0, len(long_answer), 1 << 16):
        reader.feed(long_answer[at:at + (1 << 16)].encode())
    assert reader.usage() == rb.core.tokens.TokenUsage(9, 800_000)
    assert len(reader._buffer) <= 2 << 16  # bounded, whatever the body's size


def test_an_event_too_long_to_read_is_skipped_and_the_rest_still_read() -> None:
    huge = b"data: " + b"y" * (2 << 20) + b"\n\n"
    reader = UsageReader("text/event-stream")
    for at in range(0, len(huge), 1 << 16):
        reader.feed(huge[at:at + (1 << 16)])
    reader.feed(OPENAI_STREAM)
    assert reader.usage() == rb.core.tokens.TokenUsage(12, 30)


def test_openais_null_usage_in_every_chunk_is_passed_over_and_its_last_read() -> None:
    chunk = {"object": "chat.completion.chunk", "choices": [{"delta": {"content": "hi"}}],
             "usage": None}
    compact = b"".join(b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"
                       for _ in range(50))
    last = {"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 50}}
    ended = compact + b"data: " + json.dumps(last).encode() + b"\n\ndata: [DONE]\n\n"
    assert read_usage(ended, "text/event-stream", [100, 1000]) == rb.core.tokens.TokenUsage(4, 50)
    assert read_usage(compact + b"data: [DONE]\n\n", "text/event-stream", [100]) is None
