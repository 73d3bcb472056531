"""Each provider profile through the httpx transport, against the sandbox speaking its dialect.

The sandbox and the retrier share one fake clock: the sandbox's window rolls when the retrier
sleeps, so every wait is exact. The quota (1 request a minute) is spent by a first plain
request at 30.5 s into the window; the operation under test then meets the provider's own
answer over the limit and must wait what that provider's documentation says.
"""

from __future__ import annotations

import random

import httpx
import pytest

import retrybudget as rb
from retrybudget import Backoff, FakeClock, Jitter, Policy, WaitReason
from retrybudget.integrations import outcome_of
from retrybudget.integrations.httpx import RetryTransport
from retrybudget.sandbox import RateLimit, SandboxConfig, serve_in_thread

START = 1_800_000_030.5  # window [1_800_000_000, 1_800_000_060): 29.5 s to the reset
NO_HINT = [(1.0 * 2**n, WaitReason.RATE_LIMIT_BACKOFF) for n in range(5)]  # 1+2+4+8+16 > 29.5

CASES = [
    ("github", "github", [(30.0, WaitReason.RETRY_AFTER, "retry-after")]),
    ("generic", "generic", [(30.0, WaitReason.RETRY_AFTER, "retry-after")]),
    ("stripe", "stripe", None),
    ("openai", "openai", [(30.0, WaitReason.RETRY_AFTER, "retry-after-ms")]),
    ("anthropic", "anthropic", [(30.0, WaitReason.RETRY_AFTER, "retry-after")]),
    ("slack", "slack", [(30.0, WaitReason.RETRY_AFTER, "retry-after")]),
    ("discord", "discord", [(30.0, WaitReason.RETRY_AFTER, "retry-after")]),
    ("shopify", "shopify", [(30.0, WaitReason.RETRY_AFTER, "retry-after")]),
    # No Retry-After: the epoch reset. X documents x-rate-limit-reset as the UTC epoch second
    # the window resets at (https://docs.x.com/x-api/fundamentals/rate-limits) and X asks for
    # no slack, so the wait ends at the reset: 29.5 s from 30.5 s into the window. The
    # sandbox's clock is ours; its Date (30 s, whole seconds) is half a second behind, which
    # is the Date's resolution, not skew, and must not add half a second.
    ("x", "x", [(29.5, WaitReason.RATE_LIMIT_RESET, "x-rate-limit-reset")]),
    ("aws", "aws", [(30.0, WaitReason.RETRY_AFTER, "x-amz-retry-after")]),
    ("google", "google", [(30.0, WaitReason.RETRY_AFTER, "body:retryDelay")]),
    ("azure", "azure", [(30.0, WaitReason.RETRY_AFTER, "x-ms-retry-after-ms")]),
    ("gitlab", "gitlab", [(30.0, WaitReason.RETRY_AFTER, "retry-after")]),
    ("twilio", "twilio", None),
    ("cloudflare", "cloudflare", [(30.0, WaitReason.RETRY_AFTER, "retry-after")]),
    ("ietf", "ietf", [(30.0, WaitReason.RETRY_AFTER, "retry-after")]),
]


def test_every_profile_has_a_dialect_case() -> None:
    assert {profile for profile, _, _ in CASES} == {p.name for p in rb.PROVIDERS}


@pytest.mark.parametrize(("profile", "style", "waits"), CASES, ids=[c[0] for c in CASES])
def test_the_profile_reads_its_providers_dialect(profile, style, waits) -> None:
    clock = FakeClock(wall=START)
    config = SandboxConfig(rate_limit=RateLimit(limit=1, window_s=60, style=style))
    with serve_in_thread(config, clock=clock) as sandbox:
        url = sandbox.url("/rentals/1/availability")
        assert httpx.get(url).status_code == 200  # spends the window's quota
        policy = Policy(profile=profile, max_attempts=7, deadline=300,
                        backoff=Backoff(base=0.5, jitter=Jitter.NONE))
        retrier = rb.Retrier(policy=policy, clock=clock, random=random.Random(0))
        with httpx.Client(transport=RetryTransport(retrier=retrier)) as client:
            response = client.get(url)
    assert response.status_code == 200
    outcome = outcome_of(response)
    assert outcome is not None
    assert outcome.reason is rb.Reason.OK
    if waits is None:  # the dialect names no time: the profile's floor, doubling
        assert [(w.seconds, w.reason) for w in outcome.waits] == NO_HINT
    else:
        assert [(w.seconds, w.reason, w.source) for w in outcome.waits] == waits
    first = outcome.history[0]
    assert first.kind is rb.Kind.RATE_LIMITED
    if waits is not None and not waits[0][2].startswith("body:"):
        assert waits[0][2] in dict(first.evidence), "the header reaches the audit evidence"


@pytest.fixture(scope="module")
def scripted():
    with serve_in_thread(SandboxConfig()) as sandbox:
        yield sandbox


def _send(sandbox, script, method, policy, run_id):
    url = sandbox.load_fixture(run_id, "f", script)
    with httpx.Client(transport=RetryTransport(policy=policy)) as client:
        response = client.request(method, url, json={"query": "{ viewer { login } }"})
    return response, sandbox.stats(run_id)["requests"]


def test_a_github_graphql_200_with_rate_limited_errors_is_not_a_success(scripted) -> None:
    body = {"data": None, "errors": [{"type": "RATE_LIMITED", "message": "API rate limit"}]}
    policy = Policy(profile="github", deadline=5)
    response, requests = _send(scripted, [{"status": 200, "body": body}], "POST", policy,
                               "graphql-rl")
    outcome = outcome_of(response)
    assert outcome is not None
    # a POST is not replayed, but it is no success either: rate limited, with the body read
    assert (outcome.reason, len(requests)) == (rb.Reason.RATE_LIMITED, 1)
    assert response.json() == body  # the caller still gets the body


def test_a_github_graphql_200_without_errors_is_ok(scripted) -> None:
    policy = Policy(profile="github", deadline=5)
    response, _ = _send(scripted, [{"status": 200, "body": {"data": {}}}], "POST", policy,
                        "graphql-ok")
    outcome = outcome_of(response)
    assert outcome is not None
    assert outcome.reason is rb.Reason.OK


def test_stripe_posts_carry_one_idempotency_key_across_retries(scripted) -> None:
    policy = Policy(profile="stripe", deadline=10, retry_writes_with_key=True,
                    backoff=Backoff(base=0.01, jitter=Jitter.NONE))
    script = [{"status": 409}, {"status": 500}, {"status": 200, "body": {"id": "ch_1"}}]
    first, requests = _send(scripted, script, "POST", policy, "stripe-a")
    keys = [r["idempotency_key"] for r in requests]
    assert first.status_code == 200
    assert len(keys) == 3
    assert len(set(keys)) == 1
    assert keys[0]
    _, again = _send(scripted, [{"status": 200, "body": {}}], "POST", policy, "stripe-b")
    assert again[0]["idempotency_key"] not in keys  # a new request, a new key
