"""An async inner transport that is not httpx's own: each quick first attempt is cut at its end
by a cancel scope, entered only once the exchange first waits.

A transport the caller wrote around httpx's own (here one that passes every request on, as a
logging or signing transport does) gets no bounded sockets: its exchange must still end at the
attempt's end, over real loopback sockets against a provider that trickles its answer, and an
outer cancellation must still reach it. One that answers without ever waiting costs no scope.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import anyio
import httpx
import pytest

import retrybudget as rb
from retrybudget.integrations import _httpx_io
from retrybudget.integrations.httpx import AsyncRetryTransport
from retrybudget.sandbox import serve_in_thread
from tests.support.exchange import SLACK, TrickleServer, trickle_server

DEADLINE = 0.5


class PassingOn(httpx.AsyncBaseTransport):
    """A caller's own transport around httpx's: it counts the exchanges cancelled in it."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.cancelled = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return await self.inner.handle_async_request(request)
        except BaseException:
            self.cancelled += 1
            raise

    async def aclose(self) -> None:
        await self.inner.aclose()


class AnswersAtOnce(httpx.AsyncBaseTransport):
    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"available": True}, request=request)


@pytest.fixture(scope="module")
def trickle() -> Iterator[TrickleServer]:
    with trickle_server() as server:
        yield server


def test_a_trickled_head_is_cut_at_the_attempts_end(trickle: TrickleServer) -> None:
    inner = PassingOn()

    async def run() -> rb.Reason:
        transport = AsyncRetryTransport(inner, policy=rb.Policy(max_attempts=1, deadline=DEADLINE))
        async with httpx.AsyncClient(transport=transport, timeout=5.0) as client:
            with pytest.raises(rb.RetryBudgetError) as caught:
                await client.get(trickle.url("/head/80/120/503"))
        return caught.value.reason

    started = time.monotonic()
    reason = asyncio.run(run())
    assert time.monotonic() - started <= DEADLINE + SLACK
    assert reason in (rb.Reason.DEADLINE, rb.Reason.EXHAUSTED)
    assert inner.cancelled == 1  # the exchange itself was cancelled, not left to run


def test_an_outer_cancellation_reaches_the_waiting_exchange(trickle: TrickleServer) -> None:
    inner = PassingOn()

    async def run() -> bool:
        transport = AsyncRetryTransport(inner, policy=rb.Policy(deadline=10.0))
        async with httpx.AsyncClient(transport=transport, timeout=5.0) as client:
            with anyio.move_on_after(0.2) as scope:
                await client.get(trickle.url("/head/80/120/503"))
        return scope.cancelled_caught

    assert asyncio.run(run())
    assert inner.cancelled == 1


def test_a_waiting_success_is_handed_over() -> None:
    inner = PassingOn()

    async def run() -> httpx.Response:
        transport = AsyncRetryTransport(inner, policy=rb.Policy(deadline=5.0))
        with serve_in_thread() as sandbox:
            async with httpx.AsyncClient(transport=transport, timeout=5.0) as client:
                return await client.get(sandbox.url("/rentals/1/availability"))

    response = asyncio.run(run())
    assert response.status_code == 200
    assert response.extensions["retrybudget"]["outcome"] == "ok"
    assert inner.cancelled == 0


def test_an_exchange_that_never_waits_arms_no_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    armed: list[float] = []
    real = anyio.current_time
    monkeypatch.setattr(_httpx_io.anyio, "current_time", lambda: armed.append(1.0) or real())

    async def run(inner: httpx.AsyncBaseTransport, url: str) -> httpx.Response:
        transport = AsyncRetryTransport(inner, policy=rb.Policy(deadline=5.0))
        async with httpx.AsyncClient(transport=transport, timeout=5.0) as client:
            return await client.get(url)

    response = asyncio.run(run(AnswersAtOnce(), "https://api.example.com/rentals/1/availability"))
    assert response.extensions["retrybudget"]["attempts"] == 1
    assert armed == []
    with serve_in_thread() as sandbox:  # one that waits on its socket arms its attempt's end
        response = asyncio.run(run(PassingOn(), sandbox.url("/rentals/1/availability")))
    assert response.extensions["retrybudget"]["outcome"] == "ok"
    assert armed
