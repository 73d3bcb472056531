"""The values headers are read into, the bounds, and the evidence headers: the shared ones
and those every built-in profile's entry reads (gathered from :data:`PROVIDERS` here, once)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .._values import fast_init
from ..profiles import PROVIDERS

MAX_HINT_SECONDS = 7 * 24 * 3600.0
"""The longest delay any header can ask for; longer values are clamped to it (with a note)."""

EPOCH_THRESHOLD = 1_000_000_000.0
"""A numeric reset at or above this (2001-09-09 UTC) is an epoch timestamp; below, a delta."""

MAX_VALUE_CHARS = 200
"""Header values kept in notes, hints and evidence are cut to this many characters."""

MAX_CLOCK_SKEW = 600.0
"""The largest provider-clock correction (seconds) taken from a ``Date`` header; beyond it the
correction is clamped to this bound (with a note)."""
DATE_RESOLUTION = 1.0
"""Seconds a ``Date`` header resolves (RFC 9110 IMF-fixdate): a smaller difference between
it and our clock is no evidence of clock skew (:func:`_date_skew`)."""

SKEW_EVIDENCE = "retrybudget-clock-skew"
"""The derived evidence entry that records a provider-clock correction (``+3s``)."""

CLAMP_EVIDENCE = "retrybudget-clamped"
"""The derived evidence entry that records a provider wait clamped to :data:`MAX_HINT_SECONDS`."""

_SHARED_HEADERS = ("retry-after", "retry-after-ms", "ratelimit", "x-shopify-shop-api-call-limit")
"""The headers every response is read for, whatever its provider: the delays of RFC 9110 and
of the Stainless-built SDKs, the IETF ``RateLimit`` field and Shopify's call limit (each with
a reader of its own syntax in ``_families``)."""

_SHARED_PREFIXES = ("x-ratelimit-", "ratelimit-")
"""The prefixes of the shared quota families: the de facto ``x-ratelimit-*`` and the IETF
``RateLimit-*`` fields."""

EVIDENCE_PREFIXES = tuple(dict.fromkeys(
    (*_SHARED_PREFIXES, *(prefix for p in PROVIDERS for prefix in p.evidence_prefixes))
))
"""Header-name prefixes also copied into :attr:`RateLimitInfo.evidence`: the shared families'
and each built-in profile's ``evidence_prefixes`` (``anthropic-ratelimit-``); nothing else is."""

EVIDENCE_HEADERS = frozenset(
    {
        *_SHARED_HEADERS,
        *(name for p in PROVIDERS for name in p.header_names()
          if not name.startswith(EVIDENCE_PREFIXES)),
        "date",
        SKEW_EVIDENCE,
        CLAMP_EVIDENCE,
    }
)
"""Header names (lower-case) copied into :attr:`RateLimitInfo.evidence`: the shared ones, and
every header a built-in profile reads (:meth:`Profile.header_names`: ``x-should-retry``,
``x-amz-retry-after``…) that no prefix covers (``date`` only with other evidence; the
``retrybudget-*`` entries are derived, never taken from a provider)."""

HeaderInput = Mapping[str, str] | Iterable[tuple[str, str]]


@fast_init
@dataclass(frozen=True, slots=True)
class Hint:
    """A delay that a provider asked for.

    Attributes:
        delay: seconds from when the response was received, ``0 <= delay <= MAX_HINT_SECONDS``.
        source: the lower-case header name it came from (``"retry-after"``,
            ``"x-ratelimit-reset"``…).
        raw: the header value as received (rate-limit headers carry no secrets).
        asked: the delay the provider asked for when it was clamped to ``MAX_HINT_SECONDS``;
            None when ``delay`` is what it asked.
    """

    delay: float
    source: str
    raw: str
    asked: float | None = None

    @property
    def requested(self) -> float:
        """The delay the provider asked for, before any clamp (what ``retry_at`` reports)."""
        return self.delay if self.asked is None else self.asked


@fast_init
@dataclass(frozen=True, slots=True)
class HeaderNote:
    """A header value that was ignored or clamped, and why."""

    header: str
    value: str
    reason: str


@fast_init
@dataclass(frozen=True, slots=True)
class Conflict:
    """Evidence that disagrees, for a reviewer: the header fields involved and what disagrees."""

    fields: tuple[str, ...]
    detail: str


@fast_init
@dataclass(frozen=True, slots=True)
class RateLimitInfo:
    """Everything the rate-limit and retry headers of one response say.

    Attributes:
        retry_after: from ``retry-after-ms`` or ``retry-after`` (the first valid one of these,
            in that order).
        reset: when the quota refills, from the reset headers (epoch, delta, duration, RFC 3339,
            IETF ``t``); the latest of several.
        limit: the quota size, if a header says it.
        remaining: what is left of the quota, if a header says it.
        used: what has been used, if a header says it.
        window: the quota window in seconds (IETF ``w``), if given.
        resource: the quota bucket name (``x-ratelimit-resource``, ``x-ratelimit-bucket``,
            IETF policy name).
        notes: values ignored or clamped, each with its reason.
        conflicts: disagreeing evidence, fields named.
        evidence: the rate-limit and retry headers seen, ``(lower-case name, value)``, in order.
    """

    retry_after: Hint | None = None
    reset: Hint | None = None
    limit: int | None = None
    remaining: int | None = None
    used: int | None = None
    window: float | None = None
    resource: str | None = None
    notes: tuple[HeaderNote, ...] = ()
    conflicts: tuple[Conflict, ...] = ()
    evidence: tuple[tuple[str, str], ...] = ()

    @property
    def earliest(self) -> Hint | None:
        """The provider's earliest time to try again: Retry-After wins over a reset (IETF draft)."""
        return self.retry_after if self.retry_after is not None else self.reset

    @property
    def exhausted(self) -> bool:
        """True when a header says no quota remains."""
        return self.remaining == 0


_DERIVED = frozenset({SKEW_EVIDENCE, CLAMP_EVIDENCE})
_RELEVANT_PREFIXES = (*(EVIDENCE_HEADERS - _DERIVED - {"date"}), *EVIDENCE_PREFIXES)
NO_RATE_LIMIT_INFO = RateLimitInfo()
"""What a response without rate-limit or retry headers says: nothing."""
