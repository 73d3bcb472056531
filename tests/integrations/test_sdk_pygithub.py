"""PyGithub over a loopback GitHub, through :class:`~retrybudget.integrations.urllib3.BudgetRetry`
(PyGithub takes only a urllib3 ``Retry``): as much of the contract as urllib3's retry hook
allows (see that module for what it cannot do)."""

from __future__ import annotations

import time
from typing import Any

import github
import pytest
import requests

import retrybudget as rb
from retrybudget.integrations.urllib3 import BudgetRetry
from tests.support import sdk_provider as sp
from tests.support.sdk import WITHIN, last_failed, refused_url

POLICY = rb.Policy(profile="github", deadline=5.0, backoff=rb.Backoff(base=0.01, cap=0.02))


class RecordingClock(rb.SystemClock):
    """The system clock, each sleep it is asked for written down."""

    def __init__(self) -> None:
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        super().sleep(seconds)


def client(url: str, policy: rb.Policy = POLICY, clock: rb.Clock | None = None) -> github.Github:
    retrier = rb.Retrier(policy=policy, clock=clock or rb.SystemClock())
    return github.Github(base_url=url, retry=BudgetRetry(retrier))


def repo_name(gh: github.Github) -> str:
    return gh.get_repo("octo/hello").name


def test_a_429_with_retry_after_is_waited_within_the_budget() -> None:
    clock = RecordingClock()
    with sp.serve(sp.github_rate_limited(retry_after=1, status=429), sp.github_repo()) as p:
        assert repo_name(client(p.url, clock=clock)) == "hello"
    assert len(clock.slept) == 1
    assert 1.0 - WITHIN <= clock.slept[0] <= 1.0 + WITHIN
    assert p.gaps()[0] >= clock.slept[0] - 0.005


def test_a_primary_limit_past_the_budget_stops_at_once_with_retry_at() -> None:
    with sp.serve(sp.github_rate_limited(reset_in=3600)) as p, \
            pytest.raises(github.RateLimitExceededException):
        repo_name(client(p.url))
    assert len(p.requests) == 1
    outcome = last_failed(rb.Reason.RATE_LIMITED)
    assert outcome.retry_at is not None
    assert outcome.retry_at >= time.time() + 3000


def test_a_5xx_on_a_read_is_retried() -> None:
    with sp.serve(sp.github_server_error(), sp.github_repo()) as p:
        assert repo_name(client(p.url)) == "hello"
    assert [r.method for r in p.requests] == ["GET", "GET"]


def test_a_plain_404_is_not_retried() -> None:
    with sp.serve(sp.github_not_found(), sp.github_repo()) as p, \
            pytest.raises(github.UnknownObjectException):
        repo_name(client(p.url))
    assert len(p.requests) == 1


def test_a_failed_write_is_not_replayed() -> None:
    with sp.serve(sp.github_server_error(), sp.github_issue()) as p, \
            pytest.raises(github.GithubException) as caught:
        github.Github(base_url=p.url, retry=BudgetRetry(policy=POLICY), lazy=True).get_repo(
            "octo/hello").create_issue("hi")
    assert caught.value.status == 502
    assert [r.method for r in p.requests] == ["POST"]
    last_failed(rb.Reason.NOT_RETRIED)


def test_a_refused_connect_is_retried_until_the_attempts_are_spent() -> None:
    with refused_url() as url, pytest.raises(requests.ConnectionError):
        repo_name(client(url))
    outcome = last_failed(rb.Reason.EXHAUSTED)
    assert outcome.attempts == POLICY.max_attempts
    assert not any(record.sent for record in outcome.history)


def test_the_deadline_bounds_the_waits() -> None:
    short = POLICY.replace(deadline=0.5)
    with sp.serve(sp.github_rate_limited(retry_after=2, status=429), sp.github_repo()) as p, \
            pytest.raises(github.GithubException):
        repo_name(client(p.url, short))
    assert len(p.requests) == 1
    last_failed(rb.Reason.RATE_LIMITED)


def test_a_retry_is_a_copy_sharing_nothing_between_requests() -> None:
    retry = BudgetRetry(policy=POLICY)
    with sp.serve(sp.github_server_error(), sp.github_repo(), sp.github_server_error(),
                  sp.github_repo()) as p:
        gh = github.Github(base_url=p.url, retry=retry)
        assert repo_name(gh) == "hello"
        assert repo_name(gh) == "hello"  # its own operation: a fresh budget
    assert len(p.requests) == 4
    any_retry: Any = retry
    assert any_retry._run is None  # the configured one is never an operation's
