"""Observability: hooks, per-operation stats, audit records, metrics and the review report.

Everything here plugs into a :class:`~retrybudget.Retrier` through ``hooks=``, so it works
for every driver and integration alike::

    from retrybudget import Retrier
    from retrybudget.observe import AuditHook, JsonlAuditSink, StatsAggregator

    stats = StatsAggregator()
    audit = AuditHook(JsonlAuditSink("audit.jsonl"), policy=policy)
    retrier = Retrier(policy=policy, hooks=(stats, audit))

The Prometheus and OpenTelemetry hooks import their libraries only when constructed. The
``retrybudget`` logger writes one INFO line per wait and one DEBUG line per attempt once the
application configures logging (it has only a ``NullHandler``).
"""

from ._audit import (
    AuditFileError,
    AuditHook,
    AuditLog,
    AuditSink,
    BadLine,
    CallbackAuditSink,
    JsonlAuditSink,
    LoggingAuditSink,
    audit_record,
    load_audit,
    merge_audits,
)
from ._hooks import BREAKER_STATES, AttemptEvent, CoordinatorEvents, Hook, WaitEvent, notify
from ._logging import LOGGER, LogHook, log_hooks, logs_steps
from ._metrics import METRICS, WAIT_BUCKETS, MetricsHook, MetricSpec, OtelHook, PrometheusHook
from ._redact import (
    REDACTED,
    SECRET_HEADERS,
    SECRET_PARAMS,
    is_secret_header,
    is_secret_param,
    redact_headers,
    redact_text,
    redact_url,
    scrub,
)
from ._report import CHECKS, DECISIONS, REPORT_KEYS, review_report
from ._report_html import render_html
from ._report_text import review_summary
from ._schema import AUDIT_SCHEMA, AUDIT_SCHEMA_ID, validate_audit_record
from ._stats import StatsAggregator, operation_stats
from ._tracing import OtelTracingHook

__all__ = [
    "AUDIT_SCHEMA",
    "AUDIT_SCHEMA_ID",
    "BREAKER_STATES",
    "CHECKS",
    "DECISIONS",
    "LOGGER",
    "METRICS",
    "REDACTED",
    "REPORT_KEYS",
    "SECRET_HEADERS",
    "SECRET_PARAMS",
    "WAIT_BUCKETS",
    "AttemptEvent",
    "AuditFileError",
    "AuditHook",
    "AuditLog",
    "AuditSink",
    "BadLine",
    "CallbackAuditSink",
    "CoordinatorEvents",
    "Hook",
    "JsonlAuditSink",
    "LogHook",
    "LoggingAuditSink",
    "MetricSpec",
    "MetricsHook",
    "OtelHook",
    "OtelTracingHook",
    "PrometheusHook",
    "StatsAggregator",
    "WaitEvent",
    "audit_record",
    "is_secret_header",
    "is_secret_param",
    "load_audit",
    "log_hooks",
    "logs_steps",
    "merge_audits",
    "notify",
    "operation_stats",
    "redact_headers",
    "redact_text",
    "redact_url",
    "render_html",
    "review_report",
    "review_summary",
    "scrub",
    "validate_audit_record",
]
