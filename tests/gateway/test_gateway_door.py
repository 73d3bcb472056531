"""The gateway's door: admission by operations in flight and by the budget a request has left.

The rule (:func:`admit`) is pure: exact values and properties on numbers. The live tests count
answers and provider requests: a request beyond ``max_in_flight`` and a request that arrived
too long ago are each answered 503 ``gateway_overloaded`` at once, with a ``Retry-After``, 0
attempts and no provider request; a request's budget is what its deadline has left from its
arrival, on the app's clock (a fake one here: exact values, no wall time).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrybudget import SYSTEM_CLOCK, FakeClock, PolicyError
from retrybudget.gateway import GatewayConfig, GatewayServer, create_app
from retrybudget.gateway._app import ARRIVED
from retrybudget.gateway._door import (
    ANSWER_TIME,
    LAG_FLOOR,
    LAG_TURNS,
    STEP,
    STORE_TIME,
    Admitted,
    LoopLag,
    Shed,
    admit,
    reserve,
)
from retrybudget.sandbox import SandboxServer
from retrybudget.sandbox import serve_in_thread as serve_sandbox
from tests.support.gateway import Scripted, available, unique
from tests.support.strategies import assert_reached, reached, tried

PROBLEM = "application/problem+json"
ADMIT = "admit"


# The rule, exact -------------------------------------------------------------------------


def test_a_fresh_request_gets_the_deadline_less_the_answer_time_and_the_lag_floor() -> None:
    verdict = admit(arrived=10.0, now=10.0, deadline=2.0, lag=0.0, in_flight=0, max_in_flight=4,
                    min_budget=0.25)
    # 2 - (0.05 + 3 * 0.05) - 0.05: a loop that reads no lag is still reserved 50 ms a turn
    assert verdict == Admitted(steps=35, answer_by=11.8, waited=0.0)
    assert verdict.budget == pytest.approx(1.75)


def test_the_wait_and_the_loop_lag_are_paid_out_of_the_budget() -> None:
    # arrived 0.3 s ago, the loop lags 0.1 s: 0.05 + 3 * 0.1 kept back for the answer
    verdict = admit(arrived=10.0, now=10.3, deadline=2.0, lag=0.1, in_flight=3, max_in_flight=4,
                    min_budget=0.25)
    assert isinstance(verdict, Admitted)
    assert verdict.answer_by == pytest.approx(11.65)
    assert verdict.steps == 26  # 11.65 - 0.05 - 10.3 = 1.3 s
    assert verdict.waited == pytest.approx(0.3)


def test_a_full_door_sheds_for_capacity_whatever_the_budget() -> None:
    assert admit(arrived=5.0, now=5.0, deadline=2.0, lag=0.0, in_flight=4, max_in_flight=4,
                 min_budget=0.25) == Shed("capacity", 0.0)


def test_too_little_left_sheds_for_budget() -> None:
    # 2 - 0.2 - 0.05 - 1.55 = 0.2 s left, under the 0.25 s minimum
    assert admit(arrived=0.0, now=1.55, deadline=2.0, lag=0.0, in_flight=0, max_in_flight=4,
                 min_budget=0.25) == Shed("budget", 1.55)
    # a loop that lags half a second keeps back 1.55 s: a fresh request has 0.4 s
    lagging = admit(arrived=0.0, now=0.0, deadline=2.0, lag=0.5, in_flight=0, max_in_flight=4,
                    min_budget=0.25)
    assert isinstance(lagging, Admitted)
    assert lagging.steps == 8
    assert admit(arrived=0.0, now=0.0, deadline=2.0, lag=0.6, in_flight=0, max_in_flight=4,
                 min_budget=0.25) == Shed("budget", 0.0)


def test_the_reserve_is_the_answer_time_and_three_lags_at_most_the_deadline() -> None:
    assert reserve(0.0, 2.0) == pytest.approx(ANSWER_TIME + LAG_TURNS * LAG_FLOOR)
    assert reserve(LAG_FLOOR / 2, 2.0) == reserve(0.0, 2.0)
    assert reserve(0.2, 2.0) == pytest.approx(ANSWER_TIME + LAG_TURNS * 0.2)
    assert reserve(5.0, 2.0) == 2.0
    assert reserve(-1.0, 2.0) == reserve(0.0, 2.0)


def test_the_loop_lag_is_the_worst_recent_sample() -> None:
    clock = FakeClock()
    lag = LoopLag(clock, interval=0.1, window=3)
    assert lag.current() == 0.0
    for late in (0.4, 0.05, 0.0, 0.1):
        started = clock.monotonic()
        clock.sleep(0.1 + late)
        lag.sample(started)
    assert lag.current() == pytest.approx(0.1)  # 0.4 left the window
    started = clock.monotonic()
    clock.sleep(0.05)  # resumed early (a clock step): no negative lag
    lag.sample(started)
    assert min(lag.samples) == 0.0
    lag.sleeping_since = clock.monotonic()  # a sleep under way, already 0.5 s overdue
    clock.sleep(0.6)
    assert lag.current() == pytest.approx(0.5)


# The rule, properties ----------------------------------------------------------------------

times = st.floats(0.0, 1e6, allow_nan=False)
fractions = st.floats(0.0, 1.2, allow_nan=False)


@settings(max_examples=int(os.environ.get("RB_PROPERTY_EXAMPLES", "300")))
@given(arrived=times, waiting=fractions, deadline=st.floats(0.5, 30.0), lagging=fractions,
       full=st.booleans(), running=st.integers(0, 8), max_in_flight=st.integers(1, 8),
       share=st.floats(0.01, 0.5))
def test_an_admitted_operation_ends_in_time_for_its_answer(
        arrived: float, waiting: float, deadline: float, lagging: float, full: bool,
        running: int, max_in_flight: int, share: float) -> None:
    tried(ADMIT)
    in_flight = max_in_flight + running if full else running % max_in_flight
    min_budget = deadline * share
    waited = waiting * deadline  # up to the whole deadline and a bit more
    lag = lagging * deadline / LAG_TURNS / 2
    now = arrived + waited
    verdict = admit(arrived=arrived, now=now, deadline=deadline, lag=lag, in_flight=in_flight,
                    max_in_flight=max_in_flight, min_budget=min_budget)
    kept = reserve(lag, deadline) + STORE_TIME
    left = deadline - kept - waited  # what the deadline has left once the answer is provided for
    if in_flight >= max_in_flight:
        assert verdict == Shed("capacity", pytest.approx(waited, abs=1e-6))
        reached(ADMIT, "capacity")
        return
    if isinstance(verdict, Shed):
        assert verdict.reason == "budget"
        assert left < min_budget + STEP + 1e-6  # shed only when less than the minimum (a step) is left
        reached(ADMIT, "budget")
        return
    # the operation ends, the store is read and the answer written inside the deadline
    assert verdict.budget >= min_budget - 1e-9
    assert waited + verdict.budget <= deadline - kept + 1e-6
    assert verdict.answer_by <= arrived + deadline + 1e-6
    assert verdict.budget > left - STEP - 1e-6  # rounded down by less than one step
    # a request that waited longer never gets more
    later = admit(arrived=arrived, now=now + 0.2, deadline=deadline, lag=lag, in_flight=in_flight,
                  max_in_flight=max_in_flight, min_budget=min_budget)
    assert isinstance(later, Shed) or later.steps <= verdict.steps
    reached(ADMIT, "admitted")


def test_the_admission_property_reached_its_checks() -> None:
    assert_reached(ADMIT, ("capacity", "budget", "admitted"))


def test_the_door_settings_are_checked() -> None:
    for bad in ({"max_in_flight": 0}, {"max_in_flight": True}, {"min_budget": 0},
                {"min_budget": 1.5}):
        with pytest.raises(PolicyError):
            GatewayConfig(provider="http://127.0.0.1:1", db_path="x.sqlite3", **bad)


# The door, live ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    with serve_sandbox() as server:
        yield server


def _shed_body(response: httpx.Response, reason: str) -> dict[str, Any]:
    assert response.status_code == 503
    assert response.headers["content-type"].startswith(PROBLEM)
    assert response.headers["retry-after"] == "1"
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["x-retrybudget-attempts"] == "0"
    assert response.headers["x-retrybudget-outcome"] == "none"
    body: dict[str, Any] = response.json()
    assert body["code"] == "gateway_overloaded"
    assert body["shed"] == reason
    assert (body["attempts"], body["outcome"], body["operation_id"]) == (0, None, None)
    assert "available" not in body
    assert "reserved" not in body
    return body


def test_a_request_beyond_max_in_flight_is_shed_at_once(sandbox: SandboxServer,
                                                        tmp_path: Path) -> None:
    # A 10 s deadline: the held lookup's 1.2 s stays inside its budget however much of it a
    # loaded machine's loop lag reserves; only the capacity rule can shed here.
    with Scripted(sandbox, tmp_path, max_in_flight=1, attempt_timeout=None,
                  deadline=10.0) as gateway, \
            httpx.Client(trust_env=False, timeout=20.0) as client:
        held = unique("r")
        gateway.script([{"delay_s": 1.2, **available(held)}])  # well inside the budget
        first: list[httpx.Response] = []
        worker = threading.Thread(target=lambda: first.append(
            client.get(gateway.url(f"/rentals/{held}/availability"))))
        worker.start()
        try:
            for _ in range(500):  # until the provider holds the first lookup (bounded)
                if gateway.requests():
                    break
                SYSTEM_CLOCK.sleep(0.01)
            assert len(gateway.requests()) == 1
            other = unique("r")
            shed = client.get(gateway.url(f"/rentals/{other}/availability"))
            body = _shed_body(shed, "capacity")
            assert body["stored"] is None
            assert body["rental_id"] == other
            reservation = client.post(gateway.url(f"/rentals/{other}/reservations"),
                                      headers={"Idempotency-Key": unique("k")})
            assert _shed_body(reservation, "capacity")["committed"] is False
            assert len(gateway.requests()) == 1  # neither reached the provider
        finally:
            worker.join(30)
        assert first[0].status_code == 200  # the operation in flight was not disturbed
        # the door is open again once it ended
        gateway.script([available(other)])
        assert client.get(gateway.url(f"/rentals/{other}/availability")).status_code == 200
        metrics = client.get(gateway.url("/metrics")).text
        assert 'retrybudget_gateway_shed_total{reason="capacity"} 2.0' in metrics
        assert ('retrybudget_gateway_responses_total{code="gateway_overloaded",'
                'route="availability",status="503"} 1.0') in metrics
        # nothing was claimed for the shed reservation
        assert gateway.query("SELECT COUNT(*) FROM reservations") == [(0,)]


async def _asgi_get(app: Any, path: str, arrived: float | None) -> tuple[int, dict[str, str],
                                                                         dict[str, Any]]:
    """One GET straight into the ASGI app, with the arrival stamp a server would have set."""
    scope: dict[str, Any] = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "headers": [(b"host", b"gateway")], "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80), "state": {},
    }
    if arrived is not None:
        scope[ARRIVED] = arrived
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    start = sent[0]
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return start["status"], headers, json.loads(body)


async def test_the_deadline_starts_when_the_request_arrived(sandbox: SandboxServer,
                                                           tmp_path: Path) -> None:
    clock = FakeClock()
    run, rental = unique("run"), unique("r")
    base = sandbox.load_fixture(run, "provider", [available(rental)])
    app = create_app(GatewayConfig(provider=base, db_path=tmp_path / "door.sqlite3"),
                     clock=clock)
    gateway = app.state.gateway
    path = f"/rentals/{rental}/availability"
    try:
        # it arrived 1.8 s ago: 2 - 0.2 - 0.05 - 1.8 < 0, under the 0.25 s minimum
        status, headers, body = await _asgi_get(app, path, clock.monotonic() - 1.8)
        assert status == 503
        assert body["code"] == "gateway_overloaded"
        assert body["shed"] == "budget"
        assert headers["retry-after"] == "1"
        assert sandbox.stats(run)["count"] == 0
        # it arrived 1.0 s ago: its operation runs with the 0.75 s its deadline has left
        status, _, body = await _asgi_get(app, path, clock.monotonic() - 1.0)
        assert (status, body["available"], body["attempts"]) == (200, True, 1)
        assert sandbox.stats(run)["count"] == 1
        budgets = gateway.client._transport._by_steps  # one retry transport per budget used
        assert [t.retrier.policy.deadline for t in budgets.values()] == [pytest.approx(0.75)]
        # stamped by the app on entry when no server did: the whole budget
        status, _, body = await _asgi_get(app, path, None)
        assert status == 200
        assert sorted(budgets) == [15, 35]
        metrics = gateway.metrics.render().decode()
        assert 'retrybudget_gateway_shed_total{reason="budget"} 1.0' in metrics
        waited = re.search(r"^retrybudget_gateway_admission_wait_seconds_sum (\S+)$", metrics,
                           re.MULTILINE)
        assert waited is not None
        assert float(waited[1]) == pytest.approx(2.8)
        assert gateway.door.in_flight == 0
    finally:
        await gateway.close()


def test_the_gateways_server_stamps_each_request_when_its_bytes_are_read() -> None:
    seen: list[tuple[float, float]] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":  # the lifespan: nothing to set up
            message = await receive()
            await send({"type": message["type"] + ".complete"})
            return
        seen.append((scope[ARRIVED], SYSTEM_CLOCK.monotonic()))  # a KeyError if not stamped
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    with GatewayServer(app) as server, httpx.Client(trust_env=False, timeout=10.0) as client:
        for _ in range(3):  # one keep-alive connection: each request gets its own stamp
            assert client.get(server.url("/")).status_code == 204
    assert len(seen) == 3
    assert all(isinstance(arrived, float) and arrived <= ran for arrived, ran in seen)
    assert len({arrived for arrived, _ in seen}) == 3


class _Stalling(httpx.AsyncHTTPTransport):
    """httpx's own transport, held before each exchange until the test releases it: outside
    every socket read, and deaf to cancellation (as a connect to a provider whose accept
    queue is full is, until the kernel gives up): to its task's and to a cancelled scope
    around it alike; counts the exchanges held, those asked to stop while held, and those
    that ended."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.held = self.asked_to_stop = self.ended = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.held += 1
        asked = False
        try:
            for _ in range(6000):  # at most 60 s
                asked = asked or anyio.current_effective_deadline() == -math.inf  # cancelled
                if self.release.is_set():
                    break
                try:
                    with anyio.CancelScope(shield=True):
                        await SYSTEM_CLOCK.async_sleep(0.01)
                except asyncio.CancelledError:  # the task's own cancellation
                    asked = True
            if asked:
                raise asyncio.CancelledError
            return await super().handle_async_request(request)
        finally:
            self.asked_to_stop += asked
            self.ended += 1


def test_an_exchange_held_outside_any_socket_read_is_cut_at_the_operations_end(
        sandbox: SandboxServer, tmp_path: Path) -> None:
    run, rental = unique("run"), unique("r")
    base = sandbox.load_fixture(run, "provider", [available(rental)])
    stalling = _Stalling()
    app = create_app(GatewayConfig(provider=base, db_path=tmp_path / "cut.sqlite3"),
                     transport=stalling)
    with GatewayServer(app) as server, httpx.Client(trust_env=False, timeout=120.0) as client:
        try:
            response = client.get(server.url(f"/rentals/{rental}/availability"))
            ended_before_the_answer = stalling.ended
        finally:
            stalling.release.set()
        for _ in range(500):  # the exchanges left behind end once released (bounded)
            if stalling.ended == stalling.held:
                break
            SYSTEM_CLOCK.sleep(0.01)
    assert response.status_code == 503, response.text
    body = response.json()
    assert body["code"] == "provider_unavailable"
    assert body["outcome"] in ("deadline", "exhausted")
    # the answer came while every held exchange still ignored its cancellation
    assert ended_before_the_answer == 0
    assert body["attempts"] == stalling.held == stalling.asked_to_stop == stalling.ended >= 1
    assert sandbox.stats(run)["count"] == 0


async def test_an_answer_decided_after_its_deadline_is_logged_with_where_its_time_went(
        sandbox: SandboxServer, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    run, rental = unique("run"), unique("r")
    base = sandbox.load_fixture(run, "provider", [available(rental)])
    app = create_app(GatewayConfig(provider=base, db_path=tmp_path / "late.sqlite3"),
                     clock=clock)
    path = f"/rentals/{rental}/availability"
    try:
        with caplog.at_level("WARNING", logger="retrybudget.gateway"):
            await _asgi_get(app, path, clock.monotonic() - 1.0)  # answered in time: no record
            assert [r for r in caplog.records if getattr(r, "event", "") == "late_answer"] == []
            status, _, _ = await _asgi_get(app, path, clock.monotonic() - 2.5)
        assert status == 503
        late = [r for r in caplog.records if getattr(r, "event", "") == "late_answer"]
        assert len(late) == 1
        assert late[0].verdict == "shed budget"
        assert late[0].door_s == pytest.approx(2.5)
        assert late[0].elapsed_s == pytest.approx(2.5)
    finally:
        await app.state.gateway.close()
