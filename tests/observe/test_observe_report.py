"""The review report: sourced facts, the checklist, conflicts and honest explanations."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrybudget import FakeClock, Policy, Retrier, get_profile
from retrybudget.acceptance import load_cases, policy_for, run_offline
from retrybudget.observe import (
    CHECKS,
    REPORT_KEYS,
    AuditHook,
    CallbackAuditSink,
    JsonlAuditSink,
    load_audit,
    review_report,
)
from retrybudget.testing import ScriptedProvider

CASES = load_cases()


def audited(case_ids: list[str] | None = None, *, policy: bool = True,
            clock: bool = True) -> list[dict[str, Any]]:
    """Audit records of acceptance cases, in case order."""
    records: list[dict[str, Any]] = []
    for case in CASES:
        if case_ids is None or case.id in case_ids:
            fake = FakeClock()
            hook = AuditHook(CallbackAuditSink(records.append),
                             policy=policy_for(case) if policy else None,
                             clock=fake if clock else None)
            run_offline(case, clock=fake, hooks=[hook])
    return records


ALL = audited()


def by_job(job: str) -> dict[str, Any]:
    return copy.deepcopy(next(r for r in ALL if r["job_id"] == job))


def status(report: dict[str, Any], check: str) -> str:
    return str(next(c["status"] for c in report["validation_results"] if c["check"] == check))


def review_cases(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in report["proposed_steps"] if s["action"] == "review_case"]


def test_the_report_has_exactly_the_six_keys() -> None:
    report = review_report(ALL)
    assert tuple(report) == REPORT_KEYS
    assert set(report) == {"observed_facts", "missing_inputs", "proposed_steps",
                           "validation_results", "review_required", "draft_explanation"}
    json.dumps(report)


def test_the_acceptance_fixtures_pass_every_check() -> None:
    report = review_report(ALL)
    results = report["validation_results"]
    assert [c["check"] for c in results] == list(CHECKS)
    assert {c["check"]: c["status"] for c in results} == dict.fromkeys(CHECKS, "pass")
    for check in results:
        assert check["expected"]
        assert check["actual"]
        assert check["evidence"]
        assert all(e["record"] is not None and e["operation_id"] for e in check["evidence"])
    retry_after = next(c for c in results if c["check"] == "Retry-After obeyed")
    assert {ALL[e["record"]]["job_id"] for e in retry_after["evidence"]} == {
        "A03", "A04", "A05", "A15", "A16"}
    auth = next(c for c in results if c["check"] == "authorization failure not retried")
    assert {e["job_id"] for e in auth["evidence"]} == {"A06", "A07"}


def test_the_invalid_200_of_a10_is_the_only_review_case() -> None:
    report = review_report(ALL)
    assert report["review_required"] is True
    (case,) = review_cases(report)
    assert case["conflicting_fields"] == ["status", "classification"]
    assert {e["job_id"] for e in case["evidence"]} == {"A10"}
    without = review_report([r for r in ALL if r["job_id"] != "A10"])
    assert without["review_required"] is False
    assert review_cases(without) == []


def test_every_fact_names_its_source_and_nulls_are_missing_inputs() -> None:
    report = review_report(ALL)
    missing = [m["source"] for m in report["missing_inputs"]]
    for fact in report["observed_facts"]:
        source = fact["source"]
        assert set(source) == {"record", "line", "operation_id", "job_id", "attempt", "field"}
        assert source["field"]
        assert source["operation_id"] == ALL[source["record"]]["operation_id"]
        if fact["value"] is None:
            assert source in missing
    statuses = [f["value"] for f in report["observed_facts"]
                if f["source"]["job_id"] == "A01" and f["source"]["field"] == "status"]
    assert statuses == [503, 503, 200]


def test_the_explanation_never_calls_a_failed_operation_completed() -> None:
    report = review_report(ALL)
    text = report["draft_explanation"].split("\nHandover to ")[0]  # the summary, not the handover
    for record in ALL:
        (line,) = [x for x in text.splitlines() if f"operation {record['operation_id']}" in x]
        if record["outcome"] == "ok":
            assert line.endswith("; completed.")
        else:
            assert line.endswith("; did not complete.")
    assert "6 completed with outcome ok, 12 did not complete" in text
    assert "none of them has been carried out" in text


def test_steps_are_proposals_only() -> None:
    report = review_report(ALL)
    assert report["proposed_steps"]
    assert {s["status"] for s in report["proposed_steps"]} == {"proposed"}
    a04 = next(s for s in report["proposed_steps"]
               if s["action"] == "follow_up_rate_limited" and s["evidence"][0]["job_id"] == "A04")
    assert "no earlier than 2027-01-15T09:00:00+00:00 (epoch 1800003600.000)" in a04["description"]
    assert not any(s["evidence"][0]["job_id"] in ("A01", "A03") for s in report["proposed_steps"]
                   if s["action"].startswith("follow_up"))


def test_the_report_is_deterministic() -> None:
    assert json.dumps(review_report(ALL)) == json.dumps(review_report(copy.deepcopy(ALL)))


def test_checks_no_record_exercises_are_not_applicable() -> None:
    report = review_report(audited(["A01"]))
    assert status(report, "authorization failure not retried") == "not_applicable"
    assert status(report, "writes not replayed") == "not_applicable"
    assert status(report, "Retry-After obeyed") == "not_applicable"
    assert status(report, "deadline kept") == "pass"
    assert review_report([])["validation_results"][0]["status"] == "not_applicable"


# Conflicting evidence -----------------------------------------------------------------------


def conflict_record(profile: str, script: list[dict[str, Any]]) -> dict[str, Any]:
    clock = FakeClock()
    records: list[dict[str, Any]] = []
    policy = Policy(profile=get_profile(profile), deadline=100.0)
    hook = AuditHook(CallbackAuditSink(records.append), policy=policy, clock=clock)
    Retrier(policy=policy, clock=clock, hooks=(hook,), method="GET", job_id="J").call(
        ScriptedProvider(script, clock))
    return records[0]


def test_retry_after_and_reset_disagreeing_is_a_review_case() -> None:
    record = conflict_record("generic", [
        {"status": 429, "headers": {"Retry-After": "1", "x-ratelimit-remaining": "0",
                                    "x-ratelimit-reset": "{epoch+60}"}},
        {"status": 200}])
    report = review_report([record])
    assert report["review_required"] is True
    (case,) = review_cases(report)
    assert case["conflicting_fields"] == ["retry-after", "x-ratelimit-reset"]
    assert case["evidence"][0]["field"] == "conflicts[0]"


def test_a_403_with_remaining_0_and_a_permission_message_is_a_review_case() -> None:
    record = conflict_record("github", [
        {"status": 403, "headers": {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "{epoch+1}"},
         "body": {"message": "Resource not accessible by integration"}},
        {"status": 200}])
    (case,) = review_cases(review_report([record]))
    assert case["conflicting_fields"] == ["status", "x-ratelimit-remaining", "message"]


def test_a_success_after_the_final_failure_of_the_same_operation() -> None:
    failed = by_job("A02")
    forged = {**by_job("A01"), "operation_id": failed["operation_id"], "job_id": "A02"}
    report = review_report([failed, forged])
    assert report["review_required"] is True
    (case,) = review_cases(report)
    assert case["conflicting_fields"] == ["outcome", "operation_id"]
    assert [e["record"] for e in case["evidence"]] == [0, 1]
    assert status(report, "no fabricated completion after final failure") == "fail"
    assert "did not complete" in report["draft_explanation"].splitlines()[1]


def test_a_later_success_for_the_same_job_is_reviewed_but_not_a_fabrication() -> None:
    later = {**by_job("A01"), "job_id": "A02"}
    report = review_report([by_job("A02"), later])
    (case,) = review_cases(report)
    assert case["conflicting_fields"] == ["outcome", "job_id"]
    assert status(report, "no fabricated completion after final failure") == "pass"


def test_a_later_success_of_a_job_a_reviewer_decided_to_retry_is_no_case() -> None:
    failed, later = by_job("A02"), {**by_job("A01"), "job_id": "A02"}
    for decision, cases in (("accept", 1), ("reject", 1), ("retry", 0)):
        said = {"operation_id": failed["operation_id"], "decision": decision,
                "reviewer": "dana", "note": None, "decided_at": 1.9e9}
        report = review_report([failed, later], decisions=[said])
        assert len(review_cases(report)) == cases, decision
        assert status(report, "no fabricated completion after final failure") == "pass"


# Checks that fail ---------------------------------------------------------------------------


def forged(job: str, change: Any) -> dict[str, Any]:
    record = by_job(job)
    change(record)
    return record


def early_retry(r: dict[str, Any]) -> None:
    r["history"][1]["started"] = 0.25


def overrun(r: dict[str, Any]) -> None:
    r["history"].append({**r["history"][-1], "number": 4, "started": 9.0})
    r["history"][2]["decision"] = "retry"
    r["attempts"] = 4


def retried_401(r: dict[str, Any]) -> None:
    r["history"][0]["decision"] = "retry"
    r["history"].append({**r["history"][0], "number": 2, "decision": "stop"})
    r["attempts"] = 2


def delivered_value(r: dict[str, Any]) -> None:
    r["has_value"] = True


def ok_without_success(r: dict[str, Any]) -> None:
    r["outcome"] = "ok"


def replayed_write(r: dict[str, Any]) -> None:
    r["history"][0]["decision"] = "retry"
    r["history"].append({**r["history"][0], "number": 2, "status": 201,
                         "classification": "ok", "decision": "stop"})
    r["attempts"] = 2


def late(r: dict[str, Any]) -> None:
    r["elapsed"] = 7.5


@pytest.mark.parametrize(("job", "change", "check"), [
    ("A03", early_retry, "Retry-After obeyed"),
    ("A02", overrun, "exhausted budget stops"),
    ("A06", retried_401, "authorization failure not retried"),
    ("A02", delivered_value, "no fabricated completion after final failure"),
    ("A02", ok_without_success, "no fabricated completion after final failure"),
    ("A11", replayed_write, "writes not replayed"),
    ("A13", late, "deadline kept"),
])
def test_a_missing_safeguard_fails_its_check(job: str, change: Any, check: str) -> None:
    report = review_report([forged(job, change)])
    assert status(report, check) == "fail"
    assert report["review_required"] is True
    result = next(c for c in report["validation_results"] if c["check"] == check)
    assert "fail" in result["actual"]
    assert any(s["action"] == "investigate_check" and check in s["description"]
               for s in report["proposed_steps"])


def test_a_retry_at_earlier_than_retry_after_fails() -> None:
    record = by_job("A04")
    record["retry_at"] = record["started_at"] + 60
    assert status(review_report([record]), "Retry-After obeyed") == "fail"


# Missing and malformed input ----------------------------------------------------------------


def test_without_the_policy_the_deadline_is_insufficient_evidence() -> None:
    record = by_job("A01")
    record["policy"] = None  # a record written without the policy
    report = review_report([record])
    assert status(report, "deadline kept") == "insufficient_evidence"
    assert report["review_required"] is True
    fields = {m["source"]["field"] for m in report["missing_inputs"]}
    assert {"policy.name", "policy.max_attempts", "policy.deadline"} <= fields


def test_an_http_date_retry_after_needs_started_at() -> None:
    report = review_report(audited(["A05"], clock=False))
    assert status(report, "Retry-After obeyed") == "insufficient_evidence"
    assert any(m["source"]["field"] == "started_at" for m in report["missing_inputs"])


def test_a_numeric_retry_after_needs_no_clock() -> None:
    assert status(review_report(audited(["A03"], clock=False)), "Retry-After obeyed") == "pass"


def test_records_that_break_the_schema_are_reported_not_trusted() -> None:
    broken = by_job("A01")
    del broken["outcome"]
    report = review_report([broken, {}, {"history": ["junk", {"number": "x"}]}])
    assert report["review_required"] is True
    reasons = [m["reason"] for m in report["missing_inputs"]]
    assert "schema: $.outcome: required" in reasons
    assert "operation None (record 1): outcome None" in report["draft_explanation"]


def test_an_audit_log_carries_line_numbers_and_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with JsonlAuditSink(path) as sink:
        sink.write(ALL[0])
    with path.open("a", encoding="utf-8") as fh:
        fh.write("garbage\n")
    with JsonlAuditSink(path) as sink:
        sink.write(ALL[1])
    report = review_report(load_audit(path, skip_bad=True))
    assert report["review_required"] is True
    (bad,) = [m for m in report["missing_inputs"] if m["source"]["line"] == 2]
    assert bad["reason"].startswith("unreadable line: invalid JSON")
    assert {f["source"]["line"] for f in report["observed_facts"]} == {1, 3}
    assert "1 malformed or unreadable input(s)" in report["draft_explanation"]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=20,
)
FIELDS = st.sampled_from(["outcome", "history", "attempts", "policy", "conflicts", "job_id",
                          "operation_id", "started_at", "retry_at", "waits", "has_value",
                          "elapsed", "method"])


@given(st.lists(st.dictionaries(FIELDS, JSON, max_size=8) | st.builds(dict), max_size=4),
       st.data())
def test_any_input_gives_a_report_and_never_a_crash(garbage: list[dict[str, Any]],
                                                    data: st.DataObject) -> None:
    base = [by_job(data.draw(st.sampled_from(["A01", "A03", "A06", "A11"])))]
    for record in garbage:
        merged = {**base[0], **record}
        report = review_report([*base, merged, record])
        assert tuple(report) == REPORT_KEYS
        json.dumps(report)
