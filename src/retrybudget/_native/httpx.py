"""httpx and httpx2 (one exception tree, one reading): failure kinds, header evidence, errors."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..core.classify import MESSAGE_LIMIT, FailureKind, Observation, ResponseSeen
from ._shared import EVIDENCE, _failure, method_of
from ._stdlib import stdlib_failure_kind

__all__ = ["httpx_evidence", "httpx_evidence_of", "httpx_failure_kind", "read"]

if TYPE_CHECKING:
    import httpx

_HTTPX_EVIDENCE = tuple(name.encode("ascii") for name in EVIDENCE)


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
    cache; decodes only the few values the classifier reads), read from the headers' own
    list when they keep one as httpx does (no copy of them)."""
    headers = response.headers
    listed = getattr(headers, "_list", None)
    if type(listed) is list:
        return httpx_evidence_of(listed)
    return httpx_evidence_of([(raw, raw, value) for raw, value in headers.raw])


def httpx_evidence_of(items: Iterable[tuple[bytes, bytes, bytes]]) -> tuple[tuple[str, str], ...]:
    """:func:`httpx_evidence` of header items as httpx keeps them: ``(raw name, lower-case
    name, value)``."""
    names = _NAMES
    out = []
    for raw, _lower, value in items:
        name = names.get(raw)
        if name is None:
            name = _httpx_name(raw)
        if name:
            out.append((name, value.decode("latin-1").strip()))
    return tuple(out)


def read(error: BaseException) -> Observation | None:
    """An httpx (or httpx2) exception as the observation it stands for: an HTTPStatusError is
    its response, any other of their errors a failure of its kind."""
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
