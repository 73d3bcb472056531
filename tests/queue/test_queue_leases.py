"""Leases follow their worker: renewed while it runs, listed with holder and expiry, released
when the worker is known dead; once per backend (SQLite and a real redis-server)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from retrybudget import SYSTEM_CLOCK
from retrybudget.core.outcome import Reason
from retrybudget.queue import Holder, QueueConfig, SqliteQueue, drain, holder_state, worker_name
from tests.support.queue import QueueBackend, outcome

pytest_plugins = ("tests.support.queue",)


def _gone_pid() -> int:
    """The pid of a process of this host that has exited."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(30)
    return proc.pid


def _pass(qbackend: QueueBackend, fraction: float) -> None:
    """Let ``fraction`` of the visibility timeout pass (on the clock the backend's leases use)."""
    if qbackend.url is None:
        from retrybudget import FakeClock

        assert isinstance(qbackend.clock, FakeClock)
        qbackend.clock.advance(qbackend.visibility * fraction)
    else:
        SYSTEM_CLOCK.sleep(qbackend.visibility * fraction)


def test_a_renewed_lease_outlives_its_timeout_and_lapses_once_renewals_stop(
        qbackend: QueueBackend) -> None:
    q = qbackend.make()
    q.enqueue("a")
    lease = q.lease("w1")
    assert lease is not None
    for _ in range(3):  # three renewals, each before the lease would lapse: 1.8 timeouts in all
        _pass(qbackend, 0.6)
        assert q.renew(lease) is True
        assert q.lease("w2") is None
    qbackend.lapse()
    taken = q.lease("w2")
    assert taken is not None
    assert taken.op_id == "a"
    assert q.renew(lease) is False  # the first holder's lease is gone
    assert q.complete(lease, outcome(Reason.OK)) is None
    assert q.complete(taken, outcome(Reason.OK)) is not None


def test_held_names_each_lease_holder_and_expiry(qbackend: QueueBackend) -> None:
    q = qbackend.make()
    for op in ("a", "b", "c"):
        q.enqueue(op)
    first, second = q.lease("w1"), q.lease("w2")
    assert first is not None
    assert second is not None
    held = {h.op_id: h for h in q.held()}
    assert {op: h.worker for op, h in held.items()} == {"a": "w1", "b": "w2"}
    assert held["a"].expires_at == pytest.approx(first.expires_at)
    assert held["a"].holder() is Holder.UNKNOWN  # not a host-pid-n name
    q.renew(first)
    assert q.held()[0].expires_at >= first.expires_at
    q.complete(first, outcome(Reason.OK))
    assert [h.op_id for h in q.held()] == ["b"]


def test_release_returns_a_dead_workers_operations_at_once(qbackend: QueueBackend) -> None:
    q = qbackend.make()
    for op in ("a", "b", "c"):
        q.enqueue(op)
    dead = worker_name(0, pid=_gone_pid())
    live = worker_name(1)
    leases = [q.lease(dead), q.lease(dead), q.lease(live)]
    assert all(lease is not None for lease in leases)
    assert q.dead_holders() == [dead]
    assert q.release([]) == 0
    assert q.release(q.dead_holders()) == 2
    assert q.dead_holders() == []
    assert q.counts()["leased"] == 1
    again = [q.lease("rescuer"), q.lease("rescuer")]  # at once, not after a timeout
    assert sorted(lease.op_id for lease in again if lease is not None) == ["a", "b"]
    first = leases[0]
    assert first is not None
    assert q.complete(first, outcome(Reason.OK)) is None  # the dead worker's lease is stale
    for lease in again:
        assert lease is not None
        assert q.complete(lease, outcome(Reason.OK)) is not None
    assert q.counts()["done"] == 2


def test_holder_state_tells_a_live_process_a_gone_one_and_a_stranger() -> None:
    assert holder_state(worker_name(3)) is Holder.ALIVE
    assert holder_state(worker_name(0, pid=_gone_pid())) is Holder.DEAD
    assert holder_state(worker_name(0, host="elsewhere.example")) is Holder.UNKNOWN
    for odd in ("w1", "", "host-x-1", f"{socket.gethostname()}-0-1", "-"):
        assert holder_state(odd) is Holder.UNKNOWN
    assert worker_name(2).startswith(f"{socket.gethostname()}-{os.getpid()}-")


def test_drain_keeps_the_lease_of_an_operation_slower_than_the_timeout(tmp_path: Path) -> None:
    """Real time: the operation takes 2.5 visibility timeouts; another handle polling the
    same file all the while never takes it, and it is run and recorded once. The timeout is
    long enough (a renewal every 0.4 s) that a loaded machine's scheduling delays, which
    reach a few hundred milliseconds, cannot make a renewal miss it."""
    config = QueueConfig(visibility_timeout=1.2, jitter=0.0)
    runner = SqliteQueue(tmp_path / "q.sqlite", config)
    thief = SqliteQueue(tmp_path / "q.sqlite", config)
    runner.enqueue("a")
    runs: list[str] = []
    stolen: list[str] = []
    done = threading.Event()
    running = threading.Event()

    def watch() -> None:
        running.wait(10)  # from the moment the runner holds the lease (not racing it to it)
        while not done.is_set():
            lease = thief.lease("thief")
            if lease is not None:  # taken from under the runner: finish it, so drain ends
                stolen.append(lease.op_id)
                thief.complete(lease, outcome(Reason.OK))
            SYSTEM_CLOCK.sleep(0.05)

    def slow(lease: object) -> tuple[object, None]:
        runs.append(getattr(lease, "op_id", ""))
        running.set()
        SYSTEM_CLOCK.sleep(3.0)
        return outcome(Reason.OK), None

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        assert drain(runner, slow, worker="runner", poll=0.02) == 1  # type: ignore[arg-type]
    finally:
        done.set()
        watcher.join(10)
    assert (runs, stolen) == (["a"], [])
    [recorded] = runner.export()
    assert [h["worker"] for h in recorded.history] == ["runner"]
    runner.close()
    thief.close()
