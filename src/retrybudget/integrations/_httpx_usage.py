"""The usage of an LLM answer read from its body as the caller reads it (httpx's streams).

A request that charged tokens and was answered with a 2xx whose body nobody had read when
its attempt was learned leaves a late correction (:attr:`~retrybudget.coordination.TokenCall.late`).
The transports hand such a response over with its stream wrapped (:func:`watch`,
:func:`awatch`): each piece the caller reads passes through a
:class:`~retrybudget.core.tokens.UsageReader`, which keeps only what it needs, and when the
stream is closed (httpx closes it once the body is read, or the caller does) the usage it
read corrects the charge. Nothing is read or held back that the caller does not read: a body
never read, or closed before its usage came, corrects nothing (the headers' reconciliation
stands).

httpx2 runs this module's code a second time, over its own classes (``_httpx2_usage``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator

import httpx

from ..core.tokens import TokenUsage, UsageReader, usage_from_body

__all__ = ["awatch", "watch"]

Late = Callable[[TokenUsage], None]


def _reader(response: httpx.Response) -> UsageReader:
    headers = response.headers
    return UsageReader(headers.get("content-type"), headers.get("content-encoding"))


class _Watched(httpx.SyncByteStream):
    """A response's stream whose bytes a usage reader sees as they pass."""

    def __init__(self, stream: httpx.SyncByteStream, reader: UsageReader, late: Late) -> None:
        self._stream = stream
        self._reader = reader
        self._late: Late | None = late

    def __iter__(self) -> Iterator[bytes]:
        feed = self._reader.feed
        for chunk in self._stream:
            feed(chunk)
            yield chunk

    def close(self) -> None:
        try:
            self._stream.close()
        finally:
            late, self._late = self._late, None
            self._reader.hand(late)


class _AsyncWatched(httpx.AsyncByteStream):
    """The async twin of :class:`_Watched`."""

    def __init__(self, stream: httpx.AsyncByteStream, reader: UsageReader, late: Late) -> None:
        self._stream = stream
        self._reader = reader
        self._late: Late | None = late

    async def __aiter__(self) -> AsyncIterator[bytes]:
        feed = self._reader.feed
        async for chunk in self._stream:
            feed(chunk)
            yield chunk

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        finally:
            late, self._late = self._late, None
            self._reader.hand(late)


def _read_already(response: httpx.Response, late: Late) -> bool:
    """Whether the body was read before the response was handed over (a payload validator
    read it): its usage, if it states one, corrects the charge now."""
    try:
        body = response.content
    except httpx.ResponseNotRead:
        return False
    usage = usage_from_body(body)
    if usage is not None:
        late(usage)
    return True


def watch(response: httpx.Response, late: Late) -> None:
    """Have the usage ``response``'s body states, once the caller has read it, given to
    ``late`` (a sync transport's response)."""
    if not _read_already(response, late) and isinstance(response.stream, httpx.SyncByteStream):
        response.stream = _Watched(response.stream, _reader(response), late)


def awatch(response: httpx.Response, late: Late) -> None:
    """:func:`watch` for an async transport's response."""
    if not _read_already(response, late) and isinstance(response.stream, httpx.AsyncByteStream):
        response.stream = _AsyncWatched(response.stream, _reader(response), late)
