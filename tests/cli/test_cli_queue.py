"""``fetch --queue`` across processes, and ``queue status|requeue|export``, as subprocesses."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from retrybudget import FakeClock, Policy, Retrier
from retrybudget.cli._fetch import queued
from retrybudget.coordination import Coordinator
from retrybudget.core.actions import Permit
from retrybudget.core.outcome import Outcome, Reason, WaitReason
from retrybudget.queue import SqliteQueue
from retrybudget.sandbox import Faults, RateLimit, SandboxConfig, serve_in_thread
from retrybudget.testing import ScriptedProvider
from tests.support.cli import one_line_error, read_lines, run_cli, start_cli, write_urls
from tests.support.redis import RedisServer


class _Paced(Coordinator):
    """Asks for one pacing wait of ``wait`` seconds, then lets the request go."""

    def __init__(self, wait: float) -> None:
        self.wait = wait
        self.asked = 0

    def acquire(self, key: str, attempt: int) -> Permit:
        self.asked += 1
        return Permit(wait=self.wait, reason=WaitReason.PACING) if self.asked == 1 else Permit()


@pytest.mark.parametrize(("deadline", "wait", "slept"), [
    (1.0, 0.4, True),    # half the deadline is left for the attempt: the wait is taken
    (1.0, 0.7, False),   # 0.3 s would be left: deferred to the slot instead
    (120.0, 118.5, True),
    (120.0, 119.5, False),  # less than a second would be left
])
def test_a_fetch_operation_defers_a_wait_that_would_leave_its_attempt_no_time(
        deadline: float, wait: float, slept: bool) -> None:
    clock = FakeClock()
    policy = queued(Policy(deadline=deadline))
    provider = ScriptedProvider([{"status": 200, "body": "{}"}], clock)
    outcome = Retrier(policy=policy, clock=clock, coordinator=_Paced(wait)).call(provider)
    if slept:
        assert (outcome.reason, provider.count, clock.sleeps) == (Reason.OK, 1, [wait])
    else:
        assert (outcome.reason, provider.count, clock.sleeps) == (Reason.RATE_LIMITED, 0, [])
        assert outcome.retry_at == clock.wall() + wait  # the offered slot: the queue runs it then


def test_the_queued_policy_only_raises_the_attempt_time() -> None:
    assert queued(Policy(deadline=1.0)).min_attempt_time == 0.5
    assert queued(Policy(deadline=300.0)).min_attempt_time == 1.0
    assert queued(Policy(deadline=10.0, min_attempt_time=3.0)).min_attempt_time == 3.0
    assert queued(Policy(deadline=None)).min_attempt_time == Policy(deadline=None).min_attempt_time


def test_fetch_processes_in_separate_directories_drain_one_job_through_redis(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis")
    server.directory.mkdir()
    server.start()
    n = 60
    try:
        limit = RateLimit(limit=20, window_s=1, style="retry-after")
        config = SandboxConfig(rentals=n, rate_limit=limit, faults=Faults(latency_s=0.1))
        with serve_in_thread(config) as sandbox:
            urls = [sandbox.url(f"/rentals/{i}/availability") for i in range(1, n + 1)]
            procs = []
            for host in ("host-a", "host-b", "host-c"):
                home = tmp_path / host
                home.mkdir()
                write_urls(home / "rentals.txt", urls)  # each host its own copy of the input
                procs.append(start_cli("fetch", "rentals.txt", "--workers", "2", "--quiet",
                                       "--queue", server.url, "--deadline", "30", cwd=home))
            for proc in procs:
                out, err = proc.communicate(timeout=180)
                assert proc.returncode == 0, (out, err)
            stats = sandbox.stats()
        exported = run_cli("queue", "export", server.url, "--job", "rentals")
        status = run_cli("queue", "status", server.url, "--job", "rentals")
    finally:
        server.stop()
    assert exported.returncode == 0, exported.stderr
    ops = [json.loads(line) for line in exported.stdout.splitlines()]
    assert sorted(op["id"] for op in ops) == sorted(f"line-{i}" for i in range(1, n + 1))
    for op in ops:  # each outcome recorded exactly once
        assert [h["action"] for h in op["history"]].count("complete") == 1
        assert op["result"]["ok"]
    workers = {h["worker"].rsplit("-", 1)[0] for op in ops for h in op["history"]}
    assert len(workers) >= 2, "more than one process took part"
    assert json.loads(status.stdout)["counts"]["done"] == n
    for host in ("host-a", "host-b", "host-c"):  # every host's results file holds the whole job
        lines = read_lines(tmp_path / host / "out" / "rentals.results.jsonl")
        assert sorted(line["id"] for line in lines) == sorted(op["id"] for op in ops)
    ok_requests = stats["by_status"].get("200", 0)
    assert ok_requests == n  # nothing succeeded twice


def _state_with(tmp_path: Path) -> Path:
    path = tmp_path / "job.sqlite"
    queue = SqliteQueue(path)
    for op, reason in (("a", Reason.OK), ("b", Reason.REJECTED)):
        queue.enqueue(op, {"url": f"http://x/{op}"})
        lease = queue.lease("w")
        assert lease is not None
        queue.complete(lease, Outcome(reason, op, 1, (), 0.0), {"id": op})
    queue.enqueue("c")
    queue.close()
    return path


def test_queue_status_requeue_and_export_on_a_state_file(tmp_path: Path) -> None:
    state = _state_with(tmp_path)
    status = run_cli("queue", "status", str(state))
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    assert report["counts"]["done"] == 2
    assert report["unfinished"] == 1
    exported = run_cli("queue", "export", str(state), "--out", str(tmp_path / "x.jsonl"))
    assert exported.returncode == 0
    assert [line["id"] for line in read_lines(tmp_path / "x.jsonl")] == ["a", "b"]
    assert run_cli("queue", "requeue", str(state)).stdout.strip() == "requeued 0 operation(s)"
    again = run_cli("queue", "requeue", str(state), "--failed", "--op", "b", "--op", "a")
    assert again.stdout.strip() == "requeued 1 operation(s)"
    assert Counter(json.loads(run_cli("queue", "status", str(state)).stdout)["counts"]) [
        "pending"] == 2


@pytest.mark.parametrize("argv", [
    ["queue", "status", "missing.sqlite"],
    ["queue", "export", "notes.txt"],
    ["queue", "status", "redis://127.0.0.1:1/0", "--job", "x"],
    ["queue", "requeue", "redis://127.0.0.1:1/0"],
    ["queue", "nothing"],
    ["queue"],
    ["fetch", "urls.txt", "--queue", "http://127.0.0.1:1/"],
    ["fetch", "urls.txt", "--max-deferrals", "-1"],
])
def test_bad_queue_input_is_one_line_and_exit_2(tmp_path: Path, argv: list[str]) -> None:
    (tmp_path / "notes.txt").write_text("not a database\n", "utf-8")
    write_urls(tmp_path / "urls.txt", ["http://127.0.0.1:9/x"])
    result = run_cli(*argv, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert one_line_error(result)
