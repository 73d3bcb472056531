"""A 2xx body read for the profile's body signals is still validated.

Under ``profile="auto"`` (``background()``'s default) some routed profile reads 2xx bodies
(Slack's ``ok: false``), and under ``github`` a POST's 2xx body is read for GraphQL's
``RATE_LIMITED``: in both cases the payload validator must still run, through each driver
that reads a body, against the sandbox over loopback.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import httpx
import pytest
import requests

import retrybudget as rb
from retrybudget.integrations import json_object, outcome_of
from retrybudget.integrations.httpx import RetryTransport
from retrybudget.integrations.requests import RetryAdapter
from retrybudget.sandbox import SandboxServer, serve_in_thread

_RUNS = itertools.count()


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    with serve_in_thread() as server:
        yield server


def _url(sandbox: SandboxServer, body: dict[str, object]) -> str:
    steps = [{"status": 200, "body": body}] * 3
    return sandbox.load_fixture(f"signals-{next(_RUNS)}", "f", steps) + "/rentals/1/availability"


POLICIES = {
    "auto": lambda: rb.background(max_attempts=2, deadline=5.0,
                                  validator=json_object(["available"])),
    "github": lambda: rb.background("github", max_attempts=2, deadline=5.0,
                                    validator=json_object(["available"])),
}


@pytest.mark.parametrize("name", sorted(POLICIES))
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_httpx_validates_a_2xx_read_for_its_signals(sandbox: SandboxServer, name: str,
                                                    method: str) -> None:
    transport = RetryTransport(policy=POLICIES[name]())
    with httpx.Client(transport=transport, trust_env=False) as client:
        good = client.request(method, _url(sandbox, {"rental_id": "1", "available": True}))
        found = outcome_of(good)
        assert found is not None
        assert found.reason is rb.Reason.OK
        with pytest.raises(rb.RetryBudgetError) as caught:
            client.request(method, _url(sandbox, {"rental_id": "1"}))
    assert caught.value.outcome.reason is rb.Reason.INVALID_PAYLOAD


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_requests_validates_a_2xx_read_for_its_signals(sandbox: SandboxServer, name: str) -> None:
    with requests.Session() as session:
        session.trust_env = False
        session.mount("http://", RetryAdapter(policy=POLICIES[name]()))
        good = session.post(_url(sandbox, {"rental_id": "1", "available": True}))
        found = outcome_of(good)
        assert found is not None
        assert found.reason is rb.Reason.OK
        with pytest.raises(rb.RetryBudgetError) as caught:
            session.post(_url(sandbox, {"rental_id": "1"}))
    assert caught.value.outcome.reason is rb.Reason.INVALID_PAYLOAD
