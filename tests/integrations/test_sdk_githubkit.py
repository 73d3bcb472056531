"""The githubkit SDK over a loopback GitHub, retried underneath by
:mod:`retrybudget.integrations.httpx`'s transports (``transport=`` / ``async_transport=``),
its own retries (``auto_retry=False``) and cache (``http_cache=False``: it rebuilds each
response without the outcome) off. Each case runs sync and async (the ``async_`` methods)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import githubkit
import pytest

import retrybudget as rb
from retrybudget.integrations.httpx import AsyncRetryTransport, RetryTransport
from tests.support import sdk_provider as sp
from tests.support.sdk import (
    MODES,
    Sdk,
    check_not_retried,
    check_retried,
    check_stopped,
    check_waited,
    check_write_not_replayed,
    refused_url,
    run,
)


class _Client:
    """githubkit's client as the shared checks use one (``with`` / ``async with``)."""

    def __init__(self, gh: githubkit.GitHub[Any]) -> None:
        self.gh = gh

    def __enter__(self) -> githubkit.GitHub[Any]:
        return self.gh.__enter__()

    def __exit__(self, *exc: object) -> None:
        self.gh.__exit__(*exc)  # type: ignore[arg-type]

    async def __aenter__(self) -> githubkit.GitHub[Any]:
        return await self.gh.__aenter__()

    async def __aexit__(self, *exc: object) -> None:
        await self.gh.__aexit__(*exc)  # type: ignore[arg-type]


class GitHubKit(Sdk):
    profile = "github"
    error = githubkit.exception.GitHubException
    counts_retries = False

    def client(self, mode: str, url: str, policy: rb.Policy, keys: bool) -> Any:
        transports: dict[str, Any] = (
            {"transport": RetryTransport(policy=policy, generate_idempotency_keys=keys)}
            if mode == "sync" else
            {"async_transport": AsyncRetryTransport(policy=policy, generate_idempotency_keys=keys)})
        return _Client(githubkit.GitHub("ghp_test", base_url=url, auto_retry=False,
                                        http_cache=False, **transports))

    def create(self, mode: str) -> Callable[[Any], Any]:
        def create(gh: Any) -> Any:
            response = gh.rest.issues.create("octo", "hello", title="hi")
            return response.json()["title"], response.raw_response

        async def acreate(gh: Any) -> Any:
            response = await gh.rest.issues.async_create("octo", "hello", title="hi")
            return response.json()["title"], response.raw_response

        return create if mode == "sync" else acreate

    def ok(self, text: str) -> sp.Answer:
        return sp.github_issue(text)

    def writes(self) -> rb.Policy:
        # GitHub asks for a second between writes: a retried write waits that, at least
        return super().writes().replace(profile=rb.get_profile("github").derive(
            "github", write_pacing=0.0))


SDK = GitHubKit()


@pytest.mark.parametrize("mode", MODES)
def test_a_secondary_limit_with_retry_after_is_waited_within_the_budget(mode: str) -> None:
    check_waited(SDK, mode, sp.github_rate_limited(retry_after=1, status=429), 1.0,
                 "retry-after")


@pytest.mark.parametrize("mode", MODES)
def test_a_primary_limit_past_the_budget_stops_at_once_with_retry_at(mode: str) -> None:
    check_stopped(SDK, mode, sp.github_rate_limited(reset_in=3600), 3600.0,
                  githubkit.exception.RequestFailed)


@pytest.mark.parametrize("mode", MODES)
def test_a_5xx_is_retried(mode: str) -> None:
    check_retried(SDK, mode, sp.github_server_error())


@pytest.mark.parametrize("mode", MODES)
def test_a_plain_404_is_not_retried(mode: str) -> None:
    check_not_retried(SDK, mode, sp.github_not_found(), githubkit.exception.RequestFailed,
                      rb.Reason.NOT_FOUND)


@pytest.mark.parametrize("mode", MODES)
def test_a_post_is_not_replayed_unless_keyed_and_allowed(mode: str) -> None:
    check_write_not_replayed(SDK, mode, sp.github_server_error(),
                             githubkit.exception.RequestFailed)


@pytest.mark.parametrize("mode", MODES)
def test_a_refused_connect_reaches_the_caller_with_its_outcome(mode: str) -> None:
    with refused_url() as url, pytest.raises(githubkit.exception.RequestError) as caught:
        run(mode, lambda: SDK.client(mode, url, SDK.writes(), True), SDK.create(mode))
    outcome = rb.outcome_of(caught.value)
    assert outcome is not None
    assert outcome.reason is rb.Reason.EXHAUSTED
