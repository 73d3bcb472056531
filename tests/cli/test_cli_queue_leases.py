"""A killed ``fetch --queue`` worker's operations come back: its leases lapse within the
30 s lease whatever the deadline (the survivor takes them), ``queue status`` names their
dead holder and expiry, and ``queue release --dead`` returns them at once. Real processes:
``python -m retrybudget`` against a sandbox on loopback and a redis-server of its own."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from retrybudget import SYSTEM_CLOCK
from retrybudget.queue import SqliteQueue
from retrybudget.sandbox import Faults, SandboxConfig, serve_in_thread
from tests.support.cli import (
    held_by,
    one_line_error,
    read_lines,
    run_cli,
    start_cli,
    wait_for,
    write_urls,
)
from tests.support.redis import RedisServer

N = 24
JOB = "rentals"


def _start(home: Path, url: str, *extra: str) -> subprocess.Popen[str]:
    # background's deadline is 900 s: the lease no longer grows with it
    return start_cli("fetch", "rentals.txt", "--workers", "2", "--policy", "background",
                     "--queue", url, "--job", JOB, *extra, cwd=home)


def _kill_holding(proc: subprocess.Popen[str], server: RedisServer) -> list[str]:
    """SIGKILL ``proc`` as soon as it holds two leases (killed anyway if it never does); the
    operations it held."""
    try:
        wait_for(lambda: len(held_by(server.url, JOB, proc.pid)) >= 2, 60,
                 "the victim to hold two leases")
        return held_by(server.url, JOB, proc.pid)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)


@contextlib.contextmanager
def _world(tmp_path: Path) -> Iterator[tuple[RedisServer, Any, list[str]]]:
    """A redis-server of its own and a sandbox whose answers each take half a second."""
    server = RedisServer(tmp_path / "redis")
    server.directory.mkdir()
    server.start()
    try:
        with serve_in_thread(SandboxConfig(rentals=N, faults=Faults(latency_s=0.5))) as sandbox:
            yield server, sandbox, [sandbox.url(f"/rentals/{i}/availability")
                                    for i in range(1, N + 1)]
    finally:
        server.stop()


def _homes(tmp_path: Path, urls: list[str], *names: str) -> list[Path]:
    homes = []
    for name in names:
        home = tmp_path / name
        home.mkdir()
        write_urls(home / "rentals.txt", urls)
        homes.append(home)
    return homes


def test_a_killed_workers_jobs_are_taken_by_the_survivor_within_a_minute(tmp_path: Path) -> None:
    with _world(tmp_path) as (server, sandbox, urls):
        victim_home, survivor_home = _homes(tmp_path, urls, "victim", "survivor")
        # both coordinate (gate, pacing) on the queue's own Redis database, as by default: a
        # killed holder's in-flight attempts stop counting there once it is no longer live
        victim = _start(victim_home, server.url, "--quiet", "--redis", server.url)
        survivor = _start(survivor_home, server.url, "--redis", server.url)
        try:
            held = _kill_holding(victim, server)
            killed = SYSTEM_CLOCK.monotonic()
            out, err = survivor.communicate(timeout=120)
            finished = SYSTEM_CLOCK.monotonic()
        finally:
            for proc in (victim, survivor):
                if proc.poll() is None:
                    proc.kill()
                    proc.communicate(timeout=30)
        stats = sandbox.stats()
        exported = run_cli("queue", "export", server.url, "--job", JOB)
    assert survivor.returncode == 0, (out, err)
    assert finished - killed <= 60.0, "the dead worker's operations came back within a minute"
    ops = {op["id"]: op for op in map(json.loads, exported.stdout.splitlines())}
    assert sorted(ops) == sorted(f"line-{i}" for i in range(1, N + 1))
    for op in ops.values():  # each recorded exactly once, as a success
        assert [h["action"] for h in op["history"]].count("complete") == 1
        assert op["result"]["ok"]
    for op_id in held:  # the victim's leases: the survivor recorded them
        assert ops[op_id]["leases"] >= 2
        assert f"-{survivor.pid}-" in ops[op_id]["history"][-1]["worker"]
    # (the progress names what it waits for while leases are held, "leased by …"; on this host
    # a dead holder's leases are released at once, so whether a redraw shows it is a race)
    assert stats["by_status"].get("200", 0) <= N + len(held)  # a killed request may have been answered
    assert sorted(line["id"] for line in read_lines(survivor_home / "out" / "rentals.results.jsonl")
                  ) == sorted(ops)


def test_queue_status_names_a_dead_holder_and_release_dead_frees_its_jobs_at_once(
        tmp_path: Path) -> None:
    with _world(tmp_path) as (server, _sandbox, urls):
        [home] = _homes(tmp_path, urls, "victim")
        victim = _start(home, server.url, "--quiet")
        held = _kill_holding(victim, server)
        status = json.loads(run_cli("queue", "status", server.url, "--job", JOB).stdout)
        mine = [lease for lease in status["leases"] if f"-{victim.pid}-" in lease["worker"]]
        released = run_cli("queue", "release", server.url, "--job", JOB, "--dead")
        after = json.loads(run_cli("queue", "status", server.url, "--job", JOB).stdout)
        again = run_cli("queue", "release", server.url, "--job", JOB, "--dead")
    assert sorted(lease["id"] for lease in mine) == sorted(held)
    for lease in mine:
        assert lease["holder"] == "dead"
        assert 0 < lease["expires_in"] <= 30.0  # the 30 s lease, not 2 x 900 + 10
    assert released.returncode == 0, released.stderr
    assert released.stdout.startswith(f"released {len(held)} operation(s) (")
    assert f"-{victim.pid}-" in released.stdout
    assert after["leases"] == []
    assert after["counts"]["leased"] == 0
    assert again.stdout.strip() == "released 0 operation(s) (no dead worker holds a lease)"


def test_queue_release_on_a_state_file_by_worker_name_and_bad_input(tmp_path: Path) -> None:
    state = tmp_path / "job.sqlite"
    queue = SqliteQueue(state)
    for op in ("a", "b", "c"):
        queue.enqueue(op)
    for worker in ("elsewhere-1-0", "elsewhere-1-0", "other-2-0"):
        assert queue.lease(worker) is not None
    queue.close()
    status = json.loads(run_cli("queue", "status", str(state)).stdout)
    assert [(lease["id"], lease["worker"], lease["holder"]) for lease in status["leases"]] == [
        ("a", "elsewhere-1-0", "unknown"), ("b", "elsewhere-1-0", "unknown"),
        ("c", "other-2-0", "unknown")]
    assert all(0 < lease["expires_in"] <= 30.0 for lease in status["leases"])
    released = run_cli("queue", "release", str(state), "--worker", "elsewhere-1-0")
    assert released.stdout.strip() == "released 2 operation(s) (elsewhere-1-0)"
    after = json.loads(run_cli("queue", "status", str(state)).stdout)
    assert (after["counts"]["pending"], after["counts"]["leased"]) == (2, 1)
    for argv in (["queue", "release", str(state)],  # which workers: required
                 ["queue", "release", str(state), "--dead", "--worker", "x"],
                 ["queue", "release", str(tmp_path / "missing.sqlite"), "--dead"]):
        one_line_error(run_cli(*argv))


def test_a_fetch_started_again_on_the_host_releases_its_dead_predecessors_leases(
        tmp_path: Path) -> None:
    with _world(tmp_path) as (server, _sandbox, urls):
        [home] = _homes(tmp_path, urls, "host")
        # one shared coordination database, as in the survivor's test above
        victim = _start(home, server.url, "--quiet", "--redis", server.url)
        held = _kill_holding(victim, server)
        again = run_cli("fetch", "rentals.txt", "--workers", "2", "--policy", "background",
                        "--queue", server.url, "--job", JOB, "--quiet", "--redis",
                        server.url, cwd=home, timeout=120)
        exported = run_cli("queue", "export", server.url, "--job", JOB)
    assert again.returncode == 0, again.stdout + again.stderr
    # released at the start (not after the 30 s lease): the summary counts them as resumed
    assert again.stdout.startswith(f"resumed: {len(held)} interrupted,"), again.stdout
    ops = [json.loads(line) for line in exported.stdout.splitlines()]
    assert sorted(op["id"] for op in ops) == sorted(f"line-{i}" for i in range(1, N + 1))
