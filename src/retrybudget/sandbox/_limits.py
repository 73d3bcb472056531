"""Primary and secondary rate limits: fixed windows and how each style signals them."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from retrybudget.sandbox._config import RateLimit

__all__ = [
    "FixedWindow",
    "Rejection",
    "graphql_cost",
    "WindowReading",
    "primary_headers",
    "primary_rejection",
    "secondary_rejection",
]

SECONDARY_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
)


@dataclass(frozen=True, slots=True)
class WindowReading:
    """The state of a run's current window, as seen by one request.

    Attributes:
        limit: requests admitted per window.
        window_s: the window length in seconds.
        used: requests admitted in the current window (this one included if admitted).
        reset_epoch: the whole epoch second at which the current window ends.
        admitted: whether this request was admitted.
        now: the wall time of the reading.
    """

    limit: int
    window_s: int
    used: int
    reset_epoch: int
    admitted: bool
    now: float

    @property
    def remaining(self) -> int:
        """Requests still admitted in the current window."""
        return max(0, self.limit - self.used)

    @property
    def seconds_to_reset(self) -> int:
        """Whole seconds until the window ends, rounded up (never below 0)."""
        return max(0, math.ceil(self.reset_epoch - self.now))

    @property
    def retry_after_s(self) -> int:
        """The ``Retry-After`` for a rejected request: the reset, rounded up, at least 1 s."""
        return max(1, self.seconds_to_reset)


class FixedWindow:
    """A fixed-window counter aligned to multiples of the window on the wall clock.

    Not thread-safe on its own; the caller serialises access.
    """

    __slots__ = ("_count", "_index")

    def __init__(self) -> None:
        self._index = -1
        self._count = 0

    def _roll(self, now: float, window_s: int) -> int:
        index = math.floor(now / window_s)
        if index != self._index:
            self._index = index
            self._count = 0
        return index

    def consume(self, limit: RateLimit, now: float) -> WindowReading:
        """Admit one request if the window has quota left, and report the window."""
        index = self._roll(now, limit.window_s)
        admitted = self._count < limit.limit
        if admitted:
            self._count += 1
        return self._reading(limit, index, admitted=admitted, now=now)

    def peek(self, limit: RateLimit, now: float) -> WindowReading:
        """Report the window without consuming quota (``admitted`` is always true)."""
        index = self._roll(now, limit.window_s)
        return self._reading(limit, index, admitted=True, now=now)

    def _reading(self, limit: RateLimit, index: int, *, admitted: bool, now: float) -> WindowReading:
        return WindowReading(
            limit=limit.limit,
            window_s=limit.window_s,
            used=min(self._count, limit.limit),
            reset_epoch=(index + 1) * limit.window_s,
            admitted=admitted,
            now=now,
        )


@dataclass(frozen=True, slots=True)
class Rejection:
    """A rate-limit answer: status, headers and JSON body."""

    status: int
    headers: dict[str, str]
    body: dict[str, Any]


def _rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _dialect_headers(style: str, r: WindowReading) -> dict[str, str]:
    """Each provider's quota headers on every response, as its documentation shows them."""
    if style == "openai":
        return {"x-ratelimit-limit-requests": str(r.limit),
                "x-ratelimit-remaining-requests": str(r.remaining),
                "x-ratelimit-reset-requests": f"{r.seconds_to_reset}s"}
    if style == "anthropic":
        return {"anthropic-ratelimit-requests-limit": str(r.limit),
                "anthropic-ratelimit-requests-remaining": str(r.remaining),
                "anthropic-ratelimit-requests-reset": _rfc3339(r.reset_epoch)}
    if style == "discord":
        return {"X-RateLimit-Limit": str(r.limit), "X-RateLimit-Remaining": str(r.remaining),
                "X-RateLimit-Reset": f"{r.reset_epoch:.3f}",
                "X-RateLimit-Reset-After": f"{max(r.reset_epoch - r.now, 0.0):.3f}",
                "X-RateLimit-Bucket": "sandbox-bucket"}
    if style == "shopify":
        return {"X-Shopify-Shop-Api-Call-Limit": f"{r.used}/{r.limit}"}
    if style == "x":
        return {"x-rate-limit-limit": str(r.limit), "x-rate-limit-remaining": str(r.remaining),
                "x-rate-limit-reset": str(r.reset_epoch)}
    if style == "gitlab":
        return {"RateLimit-Limit": str(r.limit), "RateLimit-Observed": str(r.used),
                "RateLimit-Remaining": str(r.remaining), "RateLimit-Reset": str(r.reset_epoch)}
    if style in ("ietf", "cloudflare"):
        return {"RateLimit": f'"default";r={r.remaining};t={r.seconds_to_reset}',
                "RateLimit-Policy": f'"default";q={r.limit};w={r.window_s}'}
    return {}


def _dialect_rejection(style: str, headers: dict[str, str], r: WindowReading) -> Rejection:
    """Each provider's answer over the limit, as its documentation shows it."""
    wait = r.retry_after_s
    if style == "stripe":  # no Retry-After (stripe-python dropped it as unused)
        return Rejection(429, headers, {"error": {"type": "invalid_request_error",
                                                  "code": "rate_limit", "message": "Too many requests"}})
    if style == "openai":
        headers["retry-after-ms"] = str(wait * 1000)
        return Rejection(429, headers, {"error": {"type": "requests", "code": "rate_limit_exceeded",
                                                  "message": "Rate limit reached for requests"}})
    if style == "anthropic":
        headers["retry-after"] = str(wait)
        return Rejection(429, headers, {"type": "error", "error": {"type": "rate_limit_error",
                                                                   "message": "Rate limited"}})
    if style == "slack":
        headers["Retry-After"] = str(wait)
        return Rejection(429, headers, {"ok": False, "error": "ratelimited"})
    if style == "discord":
        headers["Retry-After"] = str(wait)
        headers["X-RateLimit-Scope"] = "user"
        return Rejection(429, headers, {"message": "You are being rate limited.",
                                        "retry_after": float(wait), "global": False})
    if style == "shopify":
        headers["Retry-After"] = f"{float(wait):.1f}"
        return Rejection(429, headers, {"errors": "Exceeded 2 calls per second for api client."})
    if style == "x":
        return Rejection(429, headers, {"errors": [{"code": 88, "message": "Rate limit exceeded"}]})
    if style == "aws":
        headers["x-amz-retry-after"] = str(wait * 1000)
        return Rejection(400, headers, {"__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException",
                                        "message": "Rate exceeded"})
    if style == "google":
        return Rejection(429, headers, {"error": {
            "code": 429, "status": "RESOURCE_EXHAUSTED", "message": "Quota exceeded",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo",
                         "retryDelay": f"{wait}s"}]}})
    if style == "azure":
        headers["x-ms-retry-after-ms"] = str(wait * 1000)
        return Rejection(429, headers, {"error": {"code": "TooManyRequests",
                                                  "message": "Rate limit is exceeded."}})
    if style == "twilio":
        return Rejection(429, headers, {"code": 20429, "message": "Too Many Requests",
                                        "status": 429})
    headers["Retry-After"] = str(wait)  # gitlab, cloudflare, generic
    return Rejection(429, headers, {"message": "Rate limit exceeded"})


_CLASSIC = frozenset({"github", "ietf", "retry-after", "bare", "none"})


def primary_headers(limit: RateLimit, reading: WindowReading) -> dict[str, str]:
    """The quota headers a style sends on every response (none for plain styles)."""
    if limit.style == "github":
        return {
            "x-ratelimit-limit": str(reading.limit),
            "x-ratelimit-remaining": str(reading.remaining),
            "x-ratelimit-used": str(reading.used),
            "x-ratelimit-reset": str(reading.reset_epoch),
            "x-ratelimit-resource": limit.resource,
        }
    return _dialect_headers(limit.style, reading)


def graphql_cost(reading: WindowReading, requested: int = 1) -> dict[str, Any]:
    """Shopify's GraphQL ``extensions.cost`` for a query of ``requested`` points: the window's
    quota as points (``maximumAvailable``), what is left (``currentlyAvailable``) and the rate
    that refills the window (points per second)."""
    return {"cost": {"requestedQueryCost": requested,
                     "actualQueryCost": requested if reading.admitted else None,
                     "throttleStatus": {"maximumAvailable": float(reading.limit),
                                        "currentlyAvailable": reading.remaining,
                                        "restoreRate": reading.limit / reading.window_s}}}


def primary_rejection(limit: RateLimit, reading: WindowReading,
                      graphql: bool = False) -> Rejection:
    """The answer to a request over the primary limit, in the limit's style (a Shopify
    GraphQL query is throttled in a 200 body, with its cost)."""
    headers = primary_headers(limit, reading)
    if graphql and limit.style == "shopify":
        errors = [{"message": "Throttled", "extensions": {
            "code": "THROTTLED", "documentation": "https://shopify.dev/api/usage/rate-limits"}}]
        return Rejection(200, headers, {"errors": errors, "extensions": graphql_cost(reading)})
    message = "API rate limit exceeded for this run."
    if limit.style == "github" and limit.github_403:
        body = {
            "message": message,
            "documentation_url": "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api",
        }
        return Rejection(403, headers, body)
    if limit.style not in _CLASSIC:
        return _dialect_rejection(limit.style, headers, reading)
    if limit.style != "bare":
        headers["Retry-After"] = str(reading.retry_after_s)
    return Rejection(429, headers, {"message": message})


def secondary_rejection(status: int, retry_after_s: int, primary: dict[str, str] | None = None) -> Rejection:
    """The answer to a request over the concurrency (secondary) limit."""
    headers = dict(primary or {})
    headers["Retry-After"] = str(retry_after_s)
    return Rejection(status, headers, {"message": SECONDARY_MESSAGE})
