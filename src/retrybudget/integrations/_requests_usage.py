"""The usage of an LLM answer read from its body as the caller reads it (requests' ``raw``).

The requests adapter reads a body itself unless the caller asked for a stream
(``stream=True``): that body's usage is recorded before the attempt is learned. A streamed 2xx
learned before its body was read is handed over with its ``raw`` (urllib3's response) watched
(:func:`watch`): what the caller reads through it (``iter_content``, ``iter_lines``,
``content``, ``raw.read``) passes through a :class:`~retrybudget.core.tokens.UsageReader`, and
once the body has been read to its end, or the response is closed, the usage read corrects
the charge. Nothing is read that the caller does not read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import requests

from ..core.tokens import TokenUsage, UsageReader, usage_from_body

__all__ = ["read_body", "watch"]

Late = Callable[[TokenUsage], None]


class _WatchedRaw:
    """urllib3's response of a streamed answer, its bytes seen by a usage reader as they pass
    (every other attribute is the response's own)."""

    def __init__(self, raw: Any, headers: Any, late: Late) -> None:
        self._raw = raw
        self._headers = headers
        self._reader: UsageReader | None = None
        self._late: Late | None = late

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)

    def _reading(self, decode_content: bool | None) -> UsageReader:
        reader = self._reader
        if reader is None:
            decoded = self._raw.decode_content if decode_content is None else decode_content
            headers = self._headers
            reader = self._reader = UsageReader(
                headers.get("content-type"), None if decoded else headers.get("content-encoding"))
        return reader

    def _settle(self) -> None:
        late, self._late = self._late, None
        if self._reader is not None:
            self._reader.hand(late)

    def stream(self, amt: int | None = 2**16, decode_content: bool | None = None
               ) -> Iterator[bytes]:
        """The body in pieces (``iter_content`` reads it so), each seen as it passes."""
        feed = self._reading(decode_content).feed
        for chunk in self._raw.stream(amt, decode_content=decode_content):
            feed(chunk)
            yield chunk
        self._settle()

    def read(self, amt: int | None = None, decode_content: bool | None = None,
             cache_content: bool = False) -> bytes:
        """As urllib3's ``read``, the bytes seen as they pass (all of it read: settled)."""
        data: bytes = self._raw.read(amt, decode_content=decode_content,
                                     cache_content=cache_content)
        self._reading(decode_content).feed(data)
        if amt is None or not data:
            self._settle()
        return data

    def close(self) -> None:
        try:
            self._raw.close()
        finally:
            self._settle()

    def release_conn(self) -> None:
        try:
            self._raw.release_conn()
        finally:
            self._settle()


def _consumed(response: requests.Response) -> bool:
    consumed: bool = getattr(response, "_content_consumed", False)  # requests' own flag
    return consumed


def read_body(response: requests.Response) -> bytes | None:
    """The body the adapter read already (not a stream), else None."""
    content = response._content  # requests' own cache of what it read
    return content if _consumed(response) and isinstance(content, bytes) else None


def watch(response: requests.Response, late: Late) -> None:
    """Have the usage ``response``'s body states, once the caller has read it, given to
    ``late``."""
    body = read_body(response)
    if body is not None:
        usage = usage_from_body(body)
        if usage is not None:
            late(usage)
    elif not _consumed(response) and response.raw is not None:
        response.raw = _WatchedRaw(response.raw, response.headers, late)
