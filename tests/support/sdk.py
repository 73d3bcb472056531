"""What the official-SDK tests share: running a call sync or async, and reading the waits."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import retrybudget as rb
import retrybudget.integrations
from tests.support.sdk_provider import Answer, FakeProvider, serve

MODES = ["sync", "async"]

WITHIN = 0.05
"""How close the retrier's wait must come to the wait the provider named (the issue's 50 ms)."""


def run(mode: str, make_client: Callable[[], Any], call: Callable[[Any], Any]) -> Any:
    """``call(client)`` on the client ``make_client`` builds (sync), or awaited in one event
    loop that builds, uses and closes an async one."""
    if mode == "sync":
        with make_client() as client:
            return call(client)

    async def in_loop() -> Any:
        async with make_client() as client:
            return await call(client)

    return asyncio.run(in_loop())


def assert_waited(provider: FakeProvider, outcome: rb.Outcome[object], seconds: float,
                  source: str) -> None:
    """The operation waited the provider's ``seconds`` (within 50 ms), as ``source`` asked, and
    the provider saw no retry before that wait was over."""
    assert outcome.reason is rb.Reason.OK, outcome
    assert [w.source for w in outcome.waits] == [source], outcome.waits
    waited = outcome.waits[0].seconds
    assert seconds - WITHIN <= waited <= seconds + WITHIN, waited
    assert len(provider.requests) == 2
    assert provider.gaps()[0] >= waited - 0.005  # the retry arrived after the wait was paid


def assert_stopped_at_once(provider: FakeProvider, outcome: rb.Outcome[object] | None,
                           beyond: float) -> None:
    """One attempt, no wait: the provider's time to come back lies past the budget; its
    ``retry_at`` is in the outcome."""
    assert outcome is not None
    assert outcome.reason is rb.Reason.RATE_LIMITED, outcome
    assert outcome.attempts == 1
    assert outcome.waits == ()
    assert len(provider.requests) == 1
    assert outcome.retry_at is not None
    assert outcome.retry_at >= provider.requests[0].wall + beyond - 1.0


class Sdk:
    """One official SDK as the shared checks drive it: its clients (retries off, over a
    retrying transport) and the provider's answers to the call they make."""

    profile: str
    error: type[Exception]
    """The SDK's base error: every failure the call raises is one."""
    counts_retries = True
    """The SDK sends ``x-stainless-retry-count`` (openai, anthropic)."""

    def client(self, mode: str, url: str, policy: rb.Policy, keys: bool) -> Any:
        raise NotImplementedError

    def create(self, mode: str) -> Callable[[Any], Any]:
        """The call (a write): it gives the text created and the HTTP response it came in."""
        raise NotImplementedError

    def ok(self, text: str) -> Answer:
        raise NotImplementedError

    def writes(self) -> rb.Policy:
        """The recipe's policy: writes replayed when they carry a key; short backoff."""
        return rb.Policy(profile=self.profile, deadline=3.0, retry_writes_with_key=True,
                         backoff=rb.Backoff(base=0.01, cap=0.02))

    def send(self, mode: str, url: str, policy: rb.Policy | None = None, *,
             keys: bool = True) -> Any:
        return run(mode, lambda: self.client(mode, url, policy or self.writes(), keys),
                   self.create(mode))

    def raised(self, mode: str, url: str, policy: rb.Policy | None = None, *,
               keys: bool = True) -> Any:
        with pytest.raises(self.error) as caught:
            self.send(mode, url, policy, keys=keys)
        return caught.value


def check_not_retried(sdk: Sdk, mode: str, answer: Answer, error: type[Exception],
                      reason: rb.Reason) -> None:
    """``answer`` ends the operation at once: ``error`` raised, its outcome ``reason``."""
    with serve(answer, sdk.ok("never")) as p:
        raised = sdk.raised(mode, p.url)
    assert isinstance(raised, error)
    outcome = rb.outcome_of(raised)
    assert outcome is not None
    assert outcome.reason is reason
    assert len(p.requests) == 1


def check_write_not_replayed(sdk: Sdk, mode: str, failure: Answer,
                             error: type[Exception]) -> None:
    """A write that failed is sent once, unless it carries a key and the policy allows it."""
    plain = rb.Policy(profile=sdk.profile, deadline=3.0)
    for policy, keys in ((plain, False), (plain, True), (sdk.writes(), False)):
        with serve(failure, sdk.ok("never")) as p:
            raised = sdk.raised(mode, p.url, policy, keys=keys)
        assert isinstance(raised, error)
        outcome = rb.outcome_of(raised)
        assert outcome is not None
        assert outcome.attempts == 1, (policy, keys)
        assert len(p.requests) == 1
    with serve(failure, sdk.ok("replayed")) as p:
        text, _ = sdk.send(mode, p.url)
    assert text == "replayed"
    assert [r.method for r in p.requests] == ["POST", "POST"]
    assert p.requests[0].headers["idempotency-key"] == p.requests[1].headers["idempotency-key"]


def over_httpx2(mode: str, sync: Callable[..., Any], async_: Callable[..., Any],
                policy: rb.Policy, keys: bool, **options: Any) -> Any:
    """An SDK client (``sync`` or ``async_``'s, by ``mode``) built with ``options``, its own
    retries off, over an httpx2 client whose transport retries (the recipe)."""
    import httpx2

    from retrybudget.integrations import httpx2 as rb_httpx2

    if mode == "sync":
        transport = rb_httpx2.RetryTransport(policy=policy, generate_idempotency_keys=keys)
        return sync(max_retries=0, http_client=httpx2.Client(transport=transport), **options)
    async_transport = rb_httpx2.AsyncRetryTransport(policy=policy, generate_idempotency_keys=keys)
    return async_(max_retries=0, http_client=httpx2.AsyncClient(transport=async_transport),
                  **options)


def check_waited(sdk: Sdk, mode: str, limited: Answer, seconds: float, source: str) -> None:
    """A rate limit whose wait fits the budget: waited (see :func:`assert_waited`), then ok."""
    with serve(limited, sdk.ok("after the wait")) as p:
        text, response = sdk.send(mode, p.url)
    assert text == "after the wait"
    assert_waited(p, rb.integrations.outcome_of(response), seconds, source)


def check_stopped(sdk: Sdk, mode: str, limited: Answer, beyond: float,
                  error: type[Exception]) -> None:
    """A rate limit whose wait lies past the budget: ``error`` at once, ``retry_at`` in it."""
    with serve(limited) as p:
        raised = sdk.raised(mode, p.url)
    assert isinstance(raised, error)
    assert_stopped_at_once(p, rb.outcome_of(raised), beyond)


def check_retried(sdk: Sdk, mode: str, failure: Answer) -> None:
    """A transient failure of a keyed write the policy allows to replay: retried, then ok."""
    with serve(failure, sdk.ok("back")) as p:
        text, response = sdk.send(mode, p.url)
    assert text == "back"
    outcome = rb.integrations.outcome_of(response)
    assert outcome is not None
    assert outcome.attempts == 2
    # the SDK's retry count (openai, anthropic) says what was taken underneath; none is
    # added to an SDK that sends none
    counts = [r.headers.get("x-stainless-retry-count") for r in p.requests]
    assert counts == (["0", "1"] if sdk.counts_retries else [None, None])


def check_refused(sdk: Sdk, mode: str, connection_error: type[Exception]) -> None:
    """A provider nobody answers for: every attempt refused (never sent, so even a write is
    tried again), the SDK's connection error raised from the transport's typed error, and
    ``rb.outcome_of`` reaching the outcome through it."""
    with refused_url() as url, pytest.raises(connection_error) as caught:
        sdk.send(mode, url)
    assert isinstance(caught.value.__cause__, rb.RetriesExhausted)
    outcome = rb.outcome_of(caught.value)
    assert outcome is not None
    assert outcome.reason is rb.Reason.EXHAUSTED
    assert outcome.attempts == sdk.writes().max_attempts
    assert not any(record.sent for record in outcome.history)


def check_sdk_retries_warned(sdk: Sdk, mode: str, failure: Answer,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    """An SDK whose own retries are on retries on top: its retry count says so, and a
    warning (once a process) says how to turn them off."""
    from retrybudget._native import _sdks

    monkeypatch.setattr(_sdks, "_SDK_RETRIES_WARNED", [])
    once = rb.Policy(profile=sdk.profile, max_attempts=1)
    with serve(failure) as p:
        client = sdk.client(mode, p.url, once, False)
        client.max_retries = 1  # the SDK's own retries left on
        with pytest.warns(RuntimeWarning, match="max_retries=0") as caught, \
                pytest.raises(sdk.error):
            run(mode, lambda: client, sdk.create(mode))
    assert len(caught) == 1
    assert [r.headers["x-stainless-retry-count"] for r in p.requests] == ["0", "1"]


@contextmanager
def refused_url() -> Iterator[str]:
    """A loopback URL nobody answers at (bound, not listening: a connect is refused), kept
    for the block so nobody else takes its port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def last_failed(reason: rb.Reason) -> rb.Outcome[object]:
    """This context's last failed outcome, which ended for ``reason``."""
    outcome = rb.last_failed_outcome()
    assert outcome is not None
    assert outcome.reason is reason, outcome
    return outcome
