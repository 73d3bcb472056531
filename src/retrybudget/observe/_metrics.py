"""Metrics hooks for Prometheus and OpenTelemetry (optional extras, imported lazily).

Both hooks publish the same metrics (:data:`METRICS`), computed from each operation's
:func:`~retrybudget.observe.operation_stats` when it ends, so every global figure is a
sum of per-operation counters. Labels are bounded: provider key, method, outcome, wait
reason and source, breaker state; never a URL or an id.

Coordinators report breaker transitions and fallbacks with
:meth:`~MetricsHook.breaker_transition` and :meth:`~MetricsHook.coordinator_fallback`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..core.actions import RequestInfo
from ..core.outcome import Outcome
from ._hooks import BREAKER_STATES, CoordinatorEvents, Hook
from ._stats import operation_stats

__all__ = ["METRICS", "WAIT_BUCKETS", "MetricSpec", "MetricsHook", "OtelHook", "PrometheusHook"]


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One metric: its kind, labels and its names in each backend.

    Attributes:
        name: the Prometheus name without namespace (counters gain ``_total`` on exposition).
        otel_name: the OpenTelemetry instrument name.
        kind: ``"counter"`` or ``"histogram"`` (histograms are in seconds).
        labels: the label (attribute) names, all of bounded cardinality.
        description: what it counts.
    """

    name: str
    otel_name: str
    kind: Literal["counter", "histogram"]
    labels: tuple[str, ...]
    description: str


_OP = ("key", "method", "outcome")

METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("operations", "retrybudget.operations", "counter", _OP,
               "Logical operations, by outcome (one per operation, however many attempts)."),
    MetricSpec("attempts", "retrybudget.attempts", "counter", _OP,
               "Outbound attempts, by the outcome of their operation."),
    MetricSpec("operation_seconds", "retrybudget.operation.duration", "histogram", _OP,
               "Operation duration in seconds, waits included."),
    MetricSpec("wait_seconds", "retrybudget.wait.duration", "histogram",
               ("key", "reason", "source"), "Waits paid out of operations' deadlines, in seconds."),
    MetricSpec("gate_pauses", "retrybudget.gate.pauses", "counter", ("key",),
               "Waits at the rate-limit gate (the provider is throttling every worker)."),
    MetricSpec("pacing_delays", "retrybudget.pacing.delays", "counter", ("key",),
               "Waits for pacing between requests."),
    MetricSpec("concurrency_waits", "retrybudget.concurrency.waits", "counter", ("key",),
               "Waits for a concurrency slot."),
    MetricSpec("retry_budget_refusals", "retrybudget.retry_budget.refusals", "counter", ("key",),
               "Operations ended because the shared retry budget refused a retry."),
    MetricSpec("breaker_rejections", "retrybudget.breaker.rejections", "counter", ("key",),
               "Operations the open circuit breaker rejected (0 attempts each)."),
    MetricSpec("breaker_transitions", "retrybudget.breaker.transitions", "counter",
               ("key", "state"), "Circuit breaker state changes, by the state entered."),
    MetricSpec("coordinator_fallbacks", "retrybudget.coordinator.fallbacks", "counter", ("key",),
               "Times the shared coordinator was unreachable and local coordination took over."),
)
"""Every metric the hooks publish."""

WAIT_BUCKETS: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
    900.0, 3600.0,
)
"""Histogram buckets in seconds: from pacing delays to an hour-long rate-limit reset."""

_LABEL_VALUE = re.compile(r"[a-z0-9:_.-]{1,48}")
_COUNTED_WAITS = {"gate": "gate_pauses", "pacing": "pacing_delays",
                  "concurrency": "concurrency_waits"}


def _method_label(method: object) -> str:
    if not isinstance(method, str) or not method:
        return "none"
    m = method.upper()
    return m if m.isalpha() and len(m) <= 12 else "other"


def _source_label(source: object) -> str:
    text = str(source).lower()
    return text if _LABEL_VALUE.fullmatch(text) else "other"


def _breaker_state(state: str) -> str:
    normal = str(state).strip().lower().replace("-", "_")
    if normal not in BREAKER_STATES:
        raise ValueError(f"unknown breaker state {state!r}; expected one of {BREAKER_STATES}")
    return normal


class MetricsHook(Hook, CoordinatorEvents):
    """What the Prometheus and OpenTelemetry hooks share: outcomes and events to metrics.

    Subclasses implement :meth:`_add` (counters) and :meth:`_observe` (histograms).
    """

    def _add(self, name: str, value: float, labels: dict[str, str]) -> None:
        raise NotImplementedError

    def _observe(self, name: str, value: float, labels: dict[str, str]) -> None:
        raise NotImplementedError

    def on_outcome(self, outcome: Outcome[Any], request: RequestInfo) -> None:
        """Add one operation's stats to the metrics."""
        stats = operation_stats(outcome, request)
        key = str(stats["key"])
        op = {"key": key, "method": _method_label(stats["method"]), "outcome": stats["outcome"]}
        self._add("operations", 1, op)
        self._add("attempts", stats["attempts"], op)
        self._observe("operation_seconds", stats["elapsed"], op)
        for wait in stats["waits"]:
            self._observe("wait_seconds", wait["seconds"],
                          {"key": key, "reason": wait["reason"],
                           "source": _source_label(wait["source"])})
        for section, metric in _COUNTED_WAITS.items():
            if stats[section]["waits"]:
                self._add(metric, stats[section]["waits"], {"key": key})
        if stats["retry_budget"]["decision"] == "refused":
            self._add("retry_budget_refusals", 1, {"key": key})
        if stats["breaker"]["decision"] == "rejected":
            self._add("breaker_rejections", 1, {"key": key})

    def breaker_transition(self, key: str, state: str) -> None:
        """Count a breaker state change (``"open"``, ``"half_open"``/``"half-open"``, ``"closed"``).

        Raises:
            ValueError: for any other state (labels stay bounded).
        """
        self._add("breaker_transitions", 1, {"key": str(key), "state": _breaker_state(state)})

    def coordinator_fallback(self, key: str) -> None:
        """Count a fallback from the shared coordinator to local coordination."""
        self._add("coordinator_fallbacks", 1, {"key": str(key)})


class PrometheusHook(MetricsHook):
    """Publishes :data:`METRICS` with ``prometheus_client`` (``pip install 'retrybudget[prometheus]'``).

    Names are ``<namespace>_<name>``: ``retrybudget_operations_total``,
    ``retrybudget_wait_seconds`` and so on. Create one hook per registry: registering the same
    names twice in one registry fails.

    Args:
        registry: the ``CollectorRegistry`` (default: ``prometheus_client.REGISTRY``).
        namespace: the name prefix.
        buckets: histogram buckets, in seconds.

    Raises:
        ImportError: when ``prometheus_client`` is not installed, saying which extra to install.
    """

    def __init__(self, registry: Any = None, *, namespace: str = "retrybudget",
                 buckets: Sequence[float] = WAIT_BUCKETS) -> None:
        try:
            import prometheus_client  # noqa: PLC0415 - an optional extra, imported when used
        except ImportError as exc:
            raise ImportError(
                "PrometheusHook needs prometheus-client: pip install 'retrybudget[prometheus]'"
            ) from exc
        reg = prometheus_client.REGISTRY if registry is None else registry
        self._metrics: dict[str, Any] = {}
        for spec in METRICS:
            name = f"{namespace}_{spec.name}"
            if spec.kind == "counter":
                self._metrics[spec.name] = prometheus_client.Counter(
                    name, spec.description, spec.labels, registry=reg)
            else:
                self._metrics[spec.name] = prometheus_client.Histogram(
                    name, spec.description, spec.labels, registry=reg, buckets=tuple(buckets))

    def _add(self, name: str, value: float, labels: dict[str, str]) -> None:
        self._metrics[name].labels(**labels).inc(value)

    def _observe(self, name: str, value: float, labels: dict[str, str]) -> None:
        self._metrics[name].labels(**labels).observe(value)


class OtelHook(MetricsHook):
    """Publishes :data:`METRICS` as OpenTelemetry instruments (``pip install 'retrybudget[otel]'``).

    Counters and histograms (unit ``s``) named by :attr:`MetricSpec.otel_name`
    (``retrybudget.operations``, ``retrybudget.wait.duration``…), with the labels as attributes.

    Args:
        meter: the meter to create instruments on (default: the global meter provider's
            ``"retrybudget"`` meter).

    Raises:
        ImportError: when ``opentelemetry-api`` is not installed, saying which extra to install.
    """

    def __init__(self, meter: Any = None) -> None:
        try:
            from opentelemetry import metrics  # noqa: PLC0415 - an optional extra, imported when used
        except ImportError as exc:
            raise ImportError(
                "OtelHook needs opentelemetry-api: pip install 'retrybudget[otel]'"
            ) from exc
        m = metrics.get_meter("retrybudget") if meter is None else meter
        self._instruments: dict[str, Any] = {}
        for spec in METRICS:
            if spec.kind == "counter":
                self._instruments[spec.name] = m.create_counter(
                    spec.otel_name, unit="1", description=spec.description)
            else:
                self._instruments[spec.name] = m.create_histogram(
                    spec.otel_name, unit="s", description=spec.description)

    def _add(self, name: str, value: float, labels: dict[str, str]) -> None:
        self._instruments[name].add(value, attributes=labels)

    def _observe(self, name: str, value: float, labels: dict[str, str]) -> None:
        self._instruments[name].record(value, attributes=labels)
