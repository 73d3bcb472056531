"""The storm benchmark's contenders: retrybudget and the retry libraries it is compared with.

Every contender runs ``workers`` x ``ops_per_worker`` GETs of ``/rentals/{tag}/availability``
against its own sandbox, naming the run in the header ``X-Sandbox-Run``, each operation
tagged by a unique rental id so the provider's log shows which operations it served. A
contender reports, per operation, whether it claimed a success, when it started and ended
(``time.monotonic``: one clock for every process of the machine) and a short outcome.

The peers are configured the way their documentation shows, with the scenario's attempt
count (3) and, where their API has one, its per-operation time limit. retrybudget runs with
its defaults apart from the provider profile and the operation's deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import multiprocessing
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import backoff
import httpx
import httpx_retries
import requests
import stamina
import stamina.instrumentation
import tenacity
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry as Urllib3Retry

from retrybudget import Policy, Retrier
from retrybudget.coordination import (
    CoordinationConfig,
    Coordinator,
    MemoryCoordinator,
    RedisCoordinator,
)
from retrybudget.core.profiles import Profile
from retrybudget.errors import RetryBudgetError
from retrybudget.integrations import stats_of
from retrybudget.integrations.httpx import AsyncRetryTransport, RetryTransport
from retrybudget.sandbox import RUN_HEADER

RETRYABLE = frozenset({429, 500, 502, 503, 504})
"""The statuses every peer is told to retry (the usual ``status_forcelist``)."""

ATTEMPTS = 3
"""Attempts per operation for every contender (urllib3 and httpx-retries count retries:
``total=3``)."""

BACKOFF_FACTOR = 0.5
"""``backoff_factor`` of urllib3's and httpx-retries' ``Retry``."""

START_TIMEOUT = 60.0
"""Seconds every worker may take to be ready (process start-up included)."""


@dataclass(frozen=True)
class Setting:
    """What every contender of one scenario gets.

    Attributes:
        base_url: the sandbox.
        run_id: this contender's run (its own quota windows and log).
        workers: concurrent workers.
        ops_per_worker: operations each worker runs, one after the other.
        deadline: seconds one operation may take, waits included.
        request_timeout: each request's connect/read timeout.
        profile: the provider profile retrybudget classifies with.
        processes: processes the Redis contender spreads its workers over.
        redis_url: where the Redis contender's coordinator connects.
        time_limit: seconds after which a contender's unfinished operations are abandoned.
        attempts: attempts per operation, for every contender (urllib3 and httpx-retries
            count retries: ``total=attempts``).
    """

    base_url: str
    run_id: str
    workers: int
    ops_per_worker: int
    deadline: float
    request_timeout: float
    profile: Profile
    processes: int = 1
    redis_url: str | None = None
    time_limit: float = 120.0
    attempts: int = ATTEMPTS

    def url(self, tag: int) -> str:
        """The URL of operation ``tag``."""
        return f"{self.base_url}/rentals/{tag}/availability"

    @property
    def headers(self) -> dict[str, str]:
        """The request headers naming the run."""
        return {RUN_HEADER: self.run_id}


@dataclass(frozen=True)
class Op:
    """One logical operation as its caller saw it.

    Attributes:
        tag: the rental id in its URL.
        ok: the contender reported a success (a 2xx handed to the caller).
        start: ``time.monotonic()`` when the caller started it.
        end: ``time.monotonic()`` when the caller got its result.
        outcome: ``ok``, the status handed over, or the error's name / retrybudget reason.
    """

    tag: int
    ok: bool
    start: float
    end: float
    outcome: str


@dataclass
class Run:
    """What one contender did: when it started, its operations, and anything else to report."""

    started: float
    ops: list[Op]
    extra: dict[str, Any] = field(default_factory=dict)


Call = Callable[[int], tuple[bool, str]]
"""Runs operation ``tag``: ``(claimed a success, short outcome)``."""


class BarrierLike(Protocol):
    """``threading.Barrier`` and ``multiprocessing.Barrier`` alike."""

    def wait(self, timeout: float | None = None) -> int:
        """Wait for every party."""
        ...


def answered(response: httpx.Response | requests.Response) -> tuple[bool, str]:
    """A response handed to the caller: a success when 2xx."""
    return 200 <= response.status_code < 300, str(response.status_code)


def failed(error: BaseException) -> str:
    """A short name for an operation's failure (a retrybudget reason when there is one)."""
    if isinstance(error, RetryBudgetError):
        return str(error.reason)
    status = getattr(getattr(error, "response", None), "status_code", None)
    return f"{type(error).__name__} {status}" if status else type(error).__name__


def _operation(tag: int, call: Call) -> Op:
    start = time.monotonic()
    try:
        ok, outcome = call(tag)
    except Exception as exc:  # a failed operation, reported as such
        ok, outcome = False, failed(exc)
    return Op(tag, ok, start, time.monotonic(), outcome)


def run_workers(setting: Setting, call: Call, barrier: BarrierLike, first: int,
                count: int) -> list[Op]:
    """Workers ``first .. first + count - 1`` as threads of this process; their operations.

    Each waits at ``barrier``, then runs its operations one after the other. Threads still
    running after ``setting.time_limit`` are abandoned (daemons); their operations are missing.
    """
    ops: list[Op] = []
    lock = threading.Lock()
    m = setting.ops_per_worker

    def worker(index: int) -> None:
        barrier.wait(START_TIMEOUT)
        for i in range(m):
            op = _operation(index * m + i + 1, call)
            with lock:
                ops.append(op)

    pool = [threading.Thread(target=worker, args=(first + w,), daemon=True)
            for w in range(count)]
    for thread in pool:
        thread.start()
    ends = time.monotonic() + START_TIMEOUT + setting.time_limit
    for thread in pool:
        thread.join(max(0.0, ends - time.monotonic()))
    with lock:
        return list(ops)


def threads(setting: Setting, call: Call) -> Run:
    """Run ``call`` for every operation on ``setting.workers`` threads of this process."""
    barrier = threading.Barrier(setting.workers + 1)
    started: list[float] = []

    def release() -> None:
        barrier.wait(START_TIMEOUT)
        started.append(time.monotonic())

    starter = threading.Thread(target=release, daemon=True)
    starter.start()
    ops = run_workers(setting, call, barrier, 0, setting.workers)
    starter.join(1.0)
    return Run(started[0] if started else time.monotonic(), ops)


@contextlib.contextmanager
def httpx_client(setting: Setting, transport: httpx.BaseTransport | None = None
                 ) -> Iterator[httpx.Client]:
    """An httpx client with a connection for every worker."""
    limits = httpx.Limits(max_connections=setting.workers + 4,
                          max_keepalive_connections=setting.workers + 4)
    if transport is None:
        transport = httpx.HTTPTransport(limits=limits)
    with httpx.Client(transport=transport, timeout=setting.request_timeout) as client:
        yield client


# The peers ----------------------------------------------------------------------------------


def _retryable(response: httpx.Response) -> bool:
    return response.status_code in RETRYABLE


def run_tenacity(setting: Setting) -> Run:
    """tenacity: retry on transport errors and 429/5xx results, random exponential wait."""
    retrying = tenacity.Retrying(
        retry=(tenacity.retry_if_exception_type(httpx.TransportError)
               | tenacity.retry_if_result(_retryable)),
        wait=tenacity.wait_random_exponential(multiplier=1, max=60),
        stop=tenacity.stop_after_attempt(setting.attempts) | tenacity.stop_after_delay(setting.deadline),
    )
    with httpx_client(setting) as client:
        return threads(setting, lambda tag: answered(
            retrying(client.get, setting.url(tag), headers=setting.headers)))


def run_urllib3(setting: Setting) -> Run:
    """urllib3 ``Retry`` mounted on a requests session through ``HTTPAdapter``."""
    retry = Urllib3Retry(total=setting.attempts, backoff_factor=BACKOFF_FACTOR,
                         status_forcelist=sorted(RETRYABLE), respect_retry_after_header=True)
    with requests.Session() as session:
        session.mount("http://", HTTPAdapter(max_retries=retry, pool_maxsize=setting.workers))
        return threads(setting, lambda tag: answered(session.get(
            setting.url(tag), headers=setting.headers, timeout=setting.request_timeout)))


def _stamina_hook(error: Exception) -> bool | float:
    """Retry transport errors and 429/5xx; honour a Retry-After in seconds (a backoff hook)."""
    if isinstance(error, httpx.HTTPStatusError):
        if error.response.status_code not in RETRYABLE:
            return False
        retry_after = error.response.headers.get("retry-after", "")
        return float(retry_after) if retry_after.isdigit() else True
    return isinstance(error, httpx.TransportError)


Get = Callable[[int], httpx.Response]


def _decorated(setting: Setting, decorate: Callable[[Get], Get]) -> Run:
    """Threads calling ``decorate(get)``, where ``get`` raises for a 4xx or 5xx status."""
    with httpx_client(setting) as client:

        def get(tag: int) -> httpx.Response:
            return client.get(setting.url(tag), headers=setting.headers).raise_for_status()

        retried = decorate(get)
        return threads(setting, lambda tag: answered(retried(tag)))


def run_stamina(setting: Setting) -> Run:
    """stamina: ``retry(on=hook, attempts=3, timeout=deadline)`` around ``raise_for_status``."""
    stamina.instrumentation.set_on_retry_hooks([])  # no log line per retry
    return _decorated(setting, stamina.retry(on=_stamina_hook, attempts=setting.attempts,
                                             timeout=setting.deadline))


def _backoff_gives_up(error: Exception) -> bool:
    return isinstance(error, httpx.HTTPStatusError) and not _retryable(error.response)


def run_backoff(setting: Setting) -> Run:
    """backoff: ``on_exception(expo, httpx.HTTPError, max_tries=3, max_time=deadline)``."""
    return _decorated(setting, backoff.on_exception(
        backoff.expo, httpx.HTTPError, max_tries=setting.attempts, max_time=setting.deadline,
        giveup=_backoff_gives_up, logger=None))


def run_httpx_retries(setting: Setting) -> Run:
    """httpx-retries: ``RetryTransport(retry=Retry(total=3, backoff_factor=0.5))``."""
    retry = httpx_retries.Retry(total=setting.attempts, backoff_factor=BACKOFF_FACTOR,
                                total_timeout=setting.deadline)
    transport = httpx_retries.RetryTransport(retry=retry)
    with httpx_client(setting, transport) as client:
        return threads(setting, lambda tag: answered(
            client.get(setting.url(tag), headers=setting.headers)))


# retrybudget ----------------------------------------------------------------------------------


def retrier(setting: Setting, coordinator: Coordinator) -> Retrier:
    """retrybudget's retrier: 3 attempts inside the scenario's deadline, the scenario's profile,
    every other setting (backoff, retry budget, breaker, gate, pacing) at its default."""
    policy = Policy(name="storm", max_attempts=setting.attempts, deadline=setting.deadline,
                    profile=setting.profile)
    return Retrier(policy=policy, coordinator=coordinator)


def coordination(setting: Setting) -> CoordinationConfig:
    """The coordinators' configuration: the defaults (the gate reads each response with the
    policy's profile, handed over by the flow)."""
    return CoordinationConfig()


def _claimed(response: httpx.Response) -> tuple[bool, str]:
    stats = stats_of(response) or {}
    outcome = str(stats.get("outcome", response.status_code))
    return outcome == "ok" and 200 <= response.status_code < 300, outcome


def _sync_call(setting: Setting, client: httpx.Client) -> Call:
    return lambda tag: _claimed(client.get(setting.url(tag), headers=setting.headers))


def run_retrybudget_threads(setting: Setting) -> Run:
    """retrybudget's ``RetryTransport`` with a ``MemoryCoordinator``, on threads."""
    coordinator = MemoryCoordinator(coordination(setting))
    transport = RetryTransport(retrier=retrier(setting, coordinator))
    with httpx_client(setting, transport) as client:
        run = threads(setting, _sync_call(setting, client))
    run.extra["coordinator"] = dataclasses.asdict(coordinator.stats())
    return run


def run_retrybudget_asyncio(setting: Setting) -> Run:
    """retrybudget's ``AsyncRetryTransport`` with a ``MemoryCoordinator``, on asyncio tasks."""
    coordinator = MemoryCoordinator(coordination(setting))
    run = asyncio.run(_asyncio_run(setting, coordinator))
    run.extra["coordinator"] = dataclasses.asdict(coordinator.stats())
    return run


async def _asyncio_run(setting: Setting, coordinator: Coordinator) -> Run:
    transport = AsyncRetryTransport(retrier=retrier(setting, coordinator))
    ops: list[Op] = []
    m = setting.ops_per_worker
    async with httpx.AsyncClient(transport=transport, timeout=setting.request_timeout) as client:

        async def worker(index: int) -> None:
            for i in range(m):
                tag = index * m + i + 1
                start = time.monotonic()
                try:
                    response = await client.get(setting.url(tag), headers=setting.headers)
                    ok, outcome = _claimed(response)
                except Exception as exc:  # a failed operation, reported as such
                    ok, outcome = False, failed(exc)
                ops.append(Op(tag, ok, start, time.monotonic(), outcome))

        started = time.monotonic()
        tasks = [asyncio.create_task(worker(w)) for w in range(setting.workers)]
        _, pending = await asyncio.wait(tasks, timeout=setting.time_limit)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    return Run(started, ops)


def _redis_process(setting: Setting, index: int, barrier: BarrierLike,
                   results: multiprocessing.queues.Queue[Any]) -> None:
    """One process of the Redis contender: its share of the workers, as threads."""
    per = setting.workers // setting.processes
    coordinator = RedisCoordinator(setting.redis_url, config=coordination(setting),
                                   prefix=f"storm:{setting.run_id}:")
    coordinator.admit("storm-warm-up")  # connect and load the scripts before the start
    transport = RetryTransport(retrier=retrier(setting, coordinator))
    with httpx_client(setting, transport) as client:
        ops = run_workers(setting, _sync_call(setting, client), barrier, index * per, per)
    results.put((ops, dataclasses.asdict(coordinator.stats())))
    coordinator.close()


def run_retrybudget_redis(setting: Setting) -> Run:
    """retrybudget's ``RetryTransport`` with a ``RedisCoordinator``, on several processes."""
    if setting.redis_url is None:
        raise RuntimeError("the Redis contender needs a redis-server")
    if setting.workers % setting.processes:
        raise ValueError("workers must be a multiple of processes")
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(setting.workers + 1)
    results: multiprocessing.queues.Queue[Any] = context.Queue()
    children = [context.Process(target=_redis_process, args=(setting, p, barrier, results),
                                daemon=True)
                for p in range(setting.processes)]
    for child in children:
        child.start()
    barrier.wait(START_TIMEOUT)
    started = time.monotonic()
    ops: list[Op] = []
    stats: list[dict[str, Any]] = []
    ends = started + setting.time_limit + 10.0
    with contextlib.suppress(Exception):  # a child that never reports leaves its ops missing
        for _ in children:
            child_ops, child_stats = results.get(timeout=max(0.1, ends - time.monotonic()))
            ops.extend(child_ops)
            stats.append(child_stats)
    for child in children:
        child.join(max(0.1, ends - time.monotonic()))
        if child.is_alive():
            child.terminate()
            child.join(5)
    totals = {name: sum(int(s[name]) for s in stats) for name in stats[0]} if stats else {}
    return Run(started, ops, {"coordinator": totals, "processes": setting.processes})


@dataclass(frozen=True)
class Contender:
    """A contender as the benchmark lists it."""

    name: str
    label: str
    run: Callable[[Setting], Run]
    retrybudget: bool = False
    needs_redis: bool = False


CONTENDERS: tuple[Contender, ...] = (
    Contender("retrybudget-threads", "retrybudget memory, threads", run_retrybudget_threads,
              retrybudget=True),
    Contender("retrybudget-asyncio", "retrybudget memory, asyncio", run_retrybudget_asyncio,
              retrybudget=True),
    Contender("retrybudget-redis", "retrybudget Redis, processes", run_retrybudget_redis,
              retrybudget=True, needs_redis=True),
    Contender("tenacity", "tenacity", run_tenacity),
    Contender("urllib3", "urllib3 Retry (requests)", run_urllib3),
    Contender("stamina", "stamina", run_stamina),
    Contender("backoff", "backoff", run_backoff),
    Contender("httpx-retries", "httpx-retries", run_httpx_retries),
)
"""Every contender, in the order they run and are listed."""
