"""aiohttp: failure kinds and errors."""

from __future__ import annotations

from ..core.classify import FailureKind, Observation
from ._shared import _failure, _response, _upper
from ._stdlib import stdlib_failure_kind

__all__ = ["aiohttp_failure_kind", "read"]


def aiohttp_failure_kind(error: BaseException) -> FailureKind:
    """The one boundary where aiohttp's exceptions become failure kinds.

    ClientConnectorError (refused, DNS, TLS, proxy) and ConnectionTimeoutError (no connection
    from the pool or the network in time): the request was never sent (``connect``). Other
    ServerTimeoutError (a socket read timed out): ``timeout``. ServerDisconnectedError,
    ClientOSError, a reset and ClientPayloadError (the body broke off): ``network``.
    ContentTypeError: ``protocol``. ServerFingerprintMismatch, InvalidURL and other client
    errors are an ``error`` (never retried, raised again as they were); standard library
    network errors (an attempt's timeout running out) as for any callable.
    """
    import aiohttp  # noqa: PLC0415 - only once aiohttp is in use

    if isinstance(error, aiohttp.ServerFingerprintMismatch):
        return FailureKind.ERROR
    if isinstance(error, (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)):
        return FailureKind.CONNECT
    if isinstance(error, aiohttp.ServerTimeoutError):
        return FailureKind.TIMEOUT
    if isinstance(error, (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError)):
        return FailureKind.NETWORK
    if isinstance(error, aiohttp.ContentTypeError):
        return FailureKind.PROTOCOL
    if isinstance(error, aiohttp.ClientError):
        return FailureKind.ERROR
    return stdlib_failure_kind(error)


def read(error: BaseException) -> Observation | None:
    """An aiohttp exception as the observation it stands for: a ClientResponseError is its
    status and headers, any other client error a failure of its kind."""
    import aiohttp  # noqa: PLC0415 - only once an aiohttp exception proves it is installed

    method = _upper(getattr(getattr(error, "request_info", None), "method", None))
    if isinstance(error, aiohttp.ClientResponseError) and not isinstance(
        error, (aiohttp.ContentTypeError, aiohttp.TooManyRedirects)
    ):
        # aiohttp releases the body before raising: only the status and headers are left.
        headers = error.headers
        pairs = [] if headers is None else [(k.lower(), v) for k, v in headers.items()]
        return _response(error.status, pairs, "", method)
    if isinstance(error, aiohttp.ClientError):
        return _failure(aiohttp_failure_kind(error), error, method)
    return None
