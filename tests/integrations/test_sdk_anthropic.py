"""The official anthropic SDK (on httpx2) over a loopback Anthropic, retried underneath by
:mod:`retrybudget.integrations.httpx2`'s transports, the SDK's own retries off.

Each case runs sync (``Anthropic``) and async (``AsyncAnthropic``). A message is a POST: the
retried ones are sent with a generated ``Idempotency-Key`` and ``retry_writes_with_key=True``
(the recipe in docs/sdks.md); without them a failed POST is never replayed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anthropic
import httpx2
import pytest

import retrybudget as rb
from retrybudget.coordination import Coordinator
from retrybudget.core.actions import Admission
from retrybudget.integrations import outcome_of
from retrybudget.integrations.httpx2 import RetryTransport
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

MODEL = "claude-sonnet-4-5"
HELLO = [{"role": "user", "content": "hello"}]


class Anthropic(Sdk):
    profile = "anthropic"
    error = anthropic.APIError

    def client(self, mode: str, url: str, policy: rb.Policy, keys: bool) -> Any:
        return over_httpx2(mode, anthropic.Anthropic, anthropic.AsyncAnthropic, policy, keys,
                           api_key="sk-ant-test", base_url=url)

    def create(self, mode: str) -> Callable[[Any], Any]:
        def create(client: Any) -> Any:
            raw = client.messages.with_raw_response.create(model=MODEL, max_tokens=16,
                                                           messages=HELLO)
            return raw.parse().content[0].text, raw.http_response

        async def acreate(client: Any) -> Any:
            raw = await client.messages.with_raw_response.create(model=MODEL, max_tokens=16,
                                                                 messages=HELLO)
            return (await raw.parse()).content[0].text, raw.http_response

        return create if mode == "sync" else acreate

    def ok(self, text: str) -> sp.Answer:
        return sp.anthropic_message(text)


SDK = Anthropic()


@pytest.mark.parametrize("mode", MODES)
def test_a_429_with_retry_after_is_waited_within_the_budget(mode: str) -> None:
    check_waited(SDK, mode, sp.anthropic_rate_limited(retry_after=1), 1.0, "retry-after")


@pytest.mark.parametrize("mode", MODES)
def test_a_429_with_only_an_rfc3339_reset_is_waited_until_it(mode: str) -> None:
    with sp.serve(sp.anthropic_rate_limited(reset_in=0.6), sp.anthropic_message("hi")) as p:
        _, response = SDK.send(mode, p.url)
    outcome = outcome_of(response)
    assert outcome is not None
    assert outcome.reason is rb.Reason.OK
    assert [w.source for w in outcome.waits] == ["anthropic-ratelimit-requests-reset"]
    # the reset is a wall-clock time with milliseconds: the wait is what was left of it
    assert 0.3 < outcome.waits[0].seconds <= 0.6 + sp.SECOND_ROUNDING
    assert p.gaps()[0] >= outcome.waits[0].seconds - 0.005


@pytest.mark.parametrize("mode", MODES)
def test_a_429_beyond_the_budget_stops_at_once_with_retry_at(mode: str) -> None:
    check_stopped(SDK, mode, sp.anthropic_rate_limited(retry_after=30), 30.0,
                  anthropic.RateLimitError)


@pytest.mark.parametrize("mode", MODES)
def test_a_529_overloaded_is_retried(mode: str) -> None:
    check_retried(SDK, mode, sp.anthropic_overloaded())


@pytest.mark.parametrize("mode", MODES)
def test_a_529_on_a_read_is_retried_without_any_opt_in(mode: str) -> None:
    with sp.serve(sp.anthropic_overloaded(), sp.anthropic_model()) as p:
        model = run(mode, lambda: SDK.client(mode, p.url, rb.Policy(profile="anthropic"), False),
                    lambda client: client.models.retrieve(MODEL))
    assert model.id == MODEL
    assert [r.method for r in p.requests] == ["GET", "GET"]


@pytest.mark.parametrize("mode", MODES)
def test_a_plain_400_is_not_retried(mode: str) -> None:
    check_not_retried(SDK, mode, sp.anthropic_bad_request(), anthropic.BadRequestError,
                      rb.Reason.REJECTED)


@pytest.mark.parametrize("mode", MODES)
def test_a_post_is_not_replayed_unless_keyed_and_allowed(mode: str) -> None:
    # a 529 is the SDK's InternalServerError (any status >= 500)
    check_write_not_replayed(SDK, mode, sp.anthropic_overloaded(), anthropic.InternalServerError)


@pytest.mark.parametrize("mode", MODES)
def test_a_stream_arrives_intact_after_a_retry(mode: str) -> None:
    def stream_sync(client: Any) -> str:
        with client.messages.stream(model=MODEL, max_tokens=16, messages=HELLO) as stream:
            return "".join(stream.text_stream)

    async def stream_async(client: Any) -> str:
        async with client.messages.stream(model=MODEL, max_tokens=16, messages=HELLO) as stream:
            return "".join([text async for text in stream.text_stream])

    words = ["one ", "two ", "three"]
    with sp.serve(sp.anthropic_overloaded(), sp.anthropic_message_stream(words)) as p:
        text = run(mode, lambda: SDK.client(mode, p.url, SDK.writes(), True),
                   stream_sync if mode == "sync" else stream_async)
    assert text == "one two three"
    assert len(p.requests) == 2


@pytest.mark.parametrize("mode", MODES)
def test_a_refused_connect_is_retried_and_the_outcome_reached_through_the_sdks_error(
        mode: str) -> None:
    check_refused(SDK, mode, anthropic.APIConnectionError)


@pytest.mark.parametrize("mode", MODES)
def test_an_sdk_that_retries_too_is_warned_about_once(
        mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    check_sdk_retries_warned(SDK, mode, sp.anthropic_overloaded(), monkeypatch)


class OpenBreaker(Coordinator):
    def admit(self, key: str) -> Admission:
        return Admission(allowed=False, retry_at=2_000_000_000.0, detail="breaker open")


def test_an_open_breaker_is_the_sdks_connection_error_with_the_outcome() -> None:
    transport = RetryTransport(retrier=rb.Retrier(coordinator=OpenBreaker()))
    with sp.serve(sp.anthropic_model()) as p:
        client = anthropic.Anthropic(api_key="k", base_url=p.url, max_retries=0,
                                     http_client=httpx2.Client(transport=transport))
        with pytest.raises(anthropic.APIConnectionError) as caught:
            client.models.retrieve(MODEL)
    assert isinstance(caught.value.__cause__, rb.CircuitOpen)
    outcome = rb.outcome_of(caught.value)
    assert outcome is not None
    assert (outcome.reason, outcome.attempts, outcome.retry_at) == (
        rb.Reason.CIRCUIT_OPEN, 0, 2_000_000_000.0)
    assert p.requests == []  # nothing was sent
