"""Every attempt's connection is closed when the attempt ends: answered, cut at its end, or
abandoned at the deadline.

A loopback provider answers by rental id: at once, a 503, a body trickled a byte every 80 ms
(10 s in all) or nothing for 30 s. It counts the connections on which it is still answering
(a request read, its answer not yet sent whole, the client not gone): once every lookup is
answered, none may be left. A trickle or a hang whose connection the client kept would go on
for seconds; a closed one is seen at once (the provider watches each connection for its end).
Real clock and sockets: the bounds are deadlines plus generous slack, and the grace for a
close to reach the provider is bounded too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import requests

import retrybudget as rb
from retrybudget.coordination import CoordinationConfig
from retrybudget.gateway import GatewayConfig, serve_in_thread
from retrybudget.integrations.httpx import AsyncRetryTransport, RetryTransport
from retrybudget.integrations.requests import RetryAdapter
from retrybudget.integrations.validators import json_object

MODES = ("ok", "trickle", "hang", "503", "trickle", "hang")
"""What the provider does for rental id ``n``: ``MODES[n % len(MODES)]``."""

TRICKLE_GAP = 0.08
TRICKLE_BYTES = 120
HANG = 30.0
ROUNDS, LOOKUPS = 8, 60
"""Rounds of lookups at once: every trickled or hung attempt cut at its end is a chance for
the close of its connection to be broken into (a transport that cut an exchange by
cancelling its task left about 1 in 100 of them open)."""
GRACE = 3.0
"""Seconds a close may take to reach the provider once every lookup is answered (it takes
milliseconds; a kept trickle lasts 10 s, a kept hang 30 s)."""


class CountingProvider:
    """An asyncio HTTP/1.1 provider on a thread of its own that counts what it still answers.

    ``busy`` counts the connections in the middle of an answer (``busy_peak`` the most at
    once, ``served`` the answers begun); ``open`` every connection not yet closed.
    """

    def __init__(self) -> None:
        self.busy = 0
        self.busy_peak = 0
        self.open = 0
        self.served = 0
        self.modes_served: dict[str, int] = {}
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._server: asyncio.Server | None = None
        self.port = 0

    def __enter__(self) -> CountingProvider:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the provider did not start")
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._loop.call_soon_threadsafe(self._stop)
        self._thread.join(timeout=10)

    def url(self) -> str:
        """The provider's base URL."""
        return f"http://127.0.0.1:{self.port}"

    def wait_idle(self, grace: float) -> int:
        """The connections still answering once ``grace`` seconds passed or none was left."""
        ends = time.monotonic() + grace
        while self.busy and time.monotonic() < ends:
            time.sleep(0.02)
        return self.busy

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", 0, backlog=512))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        self._loop.close()

    def _stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in asyncio.all_tasks(self._loop):
            task.cancel()
        self._loop.call_later(0.2, self._loop.stop)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
                    return
                path = head.split(b" ", 2)[1].decode("ascii")
                rental = int(path.strip("/").split("/")[-2])
                mode = MODES[rental % len(MODES)]
                self.served += 1
                self.modes_served[mode] = self.modes_served.get(mode, 0) + 1
                self.busy += 1
                self.busy_peak = max(self.busy_peak, self.busy)
                try:
                    if not await self._answer(mode, rental, reader, writer):
                        return
                finally:
                    self.busy -= 1
        finally:
            self.open -= 1
            writer.close()

    async def _answer(self, mode: str, rental: int, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False: the connection ended (the client's close, or ours)."""
        body = json.dumps({"rental_id": str(rental), "available": True,
                           "checked_at": 1_800_000_000, "pad": "x" * 64}).encode()
        if mode == "trickle":
            body = body[:TRICKLE_BYTES].ljust(TRICKLE_BYTES, b" ")
        status = "503 Service Unavailable" if mode == "503" else "200 OK"
        head = (f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
                f"content-length: {len(body)}\r\n\r\n").encode("ascii")
        # A client sends nothing more on this connection until the answer is whole: anything
        # read now is its end (b"", or a reset).
        gone = asyncio.ensure_future(reader.read(1))
        try:
            if mode == "hang":
                done, _ = await asyncio.wait({gone}, timeout=HANG)
                return False  # gone, or held a whole hang: the connection ends either way
            if mode == "trickle":
                writer.write(head)
                for index in range(len(body)):
                    done, _ = await asyncio.wait({gone}, timeout=TRICKLE_GAP)
                    if done:
                        return False
                    writer.write(body[index:index + 1])
                return True
            writer.write(head + body)
            await writer.drain()
            return True
        except ConnectionError:
            return False
        finally:
            if not gone.done():  # the connection goes on: stop watching it for its end
                gone.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await gone


@pytest.fixture
def provider() -> Iterator[CountingProvider]:
    with CountingProvider() as server:
        yield server


def _rentals(count: int, first: int = 1) -> list[int]:
    return list(range(first, first + count))


def _concurrently(count: int, workers: int, lookup: Callable[[int], object],
                  first: int = 1) -> list[object]:
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lookup, _rentals(count, first)))


def _assert_all_closed(provider: CountingProvider) -> None:
    """Every kind of answer was served, and none is still being served after the grace."""
    assert {"trickle", "hang", "ok", "503"} <= set(provider.modes_served), provider.modes_served
    left = provider.wait_idle(GRACE)
    assert left == 0, f"{left} connections still answering (of {provider.served} answers)"


async def _async_idle(provider: CountingProvider) -> int:
    """:meth:`CountingProvider.wait_idle` that leaves the event loop running (a cut exchange
    closes its connection on it)."""
    ends = time.monotonic() + GRACE
    while provider.busy and time.monotonic() < ends:
        await asyncio.sleep(0.02)
    return provider.busy


def open_doors() -> rb.MemoryCoordinator:
    """A coordinator with no breaker and no retry budget: every lookup reaches the provider
    (with them, the failures this provider serves would soon answer lookups itself)."""
    return rb.MemoryCoordinator(CoordinationConfig(breaker=None, retry_budget=None))


def test_the_gateway_leaves_no_provider_connection_open_under_load(
    provider: CountingProvider, tmp_path: Path
) -> None:
    # Rounds of lookups, 30 at once, every one sent to the provider; attempts cut at 0.4 s,
    # each lookup answered in its 1.2 s.
    config = GatewayConfig(provider=provider.url(), db_path=tmp_path / "g.db", deadline=1.2,
                           attempt_timeout=0.4, max_in_flight=64, max_connections=96)
    with serve_in_thread(config, coordinator=open_doors()) as gateway, \
            httpx.Client(timeout=30.0) as client:
        def lookup(rental: int) -> int:
            started = time.monotonic()
            response = client.get(gateway.url(f"/rentals/{rental}/availability"))
            assert time.monotonic() - started <= config.deadline + 1.0
            return response.status_code

        for round_ in range(ROUNDS):
            answered = _concurrently(LOOKUPS, 30, lookup, round_ * LOOKUPS + 1)
            assert set(answered) <= {200, 503}, answered
            left = provider.wait_idle(GRACE)
            assert left == 0, f"round {round_}: {left} of {provider.served} still answering"
        _assert_all_closed(provider)
    assert provider.wait_idle(GRACE) == 0


POLICY = rb.Policy(deadline=1.0, attempt_timeout=0.4, validator=json_object(("available",)))


def _reason(error: BaseException) -> str:
    if isinstance(error, rb.RetryBudgetError):
        return error.reason.value
    raise error


def test_the_async_transport_leaves_no_connection_open_under_load(
    provider: CountingProvider,
) -> None:
    async def run() -> list[object]:
        transport = AsyncRetryTransport(policy=POLICY)
        async with httpx.AsyncClient(transport=transport, timeout=30.0) as client:
            async def lookup(rental: int) -> object:
                try:
                    return (await client.get(f"{provider.url()}/rentals/{rental}/a")).status_code
                except rb.RetryBudgetError as exc:
                    return _reason(exc)

            answered: list[object] = []
            for round_ in range(ROUNDS):
                rentals = _rentals(LOOKUPS, round_ * LOOKUPS + 1)
                answered += await asyncio.gather(*(lookup(n) for n in rentals))
                left = await _async_idle(provider)
                assert left == 0, f"round {round_}: {left} of {provider.served} still answering"
            _assert_all_closed(provider)
            return answered

    answered = asyncio.run(run())
    assert 200 in answered, answered
    assert rb.Reason.DEADLINE.value in answered, answered


@contextlib.contextmanager
def _sync_client(driver: str) -> Iterator[httpx.Client | requests.Session]:
    if driver == "httpx":
        with httpx.Client(transport=RetryTransport(policy=POLICY), timeout=30.0) as client:
            yield client
    else:
        with requests.Session() as session:
            session.mount("http://", RetryAdapter(policy=POLICY, pool_maxsize=12))
            yield session


@pytest.mark.parametrize("driver", ["httpx", "requests"])
def test_the_sync_drivers_leave_no_connection_open_under_load(
    provider: CountingProvider, driver: str
) -> None:
    with _sync_client(driver) as client:
        def lookup(rental: int) -> object:
            try:
                return client.get(f"{provider.url()}/rentals/{rental}/a").status_code
            except rb.RetryBudgetError as exc:
                return _reason(exc)

        answered = _concurrently(36, 12, lookup)
        _assert_all_closed(provider)
    assert 200 in answered, answered
    assert rb.Reason.DEADLINE.value in answered, answered


def test_the_provider_counts_a_kept_connection(provider: CountingProvider) -> None:
    # The check can fail: a client that keeps a trickled answer's connection is counted.
    with httpx.Client(timeout=30.0) as client, client.stream(
            "GET", f"{provider.url()}/rentals/1/a") as response:
        assert response.status_code == 200
        assert provider.wait_idle(0.3) == 1
    assert provider.wait_idle(GRACE) == 0

