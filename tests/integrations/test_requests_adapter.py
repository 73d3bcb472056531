"""The requests adapter over real loopback HTTP (the sandbox provider)."""

from __future__ import annotations

import pickle
import socket
import uuid
from typing import Any

import pytest
import requests
import urllib3
from test_httpx_transport import FAST, OK, Fixture, closed_port, sandbox
from urllib3 import exceptions as u3

from retrybudget import (
    CircuitOpen,
    DeadlineExceeded,
    FailureKind,
    Outcome,
    Reason,
    Retrier,
    RetriesExhausted,
)
from retrybudget.coordination import Coordinator
from retrybudget.core.actions import Admission
from retrybudget.integrations import outcome_of, stats_of
from retrybudget.integrations.requests import (
    AdapterCircuitOpen,
    AdapterDeadlineExceeded,
    AdapterInvalidPayload,
    AdapterNotRetried,
    AdapterRetriesExhausted,
    RetryAdapter,
    _clip,
    failure_kind,
)
from retrybudget.integrations.validators import json_object
from retrybudget.sandbox import SandboxServer

__all__ = ["closed_port", "sandbox"]  # fixtures shared with the httpx tests


class Recording(RetryAdapter):
    """The adapter, recording every response it built; optionally refusing the first connect."""

    def __init__(self, *args: Any, refuse_first: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.responses: list[requests.Response] = []
        self.refuse_first = refuse_first

    def build_response(self, req: Any, resp: Any) -> requests.Response:
        response = super().build_response(req, resp)
        self.responses.append(response)
        return response

    def get_connection_with_tls_context(self, request: Any, verify: Any, proxies: Any = None,
                                        cert: Any = None) -> Any:
        if self.refuse_first is not None:
            port, self.refuse_first = self.refuse_first, None
            return self.poolmanager.connection_from_url(f"http://127.0.0.1:{port}/")
        return super().get_connection_with_tls_context(request, verify, proxies, cert)

    def pool(self) -> Any:
        (pool,) = self.poolmanager.pools._container.values()
        return pool


def session_with(adapter: RetryAdapter | None = None, **options: Any) -> requests.Session:
    options.setdefault("policy", FAST)
    session = requests.Session()
    session.mount("http://", adapter if adapter is not None else RetryAdapter(**options))
    return session


# Method rules ------------------------------------------------------------------------------


def test_a_connect_failure_is_retried_even_for_a_post(
    sandbox: SandboxServer, closed_port: int
) -> None:
    fx = Fixture(sandbox, [{"status": 201, "body": {"reserved": True}}])
    adapter = Recording(policy=FAST, refuse_first=closed_port)
    response = session_with(adapter).post(fx.url, json={"rental": 1})
    assert response.status_code == 201
    outcome = outcome_of(response)
    assert outcome is not None
    assert [r.error for r in outcome.history] == ["ConnectionError", None]
    assert outcome.history[0].kind.value == "transient"
    assert [r["method"] for r in fx.requests] == ["POST"]  # the provider saw it once


def test_a_closed_port_exhausts_the_budget_with_a_typed_requests_error(closed_port: int) -> None:
    with pytest.raises(requests.ConnectionError) as caught:
        session_with().post(f"http://127.0.0.1:{closed_port}/rentals/1/reservations")
    error = caught.value
    assert isinstance(error, AdapterRetriesExhausted)
    assert isinstance(error, RetriesExhausted)
    assert error.attempts == 3
    assert error.outcome is not None
    assert isinstance(error.outcome.error, requests.ConnectionError)
    assert error.__cause__ is None  # a foreign message may quote the URL: not chained
    assert error.request is not None
    assert error.request.method == "POST"


def test_a_reset_post_is_not_replayed(sandbox: SandboxServer) -> None:
    fx = Fixture(sandbox, [{"reset": True}, {"status": 201, "body": {}}])
    with pytest.raises(requests.ConnectionError) as caught:
        session_with().post(fx.url)
    assert isinstance(caught.value, AdapterNotRetried)
    assert len(fx.requests) == 1


def test_a_post_with_a_key_is_retried_with_the_same_key(sandbox: SandboxServer) -> None:
    fx = Fixture(sandbox, [{"status": 503}, {"reset": True}, {"status": 201, "body": {}}])
    session = session_with(policy=FAST.replace(retry_writes_with_key=True))
    response = session.post(fx.url, headers={"Idempotency-Key": "k-9"})
    assert response.status_code == 201
    assert [r["idempotency_key"] for r in fx.requests] == ["k-9"] * 3


def test_generated_idempotency_keys(sandbox: SandboxServer) -> None:
    fx = Fixture(sandbox, [{"status": 503}, {"status": 201, "body": {}}])
    session = session_with(policy=FAST.replace(retry_writes_with_key=True),
                           generate_idempotency_keys=True)
    assert session.post(fx.url).status_code == 201
    keys = {r["idempotency_key"] for r in fx.requests}
    assert len(fx.requests) == 2
    assert len(keys) == 1
    assert uuid.UUID(keys.pop()).version == 4
    get = Fixture(sandbox, [OK])
    session.get(get.url)
    assert [r["idempotency_key"] for r in get.requests] == [None]


def test_put_is_retried_only_when_declared_idempotent(sandbox: SandboxServer) -> None:
    plain = Fixture(sandbox, [{"status": 503}, OK])
    response = session_with().put(plain.url)
    assert (response.status_code, stats_of(response)["outcome"]) == (503, "not_retried")  # type: ignore[index]
    declared = Fixture(sandbox, [{"status": 503}, OK])
    policy = FAST.replace(idempotent_methods={"GET", "HEAD", "OPTIONS", "PUT"})
    assert session_with(policy=policy).put(declared.url).status_code == 200
    assert len(declared.requests) == 2


def test_head_is_retried_and_not_validated(sandbox: SandboxServer) -> None:
    fx = Fixture(sandbox, [{"status": 503}, OK])
    session = session_with(policy=FAST.replace(validator=json_object(("available",))))
    response = session.head(fx.url)
    assert (response.status_code, response.content) == (200, b"")
    assert [r["method"] for r in fx.requests] == ["HEAD", "HEAD"]


# Responses: release, hand-over, streaming, redirects -----------------------------------------


def test_retried_responses_are_read_and_released_on_one_connection(sandbox: SandboxServer) -> None:
    fx = Fixture(sandbox, [{"status": 503, "body": {"m": "x" * 2000}},
                           {"status": 429, "headers": {"Retry-After": "0"}}, OK])
    adapter = Recording(policy=FAST)
    response = session_with(adapter).get(fx.url, stream=True)
    first, second, final = adapter.responses
    assert first._content_consumed
    assert second._content_consumed
    assert final is response
    assert not response._content_consumed
    assert response.json() == {"available": True}
    assert adapter.pool().num_connections == 1  # each retried response gave its connection back


def test_the_final_response_of_an_exhausted_budget_is_returned(sandbox: SandboxServer) -> None:
    fx = Fixture(sandbox, [{"status": 503}])
    response = session_with().get(fx.url)
    assert response.status_code == 503
    assert stats_of(response)["outcome"] == "exhausted"  # type: ignore[index]
    assert len(fx.requests) == 3


def test_each_redirect_hop_is_its_own_operation(sandbox: SandboxServer) -> None:
    target = Fixture(sandbox, [{"status": 503}, OK])
    hop = Fixture(sandbox, [{"status": 302, "headers": {"Location": target.url}}])
    response = session_with().get(hop.url)
    assert response.status_code == 200
    (redirect,) = response.history
    assert stats_of(redirect)["outcome"] == "ok"  # type: ignore[index]
    assert (stats_of(redirect)["attempts"], stats_of(response)["attempts"]) == (1, 2)  # type: ignore[index]


# Timeouts and the deadline --------------------------------------------------------------------


def test_a_slow_provider_ends_at_the_deadline_with_a_timeout_error(sandbox: SandboxServer) -> None:
    fx = Fixture(sandbox, [{"status": 200, "delay_s": 2.0}])
    with pytest.raises(requests.Timeout) as caught:
        session_with(policy=FAST.replace(deadline=0.5)).get(fx.url, timeout=30)
    error = caught.value
    assert isinstance(error, AdapterDeadlineExceeded)
    assert isinstance(error, DeadlineExceeded)
    assert error.outcome is not None
    # each attempt was given what was left of the 0.5 s deadline, no more
    assert all(r.timeout is not None and r.timeout <= 0.5 for r in error.outcome.history)
    # real clock: generous for a loaded machine, still short of the provider's 2 s delay
    assert error.outcome.elapsed < 1.8


@pytest.mark.parametrize(
    ("given", "limit", "expected"),
    [
        (None, 2.0, 2.0),
        (None, None, None),
        (5.0, 2.0, 2.0),
        (1.0, 2.0, 1.0),
        ((1.0, 5.0), 2.0, (1.0, 2.0)),
        ((None, 5.0), 2.0, (2.0, 2.0)),
        (urllib3.Timeout(connect=1.0, read=9.0), 2.0, (1.0, 2.0)),
        (urllib3.Timeout(), 2.0, (2.0, 2.0)),
    ],
)
def test_the_timeout_is_clipped_to_what_is_left(given: Any, limit: Any, expected: Any) -> None:
    assert _clip(given, limit) == expected


# Errors, stats and secrets ---------------------------------------------------------------------


class OpenBreaker(Coordinator):
    def admit(self, key: str) -> Admission:
        return Admission(allowed=False, detail="breaker open")


def test_an_open_breaker_raises_a_typed_requests_error(sandbox: SandboxServer) -> None:
    fx = Fixture(sandbox, [OK])
    with pytest.raises(requests.RequestException) as caught:
        session_with(RetryAdapter(Retrier(coordinator=OpenBreaker()))).get(fx.url)
    error = caught.value
    assert isinstance(error, AdapterCircuitOpen)
    assert isinstance(error, CircuitOpen)
    assert error.attempts == 0
    assert fx.requests == []
    clone = pickle.loads(pickle.dumps(error))  # noqa: S301 - our own error, pickled here
    assert type(clone) is AdapterCircuitOpen
    assert clone.reason is Reason.CIRCUIT_OPEN


def test_an_invalid_payload_is_never_handed_over_as_ok(sandbox: SandboxServer) -> None:
    fx = Fixture(sandbox, [{"status": 200, "body_text": "<html>maintenance</html>"}, OK])
    session = session_with(policy=FAST.replace(validator=json_object()))
    with pytest.raises(requests.RequestException) as caught:
        session.get(fx.url)
    assert isinstance(caught.value, AdapterInvalidPayload)
    assert len(fx.requests) == 1


def test_the_stats_attribute(sandbox: SandboxServer) -> None:
    fx = Fixture(sandbox, [{"status": 503}, OK])
    response = session_with().get(fx.url)
    stats = response.retrybudget  # type: ignore[attr-defined]
    outcome = response.retrybudget_outcome  # type: ignore[attr-defined]
    assert isinstance(outcome, Outcome)
    assert outcome.value is response
    assert stats == outcome.stats() == stats_of(response)
    assert (stats["attempts"], stats["logical_operations"], stats["outcome"]) == (2, 1, "ok")
    assert stats["key"] == sandbox.base_url


def test_the_provider_key_and_job_id_come_from_the_adapter(sandbox: SandboxServer) -> None:
    fx = Fixture(sandbox, [OK])
    adapter = RetryAdapter(Retrier(job_id="nightly"), policy=FAST, key=lambda request: "sandbox")
    stats = stats_of(session_with(adapter).get(fx.url))
    assert stats is not None
    assert (stats["key"], stats["job_id"]) == ("sandbox", "nightly")


class Capture:
    def __init__(self) -> None:
        self.urls: list[str | None] = []

    def on_outcome(self, outcome: Outcome[Any], request: Any) -> None:
        self.urls.append(request.url)


def test_errors_and_records_carry_no_secrets(closed_port: int) -> None:
    capture = Capture()
    session = session_with(RetryAdapter(Retrier(hooks=(capture,)), policy=FAST))
    url = f"http://user:pa55word@127.0.0.1:{closed_port}/rentals?api_key=T0KEN&page=2"
    with pytest.raises(AdapterRetriesExhausted) as caught:
        session.get(url, headers={"Authorization": "Bearer S3CRET"})
    error = caught.value
    assert error.outcome is not None
    shown = " ".join([str(error), repr(error), repr(error.outcome), str(error.outcome.stats()),
                      str(capture.urls)])
    for secret in ("T0KEN", "S3CRET", "pa55word"):
        assert secret not in shown
    assert "page=2" in str(capture.urls)


# The error boundary ----------------------------------------------------------------------------

_pool = urllib3.HTTPConnectionPool("127.0.0.1")
_conn = urllib3.connection.HTTPConnection("127.0.0.1")


def _max_retry(reason: Exception) -> requests.ConnectionError:
    return requests.ConnectionError(u3.MaxRetryError(_pool, "/", reason))


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (_max_retry(u3.NewConnectionError(_conn, "refused")), FailureKind.CONNECT),
        (_max_retry(u3.NameResolutionError("x", _conn, socket.gaierror())), FailureKind.CONNECT),
        (requests.ConnectTimeout("x"), FailureKind.CONNECT),
        (requests.exceptions.SSLError("x"), FailureKind.CONNECT),
        (requests.ConnectionError(u3.ClosedPoolError(_pool, "closed")), FailureKind.CONNECT),
        (requests.ReadTimeout("x"), FailureKind.TIMEOUT),
        (requests.ConnectionError(u3.ReadTimeoutError(_pool, "/", "slow")), FailureKind.TIMEOUT),
        (requests.ConnectionError(u3.ProtocolError("aborted", ConnectionResetError())),
         FailureKind.NETWORK),
        (requests.exceptions.ChunkedEncodingError("x"), FailureKind.NETWORK),
        (requests.exceptions.ContentDecodingError("x"), FailureKind.PROTOCOL),
        (requests.exceptions.ProxyError("x"), FailureKind.ERROR),
        (requests.exceptions.InvalidURL("x"), FailureKind.ERROR),
        (KeyError("x"), FailureKind.ERROR),
        (ConnectionResetError(), FailureKind.NETWORK),
    ],
)
def test_failure_kinds(error: BaseException, kind: FailureKind) -> None:
    assert failure_kind(error) is kind


def test_an_unknown_error_is_raised_as_it_was(closed_port: int) -> None:
    capture = Capture()
    session = session_with(RetryAdapter(Retrier(hooks=(capture,)), policy=FAST))
    with pytest.raises(requests.exceptions.ProxyError):
        session.get("http://127.0.0.1:9/x", proxies={"http": f"http://127.0.0.1:{closed_port}"})
    assert len(capture.urls) == 1  # one operation, one attempt, not retried
