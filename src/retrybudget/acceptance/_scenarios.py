"""The rule scenarios: each rule of the contract that no acceptance case covers, over HTTP.

Each scenario plays against the sandbox through the httpx transport and returns a
:class:`~retrybudget.acceptance._lab.Verdict`: concurrent counters (R05), the breaker counting
operations (R06), workers sharing one gate (R07), audit records without secrets (R08) and
garbled rate-limit headers (R09).
"""

from __future__ import annotations

import secrets
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..coordination import BreakerConfig, CoordinationConfig, MemoryCoordinator
from ..core.profiles import get_profile
from ..observe import AuditHook, JsonlAuditSink, load_audit
from ._judge import Check
from ._lab import (
    DEADLINE_SLACK_S,
    RULES,
    Lab,
    Scenario,
    Sent,
    Verdict,
    overran,
    overrun_check,
    parallel,
    scenario_policy,
)

__all__ = ["SCENARIOS"]


def rule_counters(lab: Lab) -> Verdict:
    """R05: concurrent operations through one transport each count only their own attempts."""
    s = Scenario(lab, "R05")
    ok = {"status": 200, "body": {"available": True}}
    scripts: dict[str, list[dict[str, Any]]] = {
        "R05a": [{"status": 503}, ok], "R05b": [ok], "R05c": [{"status": 503}, {"status": 503}, ok],
    }
    urls = {name: s.fixture(name, script) for name, script in scripts.items()}
    policy = scenario_policy(lab)
    retrier = s.retrier(policy)
    names = list(urls)
    sents = parallel(lambda i: s.send(retrier, "GET", urls[names[i]], job_id=names[i]), len(names))
    seen = {name: len(s.arrivals(name)) for name in names}
    evidence: dict[str, Any] = {"requests_seen": seen}
    late = overran(sents)
    if late:
        return Verdict("R05", "concurrent operations each report their own attempts", RULES["R05"],
                       (overrun_check(late, lab.time_limit),), evidence)
    attempts = {name: sent.outcome.attempts for name, sent in zip(names, sents, strict=True)
                if sent.outcome is not None}
    evidence.update({"attempts": attempts,
                     "outcomes": {n: x.outcome.reason.value for n, x in zip(names, sents, strict=True)
                                  if x.outcome is not None}})
    checks = [
        Check("attempts_per_operation", "each operation's attempts == its own requests", attempts,
              attempts == seen),
        Check("logical_operations", "3 operations, 3 outcomes", len(attempts), len(attempts) == 3),
    ]
    return Verdict("R05", "concurrent operations each report their own attempts", RULES["R05"],
                   tuple(checks), s.evidence(evidence))


def rule_breaker(lab: Lab) -> Verdict:
    """R06: the breaker opens after 2 failed *operations*, not after 2 failed attempts."""
    title = "the breaker opens after 2 failed operations, not 2 failed attempts"
    s = Scenario(lab, "R06")
    url = s.fixture("R06", [{"status": 503}])
    config = CoordinationConfig(breaker=BreakerConfig(consecutive_failures=2, failure_ratio=None,
                                                      cool_down=60.0), retry_budget=None)
    coordinator = MemoryCoordinator(config, clock=s.clock)
    policy = scenario_policy(lab)
    retrier = s.retrier(policy, coordinator)
    sents: list[Sent] = []
    seen: list[int] = []
    for n in range(3):
        sents.append(s.send(retrier, "GET", url, job_id=f"R06-{n + 1}"))
        seen.append(len(s.arrivals("R06")) - sum(seen))
        if sents[-1].overrun:
            return Verdict("R06", title, RULES["R06"], (overrun_check(sents[-1], lab.time_limit),),
                           {"requests_seen_per_operation": seen})
    outcomes = [x.outcome.reason.value if x.outcome else None for x in sents]
    evidence = {"requests_seen_per_operation": seen, "outcomes": outcomes,
                "breaker_opened": coordinator.stats().breaker_opened}
    checks = [
        Check("second_operation_admitted", "operation 2 reaches the provider", seen[1], seen[1] > 0),
        Check("third_operation_refused", "operation 3: circuit_open, 0 requests",
              f"{outcomes[2]}, {seen[2]} requests", outcomes[2] == "circuit_open" and seen[2] == 0),
        Check("breaker_opened_once", 1, evidence["breaker_opened"], evidence["breaker_opened"] == 1),
    ]
    return Verdict("R06", title, RULES["R06"], tuple(checks), s.evidence(evidence))


def rule_coordination(lab: Lab) -> Verdict:
    """R07: workers sharing a coordinator keep to the provider's limit without a retry herd."""
    title = "4 workers share one gate: at most one throttled answer per worker, no herd"
    workers, per_worker = 4, 3
    limited = lab.limited
    assert limited is not None  # noqa: S101 - started by run_checklist for R07
    s = Scenario(lab, "R07")
    coordinator = MemoryCoordinator(clock=s.clock)
    policy = scenario_policy(lab, max_attempts=5, deadline=15.0, profile=get_profile("github"))
    run_header = {"X-Sandbox-Run": s.run_id}
    retrier = s.retrier(policy, coordinator)

    def worker(n: int) -> list[Sent]:
        paths = [f"/rentals/{n * per_worker + k + 1}/availability" for k in range(per_worker)]
        return [s.send(retrier, "GET", limited.url(path), headers=run_header) for path in paths]

    with ThreadPoolExecutor(max_workers=workers) as pool:
        sents = [x for batch in pool.map(worker, range(workers)) for x in batch]
    stats = limited.stats(s.run_id)
    throttled = sum(v for k, v in stats["by_status"].items() if k in ("403", "429"))
    outcomes = [x.outcome.reason.value if x.outcome else "overrun" for x in sents]
    evidence = {"operations": len(sents), "requests_seen": stats["count"], "throttled": throttled,
                "by_status": stats["by_status"], "busiest_window": stats["busiest_window"],
                "outcomes": {o: outcomes.count(o) for o in sorted(set(outcomes))}}
    late = overran(sents)
    if late:
        return Verdict("R07", title, RULES["R07"], (overrun_check(late, lab.time_limit),), evidence)
    accounted = all(o == "ok" or (o == "rate_limited" and x.outcome is not None
                                  and x.outcome.retry_at is not None)
                    for o, x in zip(outcomes, sents, strict=True))
    checks = [
        Check("no_retry_herd", f"throttled answers <= workers ({workers})", throttled,
              throttled <= workers),
        Check("every_operation_accounted", "ok, or rate_limited with retry_at", evidence["outcomes"],
              accounted),
        Check("requests_bounded", f"requests <= operations + workers ({len(sents) + workers})",
              stats["count"], stats["count"] <= len(sents) + workers),
    ]
    return Verdict("R07", title, RULES["R07"], tuple(checks), s.evidence(evidence))


def rule_audit(lab: Lab) -> Verdict:
    """R08: an audit record names everything a reviewer needs and no secret."""
    title = "audit records carry ids, redacted URL, attempts and outcome, and no secret"
    s = Scenario(lab, "R08")
    token, key, query_token = (secrets.token_hex(16) for _ in range(3))
    url = s.fixture("R08", [{"status": 503}, {"status": 200, "body": {"available": True}}])
    url = f"{url}?access_token={query_token}&page=2"
    headers = {"Authorization": f"Bearer {token}", "X-Api-Key": key, "Cookie": f"session={token}"}
    policy = scenario_policy(lab)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "audit.jsonl"
        with JsonlAuditSink(path) as sink:
            hook = AuditHook(sink, policy=policy, clock=s.clock)
            sent = s.send(s.retrier(policy, hooks=(hook,), job_id="R08"), "GET", url,
                          headers=headers, job_id="R08")
        text = path.read_text("utf-8")
        records = load_audit(path).records
    if sent.overrun:
        return Verdict("R08", title, RULES["R08"], (overrun_check(sent, lab.time_limit),), {})
    leaked = [name for name, value in (("bearer token", token), ("api key", key),
                                       ("query token", query_token)) if value in text]
    record = records[0] if records else {}
    needed = ("operation_id", "job_id", "method", "url", "history", "outcome", "reviewer_decision")
    missing = [n for n in needed if n not in record or (record[n] is None and n != "reviewer_decision")]
    evidence = {"records": len(records), "url": record.get("url"), "outcome": record.get("outcome"),
                "attempt_statuses": [a.get("status") for a in record.get("history", [])]}
    checks = [
        Check("no_secret", "no header value or token in the audit file", leaked or "none found",
              not leaked),
        Check("fields_present", list(needed), missing or "all present", not missing),
        Check("one_record_per_operation", 1, len(records), len(records) == 1),
    ]
    return Verdict("R08", title, RULES["R08"], tuple(checks), evidence)


def rule_bad_headers(lab: Lab) -> Verdict:
    """R09: negative, huge and garbled rate-limit headers neither crash nor unbound a wait."""
    title = "negative, huge and garbled rate-limit headers stay bounded"
    s = Scenario(lab, "R09")
    ok = {"status": 200, "body": {"available": True}}
    scripts: dict[str, list[dict[str, Any]]] = {
        "R09a": [{"status": 429, "headers": {"Retry-After": "-5"}}, ok],
        "R09b": [{"status": 429, "headers": {"Retry-After": "99999999999999999999"}}, ok],
        "R09c": [{"status": 503, "headers": {"x-ratelimit-reset": "soon", "Retry-After": "1e999"}}, ok],
    }
    urls = {name: s.fixture(name, script) for name, script in scripts.items()}
    policy = scenario_policy(lab, deadline=3.0)
    retrier = s.retrier(policy)
    names = list(urls)
    sents = parallel(lambda i: s.send(retrier, "GET", urls[names[i]]), len(names))
    outcomes = {n: (x.outcome.reason.value, round(x.outcome.elapsed, 3)) if x.outcome else None
                for n, x in zip(names, sents, strict=True)}
    evidence = {"outcomes": outcomes, "requests_seen": {n: len(s.arrivals(n)) for n in names}}
    late = overran(sents)
    if late:
        return Verdict("R09", title, RULES["R09"], (overrun_check(late, lab.time_limit),), evidence)
    deadline = policy.deadline
    bounded = all(x.outcome is not None and (deadline is None
                                             or x.outcome.elapsed <= deadline + DEADLINE_SLACK_S)
                  for x in sents)
    checks = [
        Check("no_crash", "every operation ends with an outcome",
              sum(x.outcome is not None for x in sents), all(x.outcome is not None for x in sents)),
        Check("within_deadline", f"each ends within the deadline ({deadline})", outcomes, bounded),
    ]
    return Verdict("R09", title, RULES["R09"], tuple(checks), s.evidence(evidence))


SCENARIOS: dict[str, Callable[[Lab], Verdict]] = {
    "R05": rule_counters, "R06": rule_breaker, "R07": rule_coordination, "R08": rule_audit,
    "R09": rule_bad_headers,
}
"""Each rule scenario by id."""
