"""Plain functions written the ordinary way: send, ``raise_for_status()``, decode.

The HTTP libraries' own exceptions are read natively by the default interpreter of
``Retrier.call``/``acall`` and ``@retrying``: over real loopback HTTP to the sandbox, on a fake
clock (the waits are recorded, not slept), each library's error is the response it carries
or the transport failure it names; a failed write is not replayed; the caller's own bugs
are never retried and come back unchanged.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import traceback
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import aiohttp
import httpx
import pytest
import requests
from hypothesis import given
from hypothesis import strategies as st
from urllib3 import exceptions as u3

import retrybudget as rb
from retrybudget import FakeClock, Policy, Reason, Retrier
from retrybudget._native import observe_error
from retrybudget.core.classify import FailureKind, FailureSeen, ResponseSeen
from retrybudget.sandbox import SandboxServer, serve_in_thread

OK = {"status": 200, "body": {"available": True}}


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    with serve_in_thread() as server:
        yield server


_RUNS = iter(range(10**6))


def fixture(sandbox: SandboxServer, *script: dict[str, Any]) -> tuple[str, Callable[[], int]]:
    """A fresh fixture's URL and a function counting the requests the sandbox saw for it."""
    run_id = f"natural-{next(_RUNS)}"
    url = sandbox.load_fixture(run_id, "f", list(script))
    return url, lambda: len(sandbox.stats(run_id)["requests"])


def httpx_get(method: str, url: str) -> Any:
    r = httpx.request(method, url)
    r.raise_for_status()
    return r.json()


def requests_get(method: str, url: str) -> Any:
    r = requests.request(method, url, timeout=5)
    r.raise_for_status()
    return r.json()


def urllib_get(method: str, url: str) -> Any:
    request = urllib.request.Request(  # noqa: S310 - a loopback sandbox URL
        url, method=method, data=b"{}" if method == "POST" else None)
    with urllib.request.urlopen(request, timeout=5) as r:  # noqa: S310 - a loopback sandbox URL
        return json.load(r)


def aiohttp_get(method: str, url: str) -> Any:
    async def send() -> Any:
        async with aiohttp.ClientSession() as session, session.request(method, url) as r:
            r.raise_for_status()
            return await r.json()

    return asyncio.run(send())


NATURAL = {"httpx": httpx_get, "requests": requests_get, "urllib": urllib_get, "aiohttp": aiohttp_get}


def run(fn: Callable[[str, str], Any], method: str, url: str, clock: FakeClock) -> rb.Outcome[Any]:
    return Retrier(policy=Policy(deadline=30), clock=clock).call(fn, method, url)


# Deliverable 1: the ecosystem's exceptions, read natively -----------------------------------


def test_a_post_raising_httpx_503_through_retrying_is_attempted_once(sandbox, clock) -> None:
    url, seen = fixture(sandbox, {"status": 503}, {"status": 201, "body": {"reserved": True}})

    @rb.retrying(Policy(deadline=30), clock=clock)
    def reserve() -> Any:
        r = httpx.post(url, json={"room": 1})
        r.raise_for_status()
        return r.json()

    with pytest.raises(rb.NotRetried) as info:
        reserve()
    assert info.value.outcome.reason is Reason.NOT_RETRIED
    assert info.value.outcome.method == "POST"
    assert info.value.attempts == 1
    assert seen() == 1
    assert clock.sleeps == []


@pytest.mark.parametrize("library", ["httpx", "requests", "aiohttp"])
def test_a_failed_post_is_not_replayed_whatever_the_library(sandbox, clock, library) -> None:
    url, seen = fixture(sandbox, {"status": 503}, {"status": 201, "body": {}})
    outcome = run(NATURAL[library], "POST", url, clock)
    assert (outcome.reason, outcome.attempts, seen()) == (Reason.NOT_RETRIED, 1, 1)


def test_urllib_names_no_method_so_method_argument_still_guards_a_write(sandbox, clock) -> None:
    url, seen = fixture(sandbox, {"status": 503}, {"status": 201, "body": {}})
    retrier = Retrier(policy=Policy(deadline=30), clock=clock, method="POST")
    outcome = retrier.call(urllib_get, "POST", url)
    assert (outcome.reason, seen()) == (Reason.NOT_RETRIED, 1)


@pytest.mark.parametrize("library", list(NATURAL))
def test_503_then_ok_is_retried(sandbox, clock, library) -> None:
    url, seen = fixture(sandbox, {"status": 503}, {"status": 503}, OK)
    outcome = run(NATURAL[library], "GET", url, clock)
    assert outcome.reason is Reason.OK
    assert outcome.value == {"available": True}
    assert (outcome.attempts, seen(), len(clock.sleeps)) == (3, 3, 2)


@pytest.mark.parametrize("library", list(NATURAL))
def test_429_retry_after_1_is_waited_for(sandbox, clock, library) -> None:
    url, seen = fixture(sandbox, {"status": 429, "headers": {"Retry-After": "1"}}, OK)
    outcome = run(NATURAL[library], "GET", url, clock)
    assert outcome.reason is Reason.OK
    assert clock.sleeps == [pytest.approx(1.0)]
    assert outcome.waits[0].reason is rb.WaitReason.RETRY_AFTER
    assert seen() == 2


@pytest.mark.parametrize("library", list(NATURAL))
def test_404_is_not_found(sandbox, clock, library) -> None:
    url, seen = fixture(sandbox, {"status": 404}, OK)
    outcome = run(NATURAL[library], "GET", url, clock)
    assert (outcome.reason, seen()) == (Reason.NOT_FOUND, 1)


def test_404_through_retrying_raises_not_found(sandbox, clock) -> None:
    url, _ = fixture(sandbox, {"status": 404})
    fetch = rb.retrying(Policy(deadline=30), clock=clock)(httpx_get)
    with pytest.raises(rb.NotFound):
        fetch("GET", url)


@pytest.mark.parametrize("library", ["httpx", "requests", "urllib"])
def test_a_connection_reset_is_retried(sandbox, clock, library) -> None:
    url, seen = fixture(sandbox, {"reset": True}, OK)
    outcome = run(NATURAL[library], "GET", url, clock)
    assert outcome.reason is Reason.OK
    assert outcome.history[0].error is not None
    assert outcome.history[0].kind is rb.Kind.TRANSIENT
    assert seen() == 2


def test_an_httpx_read_error_is_retried(clock) -> None:
    calls = []

    def fetch() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise httpx.ReadError("connection reset", request=httpx.Request("GET", "http://x/"))
        return "ok"

    outcome = Retrier(clock=clock).call(fetch)
    assert (outcome.reason, outcome.value, len(calls)) == (Reason.OK, "ok", 2)


def test_a_body_message_is_read_where_the_profile_needs_one(sandbox, clock) -> None:
    # GitHub's secondary rate limit: a 403 with quota left, told apart by its message only.
    url, seen = fixture(sandbox, {"status": 403, "headers": {"x-ratelimit-remaining": "4000"},
                                  "body": {"message": "You have exceeded a secondary rate limit"}},
                        OK)
    policy = Policy(deadline=600, profile=rb.get_profile("github"))
    outcome = Retrier(policy=policy, clock=clock).call(httpx_get, "GET", url)
    assert outcome.reason is Reason.OK
    assert outcome.history[0].kind is rb.Kind.RATE_LIMITED
    assert seen() == 2


def test_a_refused_connection_is_known_never_sent_so_even_a_post_is_retried(clock) -> None:
    with socket.socket() as held:  # bound, never listening: connections are refused
        held.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{held.getsockname()[1]}/"
        outcome = Retrier(policy=Policy(max_attempts=2, deadline=30), clock=clock).call(
            httpx_get, "POST", url)
    assert outcome.reason is Reason.EXHAUSTED
    assert outcome.attempts == 2
    assert [r.sent for r in outcome.history] == [False, False]


def test_a_returned_response_names_its_method(sandbox, clock) -> None:
    url, seen = fixture(sandbox, {"status": 503}, {"status": 201, "body": {}})
    outcome = Retrier(policy=Policy(deadline=30), clock=clock).call(httpx.post, url)
    assert (outcome.reason, outcome.method, seen()) == (Reason.NOT_RETRIED, "POST", 1)


@pytest.mark.parametrize("library", list(NATURAL))
def test_a_body_that_is_not_json_is_an_invalid_payload(sandbox, clock, library) -> None:
    url, seen = fixture(sandbox, {"status": 200, "body_text": "<html>maintenance</html>"}, OK)
    fetch = rb.retrying(Policy(deadline=30), clock=clock)(NATURAL[library])
    with pytest.raises(rb.InvalidPayload):
        fetch("GET", url)
    assert seen() == 1


def _request(method: str = "GET") -> httpx.Request:
    return httpx.Request(method, "http://127.0.0.1/")


@pytest.mark.parametrize(("error", "kind"), [
    (httpx.ConnectError("refused", request=_request("POST")), FailureKind.CONNECT),
    (httpx.ConnectTimeout("slow", request=_request()), FailureKind.CONNECT),
    (httpx.PoolTimeout("full", request=_request()), FailureKind.CONNECT),
    (httpx.ReadTimeout("slow", request=_request()), FailureKind.TIMEOUT),
    (httpx.ReadError("reset", request=_request()), FailureKind.NETWORK),
    (httpx.RemoteProtocolError("closed", request=_request()), FailureKind.NETWORK),
    (httpx.InvalidURL("bad"), FailureKind.ERROR),
    (requests.ConnectTimeout(), FailureKind.CONNECT),
    (requests.ConnectionError(u3.MaxRetryError(None, "/", u3.NewConnectionError(None, "x"))),
     FailureKind.CONNECT),
    (requests.ConnectionError(u3.ProtocolError("aborted")), FailureKind.NETWORK),
    (requests.ReadTimeout(), FailureKind.TIMEOUT),
    (requests.exceptions.ChunkedEncodingError(), FailureKind.NETWORK),
    (u3.NewConnectionError(None, "refused"), FailureKind.CONNECT),
    (u3.ConnectTimeoutError(), FailureKind.CONNECT),
    (u3.EmptyPoolError(None, "empty"), FailureKind.CONNECT),
    (u3.ReadTimeoutError(None, "/", "slow"), FailureKind.TIMEOUT),
    (u3.ProtocolError("reset"), FailureKind.NETWORK),
    (u3.MaxRetryError(None, "/", u3.ReadTimeoutError(None, "/", "slow")), FailureKind.TIMEOUT),
    (u3.LocationParseError("bad"), FailureKind.ERROR),
    (aiohttp.ClientConnectorError(aiohttp.client_reqrep.ConnectionKey(
        "h", 1, False, True, None, None, None), OSError(111, "refused")), FailureKind.CONNECT),
    (aiohttp.ConnectionTimeoutError(), FailureKind.CONNECT),
    (aiohttp.SocketTimeoutError(), FailureKind.TIMEOUT),
    (aiohttp.ServerDisconnectedError(), FailureKind.NETWORK),
    (aiohttp.ClientPayloadError(), FailureKind.NETWORK),
    (aiohttp.InvalidURL("bad"), FailureKind.ERROR),
    (urllib.error.URLError(ConnectionRefusedError()), FailureKind.CONNECT),
    (urllib.error.URLError(TimeoutError()), FailureKind.TIMEOUT),
], ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v))
def test_transport_errors_map_to_their_failure_kinds(error, kind) -> None:
    seen = rb.CallInterpreter().error(error)
    assert isinstance(seen, FailureSeen)
    assert seen.kind is kind
    assert seen.sent is (kind is not FailureKind.CONNECT)


def test_an_error_names_its_requests_method() -> None:
    seen = observe_error(httpx.ReadTimeout("slow", request=_request("post")))
    assert isinstance(seen, FailureSeen)
    assert seen.method == "POST"


def test_status_errors_are_read_as_their_response() -> None:
    response = httpx.Response(429, headers={"Retry-After": "7", "X-Other": "x"},
                              request=_request("PUT"), text="slow down")
    error = httpx.HTTPStatusError("429", request=response.request, response=response)
    seen = observe_error(error)
    assert seen == ResponseSeen(429, (("retry-after", "7"),), "slow down", "", "PUT")


def test_a_subclass_of_a_library_error_is_read_like_it() -> None:
    class MyTimeout(httpx.ReadTimeout):
        pass

    seen = observe_error(MyTimeout("slow", request=_request()))
    assert isinstance(seen, FailureSeen)
    assert seen.kind is FailureKind.TIMEOUT


def test_no_http_library_is_imported_until_one_of_its_errors_is_seen() -> None:
    script = (
        "import sys, retrybudget as rb\n"
        "def bug():\n"
        "    raise ValueError('x')\n"
        "assert rb.call(bug).reason.value == 'unexpected'\n"
        "assert rb.call(lambda: 1).value == 1\n"
        "loaded = {'httpx', 'requests', 'urllib3', 'aiohttp'} & set(sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)


# Deliverable 2: the caller's own errors ----------------------------------------------------


def test_a_value_error_in_user_code_is_raised_again_as_the_same_object(clock) -> None:
    raised: list[BaseException] = []

    @rb.retrying(Policy(deadline=30), clock=clock)
    def parse(text: str) -> int:
        try:
            return int(text)  # the user's bug line
        except ValueError as exc:
            raised.append(exc)
            raise

    with pytest.raises(ValueError, match="invalid literal") as info:
        parse("not a number")
    assert info.value is raised[0]
    assert len(raised) == 1  # never retried
    assert clock.sleeps == []
    frames = traceback.extract_tb(info.value.__traceback__)
    assert any("the user's bug line" in (frame.line or "") for frame in frames)
    assert not isinstance(info.value, rb.RetryBudgetError)


async def test_a_key_error_in_async_user_code_is_raised_again_as_the_same_object(clock) -> None:
    error = KeyError("id")

    @rb.retrying(Policy(deadline=30), clock=clock)
    async def pick() -> object:
        raise error

    with pytest.raises(KeyError) as info:
        await pick()
    assert info.value is error


def test_call_records_a_user_error_as_unexpected_with_the_error(clock) -> None:
    error = ValueError("bug")
    calls = []

    def bug() -> None:
        calls.append(1)
        raise error

    outcome = Retrier(clock=clock).call(bug)
    assert outcome.reason is Reason.UNEXPECTED
    assert outcome.error is error
    assert len(calls) == 1


def test_a_provider_500_is_still_the_typed_error_not_the_library_one(sandbox, clock) -> None:
    url, seen = fixture(sandbox, {"status": 500}, OK)
    fetch = rb.retrying(Policy(deadline=30), clock=clock)(httpx_get)
    with pytest.raises(rb.UnexpectedResponse) as info:
        fetch("GET", url)
    assert isinstance(info.value.outcome.error, httpx.HTTPStatusError)
    assert seen() == 1


# The rule as a property: whatever a plain function raises, a write that may have been sent
# is never sent again (the method comes from the exception's request alone) -----------------

_STEPS = st.sampled_from(["503", "429", "404", "500", "read", "timeout", "connect", "ok"])


def _raiser(method: str, steps: list[str]) -> Callable[[], str]:
    queue = list(steps)

    def send() -> str:
        step = queue.pop(0) if queue else "ok"
        request = httpx.Request(method, "http://127.0.0.1/")
        if step == "ok":
            return "ok"
        if step == "read":
            raise httpx.ReadError("reset", request=request)
        if step == "timeout":
            raise httpx.ReadTimeout("slow", request=request)
        if step == "connect":
            raise httpx.ConnectError("refused", request=request)
        headers = {"Retry-After": "1"} if step == "429" else {}
        response = httpx.Response(int(step), headers=headers, request=request)
        response.raise_for_status()
        return "unreachable"

    return send


@given(method=st.sampled_from(["GET", "PUT", "DELETE", "POST", "PATCH"]),
       steps=st.lists(_STEPS, max_size=6))
def test_a_write_that_may_have_been_sent_is_never_sent_again(method, steps) -> None:
    policy = Policy(max_attempts=4, deadline=60)
    outcome = Retrier(policy=policy, clock=FakeClock()).call(_raiser(method, steps))
    if steps and steps[0] != "ok":  # the first attempt raised: its request named the method
        assert outcome.method == method
    if method not in policy.idempotent_methods:
        # Only a connect failure (never sent) may be followed by another attempt.
        assert all(not record.sent for record in outcome.history[:-1])
