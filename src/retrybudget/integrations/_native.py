"""The HTTP libraries' own exceptions, read natively for plain callables.

A function run by :meth:`~retrybudget.Retrier.call` or ``@retrying`` is usually written the
ordinary way: send, ``raise_for_status()``, decode. What it raises is then the HTTP
library's exception, and this module reads it as what it is:

- an error that carries a response (``httpx.HTTPStatusError``, ``requests.HTTPError``,
  ``aiohttp.ClientResponseError``, ``urllib.error.HTTPError``) is that response: its status,
  the headers the classifier reads, its body text when it was already read (bounded), and the
  method of the request it answered (a failed POST is not replayed);
- a transport error (connect, timeout, reset, pool…) is the failure kind the integrations map
  it to, a connect failure being known never to have been sent.

Nothing here imports an HTTP library up front: an exception is recognised by the module of
the classes it derives from, and only that library's reader is imported, when such an
exception is first seen (which proves the library is installed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .._drivers import _method_of
from ..core.classify import MESSAGE_LIMIT, FailureKind, FailureSeen, Observation, ResponseSeen

__all__ = ["observe_error"]

Reader = Callable[[BaseException], "Observation | None"]


def _upper(method: object) -> str | None:
    return method.upper() if isinstance(method, str) and method else None


def _response(status: object, pairs: Iterable[tuple[str, str]], message: object,
              method: str | None) -> Observation:
    from ._common import evidence  # noqa: PLC0415 - _common imports the drivers

    if not isinstance(status, int) or isinstance(status, bool):
        return FailureSeen(FailureKind.PROTOCOL, "no status", method=method)
    text = message[:MESSAGE_LIMIT] if isinstance(message, str) else ""
    return ResponseSeen(status, evidence(pairs), text, "", method)


def _failure(kind: FailureKind, error: BaseException, method: str | None) -> FailureSeen:
    return FailureSeen(kind, type(error).__name__, method=method)


def _httpx(error: BaseException) -> Observation | None:
    import httpx  # noqa: PLC0415 - only once an httpx exception proves it is installed

    from .httpx import _evidence, failure_kind  # noqa: PLC0415

    method = _method_of(error)  # the request's, when the error has one
    if isinstance(error, httpx.HTTPStatusError):
        response = error.response
        try:
            text = response.text  # read already, unless the caller streamed it
        except httpx.ResponseNotRead:
            text = ""
        return ResponseSeen(response.status_code, _evidence(response), text[:MESSAGE_LIMIT], "",
                            method)
    if isinstance(error, httpx.HTTPError):
        return _failure(failure_kind(error), error, method)
    return None


def _requests(error: BaseException) -> Observation | None:
    import requests  # noqa: PLC0415 - only once a requests exception proves it is installed

    from .requests import _evidence, failure_kind  # noqa: PLC0415

    method = _method_of(error)  # the request's, when the error has one
    response = getattr(error, "response", None)
    if isinstance(error, requests.HTTPError) and isinstance(response, requests.Response):
        method = method or _method_of(response)
        # The body is only read here when it was read already (never a stream's).
        text = response.text if response.__dict__.get("_content") not in (False, None) else ""
        return ResponseSeen(response.status_code, _evidence(response), text[:MESSAGE_LIMIT], "",
                            method)
    if isinstance(error, requests.RequestException):
        return _failure(failure_kind(error), error, method)
    return None


def urllib3_failure_kind(error: BaseException) -> FailureKind:
    """urllib3's exceptions as failure kinds (``error`` for the ones that are no failure)."""
    from urllib3 import exceptions as u3  # noqa: PLC0415 - only once urllib3 is in use

    if isinstance(error, u3.MaxRetryError) and isinstance(error.reason, BaseException):
        return urllib3_failure_kind(error.reason)
    if isinstance(error, (u3.NewConnectionError, u3.ConnectTimeoutError, u3.EmptyPoolError,
                          u3.ClosedPoolError, u3.SSLError)):
        return FailureKind.CONNECT  # the request never left
    if isinstance(error, u3.TimeoutError):
        return FailureKind.TIMEOUT
    if isinstance(error, (u3.ProtocolError, u3.IncompleteRead, u3.InvalidChunkLength)):
        return FailureKind.NETWORK
    if isinstance(error, u3.DecodeError):
        return FailureKind.PROTOCOL
    return FailureKind.ERROR


def _urllib3(error: BaseException) -> Observation | None:
    return _failure(urllib3_failure_kind(error), error, None)


def _aiohttp(error: BaseException) -> Observation | None:
    import aiohttp  # noqa: PLC0415 - only once an aiohttp exception proves it is installed

    from .aiohttp import failure_kind  # noqa: PLC0415

    method = _upper(getattr(getattr(error, "request_info", None), "method", None))
    if isinstance(error, aiohttp.ClientResponseError) and not isinstance(
        error, (aiohttp.ContentTypeError, aiohttp.TooManyRedirects)
    ):
        # aiohttp releases the body before raising: only the status and headers are left.
        headers = error.headers
        pairs = [] if headers is None else [(k.lower(), v) for k, v in headers.items()]
        return _response(error.status, pairs, "", method)
    if isinstance(error, aiohttp.ClientError):
        return _failure(failure_kind(error), error, method)
    return None


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
        from .._drivers import failure_kind  # noqa: PLC0415 - the drivers import this module

        return _failure(failure_kind(error.reason), error, None)
    return None


_READERS: dict[str, Reader] = {
    "httpx": _httpx,
    "requests": _requests,
    "urllib3": _urllib3,
    "aiohttp": _aiohttp,
    "urllib": _urllib,
}
"""Top-level module of an exception class → the reader of that library's exceptions."""


def observe_error(error: BaseException) -> Observation | None:
    """The observation an HTTP library's exception stands for, or None if it is none of theirs.

    The library is found from the module of each class in the exception's MRO, so a user's
    subclass of ``httpx.HTTPStatusError`` is read like the original. The library's own
    errors are never imported here before one of them is seen.
    """
    from ..errors import RetryBudgetError  # noqa: PLC0415 - errors imports the core only

    if isinstance(error, RetryBudgetError):
        return None  # an inner operation already decided: not a provider failure to read
    for cls in type(error).__mro__:
        reader = _READERS.get(cls.__module__.partition(".")[0])
        if reader is not None:
            return reader(error)
    return None
