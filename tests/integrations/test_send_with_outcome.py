"""One result shape for every ending: ``(Outcome, response | None)``, over real loopback HTTP."""

from __future__ import annotations

import asyncio
import itertools
import pickle
from typing import Any

import httpx
import pytest
import requests
from test_httpx_transport import closed_port, sandbox

from retrybudget import Backoff, Policy, Reason
from retrybudget.integrations import asend_with_outcome, outcome_of, send_with_outcome
from retrybudget.integrations.httpx import AsyncRetryTransport, RetryTransport
from retrybudget.integrations.requests import RetryAdapter
from retrybudget.integrations.validators import json_object
from retrybudget.sandbox import SandboxServer

__all__ = ["closed_port", "sandbox"]  # fixtures shared with the httpx tests

FAST = Policy(backoff=Backoff(base=0.01, cap=0.02), deadline=5.0, max_attempts=2)
CLIENTS = ["httpx", "httpx-async", "requests"]
_runs = itertools.count()


def fixture(sandbox: SandboxServer, script: list[dict[str, Any]]) -> str:
    return sandbox.load_fixture(f"contract-{next(_runs)}", "f", script)


def ending(client: str, url: str, policy: Policy = FAST, **options: Any) -> tuple[Any, Any]:
    """``(outcome, response | None)`` of one GET through ``client``'s retrybudget integration."""
    if client == "httpx":
        with httpx.Client(transport=RetryTransport(policy=policy, **options)) as c:
            return send_with_outcome(c.get, url)
    if client == "requests":
        with requests.Session() as s:
            s.mount("http://", RetryAdapter(policy=policy, **options))
            s.mount("ftp://", RetryAdapter(policy=policy, **options))
            return send_with_outcome(s.get, url, timeout=5, allow_redirects=False)

    async def go() -> tuple[Any, Any]:
        async with httpx.AsyncClient(transport=AsyncRetryTransport(policy=policy, **options)) as c:
            return await asend_with_outcome(c.get, url)

    return asyncio.run(go())


@pytest.mark.parametrize("client", CLIENTS)
def test_a_success_comes_back_with_its_response(client: str, sandbox: SandboxServer) -> None:
    url = fixture(sandbox, [{"status": 503}, {"status": 200, "body": {"available": True}}])
    outcome, response = ending(client, url)
    assert (outcome.reason, outcome.attempts) == (Reason.OK, 2)
    assert response is not None
    assert response.status_code == 200
    assert outcome_of(response) is outcome


@pytest.mark.parametrize("client", CLIENTS)
def test_a_404_is_an_answer_with_its_response(client: str, sandbox: SandboxServer) -> None:
    outcome, response = ending(client, fixture(sandbox, [{"status": 404}]))
    assert (outcome.reason, outcome.attempts) == (Reason.NOT_FOUND, 1)
    assert response is not None
    assert response.status_code == 404


@pytest.mark.parametrize("client", CLIENTS)
def test_no_response_to_hand_over_comes_back_as_none(client: str, closed_port: int) -> None:
    outcome, response = ending(client, f"http://127.0.0.1:{closed_port}/rentals/1")
    assert (outcome.reason, outcome.attempts, response) == (Reason.EXHAUSTED, 2, None)
    assert outcome.error is not None


@pytest.mark.parametrize("client", CLIENTS)
def test_an_invalid_payload_is_never_handed_over(client: str, sandbox: SandboxServer) -> None:
    url = fixture(sandbox, [{"status": 200, "body_text": "not json"}])
    outcome, response = ending(client, url, FAST.replace(validator=json_object()))
    assert (outcome.reason, response) == (Reason.INVALID_PAYLOAD, None)


@pytest.mark.parametrize("client", CLIENTS)
def test_an_error_raised_again_as_it_was_carries_its_outcome(client: str) -> None:
    outcome, response = ending(client, "ftp://127.0.0.1/x")
    assert (outcome.reason, outcome.attempts, response) == (Reason.UNEXPECTED, 1, None)
    assert outcome_of(outcome.error) is outcome  # the same error the integration raised again
    copy = pickle.loads(pickle.dumps(outcome.error))  # noqa: S301 - our own bytes; the outcome stays behind
    assert outcome_of(copy) is None


def test_a_response_from_outside_an_integration_is_refused(sandbox: SandboxServer) -> None:
    with httpx.Client() as c, pytest.raises(TypeError, match="no retrybudget outcome"):
        send_with_outcome(c.get, fixture(sandbox, [{"status": 200}]))


def test_an_error_raised_before_the_operation_propagates() -> None:
    def broken() -> None:
        raise ValueError("not sent")

    with pytest.raises(ValueError, match="not sent"):
        send_with_outcome(broken)


@pytest.mark.parametrize("client", CLIENTS)
def test_a_redirect_is_ok_unless_the_integration_is_told_otherwise(
    client: str, sandbox: SandboxServer
) -> None:
    redirect = [{"status": 302, "headers": {"Location": "/elsewhere"}}]
    outcome, response = ending(client, fixture(sandbox, redirect))
    assert (outcome.reason, response.status_code) == (Reason.OK, 302)
    outcome, response = ending(client, fixture(sandbox, redirect), redirects_ok=False)
    assert (outcome.reason, outcome.attempts, response.status_code) == (Reason.UNEXPECTED, 1, 302)
    assert 302 not in FAST.profile.ok  # the caller's profile is never changed


class Counting:
    """A validator that parses a JSON object and counts its calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.parse = json_object(["available"])

    def __call__(self, response: Any) -> dict[str, Any]:
        self.calls += 1
        return self.parse(response)


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("script", [
    [{"status": 200, "body": {"available": True, "n": 1}}],  # the first attempt
    [{"status": 503}, {"status": 200, "body": {"available": True, "n": 1}}],  # after a retry
])
def test_the_validators_value_is_the_outcomes_payload_read_once(
    client: str, script: list[dict[str, Any]], sandbox: SandboxServer
) -> None:
    validator = Counting()
    outcome, response = ending(client, fixture(sandbox, script), FAST.replace(validator=validator))
    assert (outcome.reason, outcome.attempts) == (Reason.OK, len(script))
    assert outcome.payload == {"available": True, "n": 1}
    assert validator.calls == 1  # the 503 is not validated; the 2xx once
    assert outcome_of(response) is outcome
    assert outcome.value is response  # the value stays the response handed over


@pytest.mark.parametrize("client", CLIENTS)
def test_no_payload_without_a_validator_or_without_ok(client: str, sandbox: SandboxServer) -> None:
    ok = [{"status": 200, "body": {"available": True}}]
    outcome, _ = ending(client, fixture(sandbox, ok))
    assert (outcome.reason, outcome.payload) == (Reason.OK, None)
    validator = Counting()
    bad = [{"status": 200, "body": {"other": 1}}]
    outcome, _ = ending(client, fixture(sandbox, bad), FAST.replace(validator=validator))
    assert (outcome.reason, outcome.payload, validator.calls) == (Reason.INVALID_PAYLOAD, None, 1)
