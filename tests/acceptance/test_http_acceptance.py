"""Every public acceptance case, end to end over loopback HTTP, through every driver.

Each case's script is served by the sandbox provider; the request goes, on the real clock,
through each way the library is used:

- the sync and async httpx transports, the requests adapter and the aiohttp middleware;
- ``Retrier.call`` / ``acall`` over a function that returns the httpx response;
- ``@retrying`` over a function written the ordinary way (send, ``raise_for_status()``,
  ``.json()``) with httpx, requests and aiohttp.

The case is judged on what the provider saw (its request log for that fixture) and on the
operation's outcome (as the hooks saw it, and as the caller got it); and every driver must
end each case as the in-process run of the same case does (:func:`run_offline`): the same
outcome after the same number of provider requests.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterator
from typing import Any

import aiohttp
import httpx
import pytest
import requests

import retrybudget as rb
from retrybudget import SYSTEM_CLOCK, Outcome, Reason, Retrier, RetryBudgetError
from retrybudget.acceptance import Case, judge, load_cases, policy_for, run_offline
from retrybudget.coordination import Coordinator
from retrybudget.core.actions import Admission
from retrybudget.integrations import outcome_of
from retrybudget.integrations.aiohttp import RetryMiddleware
from retrybudget.integrations.httpx import AsyncRetryTransport, RetryTransport
from retrybudget.integrations.requests import RetryAdapter
from retrybudget.sandbox import SandboxServer, serve_in_thread

CASES = load_cases()


class CaseCoordinator(Coordinator):
    """A breaker that is open (refuses every operation) or closed, counting failures."""

    def __init__(self, open_: bool) -> None:
        self.open = open_
        self.failures = 0

    def admit(self, key: str) -> Admission:
        if self.open:
            return Admission(allowed=False, detail="breaker open")
        return Admission()

    def finish(self, key: str, outcome: Outcome[Any], probe: bool) -> None:
        if outcome.reason.is_provider_failure:
            self.failures += 1


class Outcomes:
    """A hook that keeps every outcome it is told of (``@retrying`` returns only the value)."""

    def __init__(self) -> None:
        self.seen: list[Outcome[Any]] = []

    def on_outcome(self, outcome: Outcome[Any], request: object) -> None:
        self.seen.append(outcome)


# Transports: the caller gets the response (with the outcome on it) or a typed error.


def via_httpx(retrier: Retrier, method: str, url: str, job_id: str) -> object:
    with httpx.Client(transport=RetryTransport(retrier=retrier)) as client:
        return client.request(method, url, extensions={"retrybudget.job_id": job_id})


def via_async_httpx(retrier: Retrier, method: str, url: str, job_id: str) -> object:
    async def send() -> object:
        async with httpx.AsyncClient(transport=AsyncRetryTransport(retrier=retrier)) as client:
            return await client.request(method, url, extensions={"retrybudget.job_id": job_id})

    return asyncio.run(send())


def via_requests(retrier: Retrier, method: str, url: str, job_id: str) -> object:
    with requests.Session() as session:
        session.mount("http://", RetryAdapter(retrier))
        return session.request(method, url)


def via_aiohttp(retrier: Retrier, method: str, url: str, job_id: str) -> object:
    async def send() -> object:
        async with aiohttp.ClientSession(middlewares=(RetryMiddleware(retrier),)) as session, \
                session.request(method, url) as response:
            return response

    return asyncio.run(send())


# Plain functions. A sync function cannot be cut from outside: it hands each attempt's
# timeout (what is left of the deadline) to its client, as users are told to.


def via_call(retrier: Retrier, method: str, url: str, job_id: str) -> object:
    with httpx.Client() as client:
        def send() -> httpx.Response:
            return client.request(method, url, timeout=rb.attempt_timeout())

        return retrier.with_options(job_id=job_id).call(send)


def via_acall(retrier: Retrier, method: str, url: str, job_id: str) -> object:
    async def run() -> object:
        async with httpx.AsyncClient() as client:
            async def send() -> httpx.Response:
                return await client.request(method, url)

            return await retrier.with_options(job_id=job_id).acall(send)

    return asyncio.run(run())


def via_retrying_httpx(retrier: Retrier, method: str, url: str, job_id: str) -> object:
    with httpx.Client() as client:
        @rb.retrying(natural(retrier.policy), **options(retrier, job_id))
        def fetch() -> Any:
            r = client.request(method, url, timeout=rb.attempt_timeout())
            r.raise_for_status()
            return r.json()

        return fetch()


def via_retrying_requests(retrier: Retrier, method: str, url: str, job_id: str) -> object:
    with requests.Session() as session:
        @rb.retrying(natural(retrier.policy), **options(retrier, job_id))
        def fetch() -> Any:
            r = session.request(method, url, timeout=rb.attempt_timeout())
            r.raise_for_status()
            return r.json()

        return fetch()


def via_retrying_aiohttp(retrier: Retrier, method: str, url: str, job_id: str) -> object:
    async def run() -> object:
        async with aiohttp.ClientSession() as session:
            @rb.retrying(natural(retrier.policy), **options(retrier, job_id))
            async def fetch() -> Any:
                async with session.request(method, url) as r:
                    r.raise_for_status()
                    return await r.json()

            return await fetch()

    return asyncio.run(run())


def natural(policy: rb.Policy) -> rb.Policy:
    """An ordinary function decodes the JSON itself: that is its payload check."""
    return policy.replace(validator=None)


def options(retrier: Retrier, job_id: str) -> dict[str, Any]:
    return {"clock": retrier.clock, "coordinator": retrier.coordinator, "hooks": retrier.hooks,
            "random": retrier.random, "job_id": job_id}


DRIVERS: dict[str, Callable[[Retrier, str, str, str], object]] = {
    "httpx": via_httpx,
    "httpx-async": via_async_httpx,
    "requests": via_requests,
    "aiohttp": via_aiohttp,
    "call": via_call,
    "acall": via_acall,
    "retrying-httpx": via_retrying_httpx,
    "retrying-requests": via_retrying_requests,
    "retrying-aiohttp": via_retrying_aiohttp,
}
"""Every driver: ``(retrier, method, url, job_id) -> what the caller got``."""

TRANSPORTS = ("httpx", "httpx-async", "requests", "aiohttp")
"""The drivers that hand the caller the provider's response."""

RESENDS_A_DROPPED_CONNECTION = {"retrying-aiohttp"}
"""aiohttp's session resends an idempotent request once by itself when its connection drops
(before any middleware or caller sees the error): one attempt may be two requests."""

@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    with serve_in_thread() as server:
        yield server


def play(
    sandbox: SandboxServer, case: Case, driver: str, run_id: str
) -> tuple[Outcome[Any], Any, CaseCoordinator]:
    """Play ``case``: its outcome, what the caller got (None if it raised), the coordinator."""
    url = sandbox.load_fixture(run_id, case.id, case.script)
    coordinator = CaseCoordinator(open_=case.breaker == "open")
    hook = Outcomes()
    retrier = Retrier(policy=policy_for(case), coordinator=coordinator, random=random.Random(7),
                      hooks=(hook,))
    try:
        got = DRIVERS[driver](retrier, case.method, url, case.id)
    except RetryBudgetError as error:
        got, told = None, error.outcome
    else:
        told = got if isinstance(got, Outcome) else outcome_of(got) if driver in TRANSPORTS else None
    assert told is None or told is hook.seen[-1]
    assert len(hook.seen) == 1, "one logical operation per call"
    return hook.seen[0], got, coordinator


def arrivals(sandbox: SandboxServer, run_id: str, fixture_id: str) -> list[float]:
    seen = sandbox.stats(run_id)["requests"]
    return [r["arrival"] for r in seen if r["fixture_id"] == fixture_id]


OFFLINE = {case.id: run_offline(case) for case in CASES}
"""Each case played in process on a fake clock: the outcome and request count to match."""


@pytest.mark.parametrize("driver", list(DRIVERS))
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_case_passes_end_to_end(sandbox: SandboxServer, case: Case, driver: str) -> None:
    started = SYSTEM_CLOCK.wall()
    run_id = f"{driver}-{case.id}"
    outcome, _, coordinator = play(sandbox, case, driver, run_id)
    seen = arrivals(sandbox, run_id, case.id)
    result = judge(case, outcome, seen, started_wall=started,
                   breaker_failures=coordinator.failures)
    failed = [c for c in result.checks if not c.passed]
    assert not failed, (case.id, driver, failed, result.evidence())
    # Every driver ends the case alike: the same outcome after the same provider requests.
    reference = OFFLINE[case.id]
    assert (outcome.reason, len(seen)) == (reference.outcome.reason, reference.requests), (
        case.id, driver, result.evidence(), reference.evidence())
    # One logical operation reported per request, whatever the driver.
    if driver not in RESENDS_A_DROPPED_CONNECTION:
        assert outcome.attempts == len(seen)
    if driver not in ("requests", "aiohttp"):  # no per-request extensions to carry it
        assert outcome.job_id == case.id


@pytest.mark.parametrize("integration", TRANSPORTS)
def test_what_the_caller_gets(sandbox: SandboxServer, integration: str) -> None:
    """A response whenever the provider gave one; an error only when there is none to give."""
    by_id = {c.id: c for c in CASES}
    expectations = {
        "A01": 200, "A02": 503, "A06": 401, "A09": 404, "A11": 503, "A16": 429, "A17": 500,
        "A10": None, "A18": None,
    }
    for case_id, status in expectations.items():
        case = by_id[case_id]
        outcome, response, _ = play(sandbox, case, integration, f"{integration}-caller")
        got = None if response is None else getattr(response, "status_code", None) or response.status
        assert got == status, case_id
    assert outcome.reason is Reason.CIRCUIT_OPEN
