"""Support for the coordination tests: the backends (Redis on a real server), and process workers.

Not a test module of its own (it holds no tests): the coordination test modules import its
fixtures. Worker functions live here so spawned processes can import them by name.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis

from retrybudget import SYSTEM_CLOCK, Clock, FakeClock, Policy, Retrier
from retrybudget.coordination import (
    CoordinationConfig,
    Coordinator,
    GateConfig,
    MemoryCoordinator,
    RedisCoordinator,
)
from retrybudget.core.actions import Attempt, AttemptResult, RequestInfo, Sleep
from retrybudget.core.classify import Classified, Kind, ResponseSeen, classify
from retrybudget.core.flow import operation_flow
from retrybudget.core.outcome import AttemptRecord, Outcome, Reason
from retrybudget.core.profiles import GENERIC, Profile
from retrybudget.core.throttle import Throttle, throttle_of
from tests.support.redis import RedisServer

pytest_plugins = ("tests.support.redis",)  # redis_server, own_redis

SCRIPT_CALLS = ("eval", "evalsha", "script")
"""What a coordinator sends (each a round trip when sent on its own)."""
CONNECTION = ("client", "hello", "ping", "select", "info", "auth")
"""What a connection's set-up and these counts send (neither a call nor run by a script)."""


def command_calls(server: RedisServer) -> tuple[int, int]:
    """``(script calls clients sent, commands scripts ran)`` on ``server`` so far, from INFO
    commandstats."""
    raw = redis.Redis(unix_socket_path=str(server.socket), socket_timeout=2.0)
    stats = raw.info("commandstats")
    raw.close()
    sent = ran = 0
    for name, value in stats.items():
        command = name.removeprefix("cmdstat_").split("|")[0]
        if command in SCRIPT_CALLS:
            sent += int(value["calls"])
        elif command not in CONNECTION:
            ran += int(value["calls"])
    return sent, ran


def token_counts(c: Coordinator, key: str, url: str | None = None) -> list[int]:
    """What ``c`` counts of ``key``'s token ledgers (tokens, input tokens, output tokens) in
    their current windows; ``url``: the redis-server of a Redis coordinator."""
    if isinstance(c, MemoryCoordinator):
        ledgers = c._keys[key].tokens
        return [0, 0, 0] if ledgers is None else [d.used for d in ledgers.dims]
    assert isinstance(c, RedisCoordinator)
    assert url is not None
    client = redis.Redis.from_url(url)
    try:
        values = client.hmget(f"{c.prefix}{{{key}}}:tokens", "u1", "u2", "u3")
    finally:
        client.close()
    return [0 if value is None else int(value) for value in values]


def unique_prefix() -> str:
    """A key prefix no other test uses."""
    return f"rbtest:{uuid.uuid4().hex[:12]}:"


# The backends, for one behavioural suite ------------------------------------------------------


@dataclass
class Backend:
    """One coordination backend as the shared suite sees it.

    ``workers(config, n)`` gives ``n`` coordinators that share one store: the same object for
    memory, separate clients for Redis. Time moves with :meth:`sleep`: a fake clock is
    advanced for memory; for Redis (whose scripts read the server's clock) real time passes,
    and :meth:`lateness` says how much more of it passed than the test slept.
    """

    name: str
    clock: Clock
    url: str | None = None
    made: list[Coordinator] = field(default_factory=list)
    started: float = field(default_factory=SYSTEM_CLOCK.monotonic)
    slept: float = 0.0

    def lateness(self) -> float:
        """Real seconds that passed beyond what the test slept since the backend was made
        (0 on the fake clock): how much later than planned the server may have read its clock.
        """
        if isinstance(self.clock, FakeClock):
            return 0.0
        return max(0.0, SYSTEM_CLOCK.monotonic() - self.started - self.slept)

    def workers(self, config: CoordinationConfig | None = None, n: int = 1,
                **options: Any) -> list[Coordinator]:
        """``n`` coordinators sharing one store (``options``: constructor arguments)."""
        config = config or CoordinationConfig()
        if self.url is None:
            memory = MemoryCoordinator(config, clock=self.clock, **options)
            self.made.append(memory)
            return [memory] * n
        prefix = unique_prefix()
        out: list[Coordinator] = [
            RedisCoordinator(self.url, config=config, prefix=prefix, clock=self.clock, **options)
            for _ in range(n)
        ]
        self.made.extend(out)
        return out

    def one(self, config: CoordinationConfig | None = None, **options: Any) -> Coordinator:
        """One coordinator on a fresh store."""
        return self.workers(config, 1, **options)[0]

    def sleep(self, seconds: float) -> None:
        """Let ``seconds`` pass for the backend."""
        self.slept += seconds
        if isinstance(self.clock, FakeClock):
            self.clock.advance(seconds)
        else:
            self.clock.sleep(seconds)

    def counted(self, c: Coordinator, key: str) -> int | None:
        """The window's quota count as ``c`` stores it for ``key`` (None: not counted)."""
        if isinstance(c, MemoryCoordinator):
            return c._keys[key].schedule.quota
        assert isinstance(c, RedisCoordinator)
        assert self.url is not None
        client = redis.Redis.from_url(self.url)
        try:
            value = client.hget(f"{c.prefix}{{{key}}}:state", "quota")
        finally:
            client.close()
        return None if value is None else int(value)

    def lease_lives(self, c: Coordinator, key: str) -> list[float]:
        """Seconds each request in flight under ``key`` still counts as ``c`` stores it (its
        lease's expiry less now), ascending."""
        if isinstance(c, MemoryCoordinator):
            now = c.clock.monotonic()
            return sorted(expiry - now for expiry in c._keys[key].leases.values())
        assert isinstance(c, RedisCoordinator)
        assert self.url is not None
        client = redis.Redis.from_url(self.url)
        try:
            seconds, micros = client.time()
            expiries = client.zrange(f"{c.prefix}{{{key}}}:leases", 0, -1, withscores=True)
        finally:
            client.close()
        return sorted(score - (seconds + micros / 1e6) for _, score in expiries)

    def close(self) -> None:
        """Close every Redis client made."""
        for c in self.made:
            if isinstance(c, RedisCoordinator):
                c.close()


@pytest.fixture(params=["memory", "redis"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """Each behavioural test runs once per backend."""
    if request.param == "memory":
        made = Backend("memory", FakeClock())
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        made = Backend("redis", SYSTEM_CLOCK, server.url)
    yield made
    made.close()


class Recorder:
    """Coordinator events, as told: ``(key, state)`` per breaker transition, ``(key,
    "fallback")`` per call answered locally."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def breaker_transition(self, key: str, state: str) -> None:
        self.seen.append((key, state))

    def coordinator_fallback(self, key: str) -> None:
        self.seen.append((key, "fallback"))


# Building observations and outcomes -------------------------------------------------------------


def classified(status: int, headers: dict[str, str] | None = None, *,
               profile: Profile = GENERIC, wall: float | None = None) -> Classified:
    """A response as the flow would classify it."""
    at = SYSTEM_CLOCK.wall() if wall is None else wall
    return classify(profile, ResponseSeen.of(status, headers or {}), at)


def seen(status: int, headers: dict[str, str] | None = None, *, profile: Profile = GENERIC,
         wall: float | None = None) -> Throttle:
    """A response as the flow hands it to the coordinator (read with ``profile``)."""
    return throttle_of(profile, classified(status, headers, profile=profile, wall=wall))


def throttled(ms: int) -> Throttle:
    """A 429 asking for ``ms`` milliseconds."""
    return seen(429, {"retry-after-ms": str(ms)})


def ended(reason: Reason, attempts: int = 1, last: Kind | None = None) -> Outcome[object]:
    """An outcome with ``reason`` after ``attempts`` attempts; with ``last``, a history whose
    attempts were all classified so (without, no history)."""
    history = () if last is None else tuple(
        AttemptRecord(n, 0.0, 0.0, None, None, last, "stop" if n == attempts else "retry", "")
        for n in range(1, attempts + 1)
    )
    return Outcome(reason=reason, operation_id="t", attempts=attempts, waits=(), elapsed=0.0,
                   history=history)


def goes(c: Coordinator, key: str, n: int) -> int:
    """Ask for ``n`` slots under ``key`` at once; how many went before the first wait."""
    waits = [c.acquire(key, 1).wait for _ in range(n)]
    return next((i for i, wait in enumerate(waits) if wait > 0), n)


def run_threads(n: int, target: Callable[[int], None], timeout: float = 30.0) -> None:
    """Run ``target(i)`` in ``n`` threads and join them (re-raising the first failure)."""
    errors: list[BaseException] = []

    def body(i: int) -> None:
        try:
            target(i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        assert not t.is_alive(), "a thread did not finish in time"
    if errors:
        raise errors[0]


def most_in_window(times: list[float], width: float) -> int:
    """The most of ``times`` that fall within any window ``width`` seconds long."""
    ordered, most, first = sorted(times), 0, 0
    for last, t in enumerate(ordered):
        while t - ordered[first] > width:
            first += 1
        most = max(most, last - first + 1)
    return most


async def herd_at_a_gate(c: Coordinator, key: str, tasks: int, spread: float,
                         gate_ms: int) -> None:
    """Close ``key``'s gate for ``gate_ms``, start ``tasks`` operations at once, and check that
    all succeed within their deadline, none before the reset, and that the coordinator planned
    their release over time (not at once).

    The release is judged on the instants the coordinator planned (each wait's end, as the
    task was told it), not on when a loaded machine got round to running the tasks.
    """
    await c.aadmit("warm-up")  # connect before the clock starts
    times: list[float] = []
    planned: list[float] = []

    class Plan:
        def before_wait(self, event: Any) -> None:
            planned.append(SYSTEM_CLOCK.wall() + event.wait.seconds)

    async def fetch() -> str:
        times.append(SYSTEM_CLOCK.wall())
        return "ok"

    deadline = 20.0
    retrier = Retrier(policy=Policy(deadline=deadline), coordinator=c, key=key, hooks=(Plan(),))
    go = asyncio.Event()

    async def operation() -> Any:
        await go.wait()
        return await retrier.acall(fetch)

    # every task is made and waiting before the gate closes, so a loaded machine's slow start
    # cannot let tasks ask only after the gate has opened again
    started = asyncio.gather(*(operation() for _ in range(tasks)))
    await asyncio.sleep(0)
    gate_at = SYSTEM_CLOCK.wall() + gate_ms / 1000  # read before the gate closes: no later
    await c.alearn(key, throttled(gate_ms), None)
    go.set()
    outcomes = await asyncio.wait_for(started, 60)
    assert [o.reason for o in outcomes] == [Reason.OK] * tasks  # each inside its deadline
    assert all(o.elapsed <= deadline for o in outcomes)  # the operations' own bound
    assert min(times) >= gate_at - 1e-5  # none before the reset (the gate is a lower bound)
    # Those that asked while the gate was shut were held, and released over time in distinct
    # slots. (How many asked in time depends on how fast a loaded machine runs the tasks: a
    # task that first asks after the release has ended goes at once, with no herd left.)
    stats = c.stats()
    assert stats.gate_waits >= tasks * 0.25
    assert len(planned) >= stats.gate_waits
    assert max(planned) - min(planned) >= (len(planned) - 1) * spread * 0.5
    assert most_in_window(planned, 0.1) <= tasks // 4  # no herd planned into one window


@dataclass
class Window:
    """A provider with a fixed window of ``limit`` requests per ``window`` seconds on a clock,
    its windows starting at ``origin + k * window``. Over the limit: 429 with ``Retry-After``
    (the reset rounded up, at least 1 s, as the sandbox does). Every answer carries the IETF
    quota headers; an answer over the limit does not use quota."""

    clock: Clock
    limit: int
    origin: float
    window: float = 1.0
    served: Counter[int] = field(default_factory=Counter)
    rejected: Counter[int] = field(default_factory=Counter)

    def answer(self) -> tuple[int, dict[str, str]]:
        """The status and headers of a request arriving now."""
        now = self.clock.monotonic()
        index = math.floor((now - self.origin) / self.window)
        reset = self.origin + (index + 1) * self.window - now
        left = self.limit - self.served[index]
        quota = {"ratelimit-limit": str(self.limit), "ratelimit-reset": f"{reset:.6f}"}
        if left <= 0:
            self.rejected[index] += 1
            return 429, {"retry-after": str(max(1, math.ceil(reset))),
                         "ratelimit-remaining": "0", **quota}
        self.served[index] += 1
        return 200, {"ratelimit-remaining": str(left - 1), **quota}


def simulate(c: Coordinator, clock: FakeClock, provider: Window, operations: int,
             policy: Policy, *, latency: float = 0.001, key: str = "api.example.com",
             ) -> list[Outcome[object]]:
    """Run ``operations`` operations concurrently, all starting now, through the real flow
    and ``c``, in virtual time on ``clock`` (each request answered ``latency`` seconds after
    it went): a deterministic stand-in for that many asyncio tasks."""
    events: list[tuple[float, int, int, Any]] = []
    flows = []
    order = itertools.count()
    for n in range(operations):
        flow = operation_flow(policy, RequestInfo(key=key), clock, operation_id=f"op-{n}",
                              sample=lambda: 0.5)
        flows.append(flow)
        heapq.heappush(events, (clock.monotonic(), next(order), n, None))
    done: dict[int, Outcome[object]] = {}
    while events:
        at, _, n, reply = heapq.heappop(events)
        if at > clock.monotonic():
            clock.advance(at - clock.monotonic())
        flow = flows[n]
        try:
            action = flow.send(reply)
            while True:
                if isinstance(action, Sleep):
                    heapq.heappush(events, (at + action.wait.seconds, next(order), n, None))
                    break
                if isinstance(action, Attempt):
                    status, headers = provider.answer()
                    result = AttemptResult(ResponseSeen.of(status, headers))
                    heapq.heappush(events, (at + latency, next(order), n, result))
                    break
                action = flow.send(c.handle(action))
        except StopIteration as stop:
            done[n] = stop.value
    return [done[n] for n in range(operations)]


# Worker processes (spawned; they import this module by name) ----------------------------------


def gate_worker(url: str, prefix: str, key: str, ops: int, spread: float,
                barrier: Any, results: Any) -> None:
    """Wait at the barrier, then run ``ops`` operations under the shared gate; report
    ``(request wall times, outcome reasons, first wait's retry_at)``."""
    config = CoordinationConfig(gate=GateConfig(spread=spread))
    coordinator = RedisCoordinator(url, config=config, prefix=prefix)
    coordinator.admit("warm-up")  # connect and load the scripts before the clock starts
    retrier = Retrier(policy=Policy(deadline=20.0), coordinator=coordinator, key=key)
    times: list[float] = []

    def request() -> str:
        times.append(SYSTEM_CLOCK.wall())
        return "ok"

    barrier.wait(30)
    barrier.wait(30)
    outcomes = [retrier.call(request) for _ in range(ops)]
    first = outcomes[0]
    retry_at = first.retry_at if first.waits else None
    results.put((times, [o.reason.value for o in outcomes], retry_at,
                 coordinator.stats().fallbacks))
    coordinator.close()


def probe_worker(url: str, prefix: str, key: str, threads: int, barrier: Any,
                 results: Any) -> None:
    """Wait at the barrier, then ask for admission from ``threads`` threads at once; report
    how many were admitted as probes and how many were admitted at all."""
    coordinator = RedisCoordinator(url, prefix=prefix)
    coordinator.admit("warm-up")
    answers: list[tuple[bool, bool]] = []
    lock = threading.Lock()
    start = threading.Barrier(threads)
    barrier.wait(30)
    barrier.wait(30)

    def ask(_: int) -> None:
        start.wait(10)
        admission = coordinator.admit(key)
        with lock:
            answers.append((admission.allowed, admission.probe))

    run_threads(threads, ask)
    results.put((sum(p for _, p in answers), sum(a for a, _ in answers),
                 coordinator.stats().fallbacks))
    coordinator.close()
