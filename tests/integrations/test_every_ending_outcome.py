"""One result contract: every ending of an HTTP integration's operation carries its Outcome.

``send_with_outcome`` / ``asend_with_outcome`` read the three endings alike (a returned
response, a typed error, a foreign error raised again as it was), through httpx's sync and
async transports against the sandbox over loopback.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import retrybudget as rb
from retrybudget.integrations import asend_with_outcome, outcome_of, send_with_outcome
from retrybudget.integrations.httpx import (
    AsyncRetryTransport,
    RetryTransport,
    TransportRetriesExhausted,
)
from retrybudget.sandbox import SandboxServer, serve_in_thread
from tests.support.gateway import unique


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    with serve_in_thread() as server:
        yield server


def _retrier() -> rb.Retrier:
    return rb.Retrier(policy=rb.interactive(max_attempts=2, deadline=2.0))


def _script(sandbox: SandboxServer, steps: list[dict[str, Any]]) -> str:
    return sandbox.load_fixture(unique("run"), "f", steps) + "/rentals/1/availability"


ENDINGS = [  # the provider's script, the outcome, whether a response is handed over
    ([{"status": 200, "body": {"rental_id": "1", "available": True}}], "ok", True),
    ([{"status": 503}], "exhausted", True),
    ([{"status": 404}], "not_found", True),
    ([{"reset": True}], "exhausted", False),
]


@pytest.mark.parametrize(("steps", "reason", "handed_over"), ENDINGS)
def test_every_sync_ending_carries_its_outcome(sandbox: SandboxServer, steps: list[dict[str, Any]],
                                               reason: str, handed_over: bool) -> None:
    url = _script(sandbox, steps)
    with httpx.Client(transport=RetryTransport(retrier=_retrier()), trust_env=False) as client:
        outcome, response = send_with_outcome(lambda: client.get(url))
    assert outcome.reason.value == reason
    assert outcome.attempts == (1 if reason in ("ok", "not_found") else 2)
    assert (response is not None) is handed_over
    if response is not None:
        assert outcome_of(response) is outcome


@pytest.mark.parametrize(("steps", "reason", "handed_over"), ENDINGS)
async def test_every_async_ending_carries_its_outcome(sandbox: SandboxServer,
                                                      steps: list[dict[str, Any]], reason: str,
                                                      handed_over: bool) -> None:
    url = _script(sandbox, steps)
    transport = AsyncRetryTransport(retrier=_retrier())
    async with httpx.AsyncClient(transport=transport, trust_env=False) as client:
        outcome, response = await asend_with_outcome(lambda: client.get(url))
    assert outcome.reason.value == reason
    assert (response is not None) is handed_over


def test_a_typed_error_carries_the_outcome_it_ended_with(sandbox: SandboxServer) -> None:
    url = _script(sandbox, [{"reset": True}])
    with httpx.Client(transport=RetryTransport(retrier=_retrier()), trust_env=False) as client:
        with pytest.raises(TransportRetriesExhausted) as raised:
            client.get(url)
    assert outcome_of(raised.value) is raised.value.outcome
    assert raised.value.outcome is not None
    assert raised.value.outcome.attempts == 2


def test_a_foreign_error_raised_again_carries_its_outcome() -> None:
    # httpx has no transport for ftp: an error the integration does not know as a provider
    # failure, raised again as it was, with the outcome attached
    with httpx.Client(transport=RetryTransport(retrier=_retrier()), trust_env=False) as client:
        with pytest.raises(httpx.UnsupportedProtocol) as raised:
            client.get("ftp://127.0.0.1:1/file")
        outcome, response = send_with_outcome(lambda: client.get("ftp://127.0.0.1:1/file"))
    assert outcome_of(raised.value) is not None
    assert (outcome.reason, outcome.attempts, response) == (rb.Reason.UNEXPECTED, 1, None)
    assert isinstance(outcome.error, httpx.UnsupportedProtocol)


async def test_what_no_operation_ended_with_is_raised_as_it_was() -> None:
    with httpx.Client(transport=RetryTransport(retrier=_retrier()), trust_env=False) as client:
        with pytest.raises(httpx.InvalidURL):  # refused before any operation began
            send_with_outcome(lambda: client.get("http://[::1"))
    with pytest.raises(TypeError, match="no retrybudget outcome"):
        send_with_outcome(lambda: httpx.Response(200))

    async def plain() -> httpx.Response:
        return httpx.Response(200)

    with pytest.raises(TypeError, match="no retrybudget outcome"):
        await asend_with_outcome(plain)
