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
import logging
import threading
import uuid
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Generic, Literal, TypeVar

import redis
import redis.asyncio
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript, Script
from redis.exceptions import NoScriptError
from redis.retry import Retry

from .._clock import SYSTEM_CLOCK, Clock
from ..core.actions import Acquire, Admission, Admit, Finish, Learn, Permit
from ..core.headers import MAX_HINT_SECONDS
from ..core.outcome import Outcome, WaitReason
from ..core.policy import PolicyError, seconds
from ..core.throttle import NO_THROTTLE, Throttle
from ..observe import BREAKER_STATES, notify
from ._base import Coordinator, CoordinatorAction
from ._config import MAX_DURATION, CoordinationConfig
from ._logic import (
    EPSILON,
    FLIGHT_TTL,
    LEARNED_CONSTANTS,
    NEVER,
    PROBE_PATIENCE,
    SLICES,
    Health,
    Verdict,
    admission_of,
    health,
    permit_of,
)
from ._memory import MemoryCoordinator
from ._settle import aged, deferrable
from ._stats import CoordinationStats, Tally
from ._tokens_redis import charged, learned_args, requests_throttle, token_args

__all__ = ["OnFailure", "RedisCoordinator"]

logger = logging.getLogger("retrybudget.coordination")

T = TypeVar("T")

OnFailure = Literal["local", "fail"]
"""What to do while Redis is unavailable: coordinate locally, or refuse new operations."""

UNAVAILABLE = "coordinator unavailable"
"""The detail of an admission refused because Redis is unavailable (``on_failure="fail"``)."""

WORKER_TTL = 10.0
"""Seconds a coordinator counts among a key's live workers after its last acquire (its share of
the quota while Redis is unreachable is ``1 / live workers``)."""

SETTLE_IDLE = 0.5
"""Seconds at most a settlement held back waits for a next call under its key: then whatever
is held back is sent on its own (its worker went idle)."""

HORIZON = MAX_HINT_SECONDS + MAX_DURATION
"""How far ahead a stored instant may lie before the scripts treat it as garbage."""

_HELD: contextvars.ContextVar[tuple[object, str, Permit | None, Learn | None] | None] = (
    contextvars.ContextVar("retrybudget_redis_held", default=None))
"""What a worker's last call left for its next one, in this thread or task: ``(coordinator,
key, the first attempt's permit got with the admission, a final learn to send with the
finish)``."""

_ERRORS: tuple[type[BaseException], ...] = (redis.RedisError, OSError, asyncio.TimeoutError)
_SCRIPTS = ("admit", "acquire", "learn", "spend", "finish", "write")
_MERGED = {"begin": ("admit", "acquire"), "end": ("learn", "finish"),
           "cycle": ("learn", "finish", "admit", "acquire"),
           "settled": ("learn", "finish", "acquire")}
"""Scripts made of several: one round trip where the flow makes calls back to back (an
operation's admission and its first attempt's acquire; its last attempt's learn and its
finish; a held-back settlement and the next admission and acquire under its key, or the
next acquire)."""
Arg = str | int | float


def _source(name: str) -> str:
    return (resources.files(__package__) / "lua" / f"{name}.lua").read_text(encoding="utf-8")


def _learned_source() -> str:
    """``lua/learned.lua`` with :mod:`._logic._learned`'s constants (appended to the prelude)."""
    text = _source("learned")
    for name, value in LEARNED_CONSTANTS.items():
        text = text.replace(f"__{name}__", repr(value))
    return text


def _scripts_text() -> dict[str, str]:
    prelude = (
        _source("prelude")
        .replace("__HORIZON__", repr(HORIZON))
        .replace("__EPSILON__", repr(EPSILON))
        .replace("__SLICES__", repr(SLICES))
        .replace("__WORKER_TTL__", repr(WORKER_TTL))
        .replace("__PROBE_PATIENCE__", repr(PROBE_PATIENCE))
    ) + _learned_source() + "\n" + _source("tokens")
    texts = {name: prelude + "\nlocal function main(ARGS)\n"
             + _source(name).replace("ARGV[", "ARGS[")
             + "\nend\nlocal reply = main(ARGV)\nflush()  -- the state's writes, once\nreturn reply\n"
             for name in _SCRIPTS}
    for name, parts in _MERGED.items():
        bodies = "".join(f"local function {part}_part(ARGS)\n"
                         + _source(part).replace("ARGV[", "ARGS[") + "\nend\n"
                         for part in parts)
        listed = ", ".join(f"{part}_part" for part in parts)
        gates = ", ".join("true" if part == "admit" else "false" for part in parts)
        texts[name] = prelude + "\n" + bodies + f"""
-- {", then ".join(parts)} in the same call (after an admission, the rest only when it
-- admits). ARGV: idle, the argument counts of every part but the last, then each part's
-- arguments in turn. Returns each part's reply (false: not run).
local parts, gates = {{{listed}}}, {{{gates}}}
local pos, replies, stop = 1 + #parts, {{}}, false
for i, part in ipairs(parts) do
  local n = #ARGV - pos + 1
  if i < #parts then n = tonumber(ARGV[1 + i]) or 0 end
  local args = {{ARGV[1]}}
  for j = pos, pos + n - 1 do args[#args + 1] = ARGV[j] end
  pos = pos + n
  replies[i] = false
  if not stop then
    replies[i] = part(args)
    stop = gates[i] and replies[i][1] ~= 1
  end
end
flush()  -- the state's writes, once
return replies
"""
    return texts


_TEXT = _scripts_text()


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def _number(value: object, default: float = 0.0) -> float:
    try:
        out = float(_text(value))
    except ValueError:
        return default
    return out if 0.0 <= out <= HORIZON else default


def _optional(value: object) -> float | None:
    """A number the script may leave out ('' or absent: None)."""
    return _number(value) if _text(value) else None


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _items(raw: object, n: int) -> list[object]:
    items = list(raw) if isinstance(raw, (list, tuple)) else []
    return items + [None] * (n - len(items))


@dataclass(frozen=True, slots=True)
class _Call(Generic[T]):
    """One coordinator call for provider key ``key``: the script and its arguments, how to
    read the reply, and the answer without Redis. ``script`` None: nothing to share, answer
    locally."""

    key: str
    script: str | None
    keys: list[str]
    args: tuple[Arg, ...]
    parse: Callable[[object], T]
    local: Callable[[], T]
    refusal: T | None = None


class _Pipeline:
    """The async calls one event loop's tasks make in one turn of the loop, sent together.

    The first call of a turn starts the sender task; it runs once the tasks already woken in
    that turn have run, takes every call queued by then and sends them in one pipeline (one on
    its own as the plain script call, whose script object loads its script if need be). Scripts
    Redis no longer has (``NOSCRIPT``: flushed, or a restarted server) are loaded once each, and
    the calls that needed them sent again together.
    """

    __slots__ = ("client", "pending", "scripts", "sending", "tally")

    def __init__(self, client: redis.asyncio.Redis, scripts: dict[str, AsyncScript],
                 tally: Tally) -> None:
        self.client = client
        self.scripts = scripts
        self.tally = tally
        self.pending: list[tuple[_Call[Any], asyncio.Future[object]]] = []
        self.sending: set[asyncio.Task[None]] = set()  # held: the loop keeps only weak refs

    def submit(self, call: _Call[Any]) -> asyncio.Future[object]:
        """Queue ``call`` for this turn's pipeline; the future gets its raw reply or error."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[object] = loop.create_future()
        if not self.pending:
            task = loop.create_task(self._send())
            self.sending.add(task)
            task.add_done_callback(self.sending.discard)
        self.pending.append((call, future))
        return future

    async def _send(self) -> None:
        batch, self.pending = self.pending, []
        live = [(call, future) for call, future in batch if not future.done()]
        if not live:
            return
        try:
            replies = await self._replies([call for call, _ in live])
        except BaseException as exc:
            for _, future in live:
                if not future.done():
                    if isinstance(exc, asyncio.CancelledError):
                        future.cancel()
                    else:
                        future.set_exception(exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return
        for (_, future), reply in zip(live, replies, strict=True):
            if not future.done():
                if isinstance(reply, BaseException):
                    future.set_exception(reply)
                else:
                    future.set_result(reply)

    async def _replies(self, calls: list[_Call[Any]]) -> list[object]:
        if len(calls) == 1:
            self.tally.sent()
            call = calls[0]
            return [await self.scripts[str(call.script)](keys=call.keys, args=call.args)]
        self.tally.add("calls", len(calls))
        replies = await self._pipelined(calls)
        missing = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
        if missing:  # load each script once, then send those calls again together
            try:
                for name in dict.fromkeys(str(calls[i].script) for i in missing):
                    self.tally.add("round_trips")
                    await self.client.script_load(self.scripts[name].script)
                again = await self._pipelined([calls[i] for i in missing])
            except _ERRORS as exc:
                again = [exc] * len(missing)
            for i, reply in zip(missing, again, strict=True):
                replies[i] = reply
        return replies

    async def _pipelined(self, calls: list[_Call[Any]]) -> list[object]:
        """The replies (an error in place of a failed script's) of ``calls`` in one pipeline."""
        self.tally.add("round_trips")
        pipe = self.client.pipeline(transaction=False)
        for call in calls:
            pipe.evalsha(self.scripts[str(call.script)].sha, len(call.keys), *call.keys,
                         *call.args)
        return list(await pipe.execute(raise_on_error=False))


class RedisCoordinator(Coordinator):
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
        self.events = tuple(events)
        self.local = MemoryCoordinator(self.config, clock=clock, events=self.events, share=True)
        """The coordinator that answers while Redis is unavailable."""
        self._url = url
        self._owns_client = client is None and url is not None
        self.max_connections = max_connections
        self._client = client if client is not None else (
            None if url is None else redis.Redis.from_pool(
                redis.BlockingConnectionPool.from_url(url, **self._options(Retry))
            )
        )
        self._scripts: dict[str, Script] = (
            {} if self._client is None
            else {n: self._client.register_script(t) for n, t in _TEXT.items()}
        )
        self._async_client = async_client
        self._async_scripts: dict[str, AsyncScript] = (
            {} if async_client is None
            else {n: async_client.register_script(t) for n, t in _TEXT.items()}
        )
        self._per_loop: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[redis.asyncio.Redis, dict[str, AsyncScript]]
        ] = weakref.WeakKeyDictionary()
        self.pipeline = bool(pipeline)
        self._pipelines: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Pipeline] = (
            weakref.WeakKeyDictionary())
        self._lock = threading.Lock()
        self._degraded = False
        self._retry_at = 0.0
        self._trying: threading.Event | None = None  # set when the try under way answers
        self._tally = Tally()
        self._id = uuid.uuid4().hex
        self._live: dict[str, int] = {}  # key -> live workers last seen in Redis
        self._reseed: set[str] = set()  # keys whose next acquire offers the local observation
        self._settling: dict[str, tuple[Learn, Outcome[Any], float]] = {}
        """Per key, a settlement held back for the next admission: its final learn, the
        operation's outcome and when it was learnt (see :mod:`._settle`)."""
        self._settled: set[str] = set()  # keys whose first settlement went (never held back)
        self._counted: dict[str, float] = {}  # key -> when Redis last counted this worker live
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

    def _should_try(self) -> bool:
        if not self._degraded:
            return True
        with self._lock:
            now = self.clock.monotonic()
            trying = self._trying
            if trying is None and now >= self._retry_at:
                self._retry_at = now + self.retry_interval  # one caller tries
                self._trying = threading.Event()
                return True
        if trying is None or _in_event_loop():
            return False  # the rest go local (an event loop is never held up)
        # the rest wait for the try's answer, at most as long as it may take, so that at a
        # window's start they do not spend the fresh window locally while Redis is back
        if not trying.wait(self.socket_timeout):
            with self._lock:
                if self._trying is trying:
                    self._trying = None  # it never answered: the next due caller tries
        return not self._degraded

    def _tried(self) -> None:
        """A call to Redis answered or failed: callers waiting for a try go on."""
        trying, self._trying = self._trying, None
        if trying is not None:
            trying.set()

    def _went_down(self, exc: BaseException) -> None:
        with self._lock:
            self._retry_at = self._next_try(self.clock.monotonic())
            self._tried()
            if self._degraded:
                return
            self._degraded = True
            self._reseed = set(self._live)  # Redis may come back empty: offer what we know
        logger.warning(
            "Redis coordination unavailable (%s: %s); %s", type(exc).__name__, exc,
            "coordinating locally" if self.on_failure == "local" else "refusing new operations",
        )

    def _next_try(self, now: float) -> float:
        """When to try Redis again after a failed call at ``now``: ``retry_interval`` later,
        or, when a provider window this coordinator counts locally ends within
        :data:`WORKER_TTL` seconds, at the first end after that. Every worker's local window
        ends at the instant the provider named, so workers that come back there resume the
        shared count together for a fresh window, not mid-way through one whose shares the
        others are still spending locally."""
        later = now + self.retry_interval
        ends = [end for key in list(self._live)
                if (end := self._window_end(key, later)) is not None and end <= now + WORKER_TTL]
        return min(ends, default=later)

    def _window_end(self, key: str, after: float) -> float | None:
        """The end of ``key``'s provider window as counted locally, when it comes at or after
        ``after``: the reset the provider named, or, once that passed, the next window's end
        (the last reset plus the window's length, when two resets in a row have shown it);
        None when neither is known. No further: a provider's next window may start only with
        its next request."""
        s = self.local.schedule(key)
        if s is None:
            return None
        last = s.rolled_at if s.reset_at is None else s.reset_at
        if last >= after:
            return last
        if s.window is None or last == NEVER or last + s.window < after:
            return None
        return last + s.window

    def _came_back(self) -> None:
        if not self._degraded:
            return
        with self._lock:
            was, self._degraded = self._degraded, False
            self._tried()
        if was:
            logger.info("Redis coordination is back")

    def _without_redis(self, call: _Call[T]) -> T:
        if call.script is not None:
            self._tally.add("fallbacks")
            if self.on_failure == "fail" and call.refusal is not None:
                return call.refusal
            if self.events:
                notify(self.events, "coordinator_fallback", call.key)
        return call.local()

    def _read(self, call: _Call[T], raw: object) -> T:
        self._came_back()
        return call.parse(raw)

    def _failed(self, call: _Call[T], exc: BaseException) -> T:
        self._went_down(exc)
        return self._without_redis(call)

    # Running a call: the sync and async paths differ only by await ---------------------------

    def _run(self, call: _Call[T]) -> T:
        if self._client is None:
            raise PolicyError("sync calls need a url or a client (only async_client was given)")
        if call.script is None or not self._should_try():
            return self._without_redis(call)
        try:
            self._tally.sent()
            raw = self._scripts[call.script](keys=call.keys, args=call.args)
        except _ERRORS as exc:
            return self._failed(call, exc)
        return self._read(call, raw)

    async def _arun(self, call: _Call[T]) -> T:
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
        except _ERRORS as exc:
            return self._failed(call, exc)
        return self._read(call, raw)

    def _pipeline(self, scripts: dict[str, AsyncScript]) -> _Pipeline | None:
        """The running loop's pipeline, or None for a client that takes none (a cluster)."""
        loop = asyncio.get_running_loop()
        found = self._pipelines.get(loop)
        if found is None or found.scripts is not scripts:
            entry = self._per_loop.get(loop)
            client = self._async_client if entry is None else entry[0]
            if not isinstance(client, redis.asyncio.Redis):
                return None
            found = self._pipelines[loop] = _Pipeline(client, scripts, self._tally)
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
            entry = (client, {n: client.register_script(t) for n, t in _TEXT.items()})
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

    # The calls ------------------------------------------------------------------------------

    def _keys(self, key: str) -> list[str]:
        base = f"{self.prefix}{{{key}}}:"
        return [base + "state", base + "slots", base + "leases", base + "budget", base + "workers",
                base + "tokens"]

    def _call(self, script: str | None, key: str, args: Sequence[Arg],
              parse: Callable[[object], T], local: Callable[[], T],
              refusal: T | None = None) -> _Call[T]:
        return _Call(key, script, self._keys(key), (self.config.idle_ttl, *args), parse, local,
                     refusal)

    def _moved(self, key: str, state: object) -> None:
        """Report the breaker state a script says it entered ('' when it stayed put)."""
        entered = _text(state)
        if entered in BREAKER_STATES and self.events:
            notify(self.events, "breaker_transition", key, entered)

    def _admit(self, key: str) -> _Call[Admission]:
        cfg = self.config.breaker

        def parse(raw: object) -> Admission:
            allowed, probe, retry_in, entered = _items(raw, 4)
            verdict = Verdict(_text(allowed) == "1", _text(probe) == "1",
                              _optional(retry_in))
            self._moved(key, entered)
            return admission_of(verdict, self.clock.wall())

        return self._call(
            None if cfg is None else "admit", key, () if cfg is None else (cfg.probe_ttl,),
            parse, lambda: self.local.admit(key),
            Admission(False, retry_at=None, detail=UNAVAILABLE),
        )

    def _acquire(self, key: str, attempt: int, max_wait: float | None = None,
                 fail_fast: bool = False) -> _Call[Permit]:
        cfg = self.config
        gate, pacing, cap = cfg.gate, cfg.pacing, cfg.concurrency
        args = (
            attempt, gate.spread, gate.claim_grace,
            0 if pacing is None else 1,
            0 if pacing is None else pacing.threshold,
            0 if pacing is None else pacing.min_remaining,
            0 if cap is None else cap.limit,
            FLIGHT_TTL if cap is None else cap.lease_ttl,
            0 if cap is None else cap.poll,
            0 if pacing is None else pacing.probes,
            self._me(key), gate.herd_window, "" if max_wait is None else max_wait,
            1 if fail_fast else 0, *token_args(self._seed(key)),
        )

        def parse(raw: object) -> Permit:
            code, wait, gate_in, lease, reset_in, live = _items(raw, 6)
            workers = int(_number(live, 1.0))
            if workers >= 1:  # 0: not counted by this call
                self._live[key] = workers
                self._counted[key] = self.clock.monotonic()
            self._reseed.discard(key)  # Redis answered: it holds (or now has) the quota
            permit = permit_of(_text(code), _number(wait), _number(gate_in), _text(lease),
                               self.clock.wall(), _optional(reset_in))
            if permit.reason is WaitReason.GATE and permit.wait > 0:
                self.local.hold(key, _number(gate_in))  # still holds if Redis goes away
            return permit

        return self._call("acquire", key, args, parse, lambda: self.local.acquire(
            key, attempt, max_wait=max_wait, fail_fast=fail_fast))

    def _me(self, key: str) -> str:
        """This coordinator's id for an acquire to count among ``key``'s live workers, or ''
        when Redis counted it less than a quarter of :data:`WORKER_TTL` ago (it still counts
        it: the acquire skips the workers set)."""
        at = self._counted.get(key)
        if at is None or key in self._reseed or self.clock.monotonic() - at >= WORKER_TTL / 4:
            return self._id
        return ""

    def _write(self, key: str, gap: float) -> _Call[float]:
        """The write spacing (``write.lua``): seconds this write waits, 0 when it goes."""
        keys = [f"{self.prefix}{{{key}}}:write"]
        return _Call(key, "write", keys, (self.config.idle_ttl, gap), _number,
                     lambda: self.local.pace_write(key, gap))

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

    def _learn(self, key: str, throttle: Throttle | None, lease: str | None) -> _Call[None]:
        if lease is not None and lease.startswith("m:"):  # taken locally while Redis was away
            self.local.learn(key, None, lease)
            lease = None
        facts = NO_THROTTLE if throttle is None else throttle
        needed = lease is not None or facts.informative or (
            throttle is not None and self.config.pacing is not None)  # an answer: see learn.lua
        answer = learned_args(lease, self.clock.wall())
        if answer and throttle is not None:
            facts = requests_throttle(throttle)
        args = (
            lease or "", 1 if facts.throttled else 0,
            -1 if facts.hint is None else facts.hint,
            -1 if facts.remaining is None else facts.remaining,
            -1 if facts.limit is None else facts.limit,
            -1 if facts.reset is None else facts.reset,
            facts.floor, facts.multiplier, self.config.gate.max_gate,
            0 if throttle is None else 1, *answer,
        )
        return self._call("learn" if needed else None, key, args,
                          lambda raw: self.local.learn(key, self._share(key, facts), None),
                          lambda: self.local.learn(key, self._share(key, facts), lease))

    def _share(self, key: str, facts: Throttle) -> Throttle:
        """What this coordinator may count on of a quota observation while alone: its share,
        ``1 / live workers`` (as last seen in Redis), of the limit and of what is left."""
        workers = self._live.get(key, 1)
        if workers <= 1 or facts.remaining is None:
            return facts
        limit = None if facts.limit is None else max(facts.limit // workers, 1)
        return dataclasses.replace(facts, remaining=facts.remaining // workers, limit=limit)

    def _seed(self, key: str) -> tuple[Arg, ...]:
        """The local quota observation, scaled back to every worker's, for the first acquire
        after Redis came back (adopted only when Redis holds none: it restarted empty)."""
        if key not in self._reseed:
            return ()
        now = self.clock.monotonic()
        s, end = self.local.schedule(key), self._window_end(key, now + EPSILON)
        if s is None or s.limit is None or s.quota is None or end is None or end <= now:
            return ()
        workers = self._live.get(key, 1)
        return (s.limit * workers, min(s.quota * workers, s.limit * workers), end - now)

    def _spend(self, key: str) -> _Call[bool]:
        cfg = self.config.retry_budget
        args = () if cfg is None else (cfg.ratio, cfg.min_retries_per_sec, cfg.ttl)
        return self._call(None if cfg is None else "spend", key, args,
                          lambda raw: _text(raw) == "1", lambda: self.local.spend_retry(key))

    def _finish(self, key: str, outcome: Outcome[Any], probe: bool) -> _Call[bool]:
        cfg, budget = self.config.breaker, self.config.retry_budget
        verdict = health(outcome)
        earns = budget is not None and verdict is Health.SUCCESS
        args: tuple[Arg, ...] = (
            verdict.value, 1 if probe else 0,
            0 if cfg is None else cfg.consecutive_failures,
            -1 if cfg is None or cfg.failure_ratio is None else cfg.failure_ratio,
            0 if cfg is None else cfg.window, 0 if cfg is None else cfg.min_operations,
            0 if cfg is None else cfg.cool_down, 0 if budget is None else budget.ttl,
        )

        def parse(raw: object) -> bool:
            opened, entered = _items(raw, 2)
            self._moved(key, entered)
            return _text(opened) == "1"

        def local() -> bool:
            self.local.finish(key, outcome, probe)
            return False

        return self._call("finish" if cfg is not None or earns else None, key, args, parse, local)

    def _opened(self, opened: bool) -> None:
        if opened:
            self._tally.add("breaker_opened")

    def _begin(self, action: Admit) -> _Call[tuple[Admission, Permit | None]]:
        """An admission and, when admitted, the first attempt's acquire: one script."""
        key = action.key
        admit = self._admit(key)
        acquire = self._acquire(key, 1, action.max_wait, action.fail_fast)
        own = admit.args[1:]

        def parse(raw: object) -> tuple[Admission, Permit | None]:
            first, second = _items(raw, 2)
            admission = admit.parse(first)
            return admission, acquire.parse(second) if admission.allowed else None

        def local() -> tuple[Admission, Permit | None]:
            admission = admit.local()
            return admission, acquire.local() if admission.allowed else None

        refusal = None if admit.refusal is None else (admit.refusal, None)
        return self._after_held(self._call("begin", key, (len(own), *own, *acquire.args[1:]),
                                           parse, local, refusal), "cycle", 1)

    def _after_held(self, call: _Call[T], script: str, counts: int) -> _Call[T]:
        """``call``, after the settlement held back under its key if there is one: then one
        script (``script``: the learn, the finish, then ``call``'s own parts, whose argument
        counts are the first ``counts`` of its arguments)."""
        with self._lock:
            held = self._settling.pop(call.key, None)
        if held is None:
            return call
        learn, outcome, at = held
        assert learn.throttle is not None  # noqa: S101 - deferrable() holds back none other
        first = self._learn(learn.key, aged(learn.throttle, self.clock.monotonic() - at),
                            learn.lease)
        second = self._finish(learn.key, outcome, False)
        parts = 2 + counts + 1  # the replies: learn, finish, then call's own

        def parse(raw: object) -> T:
            replies = _items(raw, parts)
            first.parse(replies[0])
            self._opened(second.parse(replies[1]))
            return call.parse(replies[2:] if parts > 3 else replies[2])

        def local() -> T:
            first.local()
            self._opened(second.local())
            return call.local()

        own = call.args[1:]
        return _Call(call.key, script, call.keys,
                     (call.args[0], len(first.args) - 1, len(second.args) - 1, *own[:counts],
                      *first.args[1:], *second.args[1:], *own[counts:]), parse, local,
                     call.refusal)

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
        loop = asyncio.get_running_loop() if _in_event_loop() else None
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
        if loop is None or loop is (asyncio.get_running_loop() if _in_event_loop() else None):
            timer.cancel()
        elif not loop.is_closed():
            loop.call_soon_threadsafe(timer.cancel)

    def _held_back(self) -> list[_Call[bool]]:
        """Every settlement held back, as calls that send them now."""
        with self._lock:
            held, self._settling = self._settling, {}
        return [self._end(dataclasses.replace(learn, throttle=aged(
                    learn.throttle, self.clock.monotonic() - at)), outcome, False)
                for learn, outcome, at in held.values() if learn.throttle is not None]

    def settle(self) -> None:
        """Send every settlement held back for a next call now (:meth:`close` does, and a
        timer :data:`SETTLE_IDLE` seconds after one was held back)."""
        for call in self._held_back():
            self._opened(self._run(call))

    async def asettle(self) -> None:
        """Async :meth:`settle` (:meth:`aclose` does)."""
        for call in self._held_back():
            self._opened(await self._arun(call))

    def _end(self, learn: Learn, outcome: Outcome[Any], probe: bool) -> _Call[bool]:
        """A final attempt's learn and the operation's finish: one script when both are due."""
        first, second = self._learn(learn.key, learn.throttle, learn.lease), self._finish(
            learn.key, outcome, probe)
        if first.script is None:
            return second
        if second.script is None:
            return _Call(first.key, first.script, first.keys, first.args,
                         lambda raw: bool(first.parse(raw)), lambda: bool(first.local()))
        own = first.args[1:]

        def parse(raw: object) -> bool:
            one, two = _items(raw, 2)
            first.parse(one)
            return second.parse(two)

        def local() -> bool:
            first.local()
            return second.local()

        return self._call("end", learn.key, (len(own), *own, *second.args[1:]), parse, local)

    def _held(self, action: CoordinatorAction) -> tuple[bool, object, _Call[Any] | None]:
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
