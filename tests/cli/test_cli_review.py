"""The supervised workflow end to end from the CLI: a job file's owner and allowed inputs,
refusal before any attempt, reviewer decisions, and the report's handover."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from retrybudget.core.outcome import Outcome, Reason
from retrybudget.observe import review_report
from retrybudget.observe._audit import audit_record
from retrybudget.queue import SqliteQueue
from retrybudget.sandbox import SandboxConfig, serve_in_thread
from tests.support.cli import one_line_error, read_lines, restored_provider, run_cli, write_urls


def _job_file(tmp_path: Path, hosts: list[str], methods: tuple[str, ...] = ("GET",)) -> Path:
    path = tmp_path / "job.toml"
    path.write_text(f'''owner = "Dana Example <dana@example.com>"
policy = "interactive"
profile = "generic"

[inputs]
hosts = {json.dumps(hosts)}
methods = {json.dumps(list(methods))}

[outputs]
results = "{tmp_path / 'out' / 'r.jsonl'}"
audit = "{tmp_path / 'out' / 'a.jsonl'}"
state = "{tmp_path / 'out' / 's.sqlite'}"
''', "utf-8")
    return path


def _report(audit: Path) -> dict[str, Any]:
    result = run_cli("report", str(audit), "--json")
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def test_a_supervised_job_refuses_outside_inputs_records_decisions_and_hands_over(
        tmp_path: Path) -> None:
    with serve_in_thread(SandboxConfig(rentals=2)) as sandbox:
        host = sandbox.url("/").split("/")[2]
        urls = write_urls(tmp_path / "in.txt", [
            sandbox.url("/rentals/1/availability"),      # ok
            sandbox.url("/rentals/404/availability"),    # not_found
            "http://203.0.113.9/rentals/1/availability",  # outside the allowed hosts
        ])
        job = _job_file(tmp_path, [host])
        fetched = run_cli("fetch", str(urls), "--job-file", str(job), "--quiet", cwd=tmp_path)
        sent = sandbox.stats()["count"]
    assert fetched.returncode == 1, fetched.stdout + fetched.stderr
    assert "refused 1 operation(s)" in fetched.stdout
    assert sent == 2  # nothing went out for the refused one (and it was never tried)
    lines = {line["id"]: line for line in read_lines(tmp_path / "out" / "r.jsonl")}
    assert lines["line-3"]["outcome"] == "rejected"
    assert lines["line-3"]["attempts"] == 0
    assert "refused before any attempt" in lines["line-3"]["detail"]
    audit = tmp_path / "out" / "a.jsonl"
    sidecar = json.loads((tmp_path / "out" / "a.jsonl.job.json").read_text("utf-8"))
    assert sidecar["owner"] == "Dana Example <dana@example.com>"
    assert [r["id"] for r in sidecar["refused"]] == ["line-3"]

    before = _report(audit)
    handover = [s for s in before["proposed_steps"] if s["action"] == "handover"]
    assert {s["evidence"][0]["job_id"] for s in handover} == {"line-2", "line-3"}
    assert all(s["owner"] == "Dana Example <dana@example.com>" for s in handover)
    assert all(s["status"] == "proposed" for s in before["proposed_steps"])
    tail = before["draft_explanation"].split("\nHandover to ")[1]
    assert tail.startswith("Dana Example")
    assert tail.endswith("Every step above is proposed, not done.")

    decided = run_cli("review", "decide", str(audit), "line-2", "--decision", "retry",
                      "--reviewer", "dana", "--note", "record restored upstream")
    assert decided.returncode == 0, decided.stderr
    assert "recorded retry" in decided.stdout
    after = _report(audit)
    [decision] = [f["value"] for f in after["observed_facts"]
                  if f["source"]["field"] == "reviewer_decision"]
    assert decision["decision"] == "retry"
    assert decision["reviewer"] == "dana"
    assert decision["decided_at"] > 0
    [step] = [s for s in after["proposed_steps"] if s["action"] == "handover"
              and s["evidence"][0]["job_id"] == "line-2"]
    assert step["reviewer_decision"]["decision"] == "retry"
    assert "requeue" in step["description"]
    reviews = (tmp_path / "out" / "a.jsonl.reviews.jsonl").read_text("utf-8").splitlines()
    assert len(reviews) == 1  # appended, one line per decision


def test_a_method_outside_the_job_file_is_refused_before_any_attempt(tmp_path: Path) -> None:
    with serve_in_thread(SandboxConfig(rentals=2)) as sandbox:
        host = sandbox.url("/").split("/")[2]
        urls = write_urls(tmp_path / "in.txt", [sandbox.url("/rentals/1/availability"),
                                                sandbox.url("/rentals/2/availability")])
        job = _job_file(tmp_path, [host], methods=("HEAD",))  # fetch sends GET
        fetched = run_cli("fetch", str(urls), "--job-file", str(job), "--quiet", cwd=tmp_path)
        sent = sandbox.stats()["count"]
    assert fetched.returncode == 1, fetched.stdout + fetched.stderr
    assert "refused 2 operation(s)" in fetched.stdout
    assert sent == 0
    lines = read_lines(tmp_path / "out" / "r.jsonl")
    assert [(line["outcome"], line["attempts"]) for line in lines] == [("rejected", 0)] * 2
    assert all("method GET is not among" in line["detail"] for line in lines)


def _conflicted() -> dict[str, Any]:
    outcome: Outcome[Any] = Outcome(Reason.RATE_LIMITED, "op-1", 1, (), 0.1, retry_at=2e9,
                                    conflicts=("retry-after+x-ratelimit-reset: they disagree",),
                                    job_id="A07", method="GET")
    return audit_record(outcome, recorded_at=1.9e9)


def test_a_decision_on_every_conflicting_record_clears_review_required() -> None:
    record = _conflicted()
    assert review_report([record])["review_required"] is True
    other = {"operation_id": "someone-else", "decision": "accept", "reviewer": "x"}
    assert review_report([record], decisions=[other])["review_required"] is True
    decision = {"operation_id": "op-1", "decision": "accept", "reviewer": "dana",
                "note": None, "decided_at": 1.95e9}
    report = review_report([record], decisions=[decision])
    assert report["review_required"] is False, report["draft_explanation"]
    by_fixture = {**decision, "operation_id": "A07"}
    assert review_report([record], decisions=[by_fixture])["review_required"] is False
    assert report["draft_explanation"].endswith("Every step above is proposed, not done.")
    assert "no owner named" in report["draft_explanation"]


@pytest.mark.parametrize("argv", [
    ["review", "decide", "missing.jsonl", "op", "--decision", "accept", "--reviewer", "a"],
    ["review", "decide", "a.jsonl", "nope", "--decision", "accept", "--reviewer", "a"],
    ["review", "decide", "a.jsonl", "op-1", "--decision", "maybe", "--reviewer", "a"],
    ["review", "decide", "a.jsonl", "op-1", "--decision", "accept", "--reviewer", " "],
    ["review", "decide", "a.jsonl", "op-1", "--decision", "accept"],
    ["review", "decide", "a.jsonl", "op-1", "--decision", "accept", "--reviewer", "a",
     "--queue", "a.jsonl"],  # only a retry is requeued
    ["review", "decide", "a.jsonl", "op-1", "--decision", "retry", "--reviewer", "a",
     "--queue", "missing.sqlite"],
    ["review", "decide", "a.jsonl", "op-1", "--decision", "retry", "--reviewer", "a",
     "--queue", "s.sqlite"],  # a queue without that operation
    ["review", "list", "missing.jsonl"],
    ["review", "list"],
    ["fetch", "in.txt", "--job-file", "missing.toml"],
    ["fetch", "in.txt", "--job-file", "bad.toml"],
])
def test_bad_review_input_is_one_line_and_exit_2(tmp_path: Path, argv: list[str]) -> None:
    (tmp_path / "a.jsonl").write_text(json.dumps(_conflicted()) + "\n", "utf-8")
    SqliteQueue(tmp_path / "s.sqlite").close()
    (tmp_path / "bad.toml").write_text('policy = "background"\n', "utf-8")  # no owner
    write_urls(tmp_path / "in.txt", ["http://127.0.0.1:9/x"])
    result = run_cli(*argv, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert one_line_error(result)
    assert not (tmp_path / "a.jsonl.reviews.jsonl").exists()  # nothing recorded


def test_a_404_reviewed_with_retry_is_requeued_run_again_and_shown_in_the_report(
        tmp_path: Path) -> None:
    with restored_provider() as provider:
        base = f"http://{provider.host}"
        urls = write_urls(tmp_path / "in.txt", [f"{base}/rentals/{n}/availability"
                                                for n in (1, 2, 3)])
        job = _job_file(tmp_path, [provider.host])
        fetch = ("fetch", str(urls), "--job-file", str(job), "--quiet")
        first = run_cli(*fetch, cwd=tmp_path)
        audit, state = tmp_path / "out" / "a.jsonl", tmp_path / "out" / "s.sqlite"
        listed = run_cli("review", "list", str(audit))
        decided = run_cli("review", "decide", str(audit), "line-2", "--decision", "retry",
                          "--reviewer", "dana", "--note", "record restored upstream",
                          "--queue", str(state))
        left = run_cli("review", "list", str(audit), "--json")
        second = run_cli(*fetch, cwd=tmp_path)
        requests = dict(provider.seen)
    assert first.returncode == 1, first.stdout + first.stderr  # the 404 failed
    assert listed.returncode == 0, listed.stderr
    head, case, hint = listed.stdout.splitlines()
    assert head == f"1 case(s) await a decision in {audit} (owner: Dana Example <dana@example.com>):"
    assert case.startswith("  line-2  not_found: ")
    evidence = re.fullmatch(r".*\(audit line (\d+)\)", case)
    assert evidence is not None
    named = audit.read_text("utf-8").splitlines()[int(evidence.group(1)) - 1]
    assert json.loads(named)["job_id"] == "line-2"  # the line shows that operation's record
    assert "review decide" in hint
    assert decided.returncode == 0, decided.stderr
    assert decided.stdout.splitlines()[1] == ("requeued line-2: run the job again (the same "
                                              "fetch command) to send it")
    assert left.stdout == ""  # nothing awaits a decision any more
    assert second.returncode == 0, second.stdout + second.stderr
    assert requests == {f"/rentals/{n}/availability": 2 if n == 2 else 1 for n in (1, 2, 3)}
    lines = read_lines(tmp_path / "out" / "r.jsonl")
    assert sorted((line["id"], line["outcome"]) for line in lines) == [
        ("line-1", "ok"), ("line-2", "ok"), ("line-3", "ok")]  # each once, the retry ok
    exported = run_cli("queue", "export", str(state))
    ops = [json.loads(line) for line in exported.stdout.splitlines()]
    assert sorted(op["id"] for op in ops) == ["line-1", "line-2", "line-3"]
    [again] = [op for op in ops if op["id"] == "line-2"]
    assert [h["outcome"] for h in again["history"]] == ["not_found", "ok"]
    text = run_cli("report", str(audit)).stdout
    assert "reviewer decisions (1):" in text
    [shown] = [line for line in text.splitlines() if line.startswith("  - line-2: retry by dana")]
    assert shown.endswith("(requeued): record restored upstream")
    report = _report(audit)
    [step] = [s for s in report["proposed_steps"] if s["action"] == "handover"]
    assert "requeued as line-2" in step["description"]
    assert report["review_required"] is False, report["draft_explanation"]

