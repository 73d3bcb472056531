"""Audit records: the versioned schema, the sinks, concurrent appends and reading files back."""

from __future__ import annotations

import json
import logging
import pickle
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from retrybudget import FakeClock
from retrybudget.acceptance import load_cases, policy_for, run_offline
from retrybudget.observe import (
    AUDIT_SCHEMA,
    AUDIT_SCHEMA_ID,
    AuditFileError,
    AuditHook,
    CallbackAuditSink,
    JsonlAuditSink,
    LoggingAuditSink,
    audit_record,
    load_audit,
    validate_audit_record,
)

CASES = load_cases()
DOCS = Path(__file__).resolve().parents[2] / "docs" / "audit.md"


def fixture_records() -> dict[str, dict[str, Any]]:
    """One audit record per acceptance case, keyed by case id."""
    records: list[dict[str, Any]] = []
    for case in CASES:
        clock = FakeClock()
        hook = AuditHook(CallbackAuditSink(records.append), policy=policy_for(case), clock=clock)
        run_offline(case, clock=clock, hooks=[hook])
    return {r["job_id"]: r for r in records}


RECORDS = fixture_records()


def sample(job: str = "A01", **changes: Any) -> dict[str, Any]:
    return {**json.loads(json.dumps(RECORDS[job])), **changes}


# The schema ---------------------------------------------------------------------------------


@pytest.mark.parametrize("job", sorted(RECORDS))
def test_every_acceptance_record_matches_the_schema(job: str) -> None:
    record = RECORDS[job]
    assert validate_audit_record(record) == []
    assert record["schema"] == AUDIT_SCHEMA_ID
    assert record["reviewer_decision"] is None
    assert record["logical_operations"] == 1
    assert record["attempts"] == len(record["history"])
    assert record["policy"]["name"] == f"acceptance-{job}"


def test_records_carry_each_attempt_and_its_evidence() -> None:
    a01, a03, a18 = RECORDS["A01"], RECORDS["A03"], RECORDS["A18"]
    assert [a["status"] for a in a01["history"]] == [503, 503, 200]
    assert [a["decision"] for a in a01["history"]] == ["retry", "retry", "stop"]
    assert [a["wait_source"] for a in a01["history"]] == ["policy", "policy", None]
    first = a03["history"][0]
    assert (first["classification"], first["wait"], first["wait_reason"], first["wait_source"]) == (
        "rate_limited", 1.0, "retry_after", "retry-after")
    assert first["evidence"] == [["retry-after", "1"]]
    assert a03["history"][1]["started"] == 1.0
    assert (a18["attempts"], a18["history"], a18["outcome"]) == (0, [], "circuit_open")
    a12 = RECORDS["A12"]["history"][0]
    assert (a12["status"], a12["error"]) == (None, "ConnectionResetError")


def test_the_schema_checker_names_what_is_wrong() -> None:
    bad = sample(outcome="fine", extra=1, attempts=True)
    del bad["key"]
    bad["history"][0]["status"] = "503"
    problems = validate_audit_record(bad)
    assert "$.key: required" in problems
    assert "$.extra: not allowed" in problems
    assert any(p.startswith("$.outcome: 'fine' is not one of") for p in problems)
    assert "$.attempts: expected integer, got bool" in problems
    assert "$.history[0].status: expected integer or null, got str" in problems
    assert validate_audit_record([]) == ["$: expected object, got list"]
    assert validate_audit_record(sample(elapsed=-1)) == ["$.elapsed: -1 is below 0"]
    assert validate_audit_record(sample(schema="retrybudget.audit/2")) == [
        "$.schema: must be 'retrybudget.audit/1'"]


def test_the_documentation_describes_every_field() -> None:
    json.dumps(AUDIT_SCHEMA)
    text = DOCS.read_text("utf-8")
    assert AUDIT_SCHEMA_ID in text
    attempt_fields = AUDIT_SCHEMA["properties"]["history"]["items"]["properties"]
    for field in [*AUDIT_SCHEMA["properties"], *attempt_fields]:
        assert f"`{field}`" in text, field


def test_a_record_without_request_or_clock() -> None:
    outcome = run_offline(CASES[0], clock=FakeClock()).outcome
    record = audit_record(outcome)
    assert (record["url"], record["policy"], record["recorded_at"], record["started_at"]) == (
        None, None, None, None)
    assert validate_audit_record(record) == []
    assert validate_audit_record(audit_record(outcome, policy="nightly"))[:1] == []


# Sinks --------------------------------------------------------------------------------------


def test_jsonl_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with JsonlAuditSink(path) as sink:
        for record in RECORDS.values():
            sink.write(record)
    log = load_audit(path)
    assert list(log.records) == list(RECORDS.values())
    assert log.lines == tuple(range(1, 19))
    assert (path.stat().st_mode & 0o777) == 0o600


def test_logging_sink_puts_the_record_in_extra(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="retrybudget.audit"):
        LoggingAuditSink().write(RECORDS["A02"])
    (entry,) = caplog.records
    assert entry.audit == RECORDS["A02"]  # type: ignore[attr-defined]
    assert json.loads(entry.getMessage().removeprefix("retrybudget audit ")) == RECORDS["A02"]


def test_logging_sink_skips_work_when_disabled(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="retrybudget.audit"):
        LoggingAuditSink().write(RECORDS["A02"])
    assert caplog.records == []


def test_callback_sink_scrubs_registered_secrets() -> None:
    got: list[dict[str, Any]] = []
    CallbackAuditSink(got.append, secrets=["job-secret-value"]).write(
        sample(detail="saw job-secret-value and Bearer abc.def"))
    assert got[0]["detail"] == "saw [REDACTED] and Bearer [REDACTED]"


def test_a_failing_sink_does_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    class Full:
        def write(self, record: Any) -> None:
            raise OSError("disk full")

    got: list[dict[str, Any]] = []
    hook = AuditHook(Full(), CallbackAuditSink(got.append), policy=policy_for(CASES[0]))
    result = run_offline(CASES[0], clock=FakeClock(), hooks=[hook])
    assert result.passed
    assert len(got) == 1
    assert "failed in write (OSError: disk full)" in caplog.text


# Concurrent appends -------------------------------------------------------------------------

WRITER = """
import sys
from retrybudget.observe import JsonlAuditSink
path, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
sink = JsonlAuditSink(path)
for i in range(count):
    sink.write({"writer": name, "i": i, "pad": "x" * (9000 if i % 3 == 0 else 40)})
"""


def check_lines(path: Path, expected: set[tuple[str, int]]) -> None:
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    lines = raw.split(b"\n")[:-1]
    parsed = [json.loads(line) for line in lines]  # every line is whole JSON
    seen = [(p["writer"], p["i"]) for p in parsed]
    assert len(seen) == len(expected)
    assert set(seen) == expected


def test_concurrent_appends_from_threads_and_processes(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    count = 150
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"p{n}", str(count)])
             for n in range(4)]
    sink = JsonlAuditSink(path)

    def thread_writer(name: str) -> None:
        for i in range(count):
            sink.write({"writer": name, "i": i, "pad": "y" * (9000 if i % 2 else 10)})

    threads = [threading.Thread(target=thread_writer, args=(f"t{n}",)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [p.wait(timeout=120) for p in procs] == [0] * 4
    sink.close()
    names = [f"p{n}" for n in range(4)] + [f"t{n}" for n in range(6)]
    check_lines(path, {(name, i) for name in names for i in range(count)})


# Reading files back -------------------------------------------------------------------------


def write_lines(path: Path, lines: list[str], *, final_newline: bool = True) -> None:
    path.write_text("\n".join(lines) + ("\n" if final_newline else ""), "utf-8")


def test_a_malformed_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    good = [json.dumps(r) for r in list(RECORDS.values())[:3]]
    write_lines(path, [good[0], good[1], '{"schema": "retrybudget.audit/1", ', good[2]])
    with pytest.raises(AuditFileError) as info:
        load_audit(path)
    assert info.value.line == 3
    assert re.search(r"audit\.jsonl: line 3: invalid JSON", str(info.value))
    again = pickle.loads(pickle.dumps(info.value))  # noqa: S301 - our own bytes
    assert (again.line, str(again)) == (3, str(info.value))


def test_bad_lines_can_be_skipped_and_nothing_else_is_lost(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    good = [json.dumps(r) for r in RECORDS.values()]
    truncated = good[5][: len(good[5]) // 2]
    write_lines(path, [good[0], "", good[1], "not json", '{"a": 1}', good[2], good[3], "[1]",
                       good[4], truncated], final_newline=False)
    path.write_bytes(path.read_bytes().replace(b"not json", b"\xff\xfe"))
    log = load_audit(path, skip_bad=True)
    assert list(log.records) == list(RECORDS.values())[:5]
    assert log.lines == (1, 3, 6, 7, 9)
    assert [b.line for b in log.bad_lines] == [4, 5, 8, 10]
    reasons = [b.reason for b in log.bad_lines]
    assert reasons[0] == "not UTF-8"
    assert reasons[1].startswith("not a retrybudget.audit/1 record: $.schema: required")
    assert reasons[2] == "not a retrybudget.audit/1 record: $: expected object, got list"
    assert reasons[3].startswith("truncated record (the file ends inside it")


def test_a_truncated_last_line_raises_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    good = json.dumps(RECORDS["A01"])
    write_lines(path, [good, good[:-7]], final_newline=False)
    with pytest.raises(AuditFileError, match=r"line 2: truncated record"):
        load_audit(path)


def test_a_complete_last_line_without_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    write_lines(path, [json.dumps(RECORDS["A01"])], final_newline=False)
    assert load_audit(path).records == (RECORDS["A01"],)
