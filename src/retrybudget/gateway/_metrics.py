"""The gateway's Prometheus metrics, in a registry of its own (one per app).

The registry holds two families: the library's operation metrics
(:class:`~retrybudget.observe.PrometheusHook`: ``retrybudget_operations_total``,
``retrybudget_attempts_total``, waits, breaker rejections…, each a sum of per-operation
counters, contract rule 8), the gateway's own answers by route, status and code, with
their latency from the request's arrival, and the door: how long requests waited before it
admitted or shed them, and how many it shed.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

from ..observe import PrometheusHook
from ._answers import Answer
from ._door import Admitted, Shed

__all__ = ["CONTENT_TYPE", "GatewayMetrics"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
"""The media type of :meth:`GatewayMetrics.render`."""

_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 2.5, 5.0)


class GatewayMetrics:
    """The metrics of one gateway app.

    Attributes:
        registry: the app's own registry (served by ``/metrics``).
        hook: the library's metrics hook on the same registry (give it to the retrier).
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        r = self.registry
        self.hook = PrometheusHook(r)
        self.responses = Counter(
            "retrybudget_gateway_responses", "Answers by route, HTTP status and problem code.",
            ["route", "status", "code"], registry=r)
        self.reservations = Counter(
            "retrybudget_gateway_reservations",
            "Reservation answers: committed, replayed, unconfirmed, declined, refused.",
            ["result"], registry=r)
        self.stored_served = Counter(
            "retrybudget_gateway_stored_facts_served",
            "Failure answers that carried a labelled stored fact.", registry=r)
        self.latency = Histogram(
            "retrybudget_gateway_request_duration_seconds", "Time to answer, by route.",
            ["route"], buckets=_BUCKETS, registry=r)
        self.shed = Counter(
            "retrybudget_gateway_shed",
            "Requests answered 503 gateway_overloaded at once: capacity (too many operations "
            "in flight) or budget (too little of the deadline left).", ["reason"], registry=r)
        self.waited = Histogram(
            "retrybudget_gateway_admission_wait_seconds",
            "Time from a request's arrival to the door's verdict (paid out of its deadline).",
            buckets=_BUCKETS, registry=r)

    def admitted(self, verdict: Admitted | Shed) -> None:
        """Count one verdict of the door."""
        self.waited.observe(verdict.waited)
        if isinstance(verdict, Shed):
            self._child(self.shed, verdict.reason).inc()

    def _child(self, family: Any, *labels: str) -> Any:
        """``family.labels(*labels)``, looked up once (an overloaded gateway counts a lot)."""
        key = (id(family), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = family.labels(*labels)
        return child

    def observe(self, route: str, answer: Answer, elapsed: float) -> None:
        """Count one answer of ``route`` that took ``elapsed`` seconds."""
        self._child(self.responses, route, str(answer.response.status_code),
                    answer.code or "").inc()
        result = answer.fields.get("reservation")
        if result:
            self.reservations.labels(result).inc()
        if answer.fields.get("stored"):
            self.stored_served.inc()
        self._child(self.latency, route).observe(elapsed)

    def render(self) -> bytes:
        """The exposition text of every metric in the registry."""
        return generate_latest(self.registry)
