"""The standard library: its network errors as failure kinds."""

from __future__ import annotations

import asyncio

from ..core.classify import FailureKind


def stdlib_failure_kind(error: BaseException, retry_on: tuple[type[BaseException], ...] = ()) -> FailureKind:
    """The standard library's network errors, mapped to failure kinds."""
    if isinstance(error, ConnectionRefusedError):
        return FailureKind.CONNECT
    if isinstance(error, (TimeoutError, asyncio.TimeoutError)):  # one class from Python 3.11
        return FailureKind.TIMEOUT
    if isinstance(error, ConnectionError) or (retry_on and isinstance(error, retry_on)):
        return FailureKind.NETWORK
    return FailureKind.ERROR
