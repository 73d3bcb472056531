"""httpx's exchange bounded by the attempt's end: every socket read and write of httpx's own
transports clipped to what is left, and an async exchange cut there whatever it waits on.

httpx2 runs this module's code a second time, over its own classes (``_httpx2_io``).
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Callable, Coroutine, Generator
from functools import partial
from typing import Any, TypeVar

import anyio
import httpcore
import httpx

from .._clock import Clock
from ._deadline import _DEADLINE, Deadline, current_deadline

__all__ = ["Cut", "bound_sockets", "clipped", "deadline_error", "scoped", "within"]

R = TypeVar("R")

_TIMEOUTS = ("connect", "read", "write", "pool")

def _clip(timeout: float | None, error: type[Exception]) -> float | None:
    """A socket operation's timeout cut to the running attempt's end; ``error`` once it passed."""
    deadline = _DEADLINE.get()  # current_deadline(), read at every socket operation
    return timeout if deadline is None else deadline.clip(timeout, error)


class _BoundedStream(httpcore.NetworkStream):
    """A connection whose every read and write ends by the attempt's absolute end.

    httpcore reads a response in many socket reads, each with the same read timeout; a
    trickle keeps each one short. Cutting each read to what is left bounds the sum.
    """

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream
        # httpcore asks these of every exchange: the stream's own, without a frame of ours
        self.get_extra_info = stream.get_extra_info  # type: ignore[method-assign]

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        deadline = _DEADLINE.get()  # _clip(), inline: every read and write reads it
        if deadline is not None:
            timeout = deadline.clip(timeout, httpcore.ReadTimeout)
        return self._stream.read(max_bytes, timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        deadline = _DEADLINE.get()
        if deadline is not None:
            timeout = deadline.clip(timeout, httpcore.WriteTimeout)
        self._stream.write(buffer, timeout)

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _BoundedStream(self._stream.start_tls(
            ssl_context, server_hostname, _clip(timeout, httpcore.ConnectTimeout)))


class _BoundedBackend(httpcore.NetworkBackend):
    """httpcore's network backend with every connection bounded by the attempt's end."""

    def __init__(self, backend: httpcore.NetworkBackend) -> None:
        self._backend = backend

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None, socket_options: Any = None,
                    ) -> httpcore.NetworkStream:
        return _BoundedStream(self._backend.connect_tcp(
            host, port, _clip(timeout, httpcore.ConnectTimeout), local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Any = None) -> httpcore.NetworkStream:
        return _BoundedStream(self._backend.connect_unix_socket(
            path, _clip(timeout, httpcore.ConnectTimeout), socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


class _BoundedAsyncStream(httpcore.AsyncNetworkStream):
    """The async twin of :class:`_BoundedStream`."""

    def __init__(self, stream: httpcore.AsyncNetworkStream) -> None:
        self._stream = stream

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109 - httpcore's
        return await self._stream.read(max_bytes, _clip(timeout, httpcore.ReadTimeout))

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109 - httpcore's
        deadline = current_deadline()
        if isinstance(deadline, Cut):
            deadline.sent = True
        await self._stream.write(buffer, _clip(timeout, httpcore.WriteTimeout))

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:  # noqa: ASYNC109 - httpcore's
        return _BoundedAsyncStream(await self._stream.start_tls(
            ssl_context, server_hostname, _clip(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _BoundedAsyncBackend(httpcore.AsyncNetworkBackend):
    """The async twin of :class:`_BoundedBackend`."""

    def __init__(self, backend: httpcore.AsyncNetworkBackend) -> None:
        self._backend = backend

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,  # noqa: ASYNC109 - httpcore's
                          local_address: str | None = None, socket_options: Any = None,
                          ) -> httpcore.AsyncNetworkStream:
        return _BoundedAsyncStream(await self._backend.connect_tcp(
            host, port, _clip(timeout, httpcore.ConnectTimeout), local_address, socket_options))

    async def connect_unix_socket(self, path: str, timeout: float | None = None,  # noqa: ASYNC109 - httpcore's
                                  socket_options: Any = None) -> httpcore.AsyncNetworkStream:
        return _BoundedAsyncStream(await self._backend.connect_unix_socket(
            path, _clip(timeout, httpcore.ConnectTimeout), socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


def bound_sockets(transport: object) -> bool:
    """Give an httpx ``HTTPTransport``'s (or ``AsyncHTTPTransport``'s) pool the bounded backend.

    httpx builds its httpcore pool itself and exposes no backend option, so the pool's
    backend is wrapped in place (once). True: every socket read and write of the transport
    ends by the running attempt's end. Other transports read as their own timeouts say.
    """
    pool = getattr(transport, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if isinstance(backend, _BoundedBackend | _BoundedAsyncBackend):
        return True
    if isinstance(backend, httpcore.NetworkBackend):
        pool._network_backend = _BoundedBackend(backend)  # type: ignore[union-attr]
        return True
    if isinstance(backend, httpcore.AsyncNetworkBackend):
        pool._network_backend = _BoundedAsyncBackend(backend)  # type: ignore[union-attr]
        return True
    return False


def deadline_error(request: httpx.Request) -> httpx.ReadTimeout:
    return httpx.ReadTimeout("the attempt's deadline passed before the exchange ended",
                             request=request)


class Cut(Deadline):
    """An async attempt's end, at which :meth:`within` cuts its exchange.

    ``sent``: a byte of the request was written to a bounded socket. A cut before that is a
    connect timeout (nothing was sent, so even a write may be sent again); after it, a read
    timeout (it may have been sent).
    """

    __slots__ = ("sent",)

    def __init__(self, clock: Clock, timeout: float) -> None:
        super().__init__(clock, timeout)
        self.sent = False

    def error(self, request: httpx.Request) -> httpx.TimeoutException:
        """The timeout an attempt cut at this end failed with."""
        if not self.sent:
            return httpx.ConnectTimeout("the attempt's deadline passed before the request "
                                        "was sent", request=request)
        return deadline_error(request)


def clipped(extensions: dict[str, Any], limit: float | None) -> dict[str, Any]:
    """A request's extensions with each timeout at most ``limit`` (the attempt's timeout)."""
    if limit is None:
        return extensions
    given = extensions.get("timeout")
    if not given:
        return {**extensions, "timeout": dict.fromkeys(_TIMEOUTS, limit)}
    try:  # _TIMEOUTS, without a generator: one missing (KeyError) or None (TypeError) is cut
        if (given["connect"] <= limit and given["read"] <= limit and given["write"] <= limit
                and given["pool"] <= limit):
            return extensions  # the caller's timeouts fit already
    except (KeyError, TypeError):
        pass
    clipped = {name: limit if (value := given.get(name)) is None else min(value, limit)
               for name in _TIMEOUTS}
    return {**extensions, "timeout": clipped}



_LEFT_BEHIND: set[asyncio.Future[Any]] = set()
"""Exchanges cut at their attempt's end and still running, and late responses being closed
(held here until they end: the event loop keeps only weak references to tasks)."""


def _wake(ended: asyncio.Future[None], _: object) -> None:
    if not ended.done():
        ended.set_result(None)


async def _scoped(exchange: Coroutine[Any, Any, R], scope: anyio.CancelScope) -> R | None:
    """``exchange`` inside ``scope``; None once the scope was cancelled.

    The exchange is cut by cancelling its scope, never its task: a task's own cancellation
    also breaks into what httpcore shields, the close of a connection an exchange was cut
    on included (its read timed out at the same instant), and the connection then stays open,
    the provider still sending into it. A cancelled scope lets a shielded close finish.
    """
    with scope:
        return await exchange
    return None


def _leave_behind(task: asyncio.Task[R | None], scope: anyio.CancelScope,
                  response_of: Callable[[R], object]) -> None:
    """Cancel ``task``'s exchange without waiting for it; close the response it may still
    return."""
    scope.cancel()
    _LEFT_BEHIND.add(task)
    task.add_done_callback(partial(_ended_behind, response_of))


def _ended_behind(response_of: Callable[[R], object], task: asyncio.Task[R | None]) -> None:
    _LEFT_BEHIND.discard(task)
    if task.cancelled() or task.exception() is not None:
        return
    result = task.result()
    if result is None:  # cut: whatever it held is closed
        return
    response = response_of(result)
    if isinstance(response, httpx.Response):
        closing = asyncio.ensure_future(response.aclose())
        _LEFT_BEHIND.add(closing)
        closing.add_done_callback(_LEFT_BEHIND.discard)



async def within(exchange: Coroutine[Any, Any, R], deadline: Cut,
                 response_of: Callable[[R], object]) -> R | None:
    """What ``exchange`` returns by ``deadline``'s end, or None: it was cut there.

    The exchange runs as a task of its own with ``deadline`` as its attempt's end (every
    socket read and write of httpx's own transport is clipped to it). Nothing it waits
    on can hold the attempt past that end: on a loaded machine, a connect to a provider
    whose accept queue is full was seen to hold its attempt seconds past its end, in
    anyio's ``connect_tcp``, its cancellation taking effect only once the connect attempt
    ended. An exchange still running at the end is cancelled (its scope: see
    :func:`_scoped`) and left behind; a response it still returns (``response_of`` finds
    it in what the exchange returns) is closed unread.
    """
    loop = asyncio.get_running_loop()
    token = _DEADLINE.set(deadline)
    scope = anyio.CancelScope()
    try:
        task = loop.create_task(_scoped(exchange, scope))  # runs in a copy of this context
    finally:
        _DEADLINE.reset(token)
    ended = loop.create_future()
    wake = partial(_wake, ended)
    task.add_done_callback(wake)
    timer = loop.call_at(loop.time() + deadline.remaining(), wake, None)
    try:
        await ended
    except BaseException:  # the operation itself was cancelled (or dropped unfinished)
        if not loop.is_closed():
            _leave_behind(task, scope, response_of)
        raise
    finally:
        timer.cancel()
        task.remove_done_callback(wake)
    if task.done():
        return task.result()
    _leave_behind(task, scope, response_of)
    return None


_ASYNCIO_SCOPES: list[Callable[[], anyio.CancelScope]] = []
"""The cancel scope type anyio makes under asyncio, once one was made there."""


def _new_scope() -> anyio.CancelScope:
    """``anyio.CancelScope()``: under asyncio, the type anyio made there before, made again
    directly (anyio asks on every call which async library runs, a few µs per request)."""
    if asyncio._get_running_loop() is None:  # another async library (trio): anyio's own choice
        return anyio.CancelScope()
    if not _ASYNCIO_SCOPES:
        scope = anyio.CancelScope()
        _ASYNCIO_SCOPES.append(type(scope))
        return scope
    return _ASYNCIO_SCOPES[0]()


@types.coroutine
def scoped(exchange: Coroutine[Any, Any, R], clock: Clock, started: float, timeout: float,
           cut: Callable[..., R], *args: Any) -> Generator[Any, Any, R]:
    """What ``exchange`` returns by ``timeout`` seconds after ``started`` (a reading of
    ``clock``: the attempt's start), or ``cut(*args)``: it was cancelled at that end (as under
    ``anyio.move_on_after``).

    The exchange runs in a cancel scope from its start (a scope it opens itself nests inside
    ours); the scope's deadline, and so its timer, is set only when the exchange first waits:
    one that ends without ever suspending (an inner transport that answers at once) can not
    be cancelled anyway, reads no clock and arms no timer. The deadline is then the attempt's
    end, moved onto the event loop's clock (which anyio's deadlines are read on).
    """
    with _new_scope() as scope:
        try:
            waiting = exchange.send(None)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        scope.deadline = anyio.current_time() + timeout - (clock.monotonic() - started)
        return (yield from _delegated(exchange, waiting))
    return cut(*args)  # cancelled at the deadline


def _delegated(exchange: Coroutine[Any, Any, R], waiting: Any) -> Generator[Any, Any, R]:
    """The rest of an exchange that waits on ``waiting``: every value sent or error thrown in
    (a cancellation included) passed on to it, as ``await`` would."""
    while True:
        try:
            reply = yield waiting
        except GeneratorExit:  # noqa: PERF203 - one exchange's waits, not a hot loop
            exchange.close()
            raise
        except BaseException as exc:  # handed to the exchange, as await does
            try:
                waiting = exchange.throw(exc)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
        else:
            try:
                waiting = exchange.send(reply)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
