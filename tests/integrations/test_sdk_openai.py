"""The official openai SDK over a loopback OpenAI, retried underneath by
:mod:`retrybudget.integrations.httpx2`'s transports (openai builds on httpx2; an httpx client
with :mod:`retrybudget.integrations.httpx`'s transport works too), the SDK's own retries off.

Each case runs sync (``OpenAI``) and async (``AsyncOpenAI``). A chat completion is a POST:
the retried ones are sent with a generated ``Idempotency-Key`` and ``retry_writes_with_key``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest

import retrybudget as rb
from retrybudget.integrations import httpx as rb_httpx
from tests.support import sdk_provider as sp
from tests.support.sdk import (
    MODES,
    Sdk,
    check_not_retried,
    check_refused,
    check_retried,
    check_sdk_retries_warned,
    check_stopped,
    check_waited,
    check_write_not_replayed,
    over_httpx2,
    run,
)

HELLO = [{"role": "user", "content": "hello"}]


def _create(client: Any) -> Any:
    raw = client.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=HELLO)
    return raw.parse().choices[0].message.content, raw.http_response


async def _acreate(client: Any) -> Any:
    raw = await client.chat.completions.with_raw_response.create(model="gpt-4o-mini",
                                                                 messages=HELLO)
    return raw.parse().choices[0].message.content, raw.http_response  # openai's parse is sync


class OpenAI(Sdk):
    profile = "openai"
    error = openai.APIError

    def client(self, mode: str, url: str, policy: rb.Policy, keys: bool) -> Any:
        return over_httpx2(mode, openai.OpenAI, openai.AsyncOpenAI, policy, keys,
                           api_key="sk-test", base_url=url)

    def create(self, mode: str) -> Callable[[Any], Any]:
        return _create if mode == "sync" else _acreate

    def ok(self, text: str) -> sp.Answer:
        return sp.openai_chat(text)


SDK = OpenAI()


@pytest.mark.parametrize("mode", MODES)
def test_a_429_with_retry_after_ms_is_waited_within_the_budget(mode: str) -> None:
    check_waited(SDK, mode, sp.openai_rate_limited(700), 0.7, "retry-after-ms")


@pytest.mark.parametrize("mode", MODES)
def test_a_429_beyond_the_budget_stops_at_once_with_retry_at(mode: str) -> None:
    check_stopped(SDK, mode, sp.openai_rate_limited(20_000), 20.0, openai.RateLimitError)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("status", [500, 502, 503])
def test_a_5xx_is_retried(mode: str, status: int) -> None:
    check_retried(SDK, mode, sp.openai_server_error(status))


@pytest.mark.parametrize("mode", MODES)
def test_a_5xx_on_a_read_is_retried_without_any_opt_in(mode: str) -> None:
    with sp.serve(sp.openai_server_error(503), sp.openai_model()) as p:
        model = run(mode, lambda: SDK.client(mode, p.url, rb.Policy(profile="openai"), False),
                    lambda client: client.models.retrieve("gpt-4o-mini"))
    assert model.id == "gpt-4o-mini"
    assert [r.method for r in p.requests] == ["GET", "GET"]


@pytest.mark.parametrize("mode", MODES)
def test_a_plain_400_is_not_retried(mode: str) -> None:
    check_not_retried(SDK, mode, sp.openai_bad_request(), openai.BadRequestError,
                      rb.Reason.REJECTED)


@pytest.mark.parametrize("mode", MODES)
def test_a_post_is_not_replayed_unless_keyed_and_allowed(mode: str) -> None:
    check_write_not_replayed(SDK, mode, sp.openai_server_error(500), openai.InternalServerError)


@pytest.mark.parametrize("mode", MODES)
def test_a_stream_arrives_intact_after_a_retry(mode: str) -> None:
    def stream_sync(client: Any) -> str:
        chunks = client.chat.completions.create(model="gpt-4o-mini", messages=HELLO, stream=True)
        return "".join(c.choices[0].delta.content or "" for c in chunks)

    async def stream_async(client: Any) -> str:
        chunks = await client.chat.completions.create(model="gpt-4o-mini", messages=HELLO,
                                                      stream=True)
        return "".join([c.choices[0].delta.content or "" async for c in chunks])

    with sp.serve(sp.openai_rate_limited(100), sp.openai_chat_stream(["one ", "two"])) as p:
        text = run(mode, lambda: SDK.client(mode, p.url, SDK.writes(), True),
                   stream_sync if mode == "sync" else stream_async)
    assert text == "one two"
    assert len(p.requests) == 2


def test_an_httpx_client_with_the_httpx_transport_works_too() -> None:
    transport = rb_httpx.RetryTransport(policy=SDK.writes(), generate_idempotency_keys=True)
    with sp.serve(sp.openai_server_error(503), sp.openai_chat("via httpx")) as p:
        text, response = run("sync", lambda: openai.OpenAI(
            api_key="sk-test", base_url=p.url, max_retries=0,
            http_client=httpx.Client(transport=transport)), _create)
    assert text == "via httpx"
    assert isinstance(response, httpx.Response)
    assert len(p.requests) == 2


@pytest.mark.parametrize("mode", MODES)
def test_a_refused_connect_is_retried_and_the_outcome_reached_through_the_sdks_error(
        mode: str) -> None:
    check_refused(SDK, mode, openai.APIConnectionError)


@pytest.mark.parametrize("mode", MODES)
def test_an_sdk_that_retries_too_is_warned_about_once(
        mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    check_sdk_retries_warned(SDK, mode, sp.openai_server_error(503), monkeypatch)
