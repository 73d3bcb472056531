"""The Celery, Dramatiq and arq hand-offs against real brokers (a redis-server per test, and
for Celery and Dramatiq one RabbitMQ node of its own too, when RabbitMQ is installed; Celery
keeps its results in memory: its worker runs in this process).

A ``rate_limited`` outcome becomes the engine's own delayed retry, run no earlier than its
``retry_at``; a non-retryable outcome fails the task after one run. The clocks are real
(the engines schedule on them): retry_at is one second ahead and the bounds are generous.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrybudget import SYSTEM_CLOCK, RetryBudgetError
from retrybudget.core.outcome import Outcome, Reason
from retrybudget.queue import QueueConfig, Step, handoff
from tests.support.redis import RedisServer
from tests.support.strategies import examples

pytest_plugins = ("tests.support.coordination",)

AHEAD = 1.0
"""How far ahead each test's retry_at lies."""


def _ended(reason: Reason, retry_at: float | None = None, value: Any = None) -> Outcome[Any]:
    return Outcome(reason, "op", 1, (), 0.0, retry_at=retry_at, value=value)


class Script:
    """A task body: the first run is throttled (or rejected), the next succeeds; every run's
    start time is kept."""

    def __init__(self, first: Reason) -> None:
        self.first = first
        self.starts: list[float] = []
        self.retry_at: float | None = None
        self.lock = threading.Lock()

    def next(self) -> Outcome[Any]:
        now = SYSTEM_CLOCK.wall()
        with self.lock:
            self.starts.append(now)
            if len(self.starts) == 1:
                self.retry_at = now + AHEAD
                return _ended(self.first, self.retry_at)
        return _ended(Reason.OK, value="done")


def _assert_deferred_once(script: Script) -> None:
    assert len(script.starts) == 2
    assert script.retry_at is not None
    assert script.starts[1] >= script.retry_at  # the engine's retry ran no earlier


def test_handoff_is_the_queue_rule() -> None:
    now = 1000.0
    assert handoff(_ended(Reason.OK), retries=0, now=now).step is Step.DONE
    assert handoff(_ended(Reason.NOT_FOUND), retries=0, now=now).step is Step.FAIL
    step = handoff(_ended(Reason.RATE_LIMITED, now + 30), retries=0, now=now,
                   config=QueueConfig(jitter=0.0))
    assert (step.step, step.at, step.delay) == (Step.RETRY, now + 30, 30.0)
    spent = handoff(_ended(Reason.RATE_LIMITED, now + 30), retries=5, now=now)
    assert spent.step is Step.FAIL


def _wait(predicate: Any, limit: float = 60.0) -> None:
    waited = 0.0
    while not predicate() and waited < limit:
        SYSTEM_CLOCK.sleep(0.05)
        waited += 0.05


RABBITMQ_SERVER = shutil.which("rabbitmq-server")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class RabbitNode:
    """A RabbitMQ node of its own (its own name, ports and data directory)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The AMQP URL clients connect with: the default user (allowed on loopback) and the
        default virtual host ``/``, quoted, as both kombu and pika read it."""
        return f"amqp://guest:guest@127.0.0.1:{self.port}/%2F"

    def start(self) -> None:
        """Start the node and wait (at most 90 s in all: Erlang starts slowly) for its AMQP
        port. A node that exits while starting (a port taken meanwhile by another process)
        is started again on fresh ports, at most three times."""
        if RABBITMQ_SERVER is None:
            pytest.skip("rabbitmq-server is not installed")
        waited = 0.0
        for attempt in range(3):
            if attempt:
                self._kill()
                self.port = _free_port()
            proc = self._launch(RABBITMQ_SERVER)
            while waited < 90.0 and proc.poll() is None:
                if self.answers() and proc.poll() is None:
                    return
                SYSTEM_CLOCK.sleep(0.25)
                waited += 0.25
            if proc.poll() is None:
                raise RuntimeError("rabbitmq-server did not answer within 90 s")
        raise RuntimeError(f"rabbitmq-server exited with status {proc.returncode}, three times")

    def _launch(self, server: str) -> subprocess.Popen[bytes]:
        """Start the server on ``self.port`` under a fresh node name."""
        conf = self.directory / "rabbitmq.conf"
        conf.write_text(f"listeners.tcp.default = 127.0.0.1:{self.port}\n", "utf-8")
        (self.directory / "plugins").write_text("[].\n", "utf-8")
        owner: dict[str, Any] = {}
        if os.geteuid() == 0:
            # As root the server script would switch to its own user through ``su``, which
            # starts a session of its own: the node would outlive a kill of this process
            # group. The node runs as that user from the start instead, in this group.
            with contextlib.suppress(KeyError):
                user = pwd.getpwnam("rabbitmq")
                for path in (self.directory, conf, self.directory / "plugins"):
                    os.chown(path, user.pw_uid, user.pw_gid)
                owner = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
        env = dict(os.environ, HOME=str(self.directory),  # its own Erlang cookie too
                   RABBITMQ_NODENAME=f"rbtest{uuid.uuid4().hex[:8]}@localhost",
                   RABBITMQ_NODE_PORT=str(self.port), RABBITMQ_DIST_PORT=str(_free_port()),
                   RABBITMQ_MNESIA_BASE=str(self.directory / "mnesia"),
                   RABBITMQ_LOG_BASE=str(self.directory / "log"),
                   RABBITMQ_CONFIG_FILE=str(self.directory / "rabbitmq"),
                   RABBITMQ_ENABLED_PLUGINS_FILE=str(self.directory / "plugins"))
        self.proc = subprocess.Popen([server], env=env, start_new_session=True,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     **owner)
        return self.proc

    def answers(self) -> bool:
        """Whether the node opens an AMQP 0-9-1 connection: it answers the protocol header
        with a ``connection.start`` method frame (the standard library only, so every
        engine's test waits the same way, whatever client library it uses)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1.0) as conn:
                conn.sendall(b"AMQP\x00\x00\x09\x01")
                frame = b""
                while len(frame) < 11:
                    chunk = conn.recv(11 - len(frame))
                    if not chunk:
                        return False
                    frame += chunk
        except OSError:
            return False
        # frame type 1 (method) on channel 0, then class 10 method 10 (connection.start)
        return frame[:3] == b"\x01\x00\x00" and frame[7:11] == b"\x00\x0a\x00\x0a"

    def stop(self) -> None:
        """Kill the node and check that its AMQP port is closed: a node still answering is
        an error, not a leak."""
        self._kill()
        if self.answers():
            raise RuntimeError(f"the RabbitMQ node on port {self.port} outlived its kill")

    def _kill(self) -> None:
        """Kill the node's process group and wait (at most 10 s) until all of it is gone and
        its port is closed, so nothing writes into its directory once it is removed."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
            waited = 0.0
            while waited < 10.0:
                try:
                    os.killpg(self.proc.pid, 0)
                except ProcessLookupError:
                    if not self.answers():
                        break
                SYSTEM_CLOCK.sleep(0.05)
                waited += 0.05
            self.proc = None


@pytest.fixture(scope="module")
def own_rabbitmq() -> Iterator[RabbitNode]:
    """A RabbitMQ node for this module's tests, killed at its end (its directory is directly under the
    system's temporary directory: the server's own user must reach it)."""
    directory = Path(tempfile.mkdtemp(prefix="rb-rabbitmq-"))
    node = RabbitNode(directory)
    try:
        node.start()
        yield node
    finally:
        node.stop()
        shutil.rmtree(directory, ignore_errors=True)


def test_rabbitmq_node_starts_again_on_fresh_ports_and_leaves_nothing_behind() -> None:
    """The port the node was to listen on is taken: it starts on a fresh one; once stopped,
    none of its processes remain and its port is closed."""
    directory = Path(tempfile.mkdtemp(prefix="rb-rabbitmq-"))
    node = RabbitNode(directory)
    taken = node.port
    try:
        with socket.socket() as squatter:
            squatter.bind(("127.0.0.1", taken))
            squatter.listen()
            node.start()
            assert node.port != taken
            assert node.answers()
            assert node.proc is not None
            group = node.proc.pid
        node.stop()
        with pytest.raises(ProcessLookupError):
            os.killpg(group, 0)
        assert not node.answers()
    finally:
        node.stop()
        shutil.rmtree(directory, ignore_errors=True)


def _celery_case(url: str, first: Reason) -> None:
    from celery import Celery
    from celery.contrib.testing.worker import start_worker

    from retrybudget.queue.celery import settle

    app = Celery(f"t{uuid.uuid4().hex[:6]}", broker=url, backend="cache+memory://")
    app.conf.update(broker_connection_retry_on_startup=True,
                    task_default_queue=f"rb-test-{uuid.uuid4().hex[:8]}")
    script = Script(first)

    @app.task(bind=True, name=f"rb.sync.{uuid.uuid4().hex[:8]}")
    def sync(self: Any) -> Any:
        return settle(self, script.next())

    import celery.contrib.testing.tasks  # noqa: F401 - the ping task start_worker expects

    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
        result = sync.delay()
        if first is Reason.RATE_LIMITED:
            assert result.get(timeout=60) == "done"
            _assert_deferred_once(script)
        else:
            with pytest.raises(RetryBudgetError):
                result.get(timeout=60)
            SYSTEM_CLOCK.sleep(AHEAD + 0.5)  # a retry, had one been scheduled, would be due
            assert len(script.starts) == 1


@pytest.mark.parametrize("first", [Reason.RATE_LIMITED, Reason.REJECTED])
def test_celery_retries_at_retry_at_and_fails_a_rejection_once(
        own_redis: RedisServer, first: Reason) -> None:
    _celery_case(f"redis+socket://{own_redis.socket}", first)


@pytest.mark.parametrize("first", [Reason.RATE_LIMITED, Reason.REJECTED])
def test_celery_over_rabbitmq_retries_at_retry_at_and_fails_a_rejection_once(
        own_rabbitmq: RabbitNode, first: Reason) -> None:
    _celery_case(own_rabbitmq.url, first)


def _dramatiq_case(broker: Any, first: Reason) -> None:
    import dramatiq
    from dramatiq.middleware import CurrentMessage

    from retrybudget.queue.dramatiq import ACTOR_OPTIONS, settle

    broker.add_middleware(CurrentMessage())
    dramatiq.set_broker(broker)
    script = Script(first)
    finished = threading.Event()

    @dramatiq.actor(broker=broker, queue_name=f"rb-test-{uuid.uuid4().hex[:8]}", **ACTOR_OPTIONS)
    def sync() -> None:
        try:
            settle(script.next())
            finished.set()
        except RetryBudgetError:
            finished.set()
            raise

    worker = dramatiq.Worker(broker, worker_threads=1, worker_timeout=50)
    worker.start()
    try:
        sync.send()
        assert finished.wait(60)
        if first is Reason.RATE_LIMITED:
            _assert_deferred_once(script)
        else:
            SYSTEM_CLOCK.sleep(AHEAD + 0.5)  # a retry, had one been scheduled, would be due
            assert len(script.starts) == 1
    finally:
        worker.stop()
        broker.close()


@pytest.mark.parametrize("first", [Reason.RATE_LIMITED, Reason.REJECTED])
def test_dramatiq_retries_with_a_delay_and_fails_a_rejection_once(
        own_redis: RedisServer, first: Reason) -> None:
    from dramatiq.brokers.redis import RedisBroker

    _dramatiq_case(RedisBroker(unix_socket_path=str(own_redis.socket)), first)


@pytest.mark.parametrize("first", [Reason.RATE_LIMITED, Reason.REJECTED])
def test_dramatiq_over_rabbitmq_retries_with_a_delay_and_fails_a_rejection_once(
        own_rabbitmq: RabbitNode, first: Reason) -> None:
    pytest.importorskip("pika", reason="the dramatiq extra installs pika for RabbitMQ")
    from dramatiq.brokers.rabbitmq import RabbitmqBroker

    _dramatiq_case(RabbitmqBroker(url=own_rabbitmq.url), first)


@pytest.mark.parametrize("first", [Reason.RATE_LIMITED, Reason.REJECTED])
def test_arq_defers_a_retry_and_fails_a_rejection_once(own_redis: RedisServer, first: Reason,
                                                       tmp_path: Path) -> None:
    from arq import create_pool
    from arq.connections import RedisSettings
    from arq.jobs import JobStatus
    from arq.worker import Worker, func

    from retrybudget.queue.arq import settle

    script = Script(first)

    async def sync(ctx: dict[str, Any]) -> Any:
        return settle(ctx, script.next())

    async def main() -> None:
        settings = RedisSettings(unix_socket_path=str(own_redis.socket))
        pool = await create_pool(settings)
        job = await pool.enqueue_job("sync", _job_id=uuid.uuid4().hex)
        assert job is not None
        worker = Worker(functions=[func(sync, name="sync")], redis_settings=settings, burst=True, max_tries=6,
                        poll_delay=0.05, handle_signals=False)
        await worker.async_run()
        await worker.close()
        info = await job.result_info()
        assert await job.status() is JobStatus.complete
        assert info is not None
        if first is Reason.RATE_LIMITED:
            assert info.success, info.result
            assert info.result == "done"
        else:
            assert not info.success
            assert isinstance(info.result, RetryBudgetError)
        await pool.aclose()

    asyncio.run(main())
    if first is Reason.RATE_LIMITED:
        _assert_deferred_once(script)
    else:
        assert len(script.starts) == 1


def _arq_start(now: float, defer_score: int) -> float:
    """The earliest instant an arq worker starts a job deferred by ``defer_score`` ms at
    ``now``: it scores the job at its own whole-millisecond clock plus the deferral, and
    starts it once its clock, rounded the same way, reaches the score."""
    from arq.utils import as_int

    score = as_int(now * 1000) + defer_score
    return (score - 0.5) / 1000  # as_int rounds: the clock reads ``score`` from here on


@settings(max_examples=examples(300, cap=2000), deadline=None)
@given(now=st.floats(1.7e9, 1.9e9), delay=st.floats(0.0, 3600.0))
def test_arq_never_schedules_a_retry_before_retry_at_despite_its_rounding(
        now: float, delay: float) -> None:
    from arq import Retry

    from retrybudget._clock import FakeClock
    from retrybudget.queue.arq import settle

    clock = FakeClock(wall=now)
    retry_at = now + delay
    with pytest.raises(Retry) as raised:
        settle({"job_try": 1}, _ended(Reason.RATE_LIMITED, retry_at), clock=clock)
    assert raised.value.defer_score is not None
    assert _arq_start(now, raised.value.defer_score) >= retry_at


class _Counter:
    """The one Redis command :func:`on_time` sends: ``DECR`` of a job's try count."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {"arq:retry:j1": 2}

    async def decr(self, key: str) -> int:
        self.counts[key] -= 1
        return self.counts[key]


def test_arq_on_time_defers_an_early_start_to_its_score_and_gives_the_try_back() -> None:
    from arq import Retry

    from retrybudget._clock import FakeClock
    from retrybudget.queue.arq import on_time

    clock = FakeClock(wall=1_800_000_000.0)
    runs: list[int] = []

    async def sync(ctx: dict[str, Any], job: int) -> int:
        runs.append(job)
        return job

    guarded = on_time(sync, clock=clock)
    assert guarded.__name__ == "sync"  # arq names the function by it
    redis = _Counter()
    due_ms = int(clock.wall() * 1000) + 750
    early = {"score": due_ms, "redis": redis, "job_id": "j1", "job_try": 2}
    with pytest.raises(Retry) as raised:
        asyncio.run(guarded(early, 7))
    assert runs == []
    assert redis.counts["arq:retry:j1"] == 1
    assert raised.value.defer_score is not None
    assert _arq_start(clock.wall(), raised.value.defer_score) >= due_ms / 1000
    clock.advance(0.75)
    assert asyncio.run(guarded(early, 7)) == 7  # due now: the task runs
    assert runs == [7]
    assert redis.counts["arq:retry:j1"] == 1
