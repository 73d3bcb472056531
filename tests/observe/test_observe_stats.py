"""Per-operation stats, and global totals that are sums of them (contract rule 8, docs/design.md)."""

from __future__ import annotations

import json
import random
import threading
from typing import Any

import pytest

from retrybudget import FakeClock, Outcome, Policy, Reason, Retrier, WaitReason
from retrybudget.acceptance import load_cases, run_offline
from retrybudget.coordination import Coordinator
from retrybudget.core.actions import Permit, RequestInfo
from retrybudget.observe import StatsAggregator, operation_stats
from retrybudget.testing import ScriptedProvider

CASES = {c.id: c for c in load_cases()}


class Throttling(Coordinator):
    """Asks for a gate wait, then a pacing wait, before the first attempt; may refuse retries."""

    def __init__(self, *, refuse_retries: bool = False) -> None:
        self.permits = [Permit(2.0, WaitReason.GATE), Permit(0.5, WaitReason.PACING)]
        self.refuse_retries = refuse_retries

    def acquire(self, key: str, attempt: int) -> Permit:
        return self.permits.pop(0) if self.permits else Permit()

    def spend_retry(self, key: str) -> bool:
        return not self.refuse_retries


def run(script: list[dict[str, Any]], coordinator: Coordinator | None = None,
        hooks: tuple[object, ...] = ()) -> Outcome[Any]:
    clock = FakeClock()
    retrier = Retrier(policy=Policy(deadline=30.0), clock=clock, method="GET",
                      coordinator=coordinator or Coordinator(), random=random.Random(1),
                      hooks=hooks, job_id="job-7")
    return retrier.call(ScriptedProvider(script, clock))


def test_503_503_200_is_one_logical_operation_with_three_attempts() -> None:
    outcome = run_offline(CASES["A01"], clock=FakeClock()).outcome
    stats = operation_stats(outcome)
    assert stats["logical_operations"] == 1
    assert (stats["attempts"], stats["retries"], stats["outcome"]) == (3, 2, "ok")
    assert stats["job_id"] == "A01"
    assert [(w["reason"], w["source"], w["after_attempt"]) for w in stats["waits"]] == [
        ("backoff", "policy", 1), ("backoff", "policy", 2)]
    assert stats["retry_budget"] == {"decision": "granted", "retries_granted": 2}
    assert stats["breaker"] == {"decision": "admitted"}
    assert stats["gate"] == {"decision": "passed", "waits": 0, "seconds": 0.0}
    json.dumps(stats)  # JSON-ready


def test_a_breaker_rejection_is_one_operation_with_zero_attempts() -> None:
    stats = operation_stats(run_offline(CASES["A18"], clock=FakeClock()).outcome)
    assert (stats["logical_operations"], stats["attempts"]) == (1, 0)
    assert stats["breaker"] == {"decision": "rejected"}
    assert stats["retry_budget"]["decision"] == "not_asked"


def test_gate_and_pacing_waits_are_reported_with_their_seconds() -> None:
    stats = operation_stats(run([{"status": 200}], Throttling()))
    assert stats["gate"] == {"decision": "paused", "waits": 1, "seconds": 2.0}
    assert stats["pacing"] == {"decision": "delayed", "waits": 1, "seconds": 0.5}
    assert stats["concurrency"]["decision"] == "passed"
    assert [w["after_attempt"] for w in stats["waits"]] == [0, 0]


def test_retries_after_a_rate_limit_are_not_counted_as_budget_grants() -> None:
    script = [{"status": 429, "headers": {"retry-after": "1"}}, {"status": 503}, {"status": 200}]
    outcome = run(script, Throttling(refuse_retries=False))
    assert outcome.reason is Reason.OK
    stats = operation_stats(outcome)
    assert (stats["retries"], stats["retry_budget"]) == (2, {"decision": "granted",
                                                             "retries_granted": 1})
    only_throttled = operation_stats(run([{"status": 429, "headers": {"retry-after": "1"}},
                                          {"status": 200}], Throttling(refuse_retries=True)))
    assert only_throttled["outcome"] == "ok"
    assert only_throttled["retry_budget"] == {"decision": "not_asked", "retries_granted": 0}


def test_a_refused_retry_is_reported_as_the_budget_decision() -> None:
    outcome = run([{"status": 503}, {"status": 200}], Throttling(refuse_retries=True))
    assert outcome.reason is Reason.RETRY_BUDGET
    assert operation_stats(outcome)["retry_budget"] == {"decision": "refused",
                                                         "retries_granted": 0}


def test_the_url_in_stats_is_redacted() -> None:
    outcome = run([{"status": 200}])
    request = RequestInfo(url="https://me:pw@api.example.com/x?access_token=abc&page=2")
    assert operation_stats(outcome, request)["url"] == (
        "https://[REDACTED]@api.example.com/x?access_token=[REDACTED]&page=2")


def test_totals_are_sums_of_per_operation_stats() -> None:
    aggregator = StatsAggregator()
    outcomes = [run_offline(case, clock=FakeClock(), hooks=[aggregator]).outcome
                for case in CASES.values()]
    totals = aggregator.totals()
    assert totals["logical_operations"] == len(outcomes) == 18
    assert totals["attempts"] == sum(o.attempts for o in outcomes)
    assert totals["retries"] == sum(o.retries for o in outcomes)
    assert totals["waits"]["count"] == sum(len(o.waits) for o in outcomes)
    assert totals["waits"]["seconds"] == pytest.approx(sum(o.waited for o in outcomes))
    assert sum(totals["outcomes"].values()) == 18
    assert totals["outcomes"]["ok"] == sum(o.ok for o in outcomes)
    assert totals["breaker_rejections"] == 1
    assert aggregator.keys() == ["default"]
    assert aggregator.totals("default") == totals
    assert aggregator.totals("elsewhere")["logical_operations"] == 0
    aggregator.reset()
    assert aggregator.totals()["logical_operations"] == 0


def test_coordinator_waits_add_up() -> None:
    aggregator = StatsAggregator()
    for _ in range(3):
        run([{"status": 200}], Throttling(), hooks=(aggregator,))
    totals = aggregator.totals()
    assert (totals["gate_pauses"], totals["pacing_delays"]) == (3, 3)
    assert totals["waits"]["by_reason"]["gate"] == {"count": 3, "seconds": 6.0}
    assert totals["waits"]["by_source"]["coordinator"]["count"] == 6


def test_the_aggregator_is_exact_under_threads() -> None:
    aggregator = StatsAggregator()
    threads, per_thread = 8, 40

    def work() -> None:
        for _ in range(per_thread):
            run([{"status": 503}, {"status": 200}], hooks=(aggregator,))

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    totals = aggregator.totals()
    assert totals["logical_operations"] == threads * per_thread
    assert totals["attempts"] == 2 * threads * per_thread
    assert totals["outcomes"] == {"ok": threads * per_thread}
