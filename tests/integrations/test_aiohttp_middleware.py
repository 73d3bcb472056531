"""The aiohttp client middleware over real loopback HTTP (the sandbox provider)."""

from __future__ import annotations

import itertools
import pickle
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest

import retrybudget as rb
from retrybudget import Backoff, FakeClock, Policy, Reason, Retrier, RetryBudgetError
from retrybudget.core.classify import FailureKind
from retrybudget.integrations import outcome_of, stats_of
from retrybudget.integrations.aiohttp import (
    MiddlewareCircuitOpen,
    MiddlewareDeadlineExceeded,
    MiddlewareInvalidPayload,
    MiddlewareNotRetried,
    MiddlewareRetriesExhausted,
    RetryMiddleware,
    failure_kind,
)
from retrybudget.integrations.validators import json_object
from retrybudget.sandbox import SandboxServer, serve_in_thread

FAST = Policy(backoff=Backoff(base=0.01, cap=0.02), deadline=5.0)
OK = {"status": 200, "body": {"available": True}}
_runs = itertools.count()


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    with serve_in_thread() as server:
        yield server


class Fixture:
    """A scripted fixture on the sandbox, with its request log."""

    def __init__(self, sandbox: SandboxServer, *script: dict[str, Any]) -> None:
        self.sandbox = sandbox
        self.run_id = f"aiohttp-{next(_runs)}"
        self.url = sandbox.load_fixture(self.run_id, "f", list(script))

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self.sandbox.stats(self.run_id)["requests"]


@pytest.fixture
async def fast() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(middlewares=(RetryMiddleware(policy=FAST),)) as session:
        yield session


QUOTA = {"x-ratelimit-limit": "5000", "x-ratelimit-remaining": "4987",
         "x-ratelimit-reset": "4102444800", "x-ratelimit-used": "13"}


@pytest.mark.parametrize("script", [
    [{**OK, "headers": QUOTA}],
    [{**OK, "headers": {"x-ratelimit-limit": "10", "x-ratelimit-remaining": "50"}}],  # conflict
    [{"status": 503}, OK],
    [{"status": 429, "headers": {"Retry-After": "0"}}, OK],
    [{"status": 404}],
    [{"status": 302, "headers": {"Location": "/elsewhere"}}],
], ids=["quota", "conflict", "503-then-ok", "429-then-ok", "404", "redirect"])
async def test_the_quick_first_attempt_ends_as_the_generic_path_does(sandbox, script) -> None:
    """A first attempt sent before the operation is built (a 2xx handed over unread, anything
    else going on in the flow from it) ends as the generic path ends the same script."""
    endings = []
    for quick in (True, False):
        middleware = RetryMiddleware(policy=FAST.replace(profile="github"))
        if not quick:
            middleware._engine.quick = None
            middleware._engine.quick_routed = False
        fixture = Fixture(sandbox, *script)
        async with aiohttp.ClientSession(middlewares=(middleware,)) as session, session.get(
                fixture.url, allow_redirects=False) as response:
            status = response.status
        outcome = outcome_of(response)
        assert outcome is not None
        assert (middleware._engine.unread_of(fixture.url, "GET") is not None) is quick
        endings.append((status, len(fixture.requests), outcome.reason, outcome.attempts,
                        outcome.detail, outcome.conflicts, outcome.key, outcome.method,
                        [(r.status, r.kind, r.decision, r.detail,  # the Date is the clock's
                          tuple(e for e in r.evidence if e[0] != "date"))
                         for r in outcome.history], [w.reason for w in outcome.waits],
                        {k: v for k, v in stats_of(response).items()
                         if k not in ("operation_id", "elapsed", "waits", "retry_at")}))
    assert endings[0] == endings[1]


async def test_503_then_ok_is_one_operation_with_stats_on_the_response(sandbox, fast) -> None:
    fixture = Fixture(sandbox, {"status": 503}, {"status": 503}, OK)
    async with fast.get(fixture.url) as response:
        assert response.status == 200
        assert await response.json() == {"available": True}
    stats = stats_of(response)
    assert stats is not None
    assert (stats["attempts"], stats["outcome"], stats["logical_operations"]) == (3, "ok", 1)
    assert response.retrybudget == stats  # type: ignore[attr-defined]
    outcome = outcome_of(response)
    assert outcome is not None
    assert outcome.method == "GET"
    assert len(fixture.requests) == 3


async def test_the_final_response_is_returned_whatever_the_reason(sandbox, fast) -> None:
    for status, reason in [(404, Reason.NOT_FOUND), (401, Reason.REJECTED), (500, Reason.UNEXPECTED),
                           (503, Reason.EXHAUSTED)]:
        fixture = Fixture(sandbox, {"status": status})
        async with fast.get(fixture.url) as response:
            assert response.status == status
        outcome = outcome_of(response)
        assert outcome is not None
        assert outcome.reason is reason


async def test_429_retry_after_is_waited_for_on_the_injected_clock(sandbox) -> None:
    clock = FakeClock()
    fixture = Fixture(sandbox, {"status": 429, "headers": {"Retry-After": "1"}}, OK)
    middleware = RetryMiddleware(Retrier(policy=FAST, clock=clock))
    async with aiohttp.ClientSession(middlewares=(middleware,)) as session, \
            session.get(fixture.url) as response:
        assert response.status == 200
    assert clock.sleeps == [pytest.approx(1.0)]
    assert len(fixture.requests) == 2


async def test_a_failed_post_is_not_replayed(sandbox, fast) -> None:
    fixture = Fixture(sandbox, {"status": 503}, {"status": 201, "body": {}})
    async with fast.post(fixture.url, json={"room": 1}) as response:
        assert response.status == 503
    outcome = outcome_of(response)
    assert outcome is not None
    assert outcome.reason is Reason.NOT_RETRIED
    assert len(fixture.requests) == 1


async def test_a_reset_is_retried_and_a_reset_post_is_not_replayed(sandbox, fast) -> None:
    fixture = Fixture(sandbox, {"reset": True}, OK)
    async with fast.get(fixture.url) as response:
        assert response.status == 200
    assert len(fixture.requests) == 2
    fixture = Fixture(sandbox, {"reset": True}, OK)
    with pytest.raises(MiddlewareNotRetried) as info:
        async with fast.post(fixture.url, data=b"{}"):
            pass
    assert isinstance(info.value, aiohttp.ClientConnectionError)
    assert info.value.outcome.reason is Reason.NOT_RETRIED
    assert len(fixture.requests) == 1


async def test_a_refused_connection_is_never_sent_and_exhausts_the_budget() -> None:
    with socket.socket() as held:  # bound, never listening: connections are refused
        held.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{held.getsockname()[1]}/"
        async with aiohttp.ClientSession(middlewares=(RetryMiddleware(policy=FAST),)) as session:
            with pytest.raises(MiddlewareRetriesExhausted) as info:
                await session.post(url, data=b"{}")
    error = info.value
    assert isinstance(error, aiohttp.ClientConnectionError)
    assert isinstance(error, rb.RetriesExhausted)
    assert error.attempts == 3  # a POST too: never sent, so safe to retry
    assert [r.sent for r in error.outcome.history] == [False, False, False]
    assert pickle.loads(pickle.dumps(error)).reason is Reason.EXHAUSTED  # noqa: S301 - our own bytes


async def test_each_attempt_is_cut_at_what_is_left_of_the_deadline(sandbox) -> None:
    fixture = Fixture(sandbox, {"status": 503, "delay_s": 2.5}, {"status": 503, "delay_s": 2.5})
    policy = Policy(deadline=3.0, backoff=Backoff(base=0.01, cap=0.02))
    async with aiohttp.ClientSession(middlewares=(RetryMiddleware(policy=policy),)) as session:
        with pytest.raises(MiddlewareDeadlineExceeded) as info:
            await session.get(fixture.url)
    outcome = info.value.outcome
    assert outcome.reason is Reason.DEADLINE
    first, second = outcome.history
    assert first.timeout == pytest.approx(3.0, abs=0.05)
    assert second.timeout is not None
    assert second.timeout <= 3.0 - first.elapsed
    assert second.error == "TimeoutError"
    # Real sockets on a loaded machine: a generous bound, far under the two 2.5 s answers.
    assert outcome.elapsed < 4.5
    assert isinstance(info.value, aiohttp.ServerTimeoutError)


async def test_a_payload_that_fails_validation_is_never_handed_over(sandbox) -> None:
    fixture = Fixture(sandbox, {"status": 200, "body_text": "<html>maintenance</html>"}, OK)
    middleware = RetryMiddleware(policy=FAST.replace(validator=json_object(("available",))))
    async with aiohttp.ClientSession(middlewares=(middleware,)) as session:
        with pytest.raises(MiddlewareInvalidPayload) as info:
            await session.get(fixture.url)
    assert isinstance(info.value, aiohttp.ClientPayloadError)
    assert len(fixture.requests) == 1
    fixture = Fixture(sandbox, OK)
    async with aiohttp.ClientSession(middlewares=(middleware,)) as session, \
            session.get(fixture.url) as response:
        assert await response.json() == {"available": True}  # read once, still readable


async def test_an_open_breaker_refuses_without_a_request(sandbox) -> None:
    class Open(rb.coordination.Coordinator):
        def admit(self, key: str) -> rb.core.actions.Admission:
            return rb.core.actions.Admission(allowed=False, detail="open")

    fixture = Fixture(sandbox, OK)
    middleware = RetryMiddleware(Retrier(policy=FAST, coordinator=Open()))
    async with aiohttp.ClientSession(middlewares=(middleware,)) as session:
        with pytest.raises(MiddlewareCircuitOpen) as info:
            await session.get(fixture.url)
    assert isinstance(info.value, RetryBudgetError)
    assert info.value.attempts == 0
    assert fixture.requests == []


async def test_generated_idempotency_keys_are_sent_unchanged_on_every_attempt(sandbox) -> None:
    fixture = Fixture(sandbox, {"status": 503}, {"status": 201, "body": {}})
    policy = FAST.replace(retry_writes_with_key=True)
    middleware = RetryMiddleware(policy=policy, generate_idempotency_keys=True)
    async with aiohttp.ClientSession(middlewares=(middleware,)) as session, \
            session.post(fixture.url, data=b"{}") as response:
        assert response.status == 201
    keys = {r["idempotency_key"] for r in fixture.requests}
    assert len(fixture.requests) == 2
    assert len(keys) == 1
    uuid.UUID(keys.pop())


async def test_an_error_that_is_no_provider_failure_is_raised_as_it_was(sandbox) -> None:
    fixture = Fixture(sandbox, OK)
    bug = RuntimeError("a bug in an inner middleware")
    calls = []

    async def broken(request: aiohttp.ClientRequest, handler: Any) -> aiohttp.ClientResponse:
        calls.append(1)
        raise bug

    middlewares = (RetryMiddleware(policy=FAST), broken)
    async with aiohttp.ClientSession(middlewares=middlewares) as session:
        with pytest.raises(RuntimeError) as info:
            await session.get(fixture.url)
    assert info.value is bug
    assert calls == [1]  # never retried


@pytest.mark.parametrize(("error", "kind"), [
    (aiohttp.ConnectionTimeoutError(), FailureKind.CONNECT),
    (aiohttp.SocketTimeoutError(), FailureKind.TIMEOUT),
    (aiohttp.ServerDisconnectedError(), FailureKind.NETWORK),
    (aiohttp.ClientOSError(104, "reset"), FailureKind.NETWORK),
    (aiohttp.ClientPayloadError(), FailureKind.NETWORK),
    (aiohttp.InvalidURL("x"), FailureKind.ERROR),
    (TimeoutError(), FailureKind.TIMEOUT),
    (ValueError(), FailureKind.ERROR),
])
def test_failure_kinds(error, kind) -> None:
    assert failure_kind(error) is kind
