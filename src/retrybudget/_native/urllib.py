"""urllib (the standard library's HTTP client): its errors read."""

from __future__ import annotations

from ..core.classify import MESSAGE_LIMIT, Observation
from ._shared import _failure, _response
from ._stdlib import stdlib_failure_kind

__all__ = ["read"]


def read(error: BaseException) -> Observation | None:
    """A urllib exception as the observation it stands for: an HTTPError is its response
    (the body read, bounded), a URLError the failure of the network error it wraps."""
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
