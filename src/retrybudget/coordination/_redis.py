"""The Redis coordinator: every process and machine that shares a Redis server.

Each coordinator call is one atomic Lua script (``lua/*.lua``, registered with
``register_script``) over four keys per provider key, all with TTLs. Every instant is computed
inside the script from the server's ``TIME``, and clients get relative waits back, so machines
whose clocks disagree still wait for the same instant.

When Redis is unreachable, slow (``socket_timeout``) or restarted, the coordinator answers
from a local :class:`MemoryCoordinator` (``on_failure="local"``) or refuses new operations
(``on_failure="fail"``), logs the transition once on ``retrybudget.coordination``, counts it,
and tries Redis again every ``retry_interval`` seconds.

The ``admit`` and ``finish`` scripts also say which state the breaker entered, if any, so the
coordinator that saw a transition reports it to its events objects.

The async calls that one event loop's tasks make in the same turn of the loop go to Redis in one
pipeline (one round trip; each script stays atomic on its own), as ioredis' auto-pipelining does:
a process whose tasks wake together (workers released at one instant, answers that arrive
together) pays one round trip for all of them. A caller cancelled before its turn's pipeline
is sent is left out of it.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import threading
import uuid
import weakref
from collections.abc import Sequence
from typing import Any, TypeVar

import redis
import redis.asyncio
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript, Script
from redis.retry import Retry

from .._clock import SYSTEM_CLOCK, Clock
from ..core.actions import Acquire, Admission, Admit, Finish, Learn, Permit
from ..core.outcome import Outcome
from ..core.policy import PolicyError, seconds
from ..core.throttle import Throttle
from ._base import Coordinator, CoordinatorAction
from ._config import CoordinationConfig
from ._logic import health, permit_of
from ._memory import MemoryCoordinator
from ._redis_calls import RedisCalls
from ._redis_outage import OnFailure, RedisOutage
from ._redis_pipeline import ERRORS, Call, Pipeline, in_event_loop
from ._redis_scripts import TEXT
from ._settle import aged, deferrable
from ._stats import CoordinationStats, Tally
from ._tokens_redis import Corrections, charged

__all__ = ["OnFailure", "RedisCoordinator"]

T = TypeVar("T")

SETTLE_IDLE = 0.5
"""Seconds at most a settlement held back waits for a next call under its key: then whatever
is held back is sent on its own (its worker went idle)."""

_HELD: contextvars.ContextVar[tuple[object, str, Permit | None, Learn | None] | None] = (
    contextvars.ContextVar("retrybudget_redis_held", default=None))
"""What a worker's last call left for its next one, in this thread or task: ``(coordinator,
key, the first attempt's permit got with the admission, a final learn to send with the
finish)``."""


class RedisCoordinator(RedisCalls, RedisOutage, Coordinator):
    """Coordinates every worker that shares one Redis server.

    Args:
        url: a Redis URL (``redis://host:6379/0``, ``unix:///path/redis.sock``); clients are
            made from it with ``socket_timeout`` and no client-side retries.
        client: a ``redis.Redis`` to use instead (its own timeouts apply).
        async_client: a ``redis.asyncio.Redis`` for the async methods. Without one, a client is
            made from ``url`` for each event loop; with only ``client``, async calls run it in
            a worker thread. With only ``async_client``, sync calls raise
            :class:`~retrybudget.errors.PolicyError`.
        config: what to coordinate (default :class:`CoordinationConfig()`).
        prefix: prepended to every Redis key.
        clock: for ``retry_at`` on this machine's wall clock and for retrying Redis; shared
            instants come from the Redis server.
        on_failure: ``"local"`` coordinates locally while Redis is unavailable; ``"fail"``
            refuses new operations (``admit`` answers not allowed, detail
            ``"coordinator unavailable"``) and lets admitted ones finish locally.
        socket_timeout: seconds a Redis call may take before Redis counts as unavailable.
        retry_interval: seconds between attempts to get back to Redis while unavailable.
        max_connections: connections per client made from ``url`` (callers beyond it wait
            for a free one, at most ``max(1, 4 * socket_timeout)`` seconds).
        pipeline: the async calls one event loop's tasks make in the same turn of the loop go
            to Redis together, in one pipeline (one round trip); False: one round trip per call.
        events: objects told of what this coordinator sees (see
            :class:`~retrybudget.observe.CoordinatorEvents`; a
            :class:`~retrybudget.observe.PrometheusHook` for one): ``breaker_transition(key,
            state)`` for each breaker transition a script made for this coordinator (or
            :attr:`local` made while Redis was unavailable), and ``coordinator_fallback(key)``
            for each call answered locally instead of by Redis. What they raise is logged and
            ignored.

    Gates this coordinator learns or is held at are also kept in :attr:`local`, so they
    still hold while Redis is unavailable.

    The calls' keys and arguments are built by :class:`._redis_calls.RedisCalls`, what happens
    while Redis is unavailable by :class:`._redis_outage.RedisOutage`; this class runs the
    calls (sync, or async in one pipeline per turn of the loop) and merges the flow's calls
    that come back to back.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        client: redis.Redis | None = None,
        async_client: redis.asyncio.Redis | None = None,
        config: CoordinationConfig | None = None,
        prefix: str = "retrybudget:",
        clock: Clock = SYSTEM_CLOCK,
        on_failure: OnFailure = "local",
        socket_timeout: float = 0.25,
        retry_interval: float = 1.0,
        max_connections: int = 64,
        pipeline: bool = True,
        events: Sequence[object] = (),
    ) -> None:
        if url is None and client is None and async_client is None:
            raise PolicyError("RedisCoordinator needs a url, a client or an async_client")
        if on_failure not in ("local", "fail"):
            raise PolicyError(f"on_failure must be 'local' or 'fail', got {on_failure!r}")
        self.config = config or CoordinationConfig()
        self.clock = clock
        self.prefix = str(prefix)
        self.on_failure: OnFailure = on_failure
        self.socket_timeout = seconds(socket_timeout, "socket_timeout") or 0.0
        self.retry_interval = seconds(retry_interval, "retry_interval") or 0.0
        if self.socket_timeout <= 0:
            raise PolicyError("socket_timeout must be positive")
        if isinstance(max_connections, bool) or not isinstance(max_connections, int) or (
            max_connections < 1
        ):
            raise PolicyError(f"max_connections must be a positive integer, got {max_connections!r}")
        self.max_connections = max_connections
        self.pipeline = bool(pipeline)
        self.events = tuple(events)
        self.local = MemoryCoordinator(self.config, clock=clock, events=self.events, share=True)
        """The coordinator that answers while Redis is unavailable."""
        self._connect(url, client, async_client)
        self._lock = threading.Lock()
        self._degraded = False
        self._retry_at = 0.0
        self._trying: threading.Event | None = None  # set when the try under way answers
        self._tally = Tally()
        self._id = uuid.uuid4().hex
        self._live: dict[str, int] = {}  # key -> live workers last seen in Redis
        self._reseed: set[str] = set()  # keys whose next acquire offers the local observation
        self._counted: dict[str, float] = {}  # key -> when Redis last counted this worker live
        self._corrections = Corrections()  # late token corrections, for the next acquire
        self._hold_back()

    def _connect(self, url: str | None, client: redis.Redis | None,
                 async_client: redis.asyncio.Redis | None) -> None:
        """The clients (a sync one made from ``url`` unless given; an async one per event
        loop, made when first needed, unless given) and each one's registered scripts."""
        self._url = url
        self._owns_client = client is None and url is not None
        self._client = client if client is not None else (
            None if url is None else redis.Redis.from_pool(
                redis.BlockingConnectionPool.from_url(url, **self._options(Retry))
            )
        )
        self._scripts: dict[str, Script] = (
            {} if self._client is None
            else {n: self._client.register_script(t) for n, t in TEXT.items()}
        )
        self._async_client = async_client
        self._async_scripts: dict[str, AsyncScript] = (
            {} if async_client is None
            else {n: async_client.register_script(t) for n, t in TEXT.items()}
        )
        self._per_loop: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[redis.asyncio.Redis, dict[str, AsyncScript]]
        ] = weakref.WeakKeyDictionary()
        self._pipelines: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Pipeline] = (
            weakref.WeakKeyDictionary())

    def _hold_back(self) -> None:
        """No settlement held back yet (see :meth:`_defer`)."""
        self._settling: dict[str, tuple[Learn, Outcome[Any], float]] = {}
        """Per key, a settlement held back for the next admission: its final learn, the
        operation's outcome and when it was learnt (see :mod:`._settle`)."""
        self._settled: set[str] = set()  # keys whose first settlement went (never held back)
        self._idle: tuple[threading.Timer | asyncio.TimerHandle,
                          asyncio.AbstractEventLoop | None] | None = None  # sends what is held
        self._idle_tasks: set[asyncio.Task[None]] = set()  # held: the loop keeps weak refs

    def __repr__(self) -> str:
        state = "degraded" if self._degraded else "up"
        return f"RedisCoordinator(prefix={self.prefix!r}, {state})"

    def _options(self, retry: type[Retry] | type[AsyncRetry]) -> dict[str, Any]:
        return {
            "socket_timeout": self.socket_timeout,
            "socket_connect_timeout": self.socket_timeout,
            "retry": retry(NoBackoff(), 0),
            "max_connections": self.max_connections,
            "timeout": max(1.0, 4 * self.socket_timeout),  # waiting for a free connection
        }

    # Health -------------------------------------------------------------------------------

    @property
    def degraded(self) -> bool:
        """True while Redis is unavailable and calls are answered without it."""
        return self._degraded

    @property
    def fallbacks(self) -> int:
        """Calls answered without Redis so far (locally, or refused under ``"fail"``)."""
        return self._tally.snapshot().fallbacks

    def stats(self) -> CoordinationStats:
        """What this coordinator object has answered so far (this process only)."""
        return self._tally.snapshot(degraded=self._degraded)

    # Running a call: the sync and async paths differ only by await ---------------------------

    def _run(self, call: Call[T]) -> T:
        if self._client is None:
            raise PolicyError("sync calls need a url or a client (only async_client was given)")
        if call.script is None or not self._should_try():
            return self._without_redis(call)
        try:
            self._tally.sent()
            raw = self._scripts[call.script](keys=call.keys, args=call.args)
        except ERRORS as exc:
            return self._failed(call, exc)
        return self._read(call, raw)

    async def _arun(self, call: Call[T]) -> T:
        scripts = self._scripts_for_loop()
        if scripts is None:
            return await asyncio.to_thread(self._run, call)
        if call.script is None or not self._should_try():
            return self._without_redis(call)
        pipeline = self._pipeline(scripts) if self.pipeline else None
        try:
            if pipeline is not None:
                raw = await pipeline.submit(call)
            else:
                self._tally.sent()
                raw = await scripts[call.script](keys=call.keys, args=call.args)
        except ERRORS as exc:
            return self._failed(call, exc)
        return self._read(call, raw)

    def _pipeline(self, scripts: dict[str, AsyncScript]) -> Pipeline | None:
        """The running loop's pipeline, or None for a client that takes none (a cluster)."""
        loop = asyncio.get_running_loop()
        found = self._pipelines.get(loop)
        if found is None or found.scripts is not scripts:
            entry = self._per_loop.get(loop)
            client = self._async_client if entry is None else entry[0]
            if not isinstance(client, redis.asyncio.Redis):
                return None
            found = self._pipelines[loop] = Pipeline(client, scripts, self._tally)
        return found

    def _scripts_for_loop(self) -> dict[str, AsyncScript] | None:
        if self._async_client is not None:
            return self._async_scripts
        if self._url is None:
            return None
        loop = asyncio.get_running_loop()
        entry = self._per_loop.get(loop)
        if entry is None:
            client = redis.asyncio.Redis.from_pool(
                redis.asyncio.BlockingConnectionPool.from_url(self._url,
                                                              **self._options(AsyncRetry))
            )
            entry = (client, {n: client.register_script(t) for n, t in TEXT.items()})
            self._per_loop[loop] = entry
        return entry[1]

    def close(self) -> None:
        """Send the settlements held back, then close the sync client this coordinator made
        (a client passed in stays open)."""
        self._disarm()
        if self._client is not None:
            self.settle()
        if self._owns_client and self._client is not None:
            self._client.close()

    async def aclose(self) -> None:
        """Send the settlements held back, then close the async client this coordinator made
        for the running event loop."""
        self._disarm()
        await self.asettle()
        loop = asyncio.get_running_loop()
        self._pipelines.pop(loop, None)
        entry = self._per_loop.pop(loop, None)
        if entry is not None:
            await entry[0].aclose()

    def _paced(self, key: str, permit: Permit, gap: float) -> Permit:
        """A go ``permit`` of a write, after the write spacing: the same, or a pacing wait
        (its lease given back). Its own script, run only for writes the profile spaces."""
        if gap <= 0 or permit.wait > 0:
            return permit
        wait = self._run(self._write(key, gap))
        if wait <= 0:
            return permit
        if permit.lease is not None:
            self._run(self._learn(key, None, permit.lease))
        return permit_of("pace", wait, 0.0, None, 0.0)

    async def _apaced(self, key: str, permit: Permit, gap: float) -> Permit:
        """Async :meth:`_paced`."""
        if gap <= 0 or permit.wait > 0:
            return permit
        wait = await self._arun(self._write(key, gap))
        if wait <= 0:
            return permit
        if permit.lease is not None:
            await self._arun(self._learn(key, None, permit.lease))
        return permit_of("pace", wait, 0.0, None, 0.0)

    def _defer(self, learn: Learn, finish: Finish) -> bool:
        """Hold back ``learn`` and ``finish`` for the next call under the key (at most
        :data:`SETTLE_IDLE` seconds) when they may wait (:func:`._settle.deferrable`); False:
        they go now."""
        key = learn.key
        if (self.config.breaker is None or self._degraded or finish.key != key
                or (learn.lease is not None and (learn.lease.startswith("m:")
                                                 or charged(learn.lease)))
                or not deferrable(self.config, learn.throttle, health(finish.outcome),
                                  finish.probe)):
            return False
        with self._lock:
            if key not in self._settled or key in self._settling:
                self._settled.add(key)  # a key's first answer, or one already held: now
                return False
            self._settling[key] = (learn, finish.outcome, self.clock.monotonic())
        self._arm()
        return True

    def _arm(self) -> None:
        """Send what is held back in :data:`SETTLE_IDLE` seconds, unless a timer that will
        is set already (from a thread, or in this event loop)."""
        loop = asyncio.get_running_loop() if in_event_loop() else None
        with self._lock:
            if self._idle is not None and (self._idle[1] is None or self._idle[1] is loop):
                return
            if loop is not None:
                self._idle = (loop.call_later(SETTLE_IDLE, self._idle_async, loop), loop)
            elif self._client is not None:
                timer = threading.Timer(SETTLE_IDLE, self._idle_sync)
                timer.daemon = True
                self._idle = (timer, None)
                timer.start()

    def _idle_sync(self) -> None:
        with self._lock:
            self._idle = None
        self.settle()

    def _idle_async(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            self._idle = None
        task = loop.create_task(self.asettle())
        self._idle_tasks.add(task)
        task.add_done_callback(self._idle_tasks.discard)

    def _disarm(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, None
        if idle is None:
            return
        timer, loop = idle
        if loop is None or loop is (asyncio.get_running_loop() if in_event_loop() else None):
            timer.cancel()
        elif not loop.is_closed():
            loop.call_soon_threadsafe(timer.cancel)

    def _held_back(self) -> list[Call[bool]]:
        """Every settlement held back and every late token correction held, as calls that
        send them now."""
        with self._lock:
            held, self._settling = self._settling, {}
        calls = [self._end(dataclasses.replace(learn, throttle=aged(
                     learn.throttle, self.clock.monotonic() - at)), outcome, False)
                 for learn, outcome, at in held.values() if learn.throttle is not None]
        corrected = (self._corrected(key) for key in self._corrections.held())
        return calls + [call for call in corrected if call is not None]

    def settle(self) -> None:
        """Send every settlement held back for a next call now (:meth:`close` does, and a
        timer :data:`SETTLE_IDLE` seconds after one was held back)."""
        for call in self._held_back():
            self._opened(self._run(call))

    async def asettle(self) -> None:
        """Async :meth:`settle` (:meth:`aclose` does)."""
        for call in self._held_back():
            self._opened(await self._arun(call))

    def _held(self, action: CoordinatorAction) -> tuple[bool, object, Call[Any] | None]:
        """What a flow action needs, given what this worker's last call left: ``(answered,
        answer, a call to run first or instead)``."""
        held = _HELD.get()
        if held is not None and held[0] is not self:
            held = None
        if isinstance(action, Admit):
            _HELD.set(None)
            if self.config.breaker is None:
                return False, None, None
            return True, None, self._begin(action)
        if held is not None:
            _HELD.set(None)
            _, key, permit, learn = held
            if isinstance(action, Acquire) and permit is not None and action.key == key and (
                    action.attempt == 1):
                return True, permit, None
            if isinstance(action, Acquire) and permit is not None and permit.lease is not None:
                # The first attempt asks under its bucket's key (a profile's bucket_path),
                # not the admission's: the lease taken with the admission goes back.
                return False, None, self._learn(key, None, permit.lease)
            if isinstance(action, Finish) and learn is not None and action.key == key:
                if self._defer(learn, action):
                    return True, None, None  # a healthy settlement: with the next admission
                return True, None, self._end(learn, action.outcome, action.probe)
            if learn is not None:  # not the finish it expected: send it on its own now
                return False, None, self._learn(learn.key, learn.throttle, learn.lease)
        if isinstance(action, Learn) and action.final:
            _HELD.set((self, action.key, None, action))
            return True, None, None
        return False, None, None

    def _settle(self, action: CoordinatorAction, result: object) -> object:
        """The answer to a flow action from the merged call just run."""
        if isinstance(action, Admit):
            assert isinstance(result, tuple)  # noqa: S101 - _begin's answer
            admission: Admission = result[0]
            permit: Permit | None = result[1]
            _HELD.set((self, action.key, permit, None) if permit is not None else None)
            return self._tally.admission(admission)
        if isinstance(action, Finish):
            self._opened(bool(result))
        return None

    def handle(self, action: CoordinatorAction) -> object:
        """Perform one of the flow's actions: an admission brings the first attempt's acquire
        along, and a final learn goes with the finish (one round trip each)."""
        answered, answer, call = self._held(action)
        if call is not None:
            result = self._run(call)
            if answered:
                return self._settle(action, result)
        if answered:
            if isinstance(answer, Permit) and isinstance(action, Acquire):
                answer = self._paced(action.key, answer, action.write_gap)
            return self._tally.permit(answer) if isinstance(answer, Permit) else answer
        return super().handle(action)

    async def ahandle(self, action: CoordinatorAction) -> object:
        """Async :meth:`handle`."""
        answered, answer, call = self._held(action)
        if call is not None:
            result = await self._arun(call)
            if answered:
                return self._settle(action, result)
        if answered:
            if isinstance(answer, Permit) and isinstance(action, Acquire):
                answer = await self._apaced(action.key, answer, action.write_gap)
            return self._tally.permit(answer) if isinstance(answer, Permit) else answer
        return await super().ahandle(action)

    # The interface ---------------------------------------------------------------------------

    def admit(self, key: str) -> Admission:
        """The breaker, shared: admit, admit as the one probe, or refuse until ``retry_at``."""
        return self._tally.admission(self._run(self._admit(key)))

    patient = True

    def acquire(self, key: str, attempt: int, write_gap: float = 0.0, *,
                max_wait: float | None = None, fail_fast: bool = False) -> Permit:
        """The shared gate, slots, pacing and concurrency cap; then a write's spacing. A slot
        the caller would not wait for (``max_wait``, ``fail_fast``) is not reserved."""
        permit = self._run(self._after_held(self._acquire(key, attempt, max_wait, fail_fast),
                                            "settled", 0))
        return self._tally.permit(self._paced(key, permit, write_gap))

    def learn(self, key: str, throttle: Throttle | None, lease: str | None) -> None:
        """Give back the lease; share the gate and the quota observation."""
        self._run(self._learn(key, throttle, lease))

    def spend_retry(self, key: str) -> bool:
        """Take one retry from the shared retry budget (False: refused)."""
        return self._tally.retry(self._run(self._spend(key)))

    def finish(self, key: str, outcome: Outcome[Any], probe: bool) -> None:
        """Record one logical operation in the shared breaker."""
        self._opened(self._run(self._finish(key, outcome, probe)))

    async def aadmit(self, key: str) -> Admission:
        """Async :meth:`admit`."""
        return self._tally.admission(await self._arun(self._admit(key)))

    async def aacquire(self, key: str, attempt: int, write_gap: float = 0.0, *,
                       max_wait: float | None = None, fail_fast: bool = False) -> Permit:
        """Async :meth:`acquire`."""
        permit = await self._arun(self._after_held(
            self._acquire(key, attempt, max_wait, fail_fast), "settled", 0))
        return self._tally.permit(await self._apaced(key, permit, write_gap))

    async def alearn(self, key: str, throttle: Throttle | None, lease: str | None) -> None:
        """Async :meth:`learn`."""
        await self._arun(self._learn(key, throttle, lease))

    async def aspend_retry(self, key: str) -> bool:
        """Async :meth:`spend_retry`."""
        return self._tally.retry(await self._arun(self._spend(key)))

    async def afinish(self, key: str, outcome: Outcome[Any], probe: bool) -> None:
        """Async :meth:`finish`."""
        self._opened(await self._arun(self._finish(key, outcome, probe)))
