"""The usage of an LLM answer read from its body as the caller reads it (aiohttp's
``response.content``).

A 2xx to a request that charged tokens, learned before its body was read, is handed over with
its ``content`` watched (:func:`watch`): every read of it (``response.read()``, ``.json()``,
``.text()``, ``content.iter_chunked``, ``iter_any``, lines…) passes what it returns through a
:class:`~retrybudget.core.tokens.UsageReader` (aiohttp decodes the body before it is read), and
once the body has been read to its end the usage read corrects the charge. Nothing is read
that the caller does not read: a body never read to its end corrects nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import ClientResponse, Payload
from aiohttp.streams import AsyncStreamIterator, ChunkTupleAsyncStreamIterator, StreamReader

from ..core.tokens import TokenUsage, UsageReader

__all__ = ["payload_bytes", "watch"]

Late = Callable[[TokenUsage], None]


class _WatchedContent:
    """A response's ``content`` whose reads a usage reader sees (the rest is the stream's)."""

    def __init__(self, stream: StreamReader, reader: UsageReader, late: Late) -> None:
        self._stream = stream
        self._reader = reader
        self._late: Late | None = late

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def _seen(self, data: bytes) -> bytes:
        self._reader.feed(data)
        if self._late is not None and self._stream.at_eof():
            late, self._late = self._late, None
            self._reader.hand(late)
        return data

    async def read(self, n: int = -1) -> bytes:
        return self._seen(await self._stream.read(n))

    async def readany(self) -> bytes:
        return self._seen(await self._stream.readany())

    async def readline(self) -> bytes:
        return self._seen(await self._stream.readline())

    async def readuntil(self, separator: bytes = b"\n") -> bytes:
        return self._seen(await self._stream.readuntil(separator))

    async def readexactly(self, n: int) -> bytes:
        return self._seen(await self._stream.readexactly(n))

    async def readchunk(self) -> tuple[bytes, bool]:
        data, end = await self._stream.readchunk()
        return self._seen(data), end

    def read_nowait(self, n: int = -1) -> bytes:
        return self._seen(self._stream.read_nowait(n))

    def iter_chunked(self, n: int) -> AsyncStreamIterator[bytes]:
        self._stream.set_read_chunk_size(n)
        return AsyncStreamIterator(lambda: self.read(n))

    def iter_any(self) -> AsyncStreamIterator[bytes]:
        return AsyncStreamIterator(self.readany)

    def iter_chunks(self) -> ChunkTupleAsyncStreamIterator:
        return ChunkTupleAsyncStreamIterator(self)  # type: ignore[arg-type]

    def __aiter__(self) -> AsyncStreamIterator[bytes]:
        return AsyncStreamIterator(self.readline)


def payload_bytes(body: object) -> bytes:
    """A request body's bytes (a payload aiohttp built: ``json=``, ``data=`` bytes or text);
    b"" for a stream or a file (no cost read from it)."""
    if isinstance(body, bytes):
        return body
    if isinstance(body, Payload) and isinstance(getattr(body, "_value", None), bytes | str):
        try:
            return body.decode().encode()
        except (TypeError, ValueError):
            return b""
    return b""


def watch(response: ClientResponse, late: Late) -> None:
    """Have the usage ``response``'s body states, once the caller has read it to its end,
    given to ``late``."""
    content = response.content
    if isinstance(content, StreamReader):
        response.content = _WatchedContent(  # type: ignore[assignment]
            content, UsageReader(response.headers.get("content-type")), late)
