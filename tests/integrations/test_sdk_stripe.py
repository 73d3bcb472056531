"""The official stripe SDK over a loopback Stripe, retried underneath by a requests session's
:class:`~retrybudget.integrations.requests.RetryAdapter` (``stripe.RequestsClient``), the
SDK's own retries off (``max_network_retries=0``).

Stripe's errors carry neither the response nor its extensions: the outcome of the call that
failed is ``rb.last_failed_outcome()`` (this context's last operation that did not end ok).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
import requests
import stripe

import retrybudget as rb
from retrybudget.integrations.requests import RetryAdapter
from tests.support import sdk_provider as sp
from tests.support.sdk import WITHIN, last_failed, refused_url


def client_for(url: str, policy: rb.Policy) -> stripe.StripeClient:
    session = requests.Session()
    session.mount("http://", RetryAdapter(policy=policy))
    return stripe.StripeClient("sk_test_fake", base_addresses={"api": url}, max_network_retries=0,
                               http_client=stripe.RequestsClient(session=session))


POLICY = rb.Policy(profile="stripe", deadline=3.0, backoff=rb.Backoff(base=0.01, cap=0.02))
WRITES = POLICY.replace(retry_writes_with_key=True)


def retrieve(url: str, policy: rb.Policy = POLICY) -> Any:
    return client_for(url, policy).v1.customers.retrieve("cus_1")


def create(url: str, policy: rb.Policy = POLICY) -> Any:
    return client_for(url, policy).v1.customers.create(params={"email": "a@example.com"})


def test_a_429_is_waited_for_the_profiles_floor_within_the_budget() -> None:
    with sp.serve(sp.stripe_rate_limited(), sp.stripe_customer()) as p:
        customer = retrieve(p.url)
    assert customer.id == "cus_1"
    # Stripe names no time: the profile's floor (1 s), jittered by the policy's full jitter
    # at most down to nothing, never beyond it
    assert 0.0 < p.gaps()[0] <= 1.0 + WITHIN + 0.5  # + generous scheduling slack


def test_a_429_whose_wait_does_not_fit_stops_at_once_and_the_outcome_is_reachable() -> None:
    tight = POLICY.replace(deadline=0.5, backoff=rb.Backoff(base=1.0, cap=1.0, jitter=rb.Jitter.NONE))
    with sp.serve(sp.stripe_rate_limited()) as p, pytest.raises(stripe.RateLimitError) as caught:
        retrieve(p.url, tight)
    assert caught.value.http_status == 429
    assert rb.outcome_of(caught.value) is None  # the response is dropped by Stripe
    outcome = rb.last_failed_outcome()
    assert outcome is not None
    assert outcome.reason in (rb.Reason.RATE_LIMITED, rb.Reason.DEADLINE)
    assert outcome.attempts == 1
    assert len(p.requests) == 1


def test_a_5xx_is_retried_and_a_post_with_stripes_key_only_when_allowed() -> None:
    with sp.serve(sp.stripe_server_error(), sp.stripe_customer()) as p:
        assert retrieve(p.url).id == "cus_1"
    assert len(p.requests) == 2
    with sp.serve(sp.stripe_server_error(), sp.stripe_customer()) as p, \
            pytest.raises(stripe.APIError):
        create(p.url)
    assert [r.method for r in p.requests] == ["POST"]  # not replayed
    last_failed(rb.Reason.NOT_RETRIED)
    with sp.serve(sp.stripe_server_error(), sp.stripe_customer()) as p:
        assert create(p.url, WRITES).id == "cus_1"
    keys = [r.headers["idempotency-key"] for r in p.requests]
    assert len(keys) == 2
    assert keys[0] == keys[1]  # Stripe's own key, sent unchanged


def test_a_plain_4xx_is_not_retried() -> None:
    missing = sp.stripe_error(404, "invalid_request_error", "No such customer: 'cus_9'",
                              "resource_missing")
    with sp.serve(missing, sp.stripe_customer()) as p, \
            pytest.raises(stripe.InvalidRequestError):
        retrieve(p.url)
    assert len(p.requests) == 1
    last_failed(rb.Reason.NOT_FOUND)


def test_a_refused_connect_reaches_the_caller_as_stripes_connection_error() -> None:
    with refused_url() as url, pytest.raises(stripe.APIConnectionError) as caught:
        retrieve(url)
    outcome = rb.outcome_of(caught.value)  # through the adapter's typed error it wraps
    assert outcome is not None
    assert outcome.reason is rb.Reason.EXHAUSTED
    assert outcome is rb.last_failed_outcome()


def test_the_last_failed_outcome_is_the_contexts_own() -> None:
    with sp.serve(sp.stripe_rate_limited()) as p:
        tight = POLICY.replace(deadline=0.2)
        with pytest.raises(stripe.RateLimitError):
            retrieve(p.url, tight)
        mine = rb.last_failed_outcome()
        seen: list[object] = []
        thread = threading.Thread(target=lambda: seen.append(rb.last_failed_outcome()))
        thread.start()
        thread.join()

        async def in_a_task() -> object:
            return rb.last_failed_outcome()  # a task starts from a copy of its creator's context

        assert asyncio.run(in_a_task()) is mine
    assert mine is not None
    assert seen == [None]  # another thread has its own
    with sp.serve(sp.stripe_customer()) as p:
        retrieve(p.url)  # an ok operation leaves the last failure in place
    assert rb.last_failed_outcome() is mine
