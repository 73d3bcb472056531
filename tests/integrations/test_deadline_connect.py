"""Rule 13: the deadline covers the connect, against a provider whose accept queue is full.

Linux drops a SYN sent to a listener whose accept queue is full: the connect gets no answer,
neither a refusal nor an error, and hangs until the client gives up (the kernel resends the
SYN for minutes). Each driver meets such a listener on loopback (see
:func:`tests.support.exchange.full_accept_queue`); its operation must end ``deadline`` by the
deadline plus :data:`SLACK`, with every attempt counted and each failed by its connect. The
async driver over httpx's own transport is also driven by many operations at once, the
shape of a gateway under load. Real clock, real sockets: the bound is the deadline plus a
generous slack, while an unbounded connect takes seconds (the first SYN is resent after 1 s,
then 3 s, 7 s...).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpcore
import httpx
import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import retrybudget as rb
from retrybudget.integrations.httpx import AsyncRetryTransport, RetryTransport
from retrybudget.integrations.requests import RetryAdapter
from tests.support.exchange import SLACK, full_accept_queue, gateway_timed_out

pytestmark = pytest.mark.skipif(sys.platform != "linux",
                                reason="a full accept queue drops SYNs on Linux only")

DEADLINE = 0.5
Ended = tuple[rb.RetryBudgetError, float]


@pytest.fixture(scope="module")
def stuck() -> Iterator[str]:
    with full_accept_queue() as base:
        yield base + "/rentals/1/availability"


def _ended(call: Callable[[], object]) -> Ended:
    """The error ``call`` raised and the real seconds it took (it must raise)."""
    started = time.monotonic()
    with pytest.raises(rb.RetryBudgetError) as caught:
        call()
    return caught.value, time.monotonic() - started


def _httpx_sync(url: str, policy: rb.Policy) -> Ended:
    def call() -> None:
        with httpx.Client(transport=RetryTransport(policy=policy), timeout=30.0) as client:
            client.get(url)

    return _ended(call)


def _httpx_async(url: str, policy: rb.Policy) -> Ended:
    async def run() -> None:
        transport = AsyncRetryTransport(policy=policy)
        async with httpx.AsyncClient(transport=transport, timeout=30.0) as client:
            await client.get(url)

    return _ended(lambda: asyncio.run(run()))


def _requests(url: str, policy: rb.Policy) -> Ended:
    def call() -> None:
        with requests.Session() as session:
            session.mount("http://", RetryAdapter(policy=policy))
            session.get(url, timeout=30.0)

    return _ended(call)


DRIVERS = {"httpx-sync": _httpx_sync, "httpx-async": _httpx_async, "requests": _requests}


def _assert_cut_at_the_deadline(error: rb.RetryBudgetError, elapsed: float, deadline: float,
                                max_attempts: int) -> None:
    # Generous on purpose (a loaded machine): an unbounded connect hangs for seconds.
    assert elapsed <= deadline + SLACK, f"{elapsed:.2f} s against a {deadline} s deadline"
    history = error.outcome.history if error.outcome is not None else ()
    assert 1 <= error.attempts == len(history) <= max_attempts
    # every attempt timed out: the operation ended on its time limit, or used every attempt
    expected = rb.Reason.EXHAUSTED if error.attempts == max_attempts else rb.Reason.DEADLINE
    assert error.reason in (expected, rb.Reason.DEADLINE), error.reason
    assert all(attempt.status is None and attempt.error for attempt in history), history


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_a_connect_that_gets_no_answer_ends_at_the_deadline(stuck: str, driver: str) -> None:
    policy = rb.Policy(max_attempts=3, deadline=DEADLINE)
    error, elapsed = DRIVERS[driver](stuck, policy)
    _assert_cut_at_the_deadline(error, elapsed, DEADLINE, 3)
    assert error.reason is rb.Reason.DEADLINE
    assert error.attempts == 1  # the attempt had the whole deadline: nothing left after it


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_each_attempt_is_cut_at_its_timeout_and_retried(stuck: str, driver: str) -> None:
    policy = rb.Policy(max_attempts=3, deadline=1.2, attempt_timeout=0.25)
    error, elapsed = DRIVERS[driver](stuck, policy)
    _assert_cut_at_the_deadline(error, elapsed, 1.2, 3)
    assert error.attempts >= 2  # a hung connect is retried: a GET never reached the provider


@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(driver=st.sampled_from(sorted(DRIVERS)),
       deadline=st.floats(min_value=0.1, max_value=0.8),
       attempt_timeout=st.none() | st.floats(min_value=0.05, max_value=0.5),
       max_attempts=st.integers(min_value=1, max_value=4))
def test_any_deadline_and_attempt_timeout_bound_a_stuck_connect(
    stuck: str, driver: str, deadline: float, attempt_timeout: float | None, max_attempts: int
) -> None:
    policy = rb.Policy(max_attempts=max_attempts, deadline=deadline,
                       attempt_timeout=attempt_timeout)
    error, elapsed = DRIVERS[driver](stuck, policy)
    _assert_cut_at_the_deadline(error, elapsed, deadline, max_attempts)


def test_many_async_operations_at_once_each_end_at_their_deadline(stuck: str) -> None:
    operations = 100  # more connects at once than the pool's default limit (100) allows

    async def one(client: httpx.AsyncClient) -> Ended:
        started = time.monotonic()
        try:
            await client.get(stuck)
        except rb.RetryBudgetError as exc:
            return exc, time.monotonic() - started
        raise AssertionError("a stuck connect answered")

    async def run() -> list[Ended]:
        policy = rb.Policy(max_attempts=3, deadline=DEADLINE)
        async with httpx.AsyncClient(transport=AsyncRetryTransport(policy=policy),
                                     timeout=30.0) as client:
            return await asyncio.gather(*(one(client) for _ in range(operations + 20)))

    ended = asyncio.run(run())
    assert len(ended) == operations + 20
    for error, elapsed in ended:
        _assert_cut_at_the_deadline(error, elapsed, DEADLINE, 3)


def test_the_gateway_answers_within_its_deadline_when_the_provider_never_accepts(
    tmp_path: Path,
) -> None:
    with full_accept_queue() as base:
        body = gateway_timed_out(base, tmp_path / "stuck.sqlite3")
    assert body["code"] == "provider_unavailable"
    assert 1 <= body["attempts"] <= 3


GIVE_UP = 4.0
"""Seconds after which :class:`_DeafBackend`'s connect gives up (far past DEADLINE + SLACK)."""


class _DeafBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend with a connect deaf to cancellation until it gives up.

    That is how anyio's ``connect_tcp`` was seen to behave on a loaded machine against a
    provider whose accept queue is full: cancelled at the attempt's end, it still waited for
    its connect attempt, seconds more. Counts the connects begun and ended.
    """

    def __init__(self, backend: httpcore.AsyncNetworkBackend) -> None:
        self._backend = backend
        self.begun = self.ended = 0

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None, socket_options: Any = None,
                          ) -> httpcore.AsyncNetworkStream:
        self.begun += 1
        connect = asyncio.ensure_future(self._backend.connect_tcp(
            host, port, GIVE_UP, local_address, socket_options))
        asked = False
        try:
            while not connect.done():
                asked = await _cancelled_while_waiting(connect) or asked  # deaf: it goes on
            stream = connect.result()
            if asked:
                await stream.aclose()
                raise asyncio.CancelledError
            return stream
        finally:
            self.ended += 1

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Any = None) -> httpcore.AsyncNetworkStream:
        raise NotImplementedError

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


async def _cancelled_while_waiting(future: asyncio.Future[Any]) -> bool:
    try:
        await asyncio.wait((future,))
    except asyncio.CancelledError:
        return True
    return False


@pytest.mark.parametrize("attempt_timeout", [None, 0.2])
def test_a_connect_deaf_to_cancellation_is_left_behind_at_the_attempts_end(
    stuck: str, attempt_timeout: float | None,
) -> None:
    inner = httpx.AsyncHTTPTransport()
    deaf = _DeafBackend(inner._pool._network_backend)
    inner._pool._network_backend = deaf  # httpx's own transport, its connects deaf
    policy = rb.Policy(max_attempts=3, deadline=DEADLINE, attempt_timeout=attempt_timeout)

    async def run() -> tuple[Ended, int]:
        transport = AsyncRetryTransport(inner, policy=policy)
        async with httpx.AsyncClient(transport=transport, timeout=30.0) as client:
            error, elapsed = await _ended_async(client.get(stuck))
            ended_at_the_answer = deaf.ended
            for _ in range(int(GIVE_UP * 2 / 0.01)):  # the connects left behind give up
                if deaf.ended == deaf.begun:
                    break
                await asyncio.sleep(0.01)
            return (error, elapsed), ended_at_the_answer

    (error, elapsed), ended_at_the_answer = asyncio.run(run())
    _assert_cut_at_the_deadline(error, elapsed, DEADLINE, 3)
    assert ended_at_the_answer == 0  # the answer came while every connect still hung
    assert error.attempts == deaf.begun == deaf.ended  # each attempt's connect, ended later
    # nothing was sent: each cut is a connect timeout (a write could be sent again)
    assert {attempt.error for attempt in error.outcome.history} == {"ConnectTimeout"}


async def _ended_async(call: Awaitable[object]) -> Ended:
    started = time.monotonic()
    with pytest.raises(rb.RetryBudgetError) as caught:
        await call
    return caught.value, time.monotonic() - started
