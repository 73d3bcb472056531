"""The official SDKs' own exceptions, read natively by ``@retrying`` and ``Retrier.call``/
``acall``: each SDK called the ordinary way (its own retries off, no transport of ours) over
a loopback provider that answers as the provider documents.

An SDK's error is the response it carries (openai, anthropic, githubkit), or its status and
headers (Stripe's ``http_status``/``headers``, PyGithub's ``status``/``headers``), or the
transport error it wraps (a refused connect: never sent, so even a write is sent again). The
operation retries it as that; when it ends, the SDK's error reaches the caller unchanged and
``rb.outcome_of(error)`` is its outcome.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import anthropic
import github
import githubkit
import openai
import pytest
import stripe

import retrybudget as rb
from tests.support import sdk_provider as sp
from tests.support.sdk import WITHIN

POLICY = rb.Policy(deadline=3.0, backoff=rb.Backoff(base=0.01, cap=0.02))


@dataclass(frozen=True)
class Case:
    """One SDK: a read and a write through its sync client, and its provider's answers."""

    name: str
    profile: str
    read: Callable[[str], Any]
    write: Callable[[str], Any]
    limited: Callable[[float], sp.Answer]  # a 429 (or 403) naming its wait, in seconds
    source: str  # the header that names it
    ok: sp.Answer
    server_error: sp.Answer
    client_error: sp.Answer
    rate_limit_error: type[Exception]
    status_error: type[Exception]  # the SDK's error for the 5xx
    connection_error: type[Exception]
    method_known: bool  # the error names its request's method


def _openai(url: str) -> Any:
    return openai.OpenAI(api_key="sk-test", base_url=url, max_retries=0)


def _anthropic(url: str) -> Any:
    return anthropic.Anthropic(api_key="sk-ant-test", base_url=url, max_retries=0)


def _stripe(url: str) -> Any:
    return stripe.StripeClient("sk_test_fake", base_addresses={"api": url}, max_network_retries=0)


def _githubkit(url: str) -> Any:
    return githubkit.GitHub("ghp_fake", base_url=url, auto_retry=False)


def _repo_name(url: str) -> str:
    gh = _githubkit(url)  # held while its namespaces are used (they refer to it weakly)
    return str(gh.rest.repos.get("octo", "hello").json()["name"])


def _new_issue(url: str) -> int:
    gh = _githubkit(url)
    return int(gh.rest.issues.create("octo", "hello", title="hi").status_code)


def _pygithub(url: str) -> Any:
    return github.Github(base_url=url, retry=None, lazy=True)


CASES = [
    Case("openai", "openai",
         lambda url: _openai(url).models.retrieve("gpt-4o-mini").id,
         lambda url: _openai(url).chat.completions.create(
             model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]).id,
         lambda s: sp.openai_rate_limited(int(s * 1000)), "retry-after-ms",
         sp.openai_model(), sp.openai_server_error(503), sp.openai_bad_request(),
         openai.RateLimitError, openai.InternalServerError, openai.APIConnectionError, True),
    Case("anthropic", "anthropic",
         lambda url: _anthropic(url).models.retrieve("claude-sonnet-4-5").id,
         lambda url: _anthropic(url).messages.create(
             model="claude-sonnet-4-5", max_tokens=8,
             messages=[{"role": "user", "content": "hi"}]).id,
         lambda s: sp.anthropic_rate_limited(retry_after=round(s)), "retry-after",
         sp.anthropic_model(), sp.anthropic_overloaded(), sp.anthropic_bad_request(),
         anthropic.RateLimitError, anthropic.InternalServerError, anthropic.APIConnectionError,
         True),
    Case("stripe", "stripe",
         lambda url: _stripe(url).v1.customers.retrieve("cus_1").id,
         lambda url: _stripe(url).v1.customers.create(params={"email": "a@example.com"}).id,
         # Stripe names no time: the profile's floor (1 s) is the wait
         lambda s: sp.stripe_rate_limited(), "profile:stripe",
         sp.stripe_customer(), sp.stripe_server_error(),
         sp.stripe_error(400, "invalid_request_error", "No such customer", "resource_missing"),
         stripe.RateLimitError, stripe.APIError, stripe.APIConnectionError, False),
    Case("githubkit", "github",
         _repo_name, _new_issue,
         lambda s: sp.github_rate_limited(retry_after=round(s), status=429), "retry-after",
         sp.github_repo(), sp.github_server_error(), sp.github_not_found(),
         githubkit.exception.RequestFailed, githubkit.exception.RequestFailed,
         githubkit.exception.RequestError, True),
    Case("pygithub", "github",
         lambda url: github.Github(base_url=url, retry=None).get_repo("octo/hello").name,
         lambda url: _pygithub(url).get_repo("octo/hello").create_issue("hi").number,
         lambda s: sp.github_rate_limited(retry_after=round(s), status=429), "retry-after",
         sp.github_repo(), sp.github_server_error(), sp.github_not_found(),
         # PyGithub's RateLimitExceededException is a 403's; a 429 is a GithubException
         github.GithubException, github.GithubException,
         # PyGithub lets requests' own ConnectionError through: read as requests' errors
         # are, the operation ends with the typed error (its outcome.error that one)
         rb.RetriesExhausted, False),
]
IDS = [case.name for case in CASES]


def retrier(case: Case, **options: Any) -> rb.Retrier:
    return rb.Retrier(policy=POLICY.replace(profile=case.profile), **options)


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port nobody listens on (kept bound for the test, so nobody takes it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_rate_limit_within_the_budget_is_waited_and_retried(case: Case) -> None:
    with sp.serve(case.limited(1.0), case.ok) as p:
        outcome = retrier(case).call(case.read, p.url)
    assert outcome.reason is rb.Reason.OK, outcome
    assert [w.source for w in outcome.waits] == [case.source]
    assert 1.0 - WITHIN <= outcome.waits[0].seconds <= 1.0 + WITHIN
    assert len(p.requests) == 2
    assert p.gaps()[0] >= outcome.waits[0].seconds - 0.005


TIMED = [case for case in CASES if case.name != "stripe"]
"""The SDKs whose provider names when to come back (Stripe names no time)."""


@pytest.mark.parametrize("case", TIMED, ids=[case.name for case in TIMED])
def test_a_rate_limit_beyond_the_budget_raises_the_sdks_error_at_once(case: Case) -> None:
    call = rb.retrying(POLICY.replace(profile=case.profile))(case.read)
    with sp.serve(case.limited(30.0)) as p, pytest.raises(case.rate_limit_error) as caught:
        call(p.url)
    outcome = rb.outcome_of(caught.value)
    assert outcome is not None
    assert outcome.reason is rb.Reason.RATE_LIMITED
    assert outcome.error is caught.value  # the SDK's own error, unchanged
    assert outcome.attempts == 1
    assert outcome.retry_at is not None
    assert outcome.retry_at >= p.requests[0].wall + 29.0
    assert len(p.requests) == 1


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_5xx_on_a_read_is_retried(case: Case) -> None:
    with sp.serve(case.server_error, case.ok) as p:
        value = rb.retrying(POLICY.replace(profile=case.profile))(case.read)(p.url)
    assert value in ("gpt-4o-mini", "claude-sonnet-4-5", "cus_1", "hello")
    assert len(p.requests) == 2


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_plain_4xx_is_not_retried_and_reaches_the_caller(case: Case) -> None:
    call = rb.retrying(POLICY.replace(profile=case.profile))(case.read)
    with sp.serve(case.client_error, case.ok) as p, pytest.raises(Exception) as caught:
        call(p.url)
    assert not isinstance(caught.value, rb.RetryBudgetError)  # the SDK's own error
    outcome = rb.outcome_of(caught.value)
    assert outcome is not None
    assert outcome.error is caught.value
    assert outcome.reason in (rb.Reason.REJECTED, rb.Reason.NOT_FOUND)
    assert len(p.requests) == 1


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_failed_write_is_not_replayed(case: Case) -> None:
    # Stripe's and PyGithub's errors name no method: the retrier is told it (method="POST")
    options = {} if case.method_known else {"method": "POST"}
    call = rb.retrying(POLICY.replace(profile=case.profile), **options)(case.write)
    with sp.serve(case.server_error, case.ok) as p, pytest.raises(case.status_error) as caught:
        call(p.url)
    outcome = rb.outcome_of(caught.value)
    assert outcome is not None
    assert outcome.attempts == 1
    assert [r.method for r in p.requests] == ["POST"]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_refused_connect_is_retried_even_for_a_write(case: Case, closed_port: int) -> None:
    options = {} if case.method_known else {"method": "POST"}
    call = rb.retrying(POLICY.replace(profile=case.profile), **options)(case.write)
    with pytest.raises(case.connection_error) as caught:
        call(f"http://127.0.0.1:{closed_port}")
    outcome = rb.outcome_of(caught.value)
    assert outcome is not None
    assert (outcome.error is caught.value) != isinstance(caught.value, rb.RetryBudgetError)
    assert outcome.reason is rb.Reason.EXHAUSTED
    assert outcome.attempts == POLICY.max_attempts
    assert all(not record.sent for record in outcome.history)


@pytest.mark.parametrize("make", [
    lambda url: openai.AsyncOpenAI(api_key="sk-test", base_url=url, max_retries=0),
    lambda url: anthropic.AsyncAnthropic(api_key="sk-ant-test", base_url=url, max_retries=0),
], ids=["openai", "anthropic"])
def test_acall_reads_the_async_clients_errors(make: Callable[[str], Any]) -> None:
    async def read(url: str) -> str:
        async with make(url) as client:
            model = await client.models.retrieve("m")
            return str(model.id)

    retry = rb.Retrier(policy=POLICY.replace(profile="auto"))
    with sp.serve(sp.openai_server_error(503), sp.openai_model()) as p:
        outcome = asyncio.run(retry.acall(read, p.url))
    assert outcome.reason is rb.Reason.OK, outcome
    assert outcome.attempts == 2


def test_githubkit_async_errors_are_read() -> None:
    async def read(url: str) -> str:
        async with _githubkit(url) as gh:
            response = await gh.rest.repos.async_get("octo", "hello")
            return str(response.json()["name"])

    with sp.serve(sp.github_rate_limited(retry_after=1, status=429), sp.github_repo()) as p:
        outcome = asyncio.run(rb.Retrier(policy=POLICY.replace(profile="github")).acall(read, p.url))
    assert outcome.value == "hello"
    assert [w.source for w in outcome.waits] == ["retry-after"]


def test_an_sdk_whose_own_retries_are_on_is_warned_about_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from retrybudget._native import _sdks

    monkeypatch.setattr(_sdks, "_SDK_RETRIES_WARNED", [])
    retried_by_the_sdk = openai.OpenAI(api_key="sk-test", max_retries=1, base_url="")

    @rb.retrying(POLICY.replace(profile="openai", max_attempts=2))
    def model(url: str) -> str:
        return str(retried_by_the_sdk.with_options(base_url=url).models.retrieve("m").id)

    with sp.serve(sp.openai_server_error(503)) as p, \
            pytest.warns(RuntimeWarning, match="max_retries=0") as caught, \
            pytest.raises(openai.InternalServerError):
        model(p.url)
    assert len(caught) == 1  # once, though both attempts saw the SDK retry
    assert [r.headers["x-stainless-retry-count"] for r in p.requests] == ["0", "1"] * 2
