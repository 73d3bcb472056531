"""The sandbox as an LLM provider, over real loopback HTTP: OpenAI's chat completions and
Anthropic's messages behind request and token windows, read by the official SDKs."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import retrybudget as rb
from retrybudget._clock import FakeClock
from retrybudget.sandbox import RUN_HEADER, LlmLimits, SandboxConfig, SandboxServer, serve_in_thread
from retrybudget.sandbox.__main__ import build_parser, config_from_args
from retrybudget.sandbox._llm import count_tokens, go_duration, prompt_tokens
from tests.support.strategies import examples

WALL0 = 1_800_000_000.0  # a multiple of every window below: each test starts a window


def _run() -> str:
    return f"llm-{uuid.uuid4().hex[:10]}"


def _chat(content: str, max_tokens: int) -> dict[str, Any]:
    return {"model": "m", "max_tokens": max_tokens, "messages": [{"role": "user", "content": content}]}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(wall=WALL0)


@pytest.fixture
def limited(clock: FakeClock) -> Iterator[SandboxServer]:
    """A sandbox on a fake clock: 5 requests, 1,000 tokens, 600 input and 500 output tokens
    per 10-second window; answers produce half their max_tokens."""
    limits = LlmLimits(rpm=5, tpm=1000, input_tpm=600, output_tpm=500, window_s=10, output_share=0.5)
    with serve_in_thread(SandboxConfig(llm=limits), clock=clock) as server:
        yield server


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(trust_env=False, timeout=10.0) as client:
        yield client


def _post(http: httpx.Client, sandbox: SandboxServer, path: str, body: object, run: str) -> httpx.Response:
    return http.post(sandbox.url(path), json=body, headers={RUN_HEADER: run})


# the stand-in tokenizer and OpenAI's durations -----------------------------------------------

def test_the_stand_in_tokenizer_counts_word_pieces_and_punctuation() -> None:
    assert count_tokens("") == 0
    assert count_tokens("Hello, world!") == 2 + 1 + 2 + 1  # Hell|o|,|worl|d|!
    body = {"system": "be brief", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
    assert prompt_tokens(body) == 3 + 1 + 3 * 3  # be|brie|f, hi; each text and the reply: 3 more


@pytest.mark.parametrize(("seconds", "text"), [(0.0, "0ms"), (0.0201, "21ms"), (1.2, "1.2s"),
                                                (360.0, "6m0s"), (3600.5, "1h0m0.5s")])
def test_durations_are_written_as_openai_sends_them(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text
    assert rb.quota_readings({"x-ratelimit-reset-tokens": text}, 0.0)["tokens"].reset_at == (
        pytest.approx(math.ceil(seconds * 1000) / 1000))


@given(st.floats(0, 10**6, allow_nan=False))
@settings(max_examples=examples(200, cap=1000))
def test_every_duration_reads_back_within_a_millisecond(seconds: float) -> None:
    read = rb.core.headers.parse_duration(go_duration(seconds))
    assert read is not None
    assert seconds <= read + 1e-9
    assert read - seconds <= 0.001 + 1e-9


# windows and dialects over loopback -------------------------------------------------------

def test_openai_answers_carry_usage_and_its_quota_headers(limited: SandboxServer, http: httpx.Client) -> None:
    run = _run()
    answer = _post(http, limited, "/v1/chat/completions", _chat("Hello, world!", 100), run)
    assert answer.status_code == 200
    body = answer.json()
    prompt = 6 + 2 * 3
    assert body["usage"] == {"prompt_tokens": prompt, "completion_tokens": 50, "total_tokens": prompt + 50}
    assert body["choices"][0]["finish_reason"] == "stop"
    assert count_tokens(body["choices"][0]["message"]["content"]) == 50
    readings = rb.quota_readings(answer.headers, WALL0)
    # charged prompt + 100 when admitted, the 50 unused output tokens credited back
    assert readings == {"requests": rb.QuotaReading("requests", 5, 4, WALL0 + 10),
                        "tokens": rb.QuotaReading("tokens", 1000, 1000 - prompt - 50, WALL0 + 10)}
    assert answer.headers["x-ratelimit-reset-tokens"] == "10s"
    assert rb.usage_from_body(body) == rb.TokenUsage(prompt, 50)


def test_anthropic_answers_announce_input_and_output_tokens(
    limited: SandboxServer, http: httpx.Client
) -> None:
    run = _run()
    answer = _post(http, limited, "/v1/messages", {**_chat("Hello, world!", 10), "system": "brief"}, run)
    assert answer.status_code == 200
    body = answer.json()
    assert body["usage"] == {"input_tokens": 6 + 2 + 3 * 3, "output_tokens": 5}
    assert body["type"] == "message"
    assert body["stop_reason"] == "end_turn"
    readings = rb.quota_readings(answer.headers, WALL0)
    assert {d: r.remaining for d, r in readings.items()} == {
        "requests": 4, "tokens": 1000 - 17 - 5, "input-tokens": 600 - 17, "output-tokens": 500 - 5}
    assert answer.headers["anthropic-ratelimit-tokens-reset"] == "2027-01-15T08:00:10Z"
    assert {r.reset_at for r in readings.values()} == {WALL0 + 10}


def test_a_request_over_a_token_window_is_refused_in_each_dialect(
    limited: SandboxServer, http: httpx.Client, clock: FakeClock
) -> None:
    run = _run()
    # 400 output tokens charged, 200 credited back: 300 left
    assert _post(http, limited, "/v1/messages", _chat("x", 400), run).status_code == 200
    refused = _post(http, limited, "/v1/chat/completions", _chat("x", 350), run)
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "10"
    assert refused.headers["retry-after-ms"] == "10000"
    error = refused.json()["error"]
    assert (error["type"], error["code"]) == ("tokens", "rate_limit_exceeded")
    assert "output tokens per minute: Limit 500, Used 200, Requested 350" in error["message"]
    clock.advance(4.5)
    anthropic_refused = _post(http, limited, "/v1/messages", _chat("x", 350), run)
    assert anthropic_refused.status_code == 429
    assert anthropic_refused.headers["retry-after"] == "6"
    assert anthropic_refused.json()["error"]["type"] == "rate_limit_error"
    assert anthropic_refused.headers["anthropic-ratelimit-output-tokens-remaining"] == "300"
    clock.advance(5.5)  # the next window
    assert _post(http, limited, "/v1/messages", _chat("x", 350), run).status_code == 200
    report = http.get(limited.url(f"/_llm/{run}")).json()
    assert report["rejected"] == 2
    assert [w["output_tokens"] for w in report["windows"]] == [200, 175]


def test_the_request_window_refuses_the_sixth_request(limited: SandboxServer, http: httpx.Client) -> None:
    run = _run()
    statuses = [_post(http, limited, "/v1/messages", _chat("", 1), run).status_code for _ in range(6)]
    assert statuses == [200] * 5 + [429]
    assert _post(http, limited, "/v1/messages", _chat("", 1), _run()).status_code == 200  # runs apart


@pytest.mark.parametrize(("path", "body", "why"), [
    ("/v1/messages", {"model": "m", "messages": []}, "max_tokens: Field required"),
    ("/v1/chat/completions", b"{", "the body must be JSON"),
    ("/v1/chat/completions", [1], "a JSON object"),
    ("/v1/chat/completions", {"model": "m"}, "messages (a list) are required"),
    ("/v1/messages", _chat("", 0), "max_tokens must be a positive integer"),
])
def test_a_bad_request_is_a_400_in_the_dialect(
    limited: SandboxServer, http: httpx.Client, path: str, body: object, why: str
) -> None:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    answer = http.post(limited.url(path), content=content, headers={RUN_HEADER: _run()})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert why in error["message"]


@given(st.lists(st.tuples(st.sampled_from(["/v1/messages", "/v1/chat/completions"]),
                          st.integers(0, 300), st.integers(1, 400), st.floats(0, 3)),
                min_size=1, max_size=25))
@settings(max_examples=examples(15, cap=40), deadline=None)
def test_no_window_is_ever_charged_past_its_limits(requests: list[tuple[str, int, int, float]]) -> None:
    clock = FakeClock(wall=WALL0)
    limits = LlmLimits(rpm=6, tpm=1200, input_tpm=500, output_tpm=700, window_s=5, output_share=0.25)
    with serve_in_thread(SandboxConfig(llm=limits), clock=clock) as server, \
            httpx.Client(trust_env=False, timeout=10.0) as http:
        for path, chars, max_tokens, gap in requests:
            _post(http, server, path, _chat("ab " * chars, max_tokens), "default")
            clock.advance(gap)
        report = http.get(server.url("/_llm/default")).json()
    for window in report["windows"]:
        assert window["requests"] <= 6
        assert window["tokens"] <= 1200
        assert window["input_tokens"] <= 500
        assert window["output_tokens"] <= 700


# the official SDKs pointed at it ------------------------------------------------------------

def test_the_openai_sdk_reads_its_answers_and_its_rate_limit_error(
    limited: SandboxServer, clock: FakeClock
) -> None:
    client = openai.OpenAI(api_key="sk-test", base_url=limited.url("/v1"), max_retries=0,
                           default_headers={RUN_HEADER: _run()})
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", max_tokens=20, messages=[{"role": "user", "content": "Hello"}])
    completion = raw.parse()
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (2 + 6, 10)
    assert raw.headers["x-ratelimit-remaining-requests"] == "4"
    for _ in range(4):
        client.chat.completions.create(model="gpt-4o-mini", max_tokens=1, messages=[])
    with pytest.raises(openai.RateLimitError) as raised:
        client.chat.completions.create(model="gpt-4o-mini", max_tokens=1, messages=[])
    assert raised.value.status_code == 429
    assert raised.value.code == "rate_limit_exceeded"
    assert raised.value.response.headers["x-ratelimit-remaining-requests"] == "0"


def test_the_anthropic_sdk_reads_its_answers_and_its_rate_limit_error(limited: SandboxServer) -> None:
    client = anthropic.Anthropic(api_key="sk-ant-test", base_url=limited.base_url, max_retries=0,
                                 default_headers={RUN_HEADER: _run()})
    raw = client.messages.with_raw_response.create(
        model="claude-sonnet-4-5", max_tokens=8, system="brief",
        messages=[{"role": "user", "content": "Hello"}])
    message = raw.parse()
    assert (message.usage.input_tokens, message.usage.output_tokens) == (2 + 2 + 9, 4)
    assert message.stop_reason == "end_turn"
    assert raw.headers["anthropic-ratelimit-input-tokens-remaining"] == str(600 - 13)
    with pytest.raises(anthropic.RateLimitError) as raised:
        client.messages.create(model="claude-sonnet-4-5", max_tokens=1000,
                               messages=[{"role": "user", "content": "Hello"}])
    assert raised.value.status_code == 429
    assert raised.value.response.headers["retry-after"] == "10"


def test_the_sdks_stream_an_answer_with_its_usage(limited: SandboxServer) -> None:
    run = {RUN_HEADER: _run()}
    chat = openai.OpenAI(api_key="sk-test", base_url=limited.url("/v1"), max_retries=0,
                         default_headers=run)
    chunks = list(chat.chat.completions.create(
        model="gpt-4o-mini", max_tokens=6, stream=True, stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "Hello"}]))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "tok tok tok"
    assert chunks[-1].usage is not None
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (8, 3)
    messages = anthropic.Anthropic(api_key="sk-ant-test", base_url=limited.base_url, max_retries=0,
                                   default_headers=run)
    with messages.messages.stream(model="claude-sonnet-4-5", max_tokens=4,
                                  messages=[{"role": "user", "content": "Hello"}]) as stream:
        assert "".join(stream.text_stream) == "tok tok"
        final = stream.get_final_message()
    assert (final.usage.input_tokens, final.usage.output_tokens) == (8, 2)
    assert final.stop_reason == "end_turn"


def test_the_openai_sdk_through_retrybudget_waits_out_the_request_window() -> None:
    """The recipe (openai over an httpx2 client with retrybudget's transport): the second call
    of a one-request window waits for the window's end and gets through."""
    import httpx2

    from retrybudget.integrations import httpx2 as rb_httpx2

    with serve_in_thread(SandboxConfig(llm=LlmLimits(rpm=1, window_s=1))) as server:
        policy = rb.Policy(profile="openai", deadline=5.0, retry_writes_with_key=True)
        transport = rb_httpx2.RetryTransport(policy=policy, generate_idempotency_keys=True)
        client = openai.OpenAI(api_key="sk-test", base_url=server.url("/v1"), max_retries=0,
                               http_client=httpx2.Client(transport=transport))
        for _ in range(2):
            completion = client.chat.completions.create(model="m", max_tokens=3, messages=[])
            assert completion.usage is not None
            assert completion.usage.completion_tokens == 3
        report = server.stats()
    assert report["by_status"].get("200") == 2
    assert report["by_status"].get("429", 0) <= 1  # at most one refusal before the wait


# the command line -----------------------------------------------------------------------------

def test_the_llm_options_build_the_limits() -> None:
    args = build_parser().parse_args(["--llm-rpm", "60", "--llm-tpm", "30000", "--llm-input-tpm", "20000",
                                      "--llm-output-tpm", "8000", "--llm-window", "2",
                                      "--llm-output-share", "0.5"])
    assert config_from_args(args).llm == LlmLimits(rpm=60, tpm=30000, input_tpm=20000, output_tpm=8000,
                                                   window_s=2, output_share=0.5)
    assert config_from_args(build_parser().parse_args([])).llm == LlmLimits()


@pytest.mark.parametrize("argv", [["--llm-tpm", "0"], ["--llm-window", "x"], ["--llm-output-share", "2"]])
def test_a_bad_llm_option_is_one_line_and_exit_2(argv: list[str]) -> None:
    done = subprocess.run([sys.executable, "-m", "retrybudget.sandbox", *argv], capture_output=True,
                          text=True, timeout=30, check=False)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    assert argv[0] in done.stderr


@pytest.mark.parametrize("bad", [{"rpm": 0}, {"tpm": -1}, {"window_s": 0}, {"output_share": 1.5},
                                 {"default_max_tokens": 0}, {"input_tpm": True}])
def test_bad_limits_are_a_value_error(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        LlmLimits(**bad)
