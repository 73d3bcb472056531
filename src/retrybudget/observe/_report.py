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

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ._audit import AuditLog
from ._report_checks import CHECKERS, CHECKS, DEFAULT_TOLERANCE, finding, successes_after_failure, summarise
from ._report_records import Builder, Rec, at, items, observe_record
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


# Review cases and steps --------------------------------------------------------------------


def _step(action: str, description: str, evidence: list[dict[str, Any]],
          conflicting_fields: Sequence[str] = ()) -> dict[str, Any]:
    return {"action": action, "description": description, "evidence": evidence,
            "conflicting_fields": list(conflicting_fields), "status": "proposed"}


def _review_cases(recs: Sequence[Rec],
                  later_successes: list[tuple[Rec, Rec, str]]) -> list[dict[str, Any]]:
    cases = []
    for rec in recs:
        for k, text in enumerate(items(rec.data.get("conflicts"))):
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


def _record_steps(rec: Rec) -> list[dict[str, Any]]:
    template = _STEPS.get(rec.outcome or "")
    if template is None:
        return []
    text = template.format(who=rec.who(), key=rec.data.get("key"),
                           retry_at=at(rec.data.get("retry_at")))
    return [_step(f"follow_up_{rec.outcome}", text, [rec.ref("outcome")])]


def _explain(recs: Sequence[Rec], checks: list[dict[str, Any]], review: bool,
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


def _decided(recs: Sequence[Rec], decisions: Iterable[Mapping[str, Any]]) -> list[Rec]:
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
                   Rec(rec.index, rec.line, {**rec.data, "reviewer_decision": found}))
    return out


def _open(evidence: Iterable[Mapping[str, Any]], by_record: Mapping[int, Rec]) -> bool:
    """True unless every record the evidence names carries a reviewer decision."""
    named = [by_record.get(e.get("record")) for e in evidence  # type: ignore[arg-type]
             if isinstance(e.get("record"), int)]
    return not named or any(r is None or r.data.get("reviewer_decision") is None for r in named)


def _handover(recs: Sequence[Rec], owner: str | None) -> tuple[list[dict[str, Any]], str]:
    """What failed, why, who owns it and what is proposed next: steps and closing text."""
    who_owns = owner if owner else "no owner named (give the job file's owner)"
    steps, lines = [], [f"Handover to {who_owns}:"]
    for rec in recs:
        if rec.outcome == "ok":
            continue
        decision = rec.data.get("reviewer_decision")
        template = _STEPS.get(rec.outcome or "", "Investigate {who}; it did not complete.")
        proposal = template.format(who=rec.who(), key=rec.data.get("key"),
                                   retry_at=at(rec.data.get("retry_at")))
        queue_id = rec.job or rec.op  # the id the job's queue and its results know it by
        if isinstance(decision, Mapping) and decision.get("decision") == "retry":
            if decision.get("requeued"):
                proposal = (f"{decision.get('reviewer')} decided to retry it and it was requeued "
                            f"as {queue_id} at {at(decision.get('decided_at'))}: run the job "
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
    out = Builder()
    recs = _decided(_records_of(records, out), decisions)
    by_record = {rec.index: rec for rec in recs}
    for rec in recs:
        for problem in validate_audit_record(rec.data):
            out.lack(rec.ref(problem.split(":", 1)[0]), f"schema: {problem}", malformed=True)
        observe_record(rec, out)
    later_successes = successes_after_failure(recs)
    checks = _validation_results(recs, out, tolerance, later_successes)
    cases = _review_cases(recs, later_successes)
    steps = _proposed_steps(recs, cases, checks, out)
    open_cases = [c for c in cases if _open(c["evidence"], by_record)]
    review = bool(open_cases) or bool(out.malformed) or any(
        c["status"] in ("fail", "insufficient_evidence")
        and _open([f["source"] for f in c["findings"] if f["status"] != "pass"], by_record)
        for c in checks)
    handover, closing = _handover(recs, owner)
    return {
        "observed_facts": out.facts,
        "missing_inputs": out.missing,
        "proposed_steps": [*steps, *handover],
        "validation_results": checks,
        "review_required": review,
        "draft_explanation": _explain(recs, checks, review, len(open_cases), out.malformed)
        + "\n" + closing,
    }


def _records_of(records: AuditLog | Iterable[Mapping[str, Any]], out: Builder) -> list[Rec]:
    """The records to review, each with its index (and file line, from an :class:`AuditLog`,
    whose unreadable lines become malformed missing inputs in ``out``)."""
    if not isinstance(records, AuditLog):
        return [Rec(i, None, r) for i, r in enumerate(records)]
    for bad in records.bad_lines:
        out.lack({"record": None, "line": bad.line, "operation_id": None, "job_id": None,
                  "attempt": None, "field": None}, f"unreadable line: {bad.reason}",
                 malformed=True)
    pairs = zip(records.records, records.lines, strict=True)
    return [Rec(i, line, r) for i, (r, line) in enumerate(pairs)]


def _validation_results(recs: Sequence[Rec], out: Builder, tolerance: float,
                        later_successes: list[tuple[Rec, Rec, str]]) -> list[dict[str, Any]]:
    """Every check of :data:`CHECKS` over the records, a success recorded after the same
    operation's final failure counted against "no fabricated completion"."""
    findings = {name: [f for rec in recs for f in checker(rec, out, tolerance)]
                for name, checker in CHECKERS.items()}
    findings["no fabricated completion after final failure"].extend(
        finding(later.ref("outcome"), "no success after the operation's final failure",
                f"ok recorded after record {failed.index} ended {failed.outcome}", "fail")
        for failed, later, field in later_successes if field == "operation_id")
    return [summarise(name, found) for name, found in findings.items()]


def _proposed_steps(recs: Sequence[Rec], cases: list[dict[str, Any]],
                    checks: list[dict[str, Any]], out: Builder) -> list[dict[str, Any]]:
    """The steps before the handover: the review cases, a check to investigate per check not
    passed, each record's follow-up and, with missing inputs, supplying them."""
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
    return steps
