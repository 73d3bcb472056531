"""The standard library: its network errors as failure kinds, and urllib's errors read."""

from __future__ import annotations

import asyncio

from ..core.classify import MESSAGE_LIMIT, FailureKind, Observation
from ._shared import _failure, _response


def stdlib_failure_kind(error: BaseException, retry_on: tuple[type[BaseException], ...] = ()) -> FailureKind:
    """The standard library's network errors, mapped to failure kinds."""
    if isinstance(error, ConnectionRefusedError):
        return FailureKind.CONNECT
    if isinstance(error, (TimeoutError, asyncio.TimeoutError)):  # one class from Python 3.11
        return FailureKind.TIMEOUT
    if isinstance(error, ConnectionError) or (retry_on and isinstance(error, retry_on)):
        return FailureKind.NETWORK
    return FailureKind.ERROR


def _urllib(error: BaseException) -> Observation | None:
    import urllib.error  # noqa: PLC0415

    if isinstance(error, urllib.error.HTTPError):
        message = ""
        if error.fp is not None and error.code >= 400:
            # Bounded: what the classifier reads of the body, no more.
            message = error.read(MESSAGE_LIMIT).decode("utf-8", "replace")
        headers = error.headers
        pairs = [] if headers is None else [(k.lower(), v) for k, v in headers.items()]
        return _response(error.code, pairs, message, None)
    if isinstance(error, urllib.error.URLError) and isinstance(error.reason, BaseException):
        return _failure(stdlib_failure_kind(error.reason), error, None)
    return None
