"""The ``retrybudget`` logger's lines per wait and attempt, and OpenTelemetry spans per operation.

Both are seen as a user sees them: real loopback HTTP to the sandbox through the httpx
transport, the standard logging machinery, and the OpenTelemetry SDK's in-memory exporter.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import retrybudget as rb
from retrybudget.integrations.httpx import RetryTransport
from retrybudget.observe import LOGGER, LogHook, OtelTracingHook
from retrybudget.observe._logging import log_hooks
from retrybudget.sandbox import SandboxServer, serve_in_thread

TOKEN = "s3cr3t-Zq81xTok"
FAST = rb.Backoff(base=0.01, cap=0.02)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    with serve_in_thread() as server:
        yield server


def _get(sandbox: SandboxServer, fixture: str, script: list[dict[str, object]],
         hooks: tuple[object, ...] = (), policy: rb.Policy | None = None) -> httpx.Response:
    url = sandbox.load_fixture("logs", fixture, script)
    retrier = rb.Retrier(policy=policy or rb.background(backoff=FAST), hooks=hooks)
    with httpx.Client(transport=RetryTransport(retrier=retrier)) as client:
        return client.get(f"{url}?access_token={TOKEN}", headers={"Authorization": f"Bearer {TOKEN}"})


def test_the_library_adds_only_a_null_handler() -> None:
    assert [type(h) for h in LOGGER.handlers] == [logging.NullHandler]
    assert LOGGER.name == "retrybudget"


def test_no_log_hook_runs_while_the_logger_is_quiet() -> None:
    LOGGER.setLevel(logging.WARNING)
    assert log_hooks(()) == ()
    LOGGER.setLevel(logging.INFO)
    assert [type(h) for h in log_hooks(())] == [LogHook]


def test_one_info_line_per_wait_and_one_debug_line_per_attempt(
    sandbox: SandboxServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="retrybudget")
    script = [{"status": 503}, {"status": 429, "headers": {"Retry-After": "1"}}, {"status": 200, "body": {}}]
    response = _get(sandbox, "two-retries", script)
    outcome = response.extensions["retrybudget.outcome"]
    ours = [r for r in caplog.records if r.name == "retrybudget"]
    infos = [r for r in ours if r.levelno == logging.INFO]
    attempts = [r for r in ours if r.levelno == logging.DEBUG and "attempt" in r.getMessage()
                and getattr(r, "outcome", None) is None]
    assert len(attempts) == outcome.attempts == 3
    assert len(infos) == len(outcome.waits) == 2
    assert [r.wait_reason for r in infos] == [w.reason.value for w in outcome.waits]  # type: ignore[attr-defined]
    assert [r.attempt for r in infos] == [1, 2]  # type: ignore[attr-defined]
    assert [r.attempt for r in attempts] == [1, 2, 3]  # type: ignore[attr-defined]
    for record in ours:
        message = record.getMessage()
        assert outcome.operation_id in message
        assert TOKEN not in message
    assert "waiting" in infos[0].getMessage()
    assert "backoff" in infos[0].getMessage()
    assert "retry_after" in infos[1].getMessage()
    assert any(getattr(r, "outcome", None) == "ok" for r in ours)


def test_info_level_shows_the_waits_only(sandbox: SandboxServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="retrybudget")
    _get(sandbox, "one-retry", [{"status": 502}, {"status": 200, "body": {}}])
    levels = [r.levelno for r in caplog.records if r.name == "retrybudget"]
    assert levels == [logging.INFO]


@pytest.mark.parametrize("policy", [rb.interactive(), rb.background(), rb.background("github")],
                         ids=["interactive", "background-auto", "background-github"])
def test_a_first_attempt_success_is_logged_whichever_path_it_takes(
    sandbox: SandboxServer, caplog: pytest.LogCaptureFixture, policy: rb.Policy
) -> None:
    # The first-attempt fast path steps aside while the logger prints: the one attempt and
    # the outcome are logged through the transport and through Retrier.call alike.
    caplog.set_level(logging.DEBUG, logger="retrybudget")
    response = _get(sandbox, "at-once", [{"status": 200, "body": {}}], policy=policy)
    outcome = response.extensions["retrybudget.outcome"]
    called = rb.Retrier(policy=policy).call(lambda: "value")
    ours = [r for r in caplog.records if r.name == "retrybudget"]
    for operation in (outcome, called):
        mine = [r for r in ours if operation.operation_id in r.getMessage()]
        attempts = [r for r in mine if getattr(r, "attempt", None) == 1
                    and getattr(r, "outcome", None) is None]
        assert len(attempts) == 1
        assert [getattr(r, "outcome", None) for r in mine if getattr(r, "outcome", None)] == ["ok"]


@pytest.fixture
def spans() -> Iterator[tuple[OtelTracingHook, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield OtelTracingHook(provider.get_tracer("test")), exporter
    provider.shutdown()


def test_one_span_per_operation_and_one_per_attempt_with_resend_counts(
    sandbox: SandboxServer, spans: tuple[OtelTracingHook, InMemorySpanExporter]
) -> None:
    hook, exporter = spans
    script = [{"status": 503}, {"status": 503}, {"status": 200, "body": {}}]
    response = _get(sandbox, "traced", script, hooks=(hook,))
    finished = exporter.get_finished_spans()
    operation = next(s for s in finished if s.name == "retrybudget operation")
    attempts = sorted((s for s in finished if s is not operation), key=lambda s: s.start_time or 0)
    assert len(finished) == 4
    assert operation.attributes is not None
    assert operation.attributes["retrybudget.outcome"] == "ok"
    assert operation.attributes["retrybudget.attempts"] == 3
    stats = response.extensions["retrybudget"]
    assert operation.attributes["retrybudget.operation_id"] == stats["operation_id"]
    assert operation.status.status_code is not StatusCode.ERROR
    assert [e.name for e in operation.events] == ["retrybudget.wait", "retrybudget.wait"]
    for number, span in enumerate(attempts, start=1):
        attrs = span.attributes or {}
        assert span.kind is SpanKind.CLIENT
        assert span.name == "GET"
        assert span.parent is not None
        assert span.parent.span_id == operation.context.span_id
        assert attrs["http.request.method"] == "GET"
        assert attrs.get("http.request.resend_count") == (None if number == 1 else number - 1)
        assert TOKEN not in str(attrs["url.full"])
        assert (operation.start_time or 0) <= (span.start_time or 0) <= (span.end_time or 0)
        assert (span.end_time or 0) <= (operation.end_time or 0)
    assert [(s.attributes or {})["http.response.status_code"] for s in attempts] == [503, 503, 200]
    assert [s.status.status_code for s in attempts][:2] == [StatusCode.ERROR, StatusCode.ERROR]


def test_a_failed_operation_is_an_error_span_with_its_reason(
    sandbox: SandboxServer, spans: tuple[OtelTracingHook, InMemorySpanExporter]
) -> None:
    hook, exporter = spans
    _get(sandbox, "traced-404", [{"status": 404}], hooks=(hook,))
    operation = next(s for s in exporter.get_finished_spans() if s.name == "retrybudget operation")
    assert operation.status.status_code is StatusCode.ERROR
    assert operation.attributes is not None
    assert operation.attributes["retrybudget.outcome"] == "not_found"
    assert operation.attributes["retrybudget.attempts"] == 1
