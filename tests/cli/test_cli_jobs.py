"""The CLI's jobs end to end, as subprocesses: fetch (kill -9 and resume, Redis), demo, check.

The sandbox provider runs in the test process, so its request log is the evidence of what
each run sent.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from retrybudget import SYSTEM_CLOCK
from retrybudget.observe import load_audit
from retrybudget.sandbox import Faults, RateLimit, SandboxConfig, serve_in_thread
from tests.support.cli import (
    count_lines,
    read_lines,
    run_cli,
    start_cli,
    wait_for,
    write_urls,
)
from tests.support.redis import RedisServer

ROOT = Path(__file__).resolve().parents[2]


def _done_ids(state: Path) -> set[str]:
    with sqlite3.connect(state) as db:
        return {row[0] for row in db.execute("SELECT id FROM queue_ops WHERE status IN ('done', 'dead')")}


def test_fetch_killed_with_sigkill_resumes_without_loss_or_duplicates(tmp_path: Path) -> None:
    n, workers = 30, 3
    config = SandboxConfig(rentals=n, faults=Faults(latency_s=0.15))
    with serve_in_thread(config) as sandbox:
        paths = {i: f"/rentals/{i}/availability" for i in range(1, n + 1)}
        urls = write_urls(tmp_path / "rentals.txt", [sandbox.url(p) for p in paths.values()])
        files = ["--state", str(tmp_path / "job.sqlite"), "--out", str(tmp_path / "results.jsonl"),
                 "--audit", str(tmp_path / "audit.jsonl")]
        proc = start_cli("fetch", str(urls), "--workers", str(workers), "--quiet", *files,
                         cwd=tmp_path)
        try:
            wait_for(lambda: count_lines(tmp_path / "results.jsonl") >= 8, 30, "8 results")
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=10)
        assert proc.returncode == -signal.SIGKILL
        killed_at = SYSTEM_CLOCK.wall()
        done_before = _done_ids(tmp_path / "job.sqlite")
        assert 8 <= len(done_before) < n, "the kill must land mid-run"
        # A crash between recording a result and writing its line: the next run repairs it.
        results = tmp_path / "results.jsonl"
        kept = results.read_text("utf-8").splitlines(keepends=True)
        results.write_text("".join(kept[1:-1]) + kept[-1][:10], "utf-8")

        again = run_cli("fetch", str(urls), "--workers", str(workers), *files, cwd=tmp_path)
        assert again.returncode == 0, again.stderr
        assert "resumed:" in again.stdout
        log = sandbox.stats()["requests"]

    lines = read_lines(results)
    ids = [line["id"] for line in lines]
    assert len(ids) == n, "one line per operation"
    assert len(set(ids)) == n, "no duplicate line"
    assert all(line["ok"] and line["value"]["rental_id"] for line in lines)
    by_id = {f"line-{i}": p for i, p in paths.items()}
    # Nothing recorded before the kill was requested again after it.
    after = {r["path"] for r in log if r["arrival"] > killed_at}
    assert not after & {by_id[i] for i in done_before}
    # Only operations in flight at the kill were sent twice; none more than twice.
    seen = Counter(r["path"] for r in log)
    assert set(seen) == set(paths.values())
    repeated = [p for p, c in seen.items() if c > 1]
    assert len(repeated) <= workers
    assert max(seen.values()) <= 2
    assert len(load_audit(tmp_path / "audit.jsonl").records) >= n


def test_fetch_defers_rate_limited_operations_to_retry_at_and_runs_them_then(tmp_path: Path) -> None:
    # A window long enough that the third of four requests lands in it on a loaded machine
    # too (with 2 s, the first two could take it all: no 429, nothing deferred).
    limit = RateLimit(limit=2, window_s=5, style="retry-after")
    with serve_in_thread(SandboxConfig(rentals=5, rate_limit=limit)) as sandbox:
        urls = write_urls(tmp_path / "in.txt", [sandbox.url(f"/rentals/{i}/availability")
                                                for i in range(1, 5)])
        files = ["--state", str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "r.jsonl"),
                 "--audit", str(tmp_path / "a.jsonl")]
        first = run_cli("fetch", str(urls), "--policy", "interactive", "--workers", "1", "--quiet",
                        *files, cwd=tmp_path)
        assert first.returncode == 0, first.stdout + first.stderr
        log = sandbox.stats()["requests"]
    lines = read_lines(tmp_path / "r.jsonl")
    assert Counter(line["outcome"] for line in lines) == {"ok": 4}  # no person reran it
    with sqlite3.connect(tmp_path / "s.sqlite") as db:
        rows = db.execute("SELECT id, history FROM queue_ops").fetchall()
    deferrals = [(op, h) for op, history in rows for h in json.loads(history)
                 if h["action"] == "defer"]
    assert deferrals, "the 429 deferred some operations"
    paths = {f"line-{i}": f"/rentals/{i}/availability" for i in range(1, 5)}
    for op, entry in deferrals:
        assert entry["outcome"] == "rate_limited"
        assert entry["not_before"] >= entry["retry_at"]
        later = [r["arrival"] for r in log if r["path"] == paths[op] and r["arrival"] > entry["at"]]
        assert later, "a deferred operation ran again"
        assert min(later) >= entry["not_before"]  # never before its retry_at


def test_two_fetch_processes_share_one_gate_through_redis(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis")
    server.directory.mkdir()
    server.start()
    try:
        limit = RateLimit(limit=6, window_s=1, style="retry-after")
        with serve_in_thread(SandboxConfig(rentals=40, rate_limit=limit)) as sandbox:
            procs = []
            for name, ids in (("a", range(1, 16)), ("b", range(16, 31))):
                urls = write_urls(tmp_path / f"{name}.txt",
                                  [sandbox.url(f"/rentals/{i}/availability") for i in ids])
                procs.append(start_cli(
                    "fetch", str(urls), "--workers", "3", "--quiet", "--profile", "generic",
                    "--deadline", "30", "--redis", server.url, "--state", str(tmp_path / f"{name}.sqlite"),
                    "--out", str(tmp_path / f"{name}.jsonl"), "--audit", str(tmp_path / f"{name}.a.jsonl"),
                    cwd=tmp_path))
            for proc in procs:
                out, err = proc.communicate(timeout=60)
                assert proc.returncode == 0, (out, err)
            stats = sandbox.stats()
        keys = server.client().keys("retrybudget:*")
    finally:
        server.stop()
    lines = read_lines(tmp_path / "a.jsonl") + read_lines(tmp_path / "b.jsonl")
    assert len(lines) == 30
    assert all(line["ok"] for line in lines)
    assert keys, "the processes coordinated through Redis"
    throttled = stats["by_status"].get("429", 0)
    # One shared gate: after a 429, all six workers of both processes wait for the same
    # instant; at most one herd of in-flight requests per window is turned away.
    assert throttled <= 12, stats["by_status"]
    assert stats["count"] == 30 + throttled


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_readme_quick_start_make_demo_runs_as_written(tmp_path: Path) -> None:
    """`make demo`, as the README's first screen says, run by make itself.

    Only two things differ from a fresh machine: the install step is taken as done (the
    stamp is a fresh file, so make does not rebuild this environment) and the files go to
    a temporary directory (``ARGS="--out ..."``), not into the repository.
    """
    first_screen = "\n".join((ROOT / "README.md").read_text("utf-8").splitlines()[:25])
    assert "make demo" in first_screen
    assert "make test" in first_screen
    stamp = tmp_path / "installed"
    stamp.touch()  # newer than pyproject.toml: the install step is up to date
    bin_dir = Path(sys.executable).parent
    started = SYSTEM_CLOCK.monotonic()
    result = subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), "demo", f"BIN={bin_dir}",
         f"CLI={stamp}", f"ARGS=--out {tmp_path / 'out'}"],
        capture_output=True, text=True, timeout=300, check=False,
    )
    took = SYSTEM_CLOCK.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert "pip install" not in result.stdout  # make ran the demo, not the install step
    # real clock: generous for a loaded machine (the README's minute is for an idle one)
    assert took < 180, f"the demo took {took:.1f} s"
    assert "What happened" in result.stdout
    assert len(read_lines(tmp_path / "out" / "demo-results.jsonl")) == 120
    assert (tmp_path / "out" / "demo-requests.html").stat().st_size > 0


def test_demo_end_to_end(tmp_path: Path) -> None:
    """A small demo: the report printed, results, audit, chart and summary written."""
    args = ["--size", "30", "--workers", "4", "--limit", "10", "--window", "1", "--out", "demo-out"]
    result = run_cli("demo", *args, cwd=tmp_path, timeout=60)
    assert result.returncode == 0, result.stderr
    out = tmp_path / "demo-out"
    for text in ("What happened", "logical operations", "provider requests", "busiest window",
                 "ideal time", "waits: ", "outcome: ok", str(Path("demo-out") / "demo-results.jsonl"),
                 "demo-audit.jsonl", "demo-requests.html"):
        assert text in result.stdout, text
    lines = read_lines(out / "demo-results.jsonl")
    assert len(lines) == 30
    assert len({line["id"] for line in lines}) == 30
    assert all((line["value"] is not None) == (line["outcome"] == "ok") for line in lines)
    assert len(load_audit(out / "demo-audit.jsonl").records) == 30
    page = (out / "demo-requests.html").read_text("utf-8")
    assert "<svg" in page
    assert "provider limit: 10 per 1 s" in page
    assert not re.search(r"<script|<link|src=|https?://(?!www\.w3\.org/2000/svg)", page)
    summary = json.loads((out / "demo-summary.json").read_text("utf-8"))
    assert summary["logical_operations"] == 30
    assert summary["provider"]["requests"] == summary["attempts"]


@pytest.fixture
def policies(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "unbounded.toml").write_text('name = "unbounded"\nmax_attempts = 100\n'
                                            'deadline = "none"\n')
    (tmp_path / "retries-401.toml").write_text(
        'base = "interactive"\nname = "retries-401"\n[profile]\nbase = "generic"\n'
        'rejected = [400, 403]\ntransient = [401, 502, 503, 504]\n')
    return tmp_path


def test_check_passes_for_each_cases_own_policy() -> None:
    result = run_cli("check")
    assert result.returncode == 0, result.stdout
    assert "27 passed, 0 failed, 0 not applicable" in result.stdout
    for text in ("expected:", "actual:", "evidence:", "requests_seen", "Retry-After obeyed",
                 "exhausted budget stops", "authorization failure not retried forever",
                 "no fabricated completion after final failure"):
        assert text in result.stdout, text


def test_check_passes_for_the_interactive_policy() -> None:
    result = run_cli("check", "--policy", "interactive", "--json")
    assert result.returncode == 0, result.stdout
    document = json.loads(result.stdout)
    assert document["passed"]
    assert document["policy"] == "interactive"
    assert {r["status"] for r in document["results"]} == {"pass"}


def test_check_fails_a_policy_that_retries_401(policies: Path) -> None:
    result = run_cli("check", "--policy", str(policies / "retries-401.toml"), "--json",
                     "--only", "A06", "--only", "A09")
    assert result.returncode == 1
    by_id = {r["id"]: r for r in json.loads(result.stdout)["results"]}
    a06 = by_id["A06"]
    assert a06["status"] == "fail"
    assert a06["rule"] == "authorization failure not retried forever"
    assert a06["actual"]["requests"] == 2
    assert a06["evidence"]["requests_seen"] == 2
    assert by_id["A09"]["status"] == "pass"


def test_check_fails_a_policy_without_a_deadline(policies: Path) -> None:
    result = run_cli("check", "--policy", str(policies / "unbounded.toml"), "--time-limit", "2",
                     "--only", "A02", "--only", "R01", "--only", "A06")
    assert result.returncode == 1
    assert re.search(r"FAIL A02 .*exhausted budget stops", result.stdout)
    assert re.search(r"FAIL R01 .*exhausted budget stops", result.stdout)
    assert "budget_bounded deadline = None, max_attempts = 100 ✗" in result.stdout
    assert re.search(r"PASS A06 ", result.stdout)  # a 401 is still answered at once
