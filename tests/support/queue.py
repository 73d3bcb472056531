"""Support for the queue tests: the two backends behind one fixture, and process workers.

Not a test module of its own (it holds no tests). Worker functions live here so the
subprocess workers can run them by module name.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from retrybudget import SYSTEM_CLOCK, Clock, FakeClock
from retrybudget.core.outcome import Outcome, Reason
from retrybudget.queue import JobQueue, QueueConfig, SqliteQueue
from tests.support.redis import RedisServer

pytest_plugins = ("tests.support.redis",)  # redis_server, own_redis, aof_redis


def outcome(reason: Reason | str, retry_at: float | None = None, op: str = "op") -> Outcome[Any]:
    """An outcome as a retrier would report it."""
    return Outcome(Reason(reason), op, 1, (), 0.0, retry_at=retry_at)


@dataclass
class QueueBackend:
    """One queue backend as the shared suite sees it.

    ``make(config)`` opens a queue handle on one shared store (call it again for another
    worker's handle). Leases lapse with :meth:`lapse`: the fake clock is advanced for SQLite;
    Redis measures idle time itself, so real time passes (a short visibility timeout).
    """

    name: str
    clock: Clock
    directory: Path
    url: str | None = None
    job: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    made: list[JobQueue] = field(default_factory=list)

    @property
    def visibility(self) -> float:
        """The visibility timeout the suite uses."""
        return 30.0 if self.url is None else 0.5

    def make(self, config: QueueConfig | None = None, **options: Any) -> JobQueue:
        """A handle on this test's queue."""
        base = QueueConfig(visibility_timeout=self.visibility, jitter=0.0)
        config = config or base
        queue: JobQueue
        if self.url is None:
            queue = SqliteQueue(self.directory / "queue.sqlite", config, clock=self.clock,
                                **options)
        else:
            from retrybudget.queue import RedisQueue

            queue = RedisQueue(self.url, self.job, config, clock=self.clock, **options)
        self.made.append(queue)
        return queue

    def lapse(self) -> None:
        """Let every current lease lapse."""
        if self.url is None:
            assert isinstance(self.clock, FakeClock)
            self.clock.advance(self.visibility + 1)
        else:  # Redis measures a lease's idle time on its own clock: real time must pass
            SYSTEM_CLOCK.sleep(self.visibility + 0.1)

    def close(self) -> None:
        """Close every handle made."""
        for queue in self.made:
            queue.close()


@pytest.fixture(params=["sqlite", "redis"])
def qbackend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[QueueBackend]:
    """Each behavioural test runs once per backend."""
    if request.param == "sqlite":
        made = QueueBackend("sqlite", FakeClock(), tmp_path)
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        made = QueueBackend("redis", FakeClock(wall=SYSTEM_CLOCK.wall()), tmp_path, server.url)
    yield made
    made.close()


def worker_main(argv: list[str]) -> None:
    """A worker process: ``URL JOB NAME HOLD VISIBILITY MARKS``; drains the queue, each
    operation taking HOLD seconds (long enough to be killed in the middle of one), touching
    ``MARKS/started-NAME-OP`` as it starts one."""
    from retrybudget.queue import drain, open_queue

    url, job, name, hold = argv[0], argv[1], argv[2], float(argv[3])
    visibility, marks = float(argv[4]), Path(argv[5])
    queue = open_queue(url, job, QueueConfig(visibility_timeout=visibility, jitter=0.0))

    def handle(lease: Any) -> tuple[Outcome[Any], dict[str, Any]]:
        (marks / f"started-{name}-{lease.op_id}").touch()
        SYSTEM_CLOCK.sleep(hold)
        return outcome(Reason.OK, op=lease.op_id), {"by": name}

    drain(queue, handle, worker=name, poll=0.02)
    queue.close()


def spawn_worker(url: str, job: str, name: str, hold: float, visibility: float, marks: Path
                 ) -> subprocess.Popen[bytes]:
    """Start :func:`worker_main` in a new Python process."""
    code = ("import sys; sys.path[:0] = ['.']; import tests.support.queue as s; "
            "s.worker_main(sys.argv[1:])")
    return subprocess.Popen([sys.executable, "-c", code, url, job, name, str(hold),
                             str(visibility), str(marks)])
