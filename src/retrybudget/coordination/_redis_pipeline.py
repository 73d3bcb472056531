"""A Redis coordinator call (:class:`Call`: its script, keys and arguments, how to read its
reply, and its answer without Redis), and the pipeline that sends the async calls of one turn
of an event loop together (:class:`Pipeline`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import redis
import redis.asyncio
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError

from ._redis_scripts import Arg
from ._stats import Tally

__all__ = ["ERRORS", "Call", "Pipeline", "in_event_loop"]

T = TypeVar("T")

ERRORS: tuple[type[BaseException], ...] = (redis.RedisError, OSError, asyncio.TimeoutError)
"""What a call to Redis raises when Redis is unreachable, slow or restarted."""


def in_event_loop() -> bool:
    """Whether the caller runs in an event loop (its thread runs one)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
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


class Pipeline:
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
        self.pending: list[tuple[Call[Any], asyncio.Future[object]]] = []
        self.sending: set[asyncio.Task[None]] = set()  # held: the loop keeps only weak refs

    def submit(self, call: Call[Any]) -> asyncio.Future[object]:
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

    async def _replies(self, calls: list[Call[Any]]) -> list[object]:
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
            except ERRORS as exc:
                again = [exc] * len(missing)
            for i, reply in zip(missing, again, strict=True):
                replies[i] = reply
        return replies

    async def _pipelined(self, calls: list[Call[Any]]) -> list[object]:
        """The replies (an error in place of a failed script's) of ``calls`` in one pipeline."""
        self.tally.add("round_trips")
        pipe = self.client.pipeline(transaction=False)
        for call in calls:
            pipe.evalsha(self.scripts[str(call.script)].sha, len(call.keys), *call.keys,
                         *call.args)
        return list(await pipe.execute(raise_on_error=False))
