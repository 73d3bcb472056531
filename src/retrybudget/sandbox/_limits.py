"""Primary and secondary rate limits: fixed windows and how each style signals them."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from retrybudget.sandbox._config import RateLimit

__all__ = [
    "FixedWindow",
    "Rejection",
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
    if limit.style == "ietf":
        return {
            "RateLimit": f'"default";r={reading.remaining};t={reading.seconds_to_reset}',
            "RateLimit-Policy": f'"default";q={reading.limit};w={reading.window_s}',
        }
    return {}


def primary_rejection(limit: RateLimit, reading: WindowReading) -> Rejection:
    """The answer to a request over the primary limit, in the limit's style."""
    headers = primary_headers(limit, reading)
    message = "API rate limit exceeded for this run."
    if limit.style == "github" and limit.github_403:
        body = {
            "message": message,
            "documentation_url": "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api",
        }
        return Rejection(403, headers, body)
    if limit.style != "bare":
        headers["Retry-After"] = str(reading.retry_after_s)
    return Rejection(429, headers, {"message": message})


def secondary_rejection(status: int, retry_after_s: int, primary: dict[str, str] | None = None) -> Rejection:
    """The answer to a request over the concurrency (secondary) limit."""
    headers = dict(primary or {})
    headers["Retry-After"] = str(retry_after_s)
    return Rejection(status, headers, {"message": SECONDARY_MESSAGE})
