"""The HTTP libraries' own exceptions and headers, read natively (below the drivers).

A function run by :meth:`~retrybudget.Retrier.call` or ``@retrying`` is usually written the
ordinary way: send, ``raise_for_status()``, decode. What it raises is then the HTTP
library's exception, and this module reads it as what it is:

- an error that carries a response (``httpx.HTTPStatusError`` and httpx2's,
  ``requests.HTTPError``, ``aiohttp.ClientResponseError``, ``urllib.error.HTTPError``) is
  that response: its status, the headers the classifier reads, its body text when it was
  already read (bounded), and the method of the request it answered (a failed POST is not
  replayed);
- a transport error (connect, timeout, reset, pool…) is the failure kind the integrations map
  it to, a connect failure being known never to have been sent.

Nothing here imports an HTTP library up front: an exception is recognised by the module of
the classes it derives from, and only that library's reader is imported, when such an
exception is first seen (which proves the library is installed).

The integrations take each library's failure kinds and header evidence from here, and the
drivers' :class:`~retrybudget.CallInterpreter` its exception readers: one home for both,
below the drivers that use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .core.classify import MESSAGE_LIMIT, FailureKind, FailureSeen, Observation, ResponseSeen
from .core.headers import EVIDENCE_HEADERS, EVIDENCE_PREFIXES
from .core.outcome import Outcome
from .errors import RetryBudgetError

if TYPE_CHECKING:
    import httpx
    import requests

__all__ = [
    "EVIDENCE",
    "OUTCOME",
    "OUTCOME_ATTRIBUTE",
    "RETRY_COUNT_HEADER",
    "Carried",
    "aiohttp_failure_kind",
    "carry",
    "evidence",
    "httpx_evidence",
    "httpx_evidence_of",
    "httpx_failure_kind",
    "is_sdk_error",
    "method_of",
    "observe_error",
    "outcome_of",
    "requests_evidence",
    "requests_failure_kind",
    "sdk_retries_taken",
    "stdlib_failure_kind",
    "urllib3_failure_kind",
]

EVIDENCE = (*sorted(EVIDENCE_HEADERS), *EVIDENCE_PREFIXES)
"""Lower-case header names (and prefixes) the classifier reads; no other header matters."""

_HTTPX_EVIDENCE = tuple(name.encode("ascii") for name in EVIDENCE)


def evidence(
    pairs: Iterable[tuple[str, str]], names: tuple[str, ...] = EVIDENCE
) -> tuple[tuple[str, str], ...]:
    """The classifier's headers among lower-case ``(name, value)`` pairs, normalised."""
    return tuple([(name, value.strip()) for name, value in pairs if name.startswith(names)])


def method_of(response: object) -> str | None:
    """The method of the request a returned response answered (httpx, requests, aiohttp)."""
    try:  # httpx raises RuntimeError for a response built without a request
        method = getattr(getattr(response, "request", None), "method", None)
        method = method or getattr(response, "method", None)
    except Exception:  # an unreadable request is an unknown method
        return None
    return method.upper() if isinstance(method, str) and method else None


def stdlib_failure_kind(error: BaseException, retry_on: tuple[type[BaseException], ...] = ()) -> FailureKind:
    """The standard library's network errors, mapped to failure kinds."""
    if isinstance(error, ConnectionRefusedError):
        return FailureKind.CONNECT
    if isinstance(error, (TimeoutError, asyncio.TimeoutError)):  # one class from Python 3.11
        return FailureKind.TIMEOUT
    if isinstance(error, ConnectionError) or (retry_on and isinstance(error, retry_on)):
        return FailureKind.NETWORK
    return FailureKind.ERROR


_HTTPX_PACKAGES = ("httpx", "httpx2")
"""httpx and httpx2, the next-generation httpx: one exception tree, one reading."""


def _httpx_package(error: BaseException) -> ModuleType | None:
    """The package (httpx or httpx2) one of whose exceptions ``error`` is, or None.

    Imported already: one of its classes is in the exception's MRO.
    """
    for cls in type(error).__mro__:
        top = cls.__module__.partition(".")[0]
        if top in _HTTPX_PACKAGES:
            return sys.modules.get(top)
    return None


def httpx_failure_kind(error: BaseException) -> FailureKind:
    """The one boundary where httpx's (and httpx2's) exceptions become failure kinds.

    ConnectError, ConnectTimeout and PoolTimeout: the request was never sent (``connect``).
    ReadTimeout and WriteTimeout: ``timeout``. RemoteProtocolError, ReadError, WriteError and
    CloseError: the connection broke (``network``). LocalProtocolError, DecodingError and other
    protocol errors: ``protocol``. Standard library network errors as for any callable; anything
    else is an ``error`` (never retried, raised again as it was).
    """
    httpx: Any = _httpx_package(error)
    if httpx is None:
        return stdlib_failure_kind(error)
    if isinstance(error, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)):
        return FailureKind.CONNECT
    if isinstance(error, httpx.TimeoutException):
        return FailureKind.TIMEOUT
    if isinstance(error, (httpx.RemoteProtocolError, httpx.NetworkError)):
        return FailureKind.NETWORK
    if isinstance(error, (httpx.ProtocolError, httpx.DecodingError)):
        return FailureKind.PROTOCOL
    if isinstance(error, httpx.HTTPError):
        return FailureKind.ERROR
    return stdlib_failure_kind(error)


_NAMES: dict[bytes, str] = {}
"""Raw httpx header names already seen: the lower-case name the classifier reads, or ``""``."""
_NAMES_MAX = 512


def _httpx_name(raw: bytes) -> str:
    """What the classifier calls raw header name ``raw`` ("" for one it does not read)."""
    if len(_NAMES) >= _NAMES_MAX:
        _NAMES.clear()
    found = _NAMES[raw] = (raw.decode("latin-1").lower()
                           if raw.lower().startswith(_HTTPX_EVIDENCE) else "")
    return found


def httpx_evidence(response: httpx.Response) -> tuple[tuple[str, str], ...]:
    """The classifier's headers of an httpx response (each raw name classified once, bounded
    cache; decodes only the few values the classifier reads)."""
    return httpx_evidence_of(response.headers.raw)


def httpx_evidence_of(pairs: Iterable[tuple[bytes, bytes]]) -> tuple[tuple[str, str], ...]:
    """:func:`httpx_evidence` of raw ``(name, value)`` header pairs."""
    names = _NAMES
    out = []
    for raw, value in pairs:
        name = names.get(raw)
        if name is None:
            name = _httpx_name(raw)
        if name:
            out.append((name, value.decode("latin-1").strip()))
    return tuple(out)


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


Reader = Callable[[BaseException], "Observation | None"]


def _upper(method: object) -> str | None:
    return method.upper() if isinstance(method, str) and method else None


def _response(status: object, pairs: Iterable[tuple[str, str]], message: object,
              method: str | None) -> Observation:
    if not isinstance(status, int) or isinstance(status, bool):
        return FailureSeen(FailureKind.PROTOCOL, "no status", method=method)
    text = message[:MESSAGE_LIMIT] if isinstance(message, str) else ""
    return ResponseSeen(status, evidence(pairs), text, "", method)


def _failure(kind: FailureKind, error: BaseException, method: str | None) -> FailureSeen:
    return FailureSeen(kind, type(error).__name__, method=method)


def _httpx(error: BaseException) -> Observation | None:
    httpx: Any = _httpx_package(error)  # httpx or httpx2, whichever raised it
    if httpx is None:
        return None
    method = method_of(error)  # the request's, when the error has one
    if isinstance(error, httpx.HTTPStatusError):
        response = error.response
        try:
            text = response.text  # read already, unless the caller streamed it
        except httpx.ResponseNotRead:
            text = ""
        return ResponseSeen(response.status_code, httpx_evidence(response), text[:MESSAGE_LIMIT], "",
                            method)
    if isinstance(error, httpx.HTTPError):
        return _failure(httpx_failure_kind(error), error, method)
    return None


def _requests(error: BaseException) -> Observation | None:
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


def _response_seen(response: object, method: str | None) -> Observation | None:
    """A response object an error carries (httpx, httpx2, requests, aiohttp, or any with an
    integer ``status_code``/``status`` and a mapping of ``headers``), read without reading
    its body: the body text only when it was read already (bounded)."""
    if isinstance(response, type):
        return None
    top = type(response).__module__.partition(".")[0]
    verb = getattr(response, "http_verb", None)  # slack_sdk's SlackResponse names it so
    method = method_of(response) or method or (verb.upper() if isinstance(verb, str) else None)
    if top in _HTTPX_PACKAGES:
        try:
            text = response.text  # type: ignore[attr-defined]  # read already, unless streamed
        except Exception:  # ResponseNotRead: a stream nobody read
            text = ""
        return _response(getattr(response, "status_code", None),
                         httpx_evidence(response),  # type: ignore[arg-type]
                         text, method)
    if top == "requests":
        read = response.__dict__.get("_content") not in (False, None)
        return _response(getattr(response, "status_code", None),
                         requests_evidence(response),  # type: ignore[arg-type]
                         response.text if read else "", method)  # type: ignore[attr-defined]
    status = getattr(response, "status_code", None)
    if status is None:
        status = getattr(response, "status", None)
    headers = getattr(response, "headers", None)
    if not isinstance(status, int) or isinstance(status, bool) or not isinstance(headers, Mapping):
        return None
    return _response(status, _lower_pairs(headers), "", method)


def _lower_pairs(headers: Mapping[Any, Any]) -> list[tuple[str, str]]:
    return [(str(name).lower(), str(value)) for name, value in headers.items()]


_SDKS = frozenset({"openai", "anthropic", "stripe", "githubkit", "github", "slack_sdk"})
"""Top-level modules of the official SDKs whose errors :func:`_sdk` reads."""

_CAUSES = 4
"""How many wrapped errors deep an SDK error is followed to the transport error under it."""


RETRY_COUNT_HEADER = "x-stainless-retry-count"
"""The header openai's and anthropic's SDKs send with the number of retries a call has taken."""

_SDK_RETRIES_WARNED: list[bool] = []
"""Set once the warning that an SDK retries on top of retrybudget was given (once a process)."""


def sdk_retries_taken(sent: str) -> int:
    """The retries an SDK says a call took (its ``x-stainless-retry-count``). More than none
    means the SDK retries on top of retrybudget, its retries outside the budget: a
    ``RuntimeWarning`` says so, once a process."""
    try:
        taken = max(0, int(sent))
    except ValueError:
        return 0
    if taken and not _SDK_RETRIES_WARNED:
        _SDK_RETRIES_WARNED.append(True)
        warnings.warn(
            "the SDK retries on top of retrybudget (it sent x-stainless-retry-count: "
            f"{taken}): its retries escape the budget; turn them off with max_retries=0",
            RuntimeWarning, stacklevel=3)
    return taken


def _request_headers(response: object) -> Mapping[str, str] | None:
    """The headers of the request a response answered (httpx, httpx2), if it names one."""
    try:
        headers = getattr(getattr(response, "request", None), "headers", None)
    except Exception:  # httpx: a response built without a request
        return None
    return headers if isinstance(headers, Mapping) else None


def _sdk(error: BaseException) -> Observation | None:
    """An official SDK's error: the response it carries, else its status and headers, else
    the transport error it wraps (read as that error is).

    openai and anthropic (``APIStatusError.response``, an httpx2 or httpx response),
    githubkit (``RequestFailed.response.raw_response``) and slack_sdk
    (``SlackApiError.response``) carry the response; Stripe's errors carry
    ``http_status``, ``headers`` and ``http_body``, PyGithub's ``status``, ``headers`` and
    ``data``. A connection or timeout error (``APIConnectionError``, ``APITimeoutError``,
    githubkit's ``RequestError``, Stripe's ``APIConnectionError``) is the failure of the
    transport error it was raised from: a connect failure is known never to have been sent.
    Nothing of the SDK is imported: its errors are read by what they carry.
    """
    method = method_of(error)  # the request's, when the error has one (openai, anthropic)
    response = getattr(error, "response", None)
    if response is not None:
        sent = _request_headers(response)
        if sent is not None and RETRY_COUNT_HEADER in sent:  # the SDK's own retries on?
            sdk_retries_taken(sent[RETRY_COUNT_HEADER])
        raw = getattr(response, "raw_response", None)  # githubkit wraps httpx's response
        seen = _response_seen(raw if raw is not None else response, method)
        if seen is not None:
            return seen
    status = getattr(error, "http_status", None)  # Stripe
    body: object = getattr(error, "http_body", None)
    if status is None:
        status = getattr(error, "status", None)  # PyGithub
        body = getattr(error, "data", None)
    if isinstance(status, int) and not isinstance(status, bool):
        headers = getattr(error, "headers", None)
        pairs = _lower_pairs(headers) if isinstance(headers, Mapping) else []
        if isinstance(body, (dict, list)):
            body = json.dumps(body)[:MESSAGE_LIMIT]
        return _response(status, pairs, body, method)
    cause = _wrapped(error)
    for _ in range(_CAUSES):  # bounded: a chain of causes may loop
        if cause is None or not is_sdk_error(cause):
            break
        cause = _wrapped(cause)
    if cause is None or is_sdk_error(cause):
        return None
    seen = observe_error(cause)
    if isinstance(seen, FailureSeen) and seen.method is None and method is not None:
        return FailureSeen(seen.kind, seen.error, method=method)
    return seen


def _wrapped(error: BaseException) -> BaseException | None:
    """The error an SDK error was raised from (githubkit's ``exc``, else ``__cause__``)."""
    cause = getattr(error, "exc", None)
    if not isinstance(cause, BaseException):
        cause = error.__cause__
    return cause if isinstance(cause, BaseException) and cause is not error else None


_READERS: dict[str, Reader] = {
    "httpx": _httpx,
    "httpx2": _httpx,
    "requests": _requests,
    "urllib3": _urllib3,
    "aiohttp": _aiohttp,
    "urllib": _urllib,
    **dict.fromkeys(_SDKS, _sdk),
}
"""Top-level module of an exception class → the reader of that library's exceptions."""


def is_sdk_error(error: BaseException) -> bool:
    """Whether ``error`` is one of an official SDK's errors (an operation that ends on one
    hands it to the caller as it was, its outcome attached)."""
    return any(cls.__module__.partition(".")[0] in _SDKS for cls in type(error).__mro__)


def observe_error(error: BaseException) -> Observation | None:
    """The observation an HTTP library's exception stands for, or None if it is none of theirs.

    The library is found from the module of each class in the exception's MRO, so a user's
    subclass of ``httpx.HTTPStatusError`` is read like the original. The library's own
    errors are never imported here before one of them is seen.
    """
    if isinstance(error, RetryBudgetError):
        return None  # an inner operation already decided: not a provider failure to read
    for cls in type(error).__mro__:
        reader = _READERS.get(cls.__module__.partition(".")[0])
        if reader is not None:
            return reader(error)
    # anyone's error that carries an HTTP library's response is that response
    response = getattr(error, "response", None)
    return None if response is None else _response_seen(response, method_of(error))


# The outcome an object carries -------------------------------------------------------------

OUTCOME = "retrybudget.outcome"
"""Where the operation's :class:`~retrybudget.Outcome` is attached to the final response."""

OUTCOME_ATTRIBUTE = "retrybudget_outcome"
"""The attribute of a requests response (or a raised error) that holds the
:class:`~retrybudget.Outcome`."""


class Carried:
    """An outcome attached to an error raised again as it was; it stays behind when pickled."""

    __slots__ = ("outcome",)

    def __init__(self, outcome: Outcome[object] | None) -> None:
        self.outcome = outcome

    def __reduce__(self) -> tuple[Any, ...]:
        return (Carried, (None,))


def carry(error: BaseException, outcome: Outcome[Any]) -> None:
    """Attach ``outcome`` to ``error`` (``error.retrybudget_outcome``; not for a class without
    a ``__dict__``)."""
    with contextlib.suppress(AttributeError, TypeError):
        setattr(error, OUTCOME_ATTRIBUTE, Carried(outcome))


def outcome_of(response: object) -> Outcome[object] | None:
    """The :class:`~retrybudget.Outcome` of the operation that produced ``response`` (or raised
    it, for an error), or None.

    httpx and httpx2: ``response.extensions["retrybudget.outcome"]``; requests and aiohttp:
    ``response.retrybudget_outcome``. Every other ending of an operation carries it too: a
    :class:`~retrybudget.RetryBudgetError` as ``error.outcome``, an error raised again as it
    was (a bug, an invalid URL, an SDK's error that ended the operation) as
    ``error.retrybudget_outcome``, an SDK's error raised over a response a transport
    handed over (``anthropic.RateLimitError``, ``openai.APIStatusError``, githubkit's
    ``RequestFailed``…) by the response it carries, and an SDK's connection error raised
    from a transport's typed error (``APIConnectionError`` from ``TransportRetriesExhausted``)
    by that error.
    """
    if isinstance(response, RetryBudgetError):
        return response.outcome
    extensions = getattr(response, "extensions", None)
    found = extensions.get(OUTCOME) if isinstance(extensions, Mapping) else None
    if found is None:
        found = getattr(response, OUTCOME_ATTRIBUTE, None)
    if isinstance(found, Carried):
        found = found.outcome
    if found is None and isinstance(response, BaseException):
        carried = getattr(response, "response", None)  # the response an SDK's error holds
        if carried is not None and not isinstance(carried, BaseException):
            raw = getattr(carried, "raw_response", None)  # githubkit's wraps httpx's
            return outcome_of(raw if raw is not None else carried)
        cause = _wrapped(response)  # an SDK's connection error over a transport's typed one
        if cause is not None and (isinstance(cause, RetryBudgetError)
                                  or isinstance(_wrapped(cause), RetryBudgetError)):
            return outcome_of(cause if isinstance(cause, RetryBudgetError) else _wrapped(cause))
    return found if isinstance(found, Outcome) else None
