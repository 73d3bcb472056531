"""What every library's reader shares: the classifier's headers, a request's method, an
observation made of a status and headers or of a failure."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..core.classify import MESSAGE_LIMIT, FailureKind, FailureSeen, Observation, ResponseSeen
from ..core.headers import EVIDENCE_HEADERS, EVIDENCE_PREFIXES

EVIDENCE = (*sorted(EVIDENCE_HEADERS), *EVIDENCE_PREFIXES)
"""Lower-case header names (and prefixes) the classifier reads; no other header matters."""


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


def _lower_pairs(headers: Mapping[Any, Any]) -> list[tuple[str, str]]:
    return [(str(name).lower(), str(value)) for name, value in headers.items()]
