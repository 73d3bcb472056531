"""One job's audit from several files: ``merge_audits`` and ``retrybudget report A B``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from retrybudget.core.outcome import Outcome, Reason
from retrybudget.observe import AuditLog, audit_record, load_audit, merge_audits
from tests.support.cli import run_cli
from tests.support.strategies import assert_reached, examples, reached, tried

PROP = "merge_audits"


def _record(n: int, at: float | None) -> dict[str, Any]:
    outcome: Outcome[Any] = Outcome(Reason.OK if n % 3 else Reason.NOT_FOUND, f"op-{n}", 1, (),
                                    0.1, job_id=f"line-{n}", method="GET", value={} if n % 3 else None)
    return audit_record(outcome, recorded_at=at)


@settings(max_examples=examples(200, cap=1000), deadline=None)
@given(times=st.lists(st.none() | st.floats(1.7e9, 1.8e9), min_size=1, max_size=12),
       placement=st.data())
def test_merging_keeps_every_record_once_in_recording_order(times: list[float | None],
                                                            placement: st.DataObject) -> None:
    tried(PROP)
    records = [_record(n, at) for n, at in enumerate(times)]
    files: list[list[int]] = [[], [], []]
    for n in range(len(records)):  # each record in one to three files
        where = placement.draw(st.sets(st.integers(0, 2), min_size=1))
        for f in where:
            files[f].append(n)
    logs = [AuditLog(f"f{f}", tuple(records[n] for n in ns), tuple(range(1, len(ns) + 1)))
            for f, ns in enumerate(files)]
    merged = merge_audits(logs)
    assert sorted(r["job_id"] for r in merged.records) == sorted(r["job_id"] for r in records)
    assert merged.duplicates == sum(len(ns) for ns in files) - len(records)
    if merged.duplicates:
        reached(PROP, "duplicates dropped")
    stamped = [r["recorded_at"] for r in merged.records if r["recorded_at"] is not None]
    assert stamped == sorted(stamped)
    unstamped = [i for i, r in enumerate(merged.records) if r["recorded_at"] is None]
    assert all(i >= len(stamped) for i in unstamped)  # after every record with a time
    if unstamped and stamped:
        reached(PROP, "records without a time last")
    for record, line, name in zip(merged.records, merged.lines, merged.files, strict=True):
        log = next(log for log in logs if log.path == name)
        assert log.records[line - 1] is record  # each names its own file and line


def test_the_merge_property_reached_its_cases() -> None:
    assert_reached(PROP, ("duplicates dropped", "records without a time last"))


def test_report_merges_the_audit_files_of_one_job(tmp_path: Path) -> None:
    records = [_record(n, 1.75e9 + n) for n in range(6)]
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(json.dumps(r) + "\n" for r in records[0::2] + records[3:4]), "utf-8")
    b.write_text("".join(json.dumps(r) + "\n" for r in records[1::2]), "utf-8")  # 3 in both
    text = run_cli("report", str(a), str(b))
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[0] == (f"merged 2 audit files ({a}, {b}): 6 records, "
                                           "1 duplicate(s) dropped")
    [missing] = [line for line in text.stdout.splitlines() if "not recorded" in line]
    assert missing.startswith(tuple(f"{n} field(s) not recorded (" for n in range(1, 100)))
    assert "retry_at" in missing  # empty where nothing was rate-limited: said so
    assert "unreadable" not in missing  # every line was readable
    whole = json.loads(run_cli("report", str(b), str(a), "--json").stdout)
    jobs = [f["value"] for f in whole["observed_facts"] if f["source"]["field"] == "job_id"]
    assert jobs == [f"line-{n}" for n in range(6)]  # recording order, each once
    single = json.loads(run_cli("report", str(a), "--json").stdout)
    assert len([f for f in single["observed_facts"] if f["source"]["field"] == "job_id"]) == 4
    assert merge_audits([load_audit(a)]) == load_audit(a)
