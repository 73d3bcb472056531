"""Rule 13: the deadline covers the whole exchange, against a provider that trickles bytes.

A trickle keeps every socket read short, so per-read timeouts never fire: only reading the
head and the body against the attempt's absolute end bounds the operation. Each driver meets
a real loopback server that trickles its status line and headers, and one that trickles the
body of a 503 (read because it may be retried) or of a 2xx a validator reads, its length
given or ended by the connection's close (a cut then reads as the body's end: only the
attempt's end tells the two apart). These tests use
the real clock on purpose (real sockets); their bound is the deadline plus a generous
:data:`SLACK`, while the unbounded exchanges they guard against take many seconds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import retrybudget as rb
from retrybudget.integrations.aiohttp import RetryMiddleware
from retrybudget.integrations.httpx import AsyncRetryTransport, RetryTransport
from retrybudget.integrations.requests import RetryAdapter
from retrybudget.integrations.validators import json_object
from tests.support.exchange import SLACK, TrickleServer, gateway_timed_out, trickle_server

DEADLINE = 0.5
# 120 bytes 80 ms apart: almost 10 s of trickle per response, far past DEADLINE + SLACK.
TRICKLES = {
    "head-503": "/head/80/120/503",
    "body-503": "/body/80/120/503",
    "body-200-validated": "/body/80/120/200",
    "close-503": "/close/80/120/503",
    "close-200-validated": "/close/80/120/200",
}


POLICY = rb.Policy(max_attempts=3, deadline=DEADLINE, validator=json_object())


@pytest.fixture(scope="module")
def trickle() -> Iterator[TrickleServer]:
    with trickle_server() as server:
        yield server


def _httpx_sync(url: str) -> str:
    transport = RetryTransport(policy=POLICY)
    with httpx.Client(transport=transport, timeout=5.0) as client:
        try:
            return str(client.get(url).status_code)
        except rb.RetryBudgetError as exc:
            return exc.reason.value


def _httpx_async(url: str) -> str:
    async def run() -> str:
        transport = AsyncRetryTransport(policy=POLICY)
        async with httpx.AsyncClient(transport=transport, timeout=5.0) as client:
            try:
                return str((await client.get(url)).status_code)
            except rb.RetryBudgetError as exc:
                return exc.reason.value

    return asyncio.run(run())


def _requests(url: str) -> str:
    with requests.Session() as session:
        session.mount("http://", RetryAdapter(policy=POLICY))
        try:
            return str(session.get(url, timeout=5.0).status_code)
        except rb.RetryBudgetError as exc:
            return exc.reason.value


def _aiohttp(url: str) -> str:
    async def run() -> str:
        async with aiohttp.ClientSession(middlewares=(RetryMiddleware(policy=POLICY),)) as session:
            try:
                async with session.get(url) as response:
                    return str(response.status)
            except rb.RetryBudgetError as exc:
                return exc.reason.value

    return asyncio.run(run())


DRIVERS = {"httpx-sync": _httpx_sync, "httpx-async": _httpx_async, "requests": _requests,
           "aiohttp": _aiohttp}


def _timed(driver: str, url: str) -> tuple[str, float]:
    started = time.monotonic()
    answer = DRIVERS[driver](url)
    return answer, time.monotonic() - started


@pytest.mark.parametrize("driver", sorted(DRIVERS))
@pytest.mark.parametrize("trickled", sorted(TRICKLES))
def test_a_trickled_exchange_ends_within_the_deadline(
    trickle: TrickleServer, driver: str, trickled: str
) -> None:
    answer, elapsed = _timed(driver, trickle.url(TRICKLES[trickled]))
    assert elapsed <= DEADLINE + SLACK, f"{driver} {trickled}: {elapsed:.2f} s"
    # Nothing complete arrived inside the deadline: the operation ends on its time limit.
    assert answer == rb.Reason.DEADLINE.value, answer


@pytest.mark.parametrize("part", ["body", "close"])
@pytest.mark.parametrize("status", [200, 503])
def test_requests_cuts_a_short_trickled_final_body_at_the_deadline(
    trickle: TrickleServer, part: str, status: int
) -> None:
    # No validator, the smallest body (58 bytes, 80 ms apart: 4.6 s): the session would read
    # it next, so the adapter reads it inside the budget, its length given or not.
    with requests.Session() as session:
        session.mount("http://", RetryAdapter(policy=rb.Policy(deadline=DEADLINE)))
        started = time.monotonic()
        with pytest.raises(rb.RetryBudgetError) as caught:
            session.get(trickle.url(f"/{part}/80/0/{status}"))
        assert time.monotonic() - started <= DEADLINE + SLACK
    assert caught.value.reason is rb.Reason.DEADLINE


def test_requests_reads_a_final_body_inside_the_budget_unless_streamed(
    trickle: TrickleServer,
) -> None:
    # No validator: the adapter reads a final 200 only because the session would read it next.
    with requests.Session() as session:
        session.mount("http://", RetryAdapter(policy=rb.Policy(max_attempts=3, deadline=DEADLINE)))
        started = time.monotonic()
        with pytest.raises(rb.RetryBudgetError) as caught:
            session.get(trickle.url("/body/80/120/200"), timeout=5.0)
        assert time.monotonic() - started <= DEADLINE + SLACK
        assert caught.value.reason is rb.Reason.DEADLINE
        streamed = session.get(trickle.url("/body/80/120/200"), timeout=5.0, stream=True)
        assert streamed.status_code == 200  # handed over unread: outside the budget
        streamed.close()


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_a_quick_answer_is_still_read_whole(trickle: TrickleServer, driver: str) -> None:
    # 1 ms between bytes: about 0.12 s of trickle fits the deadline, the answer is the 200.
    answer, _ = _timed(driver, trickle.url("/body/1/120/200"))
    assert answer == "200"


@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(driver=st.sampled_from(sorted(DRIVERS)), part=st.sampled_from(["head", "body", "close"]),
       interval_ms=st.integers(min_value=20, max_value=200),
       size=st.integers(min_value=60, max_value=400), status=st.sampled_from([200, 503]))
def test_any_trickle_rate_and_size_ends_within_the_deadline(
    trickle: TrickleServer, driver: str, part: str, interval_ms: int, size: int, status: int
) -> None:
    answer, elapsed = _timed(driver, trickle.url(f"/{part}/{interval_ms}/{size}/{status}"))
    assert elapsed <= DEADLINE + SLACK, f"{answer} after {elapsed:.2f} s"


def test_the_gateway_answers_a_trickled_200_within_its_deadline(
    trickle: TrickleServer, tmp_path: Path
) -> None:
    # Attempts are cut at 1 s (attempt_timeout): two trickled attempts fill the 2 s deadline.
    gateway_timed_out(trickle.url("/body/80/120/200"), tmp_path / "g.db")


# Rule 13: nothing cuts a sync plain function's attempt; it is only started when it fits.
HUNG_DEADLINE = 3.0
HUNG_SLACK = 0.25
"""The operation ends within this of its deadline: it stops after the first 2.5 s attempt
(sync) or cuts the second at the deadline (async); the unguarded second attempt, started
with 0.5 s left, ended 2 s past it."""


def _hung_sync(url: str, policy: rb.Policy) -> None:
    with httpx.Client(timeout=3.0) as client:

        @rb.retrying(policy)
        def lookup() -> Any:
            response = client.get(url)
            response.raise_for_status()
            return response.json()

        lookup()


def _hung_async(url: str, policy: rb.Policy) -> None:
    async def run() -> None:
        async with httpx.AsyncClient(timeout=3.0) as client:

            @rb.retrying(policy)
            async def lookup() -> Any:
                response = await client.get(url)
                response.raise_for_status()
                return response.json()

            await lookup()

    asyncio.run(run())


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_decorated_function_whose_attempts_hang_ends_by_its_deadline(
    trickle: TrickleServer, driver: str
) -> None:
    # Every attempt hangs 2.5 s, then answers 503: httpx's own 3 s timeout never fires.
    hung = _hung_sync if driver == "sync" else _hung_async
    started = time.monotonic()
    with pytest.raises(rb.DeadlineExceeded) as caught:
        hung(trickle.url("/hang/2500/0/503"), rb.Policy(deadline=HUNG_DEADLINE))
    elapsed = time.monotonic() - started
    assert elapsed <= HUNG_DEADLINE + HUNG_SLACK, f"{driver}: {elapsed:.2f} s"
    # sync: one attempt, no second one to outlast the deadline; async: the second is cut
    assert caught.value.attempts == (1 if driver == "sync" else 2)
