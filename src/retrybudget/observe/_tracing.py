"""OpenTelemetry tracing: one span per logical operation, one child span per attempt.

The operation span (``retrybudget operation``, kind INTERNAL) carries the outcome
(``retrybudget.outcome``, ``retrybudget.attempts``, ``retrybudget.retry_at``); its status is
ERROR unless the operation ended ``ok``. Each attempt is a CLIENT span named after the
method, following the HTTP semantic conventions: ``http.request.method``, ``url.full``
(redacted), ``http.response.status_code`` when a response came, ``error.type`` when none
did, and ``http.request.resend_count`` on every attempt after the first. Waits are events on
the operation span.

Spans are written when the operation ends, with the start and end times the operation
recorded, under the span that was current when it ended (your request's span).
"""

from __future__ import annotations

from typing import Any

from .._clock import SYSTEM_CLOCK, Clock
from ..core.actions import RequestInfo
from ..core.outcome import Outcome, Reason
from ._hooks import Hook
from ._redact import redact_url

__all__ = ["OtelTracingHook"]

_NS = 1_000_000_000


class OtelTracingHook(Hook):
    """Writes each operation and its attempts as OpenTelemetry spans (``retrybudget[otel]``).

    Args:
        tracer: the tracer to start spans on (default: the global tracer provider's
            ``"retrybudget"`` tracer).
        clock: the wall clock that dates the spans.

    Raises:
        ImportError: when ``opentelemetry-api`` is not installed, saying which extra to install.
    """

    def __init__(self, tracer: Any = None, *, clock: Clock = SYSTEM_CLOCK) -> None:
        try:
            from opentelemetry import trace  # noqa: PLC0415 - an optional extra, imported when used
        except ImportError as exc:
            raise ImportError(
                "OtelTracingHook needs opentelemetry-api: pip install 'retrybudget[otel]'"
            ) from exc
        self._trace = trace
        self.tracer = trace.get_tracer("retrybudget") if tracer is None else tracer
        self.clock = clock

    def on_outcome(self, outcome: Outcome[Any], request: RequestInfo) -> None:
        """Write the operation's span and its attempts' spans."""
        trace = self._trace
        end = self.clock.wall()
        start = end - outcome.elapsed
        method = request.method or outcome.method
        attributes: dict[str, Any] = {
            "retrybudget.operation_id": outcome.operation_id,
            "retrybudget.outcome": outcome.reason.value,
            "retrybudget.attempts": outcome.attempts,
            "retrybudget.key": outcome.key or request.key,
        }
        if outcome.retry_at is not None:
            attributes["retrybudget.retry_at"] = outcome.retry_at
        if request.job_id:
            attributes["retrybudget.job_id"] = request.job_id
        url = redact_url(request.url) if request.url else None
        span = self.tracer.start_span("retrybudget operation", kind=trace.SpanKind.INTERNAL,
                                      start_time=int(start * _NS), attributes=attributes)
        for wait in outcome.waits:
            span.add_event("retrybudget.wait", attributes={
                "retrybudget.wait.seconds": wait.seconds, "retrybudget.wait.reason": wait.reason.value,
                "retrybudget.wait.source": wait.source, "retrybudget.wait.after_attempt": wait.attempt})
        context = trace.set_span_in_context(span)
        for record in outcome.history:
            attempt: dict[str, Any] = {"retrybudget.attempt": record.number,
                                       "retrybudget.classification": record.kind.value}
            if method:
                attempt["http.request.method"] = method
            if url:
                attempt["url.full"] = url
            if record.number > 1:
                attempt["http.request.resend_count"] = record.number - 1
            if record.status is not None:
                attempt["http.response.status_code"] = record.status
            if record.error is not None:
                attempt["error.type"] = record.error
            begin = start + record.started
            child = self.tracer.start_span(method or "call", context=context, kind=trace.SpanKind.CLIENT,
                                           start_time=int(begin * _NS), attributes=attempt)
            if record.error is not None or (record.status is not None and record.status >= 400):
                child.set_status(trace.Status(trace.StatusCode.ERROR))
            child.end(end_time=int((begin + record.elapsed) * _NS))
        if outcome.reason is not Reason.OK:
            span.set_status(trace.Status(trace.StatusCode.ERROR, outcome.reason.value))
        span.end(end_time=int(end * _NS))
