"""The review report's checklist: each check (:data:`CHECKS`) read from the audit records
record by record into findings, and the findings of a check summarised.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.headers import parse_rate_limit_headers
from ..core.policy import SAFE_METHODS
from ._report_records import Builder, Rec, at, items, number

__all__ = ["CHECKERS", "CHECKS", "DEFAULT_TOLERANCE", "finding", "successes_after_failure", "summarise"]

CHECKS: dict[str, str] = {
    "Retry-After obeyed":
        "after a response carrying a valid Retry-After, the next attempt starts no earlier than "
        "the time it names; an operation that stops instead reports a retry_at no earlier",
    "exhausted budget stops":
        "an operation that used its attempts (or was refused a retry by the shared budget) "
        "stops with a failure, never exceeds max_attempts, and makes no further attempt",
    "authorization failure not retried":
        "a 401/403/407 classified as rejected ends the operation at that attempt with outcome "
        "rejected; no further attempt",
    "no fabricated completion after final failure":
        "an operation is reported ok only when its last attempt got a valid 2xx; a failed "
        "operation carries no value; no success is recorded for an operation after its final "
        "failure",
    "writes not replayed":
        "a write (a method the policy does not treat as idempotent) is sent again only when the "
        "earlier attempt never reached the provider (connect failure) or it carries an "
        "idempotency key and the policy allows keyed retries",
    "deadline kept":
        "the operation's elapsed time, waits included, does not exceed the policy's deadline",
}
"""The checklist: each check's name and the behaviour it expects."""

DEFAULT_TOLERANCE = 0.001
"""Seconds of slack when comparing recorded times (rounding, wall/monotonic drift)."""

_AUTH_STATUSES = (401, 403, 407)

def finding(source: dict[str, Any], expected: str, actual: str, status: str) -> dict[str, Any]:
    """One finding of a check: its source, the behaviour expected and seen, its status."""
    return {"source": source, "expected": expected, "actual": actual, "status": status}


def _retry_after(rec: Rec, out: Builder, tol: float) -> list[dict[str, Any]]:
    findings = []
    history = rec.history
    started_at = number(rec.data.get("started_at"))
    for i, attempt in enumerate(history):
        if attempt.get("classification") not in ("rate_limited", "transient"):
            continue
        pairs = [tuple(p) for p in items(attempt.get("evidence"))
                 if isinstance(p, (list, tuple)) and len(p) == 2]
        n = attempt.get("number")
        a_started, a_elapsed = number(attempt.get("started")), number(attempt.get("elapsed"))
        if a_started is None or a_elapsed is None:
            continue
        answered = a_started + a_elapsed
        response_wall = None if started_at is None else started_at + answered
        hint = parse_rate_limit_headers(pairs, response_wall or 0.0).retry_after
        if hint is None:
            continue  # no Retry-After, or one the core rightly ignored as invalid
        source = rec.ref(f"evidence.{hint.source}", n if isinstance(n, int) else None)
        try:
            float(hint.raw)
        except ValueError:
            if response_wall is None:
                out.lack(rec.ref("started_at"), "needed to time an HTTP-date Retry-After")
                findings.append(finding(source, f"no attempt before Retry-After {hint.raw}",
                                         "cannot be timed without started_at",
                                         "insufficient_evidence"))
                continue
        expected = (f"no attempt sooner than {hint.delay:.3f}s after attempt {n}'s response "
                    f"(Retry-After: {hint.raw})")
        if i + 1 < len(history):
            following = history[i + 1]
            next_started = number(following.get("started"))
            if next_started is None:
                continue
            gap = next_started - answered
            status = "pass" if gap + tol >= hint.delay else "fail"
            findings.append(finding(source, expected, f"attempt {following.get('number')} "
                                     f"started {gap:.3f}s after it", status))
            continue
        retry_at = number(rec.data.get("retry_at"))
        actual = f"no further attempt; outcome {rec.outcome}; retry_at {at(retry_at)}"
        status = "pass"
        if (rec.outcome != "ok" and retry_at is not None and response_wall is not None
                and retry_at + tol < response_wall + hint.delay):
            status = "fail"
            actual += " is earlier than the Retry-After time"
        findings.append(finding(source, expected, actual, status))
    return findings


def _budget(rec: Rec, out: Builder, tol: float) -> list[dict[str, Any]]:
    attempts = rec.data.get("attempts")
    limit = rec.policy("max_attempts")
    counted = isinstance(attempts, int) and isinstance(limit, int)
    spent = counted and attempts >= limit
    overrun = counted and attempts > limit
    if rec.outcome not in ("exhausted", "retry_budget") and not spent:
        return []
    if rec.outcome == "ok" and not overrun:
        return []  # success on the last allowed attempt: the budget held
    history = rec.history
    last = history[-1] if history else {}
    problems = []
    if overrun:
        problems.append(f"{attempts} attempts exceed max_attempts {limit}")
    if isinstance(attempts, int) and attempts != len(history):
        problems.append(f"attempts says {attempts} but {len(history)} are recorded")
    if history and last.get("decision") != "stop":
        problems.append(f"the last attempt's decision is {last.get('decision')!r}, not stop")
    actual = f"outcome {rec.outcome} after {attempts} attempt(s) (max_attempts {limit})"
    if problems:
        actual += "; " + "; ".join(problems)
        status = "fail"
    elif limit is None:
        status = "insufficient_evidence"
    else:
        status = "pass"
    return [finding(rec.ref("attempts"), CHECKS["exhausted budget stops"], actual, status)]


def _authorization(rec: Rec, out: Builder, tol: float) -> list[dict[str, Any]]:
    findings = []
    history = rec.history
    for i, attempt in enumerate(history):
        status = attempt.get("status")
        if status not in _AUTH_STATUSES or attempt.get("classification") != "rejected":
            continue
        later = len(history) - i - 1
        actual = (f"decision {attempt.get('decision')}; {later} later attempt(s); "
                  f"outcome {rec.outcome}")
        ok = attempt.get("decision") == "stop" and later == 0 and rec.outcome == "rejected"
        n = attempt.get("number")
        findings.append(finding(rec.ref("status", n if isinstance(n, int) else None),
                                 f"{status} ends the operation as rejected at this attempt",
                                 actual, "pass" if ok else "fail"))
    return findings


def _completion(rec: Rec, out: Builder, tol: float) -> list[dict[str, Any]]:
    history = rec.history
    if rec.outcome == "ok":
        last = history[-1] if history else None
        good = (last is not None and last.get("classification") == "ok"
                and last.get("decision") == "stop")
        seen = ("no attempt" if last is None else
                f"last attempt {last.get('number')} classified {last.get('classification')}")
        return [finding(rec.ref("outcome"), "ok only after a valid 2xx on the last attempt",
                         f"outcome ok; {seen}", "pass" if good else "fail")]
    carried = rec.data.get("has_value") is True
    actual = f"outcome {rec.outcome}; " + ("a value was delivered" if carried else "no value")
    return [finding(rec.ref("has_value"), "a failed operation delivers no value", actual,
                     "fail" if carried else "pass")]


def _writes(rec: Rec, out: Builder, tol: float) -> list[dict[str, Any]]:
    method = rec.data.get("method")
    if not isinstance(method, str):
        return []
    declared = rec.policy("idempotent_methods")
    safe = set(declared) if isinstance(declared, list) else set(SAFE_METHODS)
    if method.upper() in safe:
        return []
    keyed = rec.data.get("idempotency_key") is True
    allows_keyed = rec.policy("retry_writes_with_key")
    findings = []
    for attempt in rec.history:
        if attempt.get("decision") != "retry":
            continue
        n = attempt.get("number")
        unsent = attempt.get("sent") is False or (
            "sent" not in attempt and str(attempt.get("detail", "")).startswith("connect failure")
        )
        if unsent or (keyed and allows_keyed is True):
            status, why = "pass", ("never sent (connect failure)" if unsent
                                   else "idempotency key, keyed retries allowed")
        elif (keyed and allows_keyed is None) or (declared is None and method.upper() in
                                                  ("PUT", "DELETE")):
            status, why = "insufficient_evidence", "the policy's write rules are not recorded"
        else:
            status, why = "fail", "the write was sent again"
        findings.append(finding(rec.ref("decision", n if isinstance(n, int) else None),
                                 f"{method} attempt {n} is not replayed", f"retried: {why}",
                                 status))
    if not findings:
        findings.append(finding(rec.ref("attempts"), f"{method} is sent at most once",
                                 f"{rec.data.get('attempts')} attempt(s); no retry",
                                 "pass"))
    return findings


def _deadline(rec: Rec, out: Builder, tol: float) -> list[dict[str, Any]]:
    elapsed = number(rec.data.get("elapsed"))
    if not rec.policy_known:
        return [finding(rec.ref("policy.deadline"), CHECKS["deadline kept"],
                         "the record does not carry the policy's deadline",
                         "insufficient_evidence")]
    deadline = number(rec.policy("deadline"))
    if deadline is None or elapsed is None:
        return []
    status = "pass" if elapsed <= deadline + tol else "fail"
    return [finding(rec.ref("elapsed"), f"elapsed <= deadline {deadline:.3f}s",
                     f"elapsed {elapsed:.3f}s", status)]


CHECKERS = {
    "Retry-After obeyed": _retry_after,
    "exhausted budget stops": _budget,
    "authorization failure not retried": _authorization,
    "no fabricated completion after final failure": _completion,
    "writes not replayed": _writes,
    "deadline kept": _deadline,
}


def successes_after_failure(recs: Sequence[Rec]) -> list[tuple[Rec, Rec, str]]:
    """For each failed record, the first later ok record with its operation id, and the first
    later ok record of another operation with its job id: ``(failure, success, field)``.

    A job a reviewer decided to retry is run again as a new operation: its later success
    under the same job id is the retry that was decided, not a conflict."""
    ok_at: dict[tuple[str, str], list[int]] = {}
    for rec in recs:
        if rec.outcome == "ok":
            for field, value in (("operation_id", rec.op), ("job_id", rec.job)):
                if value is not None:
                    ok_at.setdefault((field, value), []).append(rec.index)
    pairs: list[tuple[Rec, Rec, str]] = []
    for failed in recs:
        if failed.outcome in (None, "ok"):
            continue
        for field, value in (("operation_id", failed.op), ("job_id", failed.job)):
            indices = ok_at.get((field, value), []) if value is not None else []
            later = (recs[i] for i in indices[bisect.bisect_right(indices, failed.index):])
            if field == "job_id":
                if _retried(failed):
                    continue
                later = (r for r in later if r.op != failed.op)
            first = next(later, None)
            if first is not None:
                pairs.append((failed, first, field))
    return pairs


def _retried(rec: Rec) -> bool:
    """Whether a reviewer decided to retry the operation ``rec`` records."""
    decision = rec.data.get("reviewer_decision")
    return isinstance(decision, Mapping) and decision.get("decision") == "retry"


def summarise(name: str, findings: list[dict[str, Any]]) -> dict[str, Any]:
    """The check ``name``'s result from its findings: ``not_applicable`` with none, else
    its worst status, what each finding that did not pass saw, and their sources."""
    statuses = [f["status"] for f in findings]
    if not findings:
        status, actual = "not_applicable", "no record exercises this check"
    else:
        status = next((s for s in ("fail", "insufficient_evidence") if s in statuses), "pass")
        counts = ", ".join(f"{statuses.count(s)} {s}" for s in
                           ("pass", "fail", "insufficient_evidence") if s in statuses)
        actual = f"{len(findings)} finding(s): {counts}"
        failing = [f"record {f['source']['record']}: {f['actual']}" for f in findings
                   if f["status"] != "pass"]
        if failing:
            actual += " — " + "; ".join(failing)
    return {"check": name, "expected": CHECKS[name], "actual": actual, "status": status,
            "evidence": [f["source"] for f in findings], "findings": findings}
