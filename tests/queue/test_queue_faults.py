"""The queue under faults: killed workers, a restarted Redis, duplicate deliveries, clock jumps."""

from __future__ import annotations

import signal
import threading
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from retrybudget import SYSTEM_CLOCK, FakeClock
from retrybudget.core.outcome import Outcome, Reason
from retrybudget.queue import JobQueue, Lease, QueueConfig, RedisQueue, SqliteQueue, drain
from tests.support.queue import QueueBackend, outcome, spawn_worker
from tests.support.redis import RedisServer

pytest_plugins = ("tests.support.queue",)


def _wait_for(path_glob: Path, pattern: str, limit: float = 60.0) -> list[Path]:
    """Poll (bounded; a loaded machine starts Python slowly) until a file matches."""
    waited = 0.0
    while waited < limit:
        found = sorted(path_glob.glob(pattern))
        if found:
            return found
        SYSTEM_CLOCK.sleep(0.05)
        waited += 0.05
    raise AssertionError(f"nothing matched {pattern} within {limit} s")


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_a_worker_killed_mid_operation_is_taken_over_and_recorded_once(
        kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    job = uuid.uuid4().hex[:10]
    if kind == "sqlite":
        url = str(tmp_path / "q.sqlite")
        queue: JobQueue = SqliteQueue(url)
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        url = server.url
        queue = RedisQueue(url, job)
    ops = [f"op{n}" for n in range(6)]
    for op in ops:
        queue.enqueue(op)
    victim = spawn_worker(url, job, "victim", 600.0, 1.0, tmp_path)
    try:
        [started] = _wait_for(tmp_path, "started-victim-*")
        victim.send_signal(signal.SIGKILL)
        victim.wait(30)
    finally:
        if victim.poll() is None:
            victim.kill()
    taken = started.name.removeprefix("started-victim-")
    rescuer = spawn_worker(url, job, "rescuer", 0.0, 1.0, tmp_path)
    assert rescuer.wait(120) == 0
    recorded = [op.op_id for op in queue.export()]
    assert sorted(recorded) == sorted(ops)  # each once
    op = queue.get(taken)
    assert op is not None
    assert op.leases == 2  # the victim's lease, then the rescuer's
    assert [h["worker"] for h in op.history] == ["rescuer"]
    assert op.result is not None
    assert op.result["result"] == {"by": "rescuer"}
    queue.close()


def test_redis_restarted_mid_job_with_aof_loses_no_operation(aof_redis: RedisServer) -> None:
    queue = RedisQueue(aof_redis.url, "restart", QueueConfig(visibility_timeout=2.0, jitter=0.0))
    ops = [f"op{n}" for n in range(40)]
    for op in ops:
        queue.enqueue(op)
    runs: Counter[str] = Counter()
    restarted = threading.Event()

    def handle(lease: Lease) -> tuple[Outcome[Any], dict[str, Any]]:
        runs[lease.op_id] += 1
        if sum(runs.values()) == 15 and not restarted.is_set():
            aof_redis.stop()  # SIGKILL: only what the append-only file holds survives
            aof_redis.start()
            restarted.set()
        SYSTEM_CLOCK.sleep(0.005)
        return outcome(Reason.OK, op=lease.op_id), {"n": runs[lease.op_id]}

    drain(queue, handle, worker="w", poll=0.05)
    assert restarted.is_set()
    assert sorted(op.op_id for op in queue.export()) == sorted(ops)
    assert queue.counts()["done"] == 40
    assert queue.pending() == 0
    queue.close()


def test_a_duplicate_stream_entry_never_produces_a_second_outcome(redis_server: RedisServer) -> None:
    queue = RedisQueue(redis_server.url, uuid.uuid4().hex[:10])
    queue.enqueue("a")
    stream = queue._stream
    queue.client.xadd(stream, {"id": "a"})  # delivered twice while it is running
    first = queue.lease("w1")
    assert first is not None
    assert queue.lease("w2") is None  # the duplicate is acknowledged and skipped
    assert queue.complete(first, outcome(Reason.OK)) is not None
    queue.client.xadd(stream, {"id": "a"})  # and again once recorded
    assert queue.lease("w3") is None
    assert [op.op_id for op in queue.export()] == ["a"]
    assert queue.client.xlen(stream) == 0
    queue.close()


def test_many_threads_on_two_handles_record_each_operation_once(qbackend: QueueBackend) -> None:
    queues = [qbackend.make(), qbackend.make()]
    ops = [f"op{n}" for n in range(60)]
    for op in ops:
        queues[0].enqueue(op)
    runs: Counter[str] = Counter()
    lock = threading.Lock()

    def handle(lease: Lease) -> tuple[Outcome[Any], None]:
        with lock:
            runs[lease.op_id] += 1
        return outcome(Reason.OK), None

    threads = [threading.Thread(target=drain, args=(queues[n % 2], handle),
                                kwargs={"worker": f"w{n}", "poll": 0.01}) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sorted(op.op_id for op in queues[1].export()) == sorted(ops)
    assert set(runs.values()) == {1}


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_a_clock_that_jumps_does_not_fire_deferred_work_early(
        kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    clock = FakeClock(wall=SYSTEM_CLOCK.wall())
    config = QueueConfig(jitter=5.0)
    if kind == "sqlite":
        queue: JobQueue = SqliteQueue(tmp_path / "q.sqlite", config, clock=clock)
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        queue = RedisQueue(server.url, uuid.uuid4().hex[:10], config, clock=clock)
    retry_at = clock.wall() + 3600
    queue.enqueue("a")
    started: list[float] = []

    def handle(lease: Lease) -> tuple[Outcome[Any], None]:
        started.append(clock.wall())
        if len(started) == 1:
            return outcome(Reason.RATE_LIMITED, retry_at), None
        return outcome(Reason.OK), None

    lease = queue.lease("w")
    assert lease is not None
    queue.complete(lease, *handle(lease))
    due = queue.next_due()
    assert due is not None
    assert retry_at <= due <= retry_at + 5.0
    for jump in (1.0, 600.0, 2998.0):  # the clock leaps forward, still short of the instant
        clock.advance(jump)
        assert queue.lease("w") is None
    drain(queue, handle, worker="w", poll=30.0)  # sleeps on the fake clock until it is due
    assert len(started) == 2
    assert started[1] >= due
    assert started[1] - due < 30.0
    queue.close()


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_threads_on_one_handle_wait_for_due_work_as_one_poller(
        kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Idle loops sharing a handle do not each poll the queue: one waits, the rest behind it.

    Counted, not timed: every lease call that found nothing. One poller asks about once per
    ``poll`` until the instant (and again while the operation runs); each other loop asks a
    few times (when it starts, when it takes its turn, when the job is done). Six loops
    polling on their own would each ask once per ``poll``: six times as often.
    """
    config = QueueConfig(jitter=0.0)
    if kind == "sqlite":
        queue: JobQueue = SqliteQueue(tmp_path / "q.sqlite", config)
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        queue = RedisQueue(server.url, uuid.uuid4().hex[:10], config)
    ahead, poll, loops = 0.4, 0.02, 6
    due = queue.clock.wall() + ahead
    queue.enqueue("later", at=due)
    found: list[bool] = []
    lock = threading.Lock()
    lease_once = queue.lease

    def counted(worker: str) -> Lease | None:
        got = lease_once(worker)
        with lock:
            found.append(got is not None)
        return got

    queue.lease = counted  # type: ignore[method-assign]
    started: list[float] = []

    def handle(lease: Lease) -> tuple[Outcome[Any], None]:
        started.append(queue.clock.wall())
        return outcome(Reason.OK), None

    threads = [threading.Thread(target=drain, args=(queue, handle),
                                kwargs={"worker": f"w{n}", "poll": poll}) for n in range(loops)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    assert len(started) == 1
    assert started[0] >= due
    assert found.count(True) == 1
    empty = found.count(False)
    assert empty <= 2 * ahead / poll + 3 * loops, empty  # alone: loops * ahead / poll
    queue.close()
