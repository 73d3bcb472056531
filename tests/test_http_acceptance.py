"""Every public acceptance case, end to end over loopback HTTP, through each integration.

Each case's script is served by the sandbox provider; the request goes through the sync
httpx transport, the async httpx transport or the requests adapter, on the real clock.
The case is judged on what the provider saw (its request log for that fixture) and on the
outcome the integration reports (on the response, or on the raised error).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import requests

from retrybudget import SYSTEM_CLOCK, Outcome, Reason, Retrier, RetryBudgetError
from retrybudget.acceptance import Case, judge, load_cases, policy_for
from retrybudget.coordination import Coordinator
from retrybudget.core.flow import Admission
from retrybudget.integrations import outcome_of
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


INTEGRATIONS: dict[str, Callable[[Retrier, str, str, str], object]] = {
    "httpx": via_httpx,
    "httpx-async": via_async_httpx,
    "requests": via_requests,
}


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    with serve_in_thread() as server:
        yield server


def play(
    sandbox: SandboxServer, case: Case, integration: str, run_id: str
) -> tuple[Outcome[Any], Any, CaseCoordinator]:
    """Play ``case``: its outcome, the response (None if an error was raised), the coordinator."""
    url = sandbox.load_fixture(run_id, case.id, case.script)
    coordinator = CaseCoordinator(open_=case.breaker == "open")
    retrier = Retrier(policy=policy_for(case), coordinator=coordinator, random=random.Random(7))
    try:
        response = INTEGRATIONS[integration](retrier, case.method, url, case.id)
    except RetryBudgetError as error:
        outcome, response = error.outcome, None
    else:
        outcome = outcome_of(response)
    assert outcome is not None
    return outcome, response, coordinator


def arrivals(sandbox: SandboxServer, run_id: str, fixture_id: str) -> list[float]:
    seen = sandbox.stats(run_id)["requests"]
    return [r["arrival"] for r in seen if r["fixture_id"] == fixture_id]


@pytest.mark.parametrize("integration", list(INTEGRATIONS))
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_case_passes_end_to_end(sandbox: SandboxServer, case: Case, integration: str) -> None:
    started = SYSTEM_CLOCK.wall()
    run_id = f"{integration}-{case.id}"
    outcome, _, coordinator = play(sandbox, case, integration, run_id)
    seen = arrivals(sandbox, run_id, case.id)
    result = judge(case, outcome, seen, started_wall=started,
                   breaker_failures=coordinator.failures)
    failed = [c for c in result.checks if not c.passed]
    assert not failed, (case.id, integration, failed, result.evidence())
    # One logical operation reported per request, whatever the integration.
    assert outcome.attempts == len(seen)
    if integration != "requests":
        assert outcome.job_id == case.id


@pytest.mark.parametrize("integration", list(INTEGRATIONS))
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
        got = None if response is None else response.status_code
        assert got == status, case_id
    assert outcome.reason is Reason.CIRCUIT_OPEN
