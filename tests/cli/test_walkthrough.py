"""The job owner's walkthrough, from a fresh checkout's point of view, as real processes.

Two ``fetch --queue`` workers on one Redis job under a job file (one host of the input is
outside it); one worker is SIGKILLed while it holds leases; a record the provider is missing
(404) is listed for review, decided ``retry`` with ``--queue``, and the job is run again.
The dead worker's operations come back within a minute, every operation ends recorded
exactly once, and the decision shows in the report of the job's merged audit files.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
from pathlib import Path

from retrybudget import SYSTEM_CLOCK
from tests.support.cli import (
    held_by,
    read_lines,
    restored_provider,
    run_cli,
    start_cli,
    wait_for,
    write_urls,
)
from tests.support.redis import RedisServer

N = 16
JOB = "rentals"
OWNER = "Dana Example <dana@example.com>"


def _reap(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)


def test_the_job_owners_walkthrough(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis")
    server.directory.mkdir()
    server.start()
    procs: list[subprocess.Popen[str]] = []
    with contextlib.ExitStack() as stack:
        stack.callback(server.stop)
        stack.callback(_reap, procs)
        provider = stack.enter_context(restored_provider(latency=0.3))
        # missing until the owner's decision: a victim killed with its request for it in flight
        # took a 404 no one recorded, and the survivor's request must find it missing too
        provider.restored = False
        host = provider.host
        urls = [f"http://{host}/rentals/{n}/availability" for n in range(1, N + 1)]
        urls.append("http://203.0.113.9/rentals/1/availability")  # outside the job file
        homes = {}
        for name in ("a", "b"):
            home = homes[name] = tmp_path / name
            home.mkdir()
            write_urls(home / "rentals.txt", urls)
            (home / "job.toml").write_text(
                f'owner = "{OWNER}"\npolicy = "background"\n\n[inputs]\n'
                f'hosts = ["{host}"]\nmethods = ["GET"]\n', "utf-8")

        def fetch(name: str, *extra: str) -> subprocess.Popen[str]:
            proc = start_cli("fetch", "rentals.txt", "--job-file", "job.toml", "--workers", "2",
                             "--queue", server.url, "--job", JOB, "--redis",
                             server.url, *extra, cwd=homes[name])
            procs.append(proc)
            return proc

        victim, survivor = fetch("a", "--quiet"), fetch("b", "--quiet")
        audits = [homes[name] / "out" / "rentals.audit.jsonl" for name in ("a", "b")]
        wait_for(lambda: audits[0].exists() and len(held_by(server.url, JOB, victim.pid)) >= 2, 60,
                 "the victim to record an operation and hold two leases")
        victim.send_signal(signal.SIGKILL)
        victim.communicate(timeout=30)
        killed = SYSTEM_CLOCK.monotonic()
        out, err = survivor.communicate(timeout=120)
        recovered = SYSTEM_CLOCK.monotonic() - killed
        listed = run_cli("review", "list", *map(str, audits), "--json")
        cases = {case["id"]: case for case in map(json.loads, listed.stdout.splitlines())}
        assert "line-2" in cases, (listed.stdout, out, err)  # the 404, listed for review
        holder = cases["line-2"]["evidence"][0].rsplit(":", 1)[0]  # the file that holds it
        decided = run_cli("review", "decide", holder, "line-2", "--decision", "retry",
                          "--reviewer", "dana", "--note", "record restored upstream",
                          "--queue", server.url, "--job", JOB)
        provider.restored = True
        asked = provider.seen["/rentals/2/availability"]  # 1, or 2 when the victim's was lost
        again = fetch("b", "--quiet")
        again_out, again_err = again.communicate(timeout=120)
        exported = run_cli("queue", "export", server.url, "--job", JOB)
        report = run_cli("report", *map(str, audits))
        requests = dict(provider.seen)
    assert survivor.returncode == 1, (out, err)  # the 404 and the refused host failed
    assert recovered <= 60.0, recovered  # the dead worker's jobs came back within a minute
    assert set(cases) == {"line-2", f"line-{N + 1}"}  # the 404, and the refused request
    assert holder in map(str, audits)
    assert cases["line-2"]["outcome"] == "not_found"
    assert cases["line-2"]["owner"] == OWNER
    assert decided.returncode == 0, decided.stderr
    assert "requeued line-2" in decided.stdout
    assert again.returncode == 0, (again_out, again_err)
    ops = {op["id"]: op for op in map(json.loads, exported.stdout.splitlines())}
    assert sorted(ops) == sorted(f"line-{n}" for n in range(1, N + 2))  # each recorded once
    for op_id, op in ops.items():
        assert [h["action"] for h in op["history"]].count("complete") == (
            2 if op_id == "line-2" else 1)  # line-2: the 404, then the decided retry
    assert ops["line-2"]["result"]["ok"]
    assert ops[f"line-{N + 1}"]["result"]["outcome"] == "rejected"
    assert asked in (1, 2)
    assert requests["/rentals/2/availability"] == asked + 1  # the decided retry, once
    results = read_lines(audits[1].parent / "rentals.results.jsonl")
    assert sorted(line["id"] for line in results) == sorted(ops)
    assert report.returncode == 0, report.stderr
    assert report.stdout.startswith("merged 2 audit files")
    assert any(line.startswith("  - line-2: retry by dana") and "(requeued)" in line
               for line in report.stdout.splitlines())
