"""The review report: what the audit records show, checked against the acceptance checklist.

:func:`review_report` is deterministic application code (no language model): it reads
audit records and returns a JSON object with exactly the keys in :data:`REPORT_KEYS`.

- ``observed_facts``: every fact names its source (record index, file line when known,
  operation id, job id, attempt number and field); a null value is also listed in
- ``missing_inputs``, with records that fail the schema and unreadable file lines;
- ``proposed_steps``: steps for a person to take, each ``"status": "proposed"``; the
  report never says a step ran, and review cases name their conflicting fields;
- ``validation_results``: one entry per :data:`CHECKS` item, with expected and actual
  behaviour, evidence and ``pass`` / ``fail`` / ``not_applicable`` (no record exercises
  it) / ``insufficient_evidence`` (a record exercises it but lacks a needed field);
- ``review_required``: True when evidence conflicts, a check fails or cannot be decided,
  or a record breaks the schema or a file line is unreadable (a null field alone does not
  require review);
- ``draft_explanation``: a plain-text summary that calls an operation completed only
  when its record says ``ok``.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..core.headers import parse_rate_limit_headers
from ..core.policy import SAFE_METHODS
from ._audit import AuditLog
from ._schema import validate_audit_record

__all__ = ["CHECKS", "DECISIONS", "REPORT_KEYS", "review_report"]

REPORT_KEYS = (
    "observed_facts",
    "missing_inputs",
    "proposed_steps",
    "validation_results",
    "review_required",
    "draft_explanation",
)
"""The report's keys, exactly these and in this order."""

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
_COORDINATOR_REASONS = ("gate", "pacing", "concurrency")
_STEPS: dict[str, str] = {
    "rate_limited": "Run {who} again as a new operation no earlier than {retry_at}; "
                    "do not retry before that time.",
    "exhausted": "Report {who} as provider unavailable; a later run starts a new operation "
                 "with a fresh budget.",
    "deadline": "Report {who} as provider unavailable (the deadline left no room); a later run "
                "starts a new operation with a fresh budget.",
    "circuit_open": "Report {who} as provider unavailable; try again as a new operation after "
                    "the breaker for key {key} closes.",
    "retry_budget": "Report {who} as provider unavailable; the shared retry budget for key {key} "
                    "was spent, so wait for it to refill before a new operation.",
    "rejected": "Correct the request, credentials or permissions for {who} (key {key}) before "
                "any new attempt; it is not retried automatically.",
    "not_found": "Treat the record requested by {who} as missing; it is not retried.",
    "invalid_payload": "Inspect the provider's payload for {who}; the response was not used as "
                       "a success and is not retried.",
    "unexpected": "Investigate the provider's answer to {who}, which is outside the contract; "
                  "it is not retried.",
    "not_retried": "Reconcile the write of {who} with the provider (read its state, or resend "
                   "with an idempotency key) before sending it again; it was not replayed.",
}


@dataclass(frozen=True, slots=True)
class _Rec:
    index: int
    line: int | None
    data: Mapping[str, Any]

    @property
    def op(self) -> str | None:
        value = self.data.get("operation_id")
        return value if isinstance(value, str) else None

    @property
    def job(self) -> str | None:
        value = self.data.get("job_id")
        return value if isinstance(value, str) else None

    @property
    def outcome(self) -> str | None:
        value = self.data.get("outcome")
        return value if isinstance(value, str) else None

    @property
    def history(self) -> list[Mapping[str, Any]]:
        return [a for a in _items(self.data.get("history")) if isinstance(a, Mapping)]

    def policy(self, name: str) -> Any:
        """A policy field, or None when the policy (or the field) is unknown."""
        policy = self.data.get("policy")
        return policy.get(name) if isinstance(policy, Mapping) else None

    @property
    def policy_known(self) -> bool:
        """True when the record carries the policy's limits, not just its name."""
        return self.policy("max_attempts") is not None

    def who(self) -> str:
        job = f", job {self.job}" if self.job is not None else ""
        return f"operation {self.op}{job} (record {self.index})"

    def ref(self, field: str | None = None, attempt: int | None = None) -> dict[str, Any]:
        return {"record": self.index, "line": self.line, "operation_id": self.op,
                "job_id": self.job, "attempt": attempt, "field": field}


def _items(value: object) -> list[Any]:
    """A list field's items; anything else (a malformed record) has none."""
    return value if isinstance(value, list) else []


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _at(epoch: object) -> str:
    seconds = _number(epoch)
    if seconds is None:
        return "a time the records do not name"
    try:
        stamp = datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat()
    except (OverflowError, OSError, ValueError):
        return f"epoch {seconds:.3f}"
    return f"{stamp} (epoch {seconds:.3f})"


class _Builder:
    """Collects facts and missing inputs, each with its source."""

    def __init__(self) -> None:
        self.facts: list[dict[str, Any]] = []
        self.missing: list[dict[str, Any]] = []
        self.malformed = 0
        self._seen: set[tuple[object, ...]] = set()

    def fact(self, rec: _Rec, field: str, value: object, attempt: int | None = None) -> None:
        self.facts.append({"source": rec.ref(field, attempt), "value": value})
        if value is None:
            self.lack(rec.ref(field, attempt), "not recorded (null)")

    def lack(self, source: dict[str, Any], reason: str, *, malformed: bool = False) -> None:
        seen = (*source.values(), reason)
        if seen not in self._seen:
            self._seen.add(seen)
            self.missing.append({"source": source, "reason": reason})
            self.malformed += malformed


_RECORD_FIELDS = ("job_id", "method", "url", "key", "idempotency_key", "outcome", "attempts",
                  "logical_operations", "elapsed", "has_value")
_POLICY_FIELDS = ("name", "max_attempts", "deadline", "rate_limit")


def _observe(rec: _Rec, out: _Builder) -> None:
    data = rec.data
    for field in _RECORD_FIELDS:
        out.fact(rec, field, data.get(field))
    for field in _POLICY_FIELDS:
        value = rec.policy(field)
        if field != "deadline" or not rec.policy_known:
            out.fact(rec, f"policy.{field}", value)
        elif value is not None:  # a known policy with a null deadline has no deadline
            out.fact(rec, "policy.deadline", value)
    if rec.outcome != "ok":
        out.fact(rec, "retry_at", data.get("retry_at"))
    for k, text in enumerate(_items(data.get("conflicts"))):
        out.fact(rec, f"conflicts[{k}]", text)
    if data.get("reviewer_decision") is not None:
        out.fact(rec, "reviewer_decision", data.get("reviewer_decision"))
    for attempt in rec.history:
        n = attempt.get("number")
        number = n if isinstance(n, int) else None
        if attempt.get("status") is None and attempt.get("error") is not None:
            out.fact(rec, "error", attempt.get("error"), number)
        else:
            out.fact(rec, "status", attempt.get("status"), number)
        for field in ("started", "classification", "decision"):
            out.fact(rec, field, attempt.get(field), number)
        if attempt.get("decision") == "retry":
            for field in ("wait", "wait_reason", "wait_source"):
                out.fact(rec, field, attempt.get(field), number)
        for pair in _items(attempt.get("evidence")):
            if isinstance(pair, (list, tuple)) and len(pair) == 2:
                out.fact(rec, f"evidence.{pair[0]}", pair[1], number)
    for k, wait in enumerate(_items(data.get("waits"))):
        if isinstance(wait, Mapping) and wait.get("reason") in _COORDINATOR_REASONS:
            out.fact(rec, f"waits[{k}]", dict(wait))


# Checks ------------------------------------------------------------------------------------


def _finding(source: dict[str, Any], expected: str, actual: str, status: str) -> dict[str, Any]:
    return {"source": source, "expected": expected, "actual": actual, "status": status}


def _retry_after(rec: _Rec, out: _Builder, tol: float) -> list[dict[str, Any]]:
    findings = []
    history = rec.history
    started_at = _number(rec.data.get("started_at"))
    for i, attempt in enumerate(history):
        if attempt.get("classification") not in ("rate_limited", "transient"):
            continue
        pairs = [tuple(p) for p in _items(attempt.get("evidence"))
                 if isinstance(p, (list, tuple)) and len(p) == 2]
        n = attempt.get("number")
        a_started, a_elapsed = _number(attempt.get("started")), _number(attempt.get("elapsed"))
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
                findings.append(_finding(source, f"no attempt before Retry-After {hint.raw}",
                                         "cannot be timed without started_at",
                                         "insufficient_evidence"))
                continue
        expected = (f"no attempt sooner than {hint.delay:.3f}s after attempt {n}'s response "
                    f"(Retry-After: {hint.raw})")
        if i + 1 < len(history):
            following = history[i + 1]
            next_started = _number(following.get("started"))
            if next_started is None:
                continue
            gap = next_started - answered
            status = "pass" if gap + tol >= hint.delay else "fail"
            findings.append(_finding(source, expected, f"attempt {following.get('number')} "
                                     f"started {gap:.3f}s after it", status))
            continue
        retry_at = _number(rec.data.get("retry_at"))
        actual = f"no further attempt; outcome {rec.outcome}; retry_at {_at(retry_at)}"
        status = "pass"
        if (rec.outcome != "ok" and retry_at is not None and response_wall is not None
                and retry_at + tol < response_wall + hint.delay):
            status = "fail"
            actual += " is earlier than the Retry-After time"
        findings.append(_finding(source, expected, actual, status))
    return findings


def _budget(rec: _Rec, out: _Builder, tol: float) -> list[dict[str, Any]]:
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
    return [_finding(rec.ref("attempts"), CHECKS["exhausted budget stops"], actual, status)]


def _authorization(rec: _Rec, out: _Builder, tol: float) -> list[dict[str, Any]]:
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
        findings.append(_finding(rec.ref("status", n if isinstance(n, int) else None),
                                 f"{status} ends the operation as rejected at this attempt",
                                 actual, "pass" if ok else "fail"))
    return findings


def _completion(rec: _Rec, out: _Builder, tol: float) -> list[dict[str, Any]]:
    history = rec.history
    if rec.outcome == "ok":
        last = history[-1] if history else None
        good = (last is not None and last.get("classification") == "ok"
                and last.get("decision") == "stop")
        seen = ("no attempt" if last is None else
                f"last attempt {last.get('number')} classified {last.get('classification')}")
        return [_finding(rec.ref("outcome"), "ok only after a valid 2xx on the last attempt",
                         f"outcome ok; {seen}", "pass" if good else "fail")]
    carried = rec.data.get("has_value") is True
    actual = f"outcome {rec.outcome}; " + ("a value was delivered" if carried else "no value")
    return [_finding(rec.ref("has_value"), "a failed operation delivers no value", actual,
                     "fail" if carried else "pass")]


def _writes(rec: _Rec, out: _Builder, tol: float) -> list[dict[str, Any]]:
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
        findings.append(_finding(rec.ref("decision", n if isinstance(n, int) else None),
                                 f"{method} attempt {n} is not replayed", f"retried: {why}",
                                 status))
    if not findings:
        findings.append(_finding(rec.ref("attempts"), f"{method} is sent at most once",
                                 f"{rec.data.get('attempts')} attempt(s); no retry",
                                 "pass"))
    return findings


def _deadline(rec: _Rec, out: _Builder, tol: float) -> list[dict[str, Any]]:
    elapsed = _number(rec.data.get("elapsed"))
    if not rec.policy_known:
        return [_finding(rec.ref("policy.deadline"), CHECKS["deadline kept"],
                         "the record does not carry the policy's deadline",
                         "insufficient_evidence")]
    deadline = _number(rec.policy("deadline"))
    if deadline is None or elapsed is None:
        return []
    status = "pass" if elapsed <= deadline + tol else "fail"
    return [_finding(rec.ref("elapsed"), f"elapsed <= deadline {deadline:.3f}s",
                     f"elapsed {elapsed:.3f}s", status)]


_CHECKERS = {
    "Retry-After obeyed": _retry_after,
    "exhausted budget stops": _budget,
    "authorization failure not retried": _authorization,
    "no fabricated completion after final failure": _completion,
    "writes not replayed": _writes,
    "deadline kept": _deadline,
}


def _later_success(recs: Sequence[_Rec]) -> list[tuple[_Rec, _Rec, str]]:
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
    pairs: list[tuple[_Rec, _Rec, str]] = []
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


def _retried(rec: _Rec) -> bool:
    """Whether a reviewer decided to retry the operation ``rec`` records."""
    decision = rec.data.get("reviewer_decision")
    return isinstance(decision, Mapping) and decision.get("decision") == "retry"


def _summarise(name: str, findings: list[dict[str, Any]]) -> dict[str, Any]:
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


# Review cases and steps --------------------------------------------------------------------


def _step(action: str, description: str, evidence: list[dict[str, Any]],
          conflicting_fields: Sequence[str] = ()) -> dict[str, Any]:
    return {"action": action, "description": description, "evidence": evidence,
            "conflicting_fields": list(conflicting_fields), "status": "proposed"}


def _review_cases(recs: Sequence[_Rec],
                  later_successes: list[tuple[_Rec, _Rec, str]]) -> list[dict[str, Any]]:
    cases = []
    for rec in recs:
        for k, text in enumerate(_items(rec.data.get("conflicts"))):
            head, sep, _ = str(text).partition(":")
            fields = head.split("+") if sep and head else ["conflicts"]
            cases.append(_step(
                "review_case",
                f"The evidence in {rec.who()} disagrees ({text}); a reviewer decides which "
                "field to trust and records it in reviewer_decision.",
                [rec.ref(f"conflicts[{k}]")], fields))
        for attempt in rec.history:
            status = attempt.get("status")
            if (isinstance(status, int) and 200 <= status < 300
                    and attempt.get("classification") == "invalid_payload"):
                n = attempt.get("number")
                cases.append(_step(
                    "review_case",
                    f"Attempt {n} of {rec.who()} got status {status} but its payload failed "
                    "validation; it was not used as a success. A reviewer decides whether the "
                    "provider or the validator is wrong.",
                    [rec.ref("status", n), rec.ref("classification", n)],
                    ["status", "classification"]))
    for failed, later, field in later_successes:
        cases.append(_step(
            "review_case",
            f"Record {later.index} says ok for the same {field} after {failed.who()} ended "
            f"{failed.outcome}; a reviewer decides which record is true before anything is "
            "treated as completed.",
            [failed.ref("outcome"), later.ref("outcome")], ["outcome", field]))
    return cases


def _record_steps(rec: _Rec) -> list[dict[str, Any]]:
    template = _STEPS.get(rec.outcome or "")
    if template is None:
        return []
    text = template.format(who=rec.who(), key=rec.data.get("key"),
                           retry_at=_at(rec.data.get("retry_at")))
    return [_step(f"follow_up_{rec.outcome}", text, [rec.ref("outcome")])]


def _explain(recs: Sequence[_Rec], checks: list[dict[str, Any]], review: bool,
             cases: int, malformed: int) -> str:
    ok = [r for r in recs if r.outcome == "ok"]
    failed = [r for r in recs if r.outcome != "ok"]
    operations = len({r.op for r in recs if r.op is not None})
    lines = [f"{len(recs)} audit record(s) for {operations} operation(s): {len(ok)} completed "
             f"with outcome ok, {len(failed)} did not complete."]
    for rec in recs:
        verdict = "completed" if rec.outcome == "ok" else "did not complete"
        lines.append(f"- {rec.who()}: outcome {rec.outcome} after "
                     f"{rec.data.get('attempts')} attempt(s); {verdict}.")
    lines.append("Checks: " + "; ".join(f"{c['check']}: {c['status']}" for c in checks) + ".")
    if review:
        failing = [c["check"] for c in checks if c["status"] in ("fail", "insufficient_evidence")]
        reasons = []
        if cases:
            reasons.append(f"{cases} review case(s) with conflicting evidence")
        if failing:
            reasons.append("checks not passed: " + ", ".join(failing))
        if malformed:
            reasons.append(f"{malformed} malformed or unreadable input(s)")
        lines.append("Review required: " + "; ".join(reasons) + ".")
    else:
        lines.append("No review required: the evidence agrees and every applicable check passed.")
    lines.append("This report is derived from the audit records alone; its steps are proposals "
                 "and none of them has been carried out.")
    return "\n".join(lines)


DECISIONS = ("accept", "reject", "retry")
"""What a reviewer may decide about an operation."""


def _decided(recs: Sequence[_Rec], decisions: Iterable[Mapping[str, Any]]) -> list[_Rec]:
    """The records with their latest reviewer decision (by operation or fixture id) merged in."""
    latest: dict[str, dict[str, Any]] = {}
    for d in decisions:
        if isinstance(d.get("operation_id"), str) and d.get("decision") in DECISIONS:
            latest[d["operation_id"]] = {k: d.get(k) for k in
                                         ("decision", "reviewer", "note", "decided_at")}
            if d.get("requeued") is not None:  # the retry was put back on the job's queue
                latest[d["operation_id"]]["requeued"] = d.get("requeued")
    out = []
    for rec in recs:
        found = latest.get(rec.op or "") or latest.get(rec.job or "")
        out.append(rec if found is None else
                   _Rec(rec.index, rec.line, {**rec.data, "reviewer_decision": found}))
    return out


def _open(evidence: Iterable[Mapping[str, Any]], by_record: Mapping[int, _Rec]) -> bool:
    """True unless every record the evidence names carries a reviewer decision."""
    named = [by_record.get(e.get("record")) for e in evidence  # type: ignore[arg-type]
             if isinstance(e.get("record"), int)]
    return not named or any(r is None or r.data.get("reviewer_decision") is None for r in named)


def _handover(recs: Sequence[_Rec], owner: str | None) -> tuple[list[dict[str, Any]], str]:
    """What failed, why, who owns it and what is proposed next: steps and closing text."""
    who_owns = owner if owner else "no owner named (give the job file's owner)"
    steps, lines = [], [f"Handover to {who_owns}:"]
    for rec in recs:
        if rec.outcome == "ok":
            continue
        decision = rec.data.get("reviewer_decision")
        template = _STEPS.get(rec.outcome or "", "Investigate {who}; it did not complete.")
        proposal = template.format(who=rec.who(), key=rec.data.get("key"),
                                   retry_at=_at(rec.data.get("retry_at")))
        queue_id = rec.job or rec.op  # the id the job's queue and its results know it by
        if isinstance(decision, Mapping) and decision.get("decision") == "retry":
            if decision.get("requeued"):
                proposal = (f"{decision.get('reviewer')} decided to retry it and it was requeued "
                            f"as {queue_id} at {_at(decision.get('decided_at'))}: run the job "
                            "again to send it.")
            else:
                proposal = (f"{decision.get('reviewer')} decided to retry it: requeue {queue_id} "
                            f"(retrybudget queue requeue STATE --failed --op {queue_id}) and run "
                            "the job again.")
        why = str(rec.data.get("detail") or "no detail recorded")
        step = _step("handover", f"{rec.who()} ended {rec.outcome}: {why}. Owner: {who_owns}. "
                     f"Proposed: {proposal}", [rec.ref("outcome")])
        step["owner"] = owner
        step["reviewer_decision"] = decision
        steps.append(step)
        said = "" if decision is None else f" (reviewer: {decision.get('decision')})"
        lines.append(f"- {rec.who()}: {rec.outcome}{said}. Why: {why}. Proposed next: {proposal}")
    if len(lines) == 1:
        lines.append("- nothing failed.")
    lines.append("Every step above is proposed, not done.")
    return steps, "\n".join(lines)


def review_report(
    records: AuditLog | Iterable[Mapping[str, Any]],
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    decisions: Iterable[Mapping[str, Any]] = (),
    owner: str | None = None,
) -> dict[str, Any]:
    """Build the review report for a set of audit records.

    Args:
        records: audit records (dicts), or an :class:`AuditLog` from :func:`load_audit` (its
            line numbers become sources and its skipped lines missing inputs).
        tolerance: seconds of slack when comparing recorded times.
        decisions: reviewer decisions (``operation_id``, ``decision`` in :data:`DECISIONS`,
            ``reviewer``, ``note``, ``decided_at``), oldest first; the latest per operation
            becomes its record's ``reviewer_decision``. A review case or failed check whose
            records all carry a decision no longer requires review.
        owner: the job's owner, named in the closing handover.

    Returns:
        A JSON-ready dict with exactly the keys of :data:`REPORT_KEYS`. Same records, same
        report.
    """
    out = _Builder()
    if isinstance(records, AuditLog):
        pairs = zip(records.records, records.lines, strict=True)
        recs = [_Rec(i, line, r) for i, (r, line) in enumerate(pairs)]
        for bad in records.bad_lines:
            out.lack({"record": None, "line": bad.line, "operation_id": None, "job_id": None,
                      "attempt": None, "field": None}, f"unreadable line: {bad.reason}",
                     malformed=True)
    else:
        recs = [_Rec(i, None, r) for i, r in enumerate(records)]
    recs = _decided(recs, decisions)
    by_record = {rec.index: rec for rec in recs}
    for rec in recs:
        for problem in validate_audit_record(rec.data):
            out.lack(rec.ref(problem.split(":", 1)[0]), f"schema: {problem}", malformed=True)
        _observe(rec, out)
    later_successes = _later_success(recs)
    findings = {name: [f for rec in recs for f in checker(rec, out, tolerance)]
                for name, checker in _CHECKERS.items()}
    findings["no fabricated completion after final failure"].extend(
        _finding(later.ref("outcome"), "no success after the operation's final failure",
                 f"ok recorded after record {failed.index} ended {failed.outcome}", "fail")
        for failed, later, field in later_successes if field == "operation_id")
    checks = [_summarise(name, found) for name, found in findings.items()]
    cases = _review_cases(recs, later_successes)
    steps = [*cases]
    steps.extend(_step("investigate_check",
                       f"Investigate check '{c['check']}' ({c['status']}): {c['actual']}",
                       c["evidence"])
                 for c in checks if c["status"] in ("fail", "insufficient_evidence"))
    for rec in recs:
        steps.extend(_record_steps(rec))
    if out.missing:
        steps.append(_step("supply_missing_inputs",
                           f"Supply the {len(out.missing)} missing input(s) listed in "
                           "missing_inputs where they matter (an empty field, such as "
                           "retry_at of an operation that was not rate-limited, is not a "
                           "problem; a missing policy: fetch and demo record it, your own "
                           "code passes AuditHook(policy=...)).",
                           [m["source"] for m in out.missing]))
    open_cases = [c for c in cases if _open(c["evidence"], by_record)]
    review = bool(open_cases) or bool(out.malformed) or any(
        c["status"] in ("fail", "insufficient_evidence")
        and _open([f["source"] for f in c["findings"] if f["status"] != "pass"], by_record)
        for c in checks)
    handover, closing = _handover(recs, owner)
    steps.extend(handover)
    return {
        "observed_facts": out.facts,
        "missing_inputs": out.missing,
        "proposed_steps": steps,
        "validation_results": checks,
        "review_required": review,
        "draft_explanation": _explain(recs, checks, review, len(open_cases), out.malformed)
        + "\n" + closing,
    }
