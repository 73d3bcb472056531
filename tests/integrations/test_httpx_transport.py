"""The httpx transports over real loopback HTTP (the sandbox provider), sync and async."""

from __future__ import annotations

import asyncio
import itertools
import pickle
import random
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from retrybudget import (
    Backoff,
    CircuitOpen,
    DeadlineExceeded,
    FailureKind,
    Outcome,
    Policy,
    Reason,
    Retrier,
    RetriesExhausted,
    RetryBudgetError,
)
from retrybudget.coordination import Coordinator
from retrybudget.core.actions import Admission, RequestInfo
from retrybudget.integrations import outcome_of, stats_of
from retrybudget.integrations.httpx import (
    AsyncRetryTransport,
    RetryTransport,
    TransportCircuitOpen,
    TransportDeadlineExceeded,
    TransportInvalidPayload,
    TransportNotRetried,
    TransportRetriesExhausted,
    failure_kind,
)
from retrybudget.integrations.validators import json_object
from retrybudget.sandbox import SandboxServer, serve_in_thread

FAST = Policy(backoff=Backoff(base=0.01, cap=0.02), deadline=5.0)
OK = {"status": 200, "body": {"available": True}}
MODES = ["sync", "async"]
_runs = itertools.count()


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    with serve_in_thread() as server:
        yield server


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port nobody listens on: connecting is refused (the request is never sent).

    The port stays bound (not listening) for the whole test, so nothing else can take it.
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


class Fixture:
    """A scripted fixture on the sandbox, with its request log."""

    def __init__(self, sandbox: SandboxServer, script: list[dict[str, Any]]) -> None:
        self.sandbox = sandbox
        self.run_id = f"httpx-{next(_runs)}"
        self.url = sandbox.load_fixture(self.run_id, "f", script)

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self.sandbox.stats(self.run_id)["requests"]


class Recording(httpx.HTTPTransport):
    """The real transport, recording every response it returned and each attempt's timeouts."""

    def __init__(self, refuse_first: int | None = None) -> None:
        super().__init__()
        self.responses: list[httpx.Response] = []
        self.timeouts: list[dict[str, float]] = []
        self.pool_sizes: list[int] = []
        self.refuse_first = refuse_first

    def _target(self, request: httpx.Request) -> httpx.Request:
        self.timeouts.append(dict(request.extensions.get("timeout", {})))
        if self.refuse_first is not None and len(self.timeouts) == 1:
            url = request.url.copy_with(port=self.refuse_first)
            return httpx.Request(request.method, url, headers=request.headers,
                                 extensions=request.extensions)
        return request

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(self._target(request))
        self.responses.append(response)
        self.pool_sizes.append(len(self._pool.connections))
        return response


class AsyncRecording(httpx.AsyncHTTPTransport):
    """The async twin of :class:`Recording`."""

    def __init__(self, refuse_first: int | None = None) -> None:
        super().__init__()
        self.sync = Recording(refuse_first)
        self.responses = self.sync.responses
        self.timeouts = self.sync.timeouts
        self.pool_sizes = self.sync.pool_sizes

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(self.sync._target(request))
        self.responses.append(response)
        self.pool_sizes.append(len(self._pool.connections))
        return response


def recording(mode: str, refuse_first: int | None = None) -> Any:
    return Recording(refuse_first) if mode == "sync" else AsyncRecording(refuse_first)


def send(
    mode: str,
    method: str,
    url: str,
    *,
    inner: Any = None,
    client: dict[str, Any] | None = None,
    **options: Any,
) -> httpx.Response:
    """One request through a fresh client with a retry transport (sync or async)."""
    options.setdefault("policy", FAST)
    request = dict(client or {})
    if mode == "sync":
        with httpx.Client(transport=RetryTransport(inner, **options)) as c:
            return c.request(method, url, **request)

    async def go() -> httpx.Response:
        async with httpx.AsyncClient(transport=AsyncRetryTransport(inner, **options)) as c:
            return await c.request(method, url, **request)

    return asyncio.run(go())


def error_of(mode: str, method: str, url: str, **options: Any) -> RetryBudgetError:
    with pytest.raises(RetryBudgetError) as caught:
        send(mode, method, url, **options)
    return caught.value


# Method rules ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_a_connect_failure_is_retried_even_for_a_post(
    mode: str, sandbox: SandboxServer, closed_port: int
) -> None:
    fx = Fixture(sandbox, [{"status": 201, "body": {"reserved": True}}])
    inner = recording(mode, refuse_first=closed_port)
    response = send(mode, "POST", fx.url, inner=inner)
    assert response.status_code == 201
    outcome = outcome_of(response)
    assert outcome is not None
    assert [r.error for r in outcome.history] == ["ConnectError", None]
    assert [r["method"] for r in fx.requests] == ["POST"]  # the provider saw it once


@pytest.mark.parametrize("mode", MODES)
def test_a_closed_port_exhausts_the_budget_with_a_typed_httpx_error(
    mode: str, closed_port: int
) -> None:
    with pytest.raises(httpx.TransportError) as caught:
        send(mode, "POST", f"http://127.0.0.1:{closed_port}/rentals/1/reservations")
    error = caught.value
    assert isinstance(error, TransportRetriesExhausted)
    assert isinstance(error, RetriesExhausted)
    assert error.attempts == 3
    assert error.outcome is not None
    assert isinstance(error.outcome.error, httpx.ConnectError)
    assert error.__cause__ is None  # a foreign message may quote the URL: not chained
    assert error.request.method == "POST"


@pytest.mark.parametrize("mode", MODES)
def test_a_reset_post_is_not_replayed(mode: str, sandbox: SandboxServer) -> None:
    fx = Fixture(sandbox, [{"reset": True}, {"status": 201, "body": {"reserved": True}}])
    error = error_of(mode, "POST", fx.url)
    assert isinstance(error, TransportNotRetried)
    assert isinstance(error, httpx.TransportError)
    assert error.outcome is not None
    assert error.outcome.reason is Reason.NOT_RETRIED
    assert len(fx.requests) == 1


@pytest.mark.parametrize("mode", MODES)
def test_a_post_with_a_key_is_retried_with_the_same_key(mode: str, sandbox: SandboxServer) -> None:
    fx = Fixture(sandbox, [{"status": 503}, {"reset": True}, {"status": 201, "body": {}}])
    response = send(mode, "POST", fx.url, client={"headers": {"Idempotency-Key": "k-123"}},
                    policy=FAST.replace(retry_writes_with_key=True))
    assert response.status_code == 201
    assert [r["idempotency_key"] for r in fx.requests] == ["k-123"] * 3


@pytest.mark.parametrize("mode", MODES)
def test_a_post_with_a_key_is_not_retried_without_opting_in(
    mode: str, sandbox: SandboxServer
) -> None:
    fx = Fixture(sandbox, [{"status": 503}, {"status": 201, "body": {}}])
    response = send(mode, "POST", fx.url, client={"headers": {"Idempotency-Key": "k-1"}})
    assert response.status_code == 503
    assert stats_of(response)["outcome"] == "not_retried"  # type: ignore[index]
    assert len(fx.requests) == 1


@pytest.mark.parametrize("mode", MODES)
def test_generated_idempotency_keys(mode: str, sandbox: SandboxServer) -> None:
    fx = Fixture(sandbox, [{"status": 503}, {"status": 503}, {"status": 201, "body": {}}])
    policy = FAST.replace(retry_writes_with_key=True)
    response = send(mode, "POST", fx.url, policy=policy, generate_idempotency_keys=True)
    assert response.status_code == 201
    keys = {r["idempotency_key"] for r in fx.requests}
    assert len(fx.requests) == 3
    assert len(keys) == 1
    assert uuid.UUID(keys.pop()).version == 4
    # A GET is idempotent: no key is added.
    get = Fixture(sandbox, [OK])
    send(mode, "GET", get.url, policy=policy, generate_idempotency_keys=True)
    assert [r["idempotency_key"] for r in get.requests] == [None]


@pytest.mark.parametrize("mode", MODES)
def test_put_is_retried_only_when_declared_idempotent(mode: str, sandbox: SandboxServer) -> None:
    script = [{"status": 503}, OK]
    plain = Fixture(sandbox, script)
    assert send(mode, "PUT", plain.url).status_code == 503
    assert len(plain.requests) == 1
    declared = Fixture(sandbox, script)
    policy = FAST.replace(idempotent_methods={"GET", "HEAD", "OPTIONS", "PUT"})
    assert send(mode, "PUT", declared.url, policy=policy).status_code == 200
    assert len(declared.requests) == 2


@pytest.mark.parametrize("mode", MODES)
def test_head_is_retried_and_not_validated(mode: str, sandbox: SandboxServer) -> None:
    fx = Fixture(sandbox, [{"status": 503}, OK])
    policy = FAST.replace(validator=json_object(required_keys=("available",)))
    response = send(mode, "HEAD", fx.url, policy=policy)
    assert response.status_code == 200
    assert response.content == b""
    assert stats_of(response)["outcome"] == "ok"  # type: ignore[index]
    assert [r["method"] for r in fx.requests] == ["HEAD", "HEAD"]


@pytest.mark.parametrize("mode", MODES)
def test_no_content_is_not_validated(mode: str, sandbox: SandboxServer) -> None:
    fx = Fixture(sandbox, [{"status": 204}])
    policy = FAST.replace(validator=json_object(("available",)))
    response = send(mode, "DELETE", fx.url, policy=policy)
    assert response.status_code == 204
    assert stats_of(response)["outcome"] == "ok"  # type: ignore[index]


# Responses: release, hand-over, streaming, redirects -----------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_retried_responses_are_read_and_closed_on_one_connection(
    mode: str, sandbox: SandboxServer
) -> None:
    fx = Fixture(sandbox, [{"status": 503, "body": {"m": "x" * 2000}},
                           {"status": 429, "headers": {"Retry-After": "0"}}, OK])
    inner = recording(mode)
    response = send(mode, "GET", fx.url, inner=inner)
    assert response.status_code == 200
    first, second, final = inner.responses
    assert first.is_closed
    assert second.is_closed
    assert final is response
    assert inner.pool_sizes == [1, 1, 1]  # each retried response gave its connection back


def test_a_streamed_final_response_is_handed_over_unread(sandbox: SandboxServer) -> None:
    fx = Fixture(sandbox, [{"status": 503}, {"status": 200, "body": {"available": True}}])
    inner = Recording()
    with httpx.Client(transport=RetryTransport(inner, policy=FAST)) as client:
        with client.stream("GET", fx.url) as response:
            assert inner.responses[0].is_closed
            assert not response.is_stream_consumed
            assert stats_of(response)["attempts"] == 2  # type: ignore[index]
            assert b"".join(response.iter_raw()) == b'{"available":true}'
        assert len(fx.requests) == 2  # reading it sent nothing more


async def test_a_streamed_final_response_is_handed_over_unread_async(
    sandbox: SandboxServer,
) -> None:
    fx = Fixture(sandbox, [{"status": 503}, {"status": 503}, {"status": 503}])
    inner = AsyncRecording()
    async with httpx.AsyncClient(transport=AsyncRetryTransport(inner, policy=FAST)) as client:
        async with client.stream("GET", fx.url) as response:
            assert response.status_code == 503  # the final 503: exhausted, returned unread
            assert [r.is_closed for r in inner.responses] == [True, True, False]
            assert not response.is_stream_consumed
            assert stats_of(response)["outcome"] == "exhausted"  # type: ignore[index]
            await response.aread()
    assert len(fx.requests) == 3


def test_a_validated_stream_is_read_once_and_still_iterable(sandbox: SandboxServer) -> None:
    fx = Fixture(sandbox, [OK])
    with httpx.Client(transport=RetryTransport(policy=FAST.replace(
            validator=json_object(("available",))))) as client:
        with client.stream("GET", fx.url) as response:
            assert b"".join(response.iter_bytes()) == b'{"available":true}'


@pytest.mark.parametrize("mode", MODES)
def test_each_redirect_hop_is_its_own_operation(mode: str, sandbox: SandboxServer) -> None:
    target = Fixture(sandbox, [{"status": 503}, OK])
    hop = Fixture(sandbox, [{"status": 302, "headers": {"Location": target.url}}])
    response = send(mode, "GET", hop.url, client={"follow_redirects": True})
    assert response.status_code == 200
    (redirect,) = response.history
    assert stats_of(redirect)["outcome"] == "ok"  # a redirect is an answer, not a failure
    assert stats_of(redirect)["attempts"] == 1  # type: ignore[index]
    assert stats_of(response)["attempts"] == 2  # type: ignore[index]
    assert stats_of(response)["operation_id"] != stats_of(redirect)["operation_id"]  # type: ignore[index]


@pytest.mark.parametrize("mode", MODES)
def test_a_redirect_is_returned_when_the_client_does_not_follow(
    mode: str, sandbox: SandboxServer
) -> None:
    hop = Fixture(sandbox, [{"status": 301, "headers": {"Location": "/elsewhere"}}])
    response = send(mode, "GET", hop.url)
    assert response.status_code == 301
    assert stats_of(response)["outcome"] == "ok"  # type: ignore[index]


# Timeouts and the deadline --------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_each_attempt_timeout_is_clipped_and_the_callers_is_kept(
    mode: str, sandbox: SandboxServer
) -> None:
    fx = Fixture(sandbox, [{"status": 503}, {"status": 503, "delay_s": 0.3}, OK])
    inner = recording(mode)
    response = send(mode, "GET", fx.url, inner=inner, policy=FAST.replace(deadline=2.0),
                    client={"timeout": httpx.Timeout(5.0, connect=1.0)})
    assert response.status_code == 200
    first, second, third = inner.timeouts
    assert first["connect"] == 1.0
    assert 1.9 < first["read"] <= 2.0
    assert first["read"] == first["write"] == first["pool"]
    assert second["read"] < first["read"]
    assert third["read"] < second["read"] - 0.25
    assert response.request.extensions["timeout"] == {"connect": 1.0, "read": 5.0,
                                                      "write": 5.0, "pool": 5.0}


@pytest.mark.parametrize("mode", MODES)
def test_a_slow_provider_ends_at_the_deadline_with_a_timeout_error(
    mode: str, sandbox: SandboxServer
) -> None:
    fx = Fixture(sandbox, [{"status": 200, "delay_s": 2.0}])
    with pytest.raises(httpx.TimeoutException) as caught:
        send(mode, "GET", fx.url, policy=FAST.replace(deadline=0.5))
    error = caught.value
    assert isinstance(error, TransportDeadlineExceeded)
    assert isinstance(error, DeadlineExceeded)
    assert error.outcome is not None
    # each attempt was given what was left of the 0.5 s deadline, no more
    assert all(r.timeout is not None and r.timeout <= 0.5 for r in error.outcome.history)
    # real clock: generous for a loaded machine, still short of the provider's 2 s delay
    assert error.outcome.elapsed < 1.8


# Errors, stats and secrets ---------------------------------------------------------------------


class OpenBreaker(Coordinator):
    def admit(self, key: str) -> Admission:
        return Admission(allowed=False, retry_at=2_000_000_000.0, detail="breaker open")


@pytest.mark.parametrize("mode", MODES)
def test_an_open_breaker_raises_a_typed_httpx_error_with_zero_attempts(
    mode: str, sandbox: SandboxServer
) -> None:
    fx = Fixture(sandbox, [OK])
    with pytest.raises(httpx.TransportError) as caught:
        send(mode, "GET", fx.url, retrier=Retrier(coordinator=OpenBreaker()), policy=None)
    error = caught.value
    assert isinstance(error, TransportCircuitOpen)
    assert isinstance(error, CircuitOpen)
    assert (error.attempts, error.retry_at) == (0, 2_000_000_000.0)
    assert fx.requests == []
    clone = pickle.loads(pickle.dumps(error))  # noqa: S301 - our own error, pickled here
    assert type(clone) is TransportCircuitOpen
    assert str(clone) == str(error)


@pytest.mark.parametrize("mode", MODES)
def test_an_invalid_payload_is_never_handed_over_as_ok(mode: str, sandbox: SandboxServer) -> None:
    fx = Fixture(sandbox, [{"status": 200, "body": {"unexpected": 1}}, OK])
    validator = json_object(required_keys=("available",))
    with pytest.raises(httpx.TransportError) as caught:
        send(mode, "GET", fx.url, client={"extensions": {"retrybudget.validator": validator}})
    error = caught.value
    assert isinstance(error, TransportInvalidPayload)
    assert error.outcome is not None
    assert error.outcome.last.json() == {"unexpected": 1}  # type: ignore[union-attr]
    assert len(fx.requests) == 1


@pytest.mark.parametrize("mode", MODES)
def test_the_stats_extension(mode: str, sandbox: SandboxServer) -> None:
    fx = Fixture(sandbox, [{"status": 429, "headers": {"Retry-After": "0"}}, {"status": 503}, OK])
    response = send(mode, "GET", fx.url, retrier=Retrier(random=random.Random(3)), client={
        "extensions": {"retrybudget.job_id": "job-7"}})
    stats = response.extensions["retrybudget"]
    outcome = response.extensions["retrybudget.outcome"]
    assert isinstance(outcome, Outcome)
    assert outcome.value is response
    assert stats == outcome.stats()
    assert stats["logical_operations"] == 1
    assert stats["attempts"] == 3
    assert stats["outcome"] == "ok"
    assert stats["job_id"] == "job-7"
    assert stats["method"] == "GET"
    assert stats["key"] == sandbox.base_url
    # Retry-After: 0 names no time to wait: the policy's backoff, not an immediate burst
    assert [w["reason"] for w in stats["waits"]] == ["backoff", "backoff"]


@pytest.mark.parametrize("mode", MODES)
def test_the_provider_key_can_be_named(mode: str, sandbox: SandboxServer) -> None:
    fx = Fixture(sandbox, [OK])
    response = send(mode, "GET", fx.url, key=lambda request: f"sandbox:{request.url.path}")
    assert stats_of(response)["key"] == f"sandbox:{httpx.URL(fx.url).path}"  # type: ignore[index]


class Capture:
    def __init__(self) -> None:
        self.requests: list[RequestInfo] = []

    def on_outcome(self, outcome: Outcome[Any], request: RequestInfo) -> None:
        self.requests.append(request)


@pytest.mark.parametrize("mode", MODES)
def test_errors_and_records_carry_no_secrets(mode: str, closed_port: int) -> None:
    capture = Capture()
    url = f"http://user:pa55word@127.0.0.1:{closed_port}/rentals?access_token=T0KEN&page=2"
    with pytest.raises(TransportRetriesExhausted) as caught:
        send(mode, "GET", url, retrier=Retrier(hooks=(capture,)),
             client={"headers": {"Authorization": "Bearer S3CRET"}})
    error = caught.value
    assert error.outcome is not None
    shown = " ".join([str(error), repr(error), repr(error.outcome), str(error.outcome.stats()),
                      str(capture.requests)])
    for secret in ("T0KEN", "S3CRET", "pa55word"):
        assert secret not in shown
    (info,) = capture.requests
    assert info.url is not None
    assert "page=2" in info.url
    assert "REDACTED" in info.url
    assert info.key == f"http://127.0.0.1:{closed_port}"


# The error boundary ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (httpx.ConnectError("x"), FailureKind.CONNECT),
        (httpx.ConnectTimeout("x"), FailureKind.CONNECT),
        (httpx.PoolTimeout("x"), FailureKind.CONNECT),
        (httpx.ReadTimeout("x"), FailureKind.TIMEOUT),
        (httpx.WriteTimeout("x"), FailureKind.TIMEOUT),
        (httpx.RemoteProtocolError("x"), FailureKind.NETWORK),
        (httpx.ReadError("x"), FailureKind.NETWORK),
        (httpx.WriteError("x"), FailureKind.NETWORK),
        (httpx.CloseError("x"), FailureKind.NETWORK),
        (httpx.LocalProtocolError("x"), FailureKind.PROTOCOL),
        (httpx.DecodingError("x"), FailureKind.PROTOCOL),
        (httpx.UnsupportedProtocol("x"), FailureKind.ERROR),
        (httpx.ProxyError("x"), FailureKind.ERROR),
        (ValueError("x"), FailureKind.ERROR),
        (ConnectionRefusedError(), FailureKind.CONNECT),
    ],
)
def test_failure_kinds(error: BaseException, kind: FailureKind) -> None:
    assert failure_kind(error) is kind


@pytest.mark.parametrize("mode", MODES)
def test_an_unknown_error_is_raised_as_it_was(mode: str) -> None:
    capture = Capture()
    with pytest.raises(httpx.UnsupportedProtocol):
        send(mode, "GET", "ftp://127.0.0.1/x", retrier=Retrier(hooks=(capture,)))
    assert len(capture.requests) == 1  # the operation was recorded, then the error raised


def test_json_object_validator() -> None:
    check = json_object(("a", "b"))
    assert check(b'{"a": 1, "b": 2}') == {"a": 1, "b": 2}
    assert check({"a": 1, "b": None}) == {"a": 1, "b": None}
    with pytest.raises(ValueError, match="lacks b"):
        check('{"a": 1}')
    with pytest.raises(ValueError, match="not a JSON object"):
        check("[1]")
    with pytest.raises(ValueError):
        check("<html>maintenance</html>")
    with pytest.raises(TypeError):
        json_object("ab")
