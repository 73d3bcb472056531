"""Prometheus and OpenTelemetry metrics: real exposition, bounded labels, lazy imports."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from prometheus_client import CollectorRegistry, generate_latest

from retrybudget import FakeClock, Policy, Retrier, WaitReason
from retrybudget.acceptance import load_cases, run_offline
from retrybudget.coordination import Coordinator
from retrybudget.core.actions import AttemptResult, Permit, RequestInfo
from retrybudget.core.classify import ResponseSeen
from retrybudget.observe import METRICS, OtelHook, PrometheusHook

CASES = {c.id: c for c in load_cases()}
BOUNDED = {"key", "method", "outcome", "reason", "source", "state", "le"}


class Gate(Coordinator):
    def __init__(self) -> None:
        self.permits = [Permit(3.0, WaitReason.GATE), Permit(0.2, WaitReason.PACING)]

    def acquire(self, key: str, attempt: int) -> Permit:
        return self.permits.pop(0) if self.permits else Permit()


def exercise(hook: Any) -> list[Any]:
    """A01 (ok, 3 attempts), A02 (exhausted), A18 (breaker), a gated call, coordinator events."""
    outcomes = [run_offline(CASES[c], clock=FakeClock(), hooks=[hook]).outcome
                for c in ("A01", "A02", "A18")]
    clock = FakeClock()
    retrier = Retrier(policy=Policy(deadline=30), clock=clock, coordinator=Gate(), hooks=(hook,),
                      key="api.example.com")
    request = RequestInfo(key="api.example.com", url="https://api.example.com/x?token=abc")
    outcomes.append(retrier.run(lambda attempt: AttemptResult(ResponseSeen(200), "ok"), request))
    hook.breaker_transition("api.example.com", "open")
    hook.breaker_transition("api.example.com", "half-open")
    hook.breaker_transition("api.example.com", "closed")
    hook.coordinator_fallback("api.example.com")
    return outcomes


def test_prometheus_exposition() -> None:
    registry = CollectorRegistry()
    outcomes = exercise(PrometheusHook(registry))
    get = registry.get_sample_value
    ok = {"key": "default", "method": "GET", "outcome": "ok"}
    exhausted = {**ok, "outcome": "exhausted"}
    assert get("retrybudget_operations_total", ok) == 1
    assert get("retrybudget_attempts_total", ok) == 3
    assert get("retrybudget_attempts_total", exhausted) == 3
    assert get("retrybudget_operations_total", {**ok, "outcome": "circuit_open"}) == 1
    assert get("retrybudget_attempts_total", {**ok, "outcome": "circuit_open"}) == 0
    assert get("retrybudget_breaker_rejections_total", {"key": "default"}) == 1
    backoff = {"key": "default", "reason": "backoff", "source": "policy"}
    assert get("retrybudget_wait_seconds_count", backoff) == 4
    gated = {"key": "api.example.com"}
    assert get("retrybudget_gate_pauses_total", gated) == 1
    assert get("retrybudget_pacing_delays_total", gated) == 1
    assert get("retrybudget_wait_seconds_sum", {**gated, "reason": "gate",
                                                "source": "coordinator"}) == 3.0
    assert get("retrybudget_operations_total", {**gated, "method": "none", "outcome": "ok"}) == 1
    for state in ("open", "half_open", "closed"):
        assert get("retrybudget_breaker_transitions_total", {**gated, "state": state}) == 1
    assert get("retrybudget_coordinator_fallbacks_total", gated) == 1
    # global figures are sums of the per-operation counters
    total_ops = sum(s.value for m in registry.collect() if m.name == "retrybudget_operations"
                    for s in m.samples if s.name.endswith("_total"))
    total_attempts = sum(s.value for m in registry.collect() if m.name == "retrybudget_attempts"
                         for s in m.samples if s.name.endswith("_total"))
    assert (total_ops, total_attempts) == (len(outcomes), sum(o.attempts for o in outcomes))

    text = generate_latest(registry).decode()
    assert "retrybudget_operations_total{" in text
    assert "retrybudget_wait_seconds_bucket{" in text
    for outcome in outcomes:
        assert outcome.operation_id not in text
    assert "token" not in text
    assert "https://" not in text
    labels = {name for m in registry.collect() for s in m.samples for name in s.labels}
    assert labels <= BOUNDED


def test_every_metric_is_published_in_prometheus() -> None:
    registry = CollectorRegistry()
    PrometheusHook(registry)
    names = {m.name for m in registry.collect()}
    assert names == {f"retrybudget_{spec.name}" for spec in METRICS}


def test_unknown_breaker_states_are_refused() -> None:
    hook = PrometheusHook(CollectorRegistry())
    with pytest.raises(ValueError, match="unknown breaker state"):
        hook.breaker_transition("k", "ajar")


def test_opentelemetry_in_memory_reader() -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    outcomes = exercise(OtelHook(meter=provider.get_meter("test")))
    data = reader.get_metrics_data()
    assert data is not None
    points: dict[str, list[Any]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points.setdefault(metric.name, []).extend(metric.data.data_points)
    unused = {"retrybudget.concurrency.waits", "retrybudget.retry_budget.refusals"}
    assert set(points) == {spec.otel_name for spec in METRICS} - unused  # exported once used

    def value(name: str, **attributes: str) -> Any:
        (point,) = [p for p in points[name] if dict(p.attributes) == attributes]
        return point

    assert value("retrybudget.operations", key="default", method="GET", outcome="ok").value == 1
    assert value("retrybudget.attempts", key="default", method="GET",
                 outcome="exhausted").value == 3
    assert value("retrybudget.wait.duration", key="default", reason="backoff",
                 source="policy").count == 4
    assert value("retrybudget.breaker.transitions", key="api.example.com",
                 state="half_open").value == 1
    assert value("retrybudget.gate.pauses", key="api.example.com").value == 1
    assert sum(p.value for p in points["retrybudget.operations"]) == len(outcomes)
    attributes = {name for ps in points.values() for p in ps for name in p.attributes}
    assert attributes <= BOUNDED


def test_the_core_imports_without_the_extras() -> None:
    code = ("import sys, retrybudget, retrybudget.observe; "
            "assert 'prometheus_client' not in sys.modules; "
            "assert not any(m.startswith('opentelemetry') for m in sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(("hook", "module", "extra"), [
    (PrometheusHook, "prometheus_client", "retrybudget[prometheus]"),
    (OtelHook, "opentelemetry", "retrybudget[otel]"),
])
def test_a_missing_extra_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, hook: Any, module: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ImportError, match=extra.replace("[", r"\[").replace("]", r"\]")):
        hook()
