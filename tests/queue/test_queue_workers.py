"""Celery, Dramatiq and arq workers started with their own commands, as docs/queue.md tells a
user to, two of each on one real Redis, against a provider on a loopback socket.

The provider answers each job's first request with 429 and ``Retry-After: 1`` and every
later one with 200, and keeps every request's arrival time. Each job's task calls it through
a :class:`~retrybudget.Retrier` (fail fast on 429) and settles the outcome with the engine's
hand-off. Counted at the provider: no request of any job arrives before the time its 429
named, and every job is answered 200 exactly once. The clocks are real (the engines schedule
on them); the only bound is a generous overall limit for the jobs to finish.
"""

from __future__ import annotations

import contextlib
import http.server
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from retrybudget import SYSTEM_CLOCK
from tests.support.cli import answer_json, serving
from tests.support.redis import RedisServer

pytest_plugins = ("tests.support.coordination",)

JOBS = 20
"""Jobs per engine: as many as the reported runs had."""

WAIT = 1
"""The provider's Retry-After, seconds."""

BIN = Path(sys.executable).parent


@dataclass
class Seen:
    """What the provider saw of one job: each request's arrival and the time its 429 named."""

    arrivals: list[float] = field(default_factory=list)
    due: float | None = None
    answered_ok: int = 0


class Provider(http.server.ThreadingHTTPServer):
    """``GET /jobs/<n>``: 429 on a job's first request, 200 afterwards; every request kept."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.jobs: dict[str, Seen] = {}

    @property
    def url(self) -> str:
        """Where the workers reach it."""
        return f"http://127.0.0.1:{self.server_address[1]}"

    def early(self) -> dict[str, list[float]]:
        """Each job's requests that arrived before the time its 429 named (seconds early)."""
        with self.lock:
            return {job: [seen.due - t for t in seen.arrivals[1:] if t < seen.due]
                    for job, seen in self.jobs.items()
                    if seen.due is not None and any(t < seen.due for t in seen.arrivals[1:])}

    def done(self) -> int:
        """How many jobs were answered 200."""
        with self.lock:
            return sum(1 for seen in self.jobs.values() if seen.answered_ok)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Provider

    def do_GET(self) -> None:
        now = SYSTEM_CLOCK.wall()
        job = self.path.rsplit("/", 1)[-1]
        with self.server.lock:
            seen = self.server.jobs.setdefault(job, Seen())
            seen.arrivals.append(now)
            first = seen.due is None
            if first:
                seen.due = now + WAIT
            else:
                seen.answered_ok += 1
        if first:
            answer_json(self, 429, b'{"error": "slow down"}', [("Retry-After", str(WAIT))])
        else:
            answer_json(self, 200, b'{"ok": true}')

    def log_message(self, *args: Any) -> None:
        """Quiet."""


@pytest.fixture
def provider() -> Iterator[Provider]:
    """The provider, serving on its own thread."""
    with serving(Provider()) as server:
        yield server


CALL = '''
import os
import retrybudget as rb

PROVIDER = os.environ["RB_PROVIDER"]
REDIS = os.environ["RB_REDIS_SOCKET"]
retrier = rb.Retrier(policy=rb.interactive(deadline=10))   # a 429 ends at once, with retry_at
'''

TASKS = {
    "celery": CALL + '''
import requests
from celery import Celery
from retrybudget.queue.celery import settle

app = Celery("rbtasks", broker=f"redis+socket://{REDIS}")
app.conf.update(broker_connection_retry_on_startup=True, worker_prefetch_multiplier=1)
session = requests.Session()

def fetch(job):
    r = session.get(f"{PROVIDER}/jobs/{job}", timeout=rb.attempt_timeout())
    r.raise_for_status()
    return r.json()

@app.task(bind=True, name="rbtasks.sync")
def sync(self, job):
    return settle(self, retrier.call(fetch, job))

def enqueue(n):
    for job in range(n):
        sync.delay(job)
''',
    "dramatiq": CALL + '''
import dramatiq
import requests
from dramatiq.brokers.redis import RedisBroker
from dramatiq.middleware import CurrentMessage
from retrybudget.queue.dramatiq import ACTOR_OPTIONS, settle

broker = RedisBroker(unix_socket_path=REDIS)
broker.add_middleware(CurrentMessage())
dramatiq.set_broker(broker)
session = requests.Session()

def fetch(job):
    r = session.get(f"{PROVIDER}/jobs/{job}", timeout=rb.attempt_timeout())
    r.raise_for_status()
    return r.json()

@dramatiq.actor(**ACTOR_OPTIONS)
def sync(job):
    settle(retrier.call(fetch, job))

def enqueue(n):
    for job in range(n):
        sync.send(job)
''',
    "arq": CALL + '''
import asyncio
import httpx
from arq import create_pool
from arq.connections import RedisSettings
from retrybudget.queue.arq import on_time, settle

SETTINGS = RedisSettings(unix_socket_path=REDIS)

@on_time
async def sync(ctx, job):
    async with httpx.AsyncClient() as client:
        async def fetch(job):
            r = await client.get(f"{PROVIDER}/jobs/{job}", timeout=rb.attempt_timeout())
            r.raise_for_status()
            return r.json()
        return settle(ctx, await retrier.acall(fetch, job))

class WorkerSettings:
    functions = [sync]
    redis_settings = SETTINGS
    max_tries = 7          # at least QueueConfig.max_deferrals (5) + 2
    max_jobs = 4
    poll_delay = 0.05

def enqueue(n):
    async def main():
        pool = await create_pool(SETTINGS)
        for job in range(n):
            await pool.enqueue_job("sync", job)
        await pool.aclose()
    asyncio.run(main())
''',
}

WORKER = {
    "celery": [str(BIN / "celery"), "-A", "rbtasks", "worker", "--pool=solo", "--loglevel=INFO",
               "--without-gossip", "--without-mingle", "--without-heartbeat"],
    "dramatiq": [str(BIN / "dramatiq"), "rbtasks", "--processes", "1", "--threads", "2"],
    "arq": [str(BIN / "arq"), "rbtasks.WorkerSettings"],
}
"""Each engine's worker command, as docs/queue.md gives it."""


@contextlib.contextmanager
def _workers(engine: str, directory: Path, env: dict[str, str]) -> Iterator[list[Path]]:
    """Two workers of ``engine``, each in its own process group, stopped (then killed) at
    the end; yields their log files."""
    procs: list[subprocess.Popen[bytes]] = []
    logs = [directory / f"{engine}-{n}.log" for n in (1, 2)]
    try:
        for n, log in enumerate(logs, 1):
            extra = ["-n", f"w{n}@%h"] if engine == "celery" else []
            with log.open("wb") as out:
                procs.append(subprocess.Popen(WORKER[engine] + extra, cwd=directory, env=env,
                                              stdout=out, stderr=subprocess.STDOUT,
                                              start_new_session=True))
        yield logs
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            _reap(proc)


def _reap(proc: subprocess.Popen[bytes]) -> None:
    """Wait for a stopped worker (15 s to finish its jobs), then kill its group."""
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


@pytest.mark.parametrize("engine", ["celery", "dramatiq", "arq"])
def test_two_workers_never_call_before_retry_at_and_finish_each_job_once(
        engine: str, own_redis: RedisServer, provider: Provider, tmp_path: Path) -> None:
    pytest.importorskip(engine)
    (tmp_path / "rbtasks.py").write_text(TASKS[engine], "utf-8")
    env = dict(os.environ, RB_PROVIDER=provider.url, RB_REDIS_SOCKET=str(own_redis.socket),
               PYTHONPATH=str(tmp_path), PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    with _workers(engine, tmp_path, env) as logs:
        subprocess.run([sys.executable, "-c", f"import rbtasks; rbtasks.enqueue({JOBS})"],
                       cwd=tmp_path, env=env, check=True, timeout=60)
        waited = 0.0
        while provider.done() < JOBS and waited < 120.0:  # generous: three engines start slowly
            SYSTEM_CLOCK.sleep(0.1)
            waited += 0.1
        SYSTEM_CLOCK.sleep(WAIT + 1.0)  # a duplicate run, had one been scheduled, would be due
    story = "\n".join(log.read_text("utf-8", "replace")[-3000:] for log in logs)
    assert provider.done() == JOBS, story
    assert provider.early() == {}, story
    with provider.lock:
        answered = {job: (len(seen.arrivals), seen.answered_ok)
                    for job, seen in provider.jobs.items()}
    assert answered == {str(job): (2, 1) for job in range(JOBS)}, story


def test_the_worker_commands_docs_queue_md_gives_are_the_ones_run_here() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "queue.md").read_text("utf-8")
    block = docs.split("### Starting the workers", 1)[1].split("```sh\n", 1)[1].split("```")[0]
    given = [line.split("#")[0].split() for line in block.splitlines() if line.strip()]
    for engine, argv in WORKER.items():
        run = [Path(argv[0]).name, *[a.replace("rbtasks", "tasks") for a in argv[1:]]]
        if engine == "celery":
            run += ["-n", "w1@%h"]  # each worker's own name, as _workers gives it
        [doc] = [g for g in given if g[0] == engine]
        assert all(word in run for word in doc), (doc, run)
