"""requests: failure kinds, header evidence, errors."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.classify import MESSAGE_LIMIT, FailureKind, Observation, ResponseSeen
from ._shared import _failure, evidence, method_of
from ._stdlib import stdlib_failure_kind
from .urllib3 import urllib3_failure_kind

if TYPE_CHECKING:
    import requests

__all__ = ["read", "requests_evidence", "requests_failure_kind"]


def requests_failure_kind(error: BaseException) -> FailureKind:
    """The one boundary where requests' (and urllib3's) exceptions become failure kinds.

    ConnectTimeout, SSLError and a ConnectionError caused by urllib3's NewConnectionError,
    ConnectTimeoutError or a closed or empty pool: the request was never sent (``connect``).
    ReadTimeout (and a read timeout while reading the body): ``timeout``. ChunkedEncodingError
    and every other ConnectionError (a reset, an aborted connection): ``network``.
    ContentDecodingError: ``protocol``. Standard library network errors as for any callable;
    anything else (ProxyError, InvalidURL, InvalidHeader…) is an ``error`` (never retried,
    raised again as it was).
    """
    import requests  # noqa: PLC0415 - only once requests is in use
    from urllib3 import exceptions as u3  # noqa: PLC0415

    if isinstance(error, (requests.exceptions.ConnectTimeout, requests.exceptions.SSLError)):
        return FailureKind.CONNECT
    if isinstance(error, requests.exceptions.Timeout):
        return FailureKind.TIMEOUT
    if isinstance(error, requests.exceptions.ProxyError):
        return FailureKind.ERROR
    if isinstance(error, requests.exceptions.ConnectionError):
        cause = error.args[0] if error.args else None
        kind = urllib3_failure_kind(cause) if isinstance(cause, u3.HTTPError) else None
        return kind if kind in (FailureKind.CONNECT, FailureKind.TIMEOUT) else FailureKind.NETWORK
    if isinstance(error, requests.exceptions.ChunkedEncodingError):
        return FailureKind.NETWORK
    if isinstance(error, requests.exceptions.ContentDecodingError):
        return FailureKind.PROTOCOL
    if isinstance(error, u3.EmptyPoolError):
        return FailureKind.CONNECT
    if isinstance(error, (requests.exceptions.RequestException, u3.HTTPError)):
        return FailureKind.ERROR
    return stdlib_failure_kind(error)


def requests_evidence(response: requests.Response) -> tuple[tuple[str, str], ...]:
    """The classifier's headers of a requests response."""
    return evidence(response.headers.lower_items())


def read(error: BaseException) -> Observation | None:
    """A requests exception as the observation it stands for: an HTTPError with its response
    is that response, any other of its errors a failure of its kind."""
    import requests  # noqa: PLC0415 - only once a requests exception proves it is installed

    method = method_of(error)  # the request's, when the error has one
    response = getattr(error, "response", None)
    if isinstance(error, requests.HTTPError) and isinstance(response, requests.Response):
        method = method or method_of(response)
        # The body is only read here when it was read already (never a stream's).
        text = response.text if response.__dict__.get("_content") not in (False, None) else ""
        return ResponseSeen(response.status_code, requests_evidence(response), text[:MESSAGE_LIMIT], "",
                            method)
    if isinstance(error, requests.RequestException):
        return _failure(requests_failure_kind(error), error, method)
    return None
