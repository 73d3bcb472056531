"""The values headers are read into, the dialect they are read in, and the bounds."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._values import fast_init

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

DELAY_UNITS = frozenset({"seconds", "ms", "epoch", "duration", "rfc3339", "auto"})
"""How a delay or reset header's value is read: delay-seconds (or an HTTP-date, for a delay),
milliseconds, epoch seconds, a Go duration, an RFC 3339 time, or ``auto`` (the generic
magnitude heuristic: a number at or above :data:`EPOCH_THRESHOLD` is an epoch)."""

EVIDENCE_HEADERS = frozenset(
    {
        "retry-after",
        "retry-after-ms",
        "ratelimit",
        "x-should-retry",
        "stripe-should-retry",
        "x-amz-retry-after",
        "x-ms-retry-after-ms",
        "x-shopify-shop-api-call-limit",
        "date",
        SKEW_EVIDENCE,
        CLAMP_EVIDENCE,
    }
)
"""Header names (lower-case) copied into :attr:`RateLimitInfo.evidence` (``date`` only with
other evidence; the ``retrybudget-*`` entries are derived, never taken from a provider)."""

EVIDENCE_PREFIXES = ("x-ratelimit-", "x-rate-limit-", "ratelimit-", "anthropic-ratelimit-")
"""Header-name prefixes also copied into :attr:`RateLimitInfo.evidence`; nothing else is."""

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


@dataclass(frozen=True, slots=True)
class HeaderRules:
    """How one provider's delay and reset headers are read (a profile's header dialect).

    Attributes:
        delays: ``(header, unit)`` pairs naming a time to retry, in precedence order (the
            first valid one wins); units from :data:`DELAY_UNITS`.
        resets: ``(header, unit)`` pairs saying how a quota family's reset header is read;
            a reset header not listed is read ``auto``.
        provider_clock: measure absolute times (HTTP-dates, epochs, RFC 3339) against the
            response's ``Date`` header, so a skewed local clock waits what the provider asked.
    """

    delays: tuple[tuple[str, str], ...] = (("retry-after-ms", "ms"), ("retry-after", "seconds"))
    resets: tuple[tuple[str, str], ...] = ()
    provider_clock: bool = True
    relevant: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """Header names and prefixes whose presence means there is something to read."""
    own: frozenset[str] = field(init=False, repr=False, compare=False)
    """The delay and reset header names these rules add to the evidence."""
    roles: dict[object, tuple[Any, ...]] = field(init=False, repr=False, compare=False)
    """What each header name seen so far is to the fast reader (bounded)."""
    plans: dict[object, Any] = field(init=False, repr=False, compare=False)
    """What each header set seen so far says apart from the time, for the fast reader
    (bounded)."""

    def __post_init__(self) -> None:
        for field_name in ("delays", "resets"):
            pairs = tuple((str(h).strip().lower(), str(u)) for h, u in getattr(self, field_name))
            for header, unit in pairs:
                if not header:
                    raise ValueError(f"{field_name}: a header name is empty")
                if unit not in DELAY_UNITS:
                    known = ", ".join(sorted(DELAY_UNITS))
                    raise ValueError(f"{field_name}: unknown unit {unit!r} for {header} ({known})")
            object.__setattr__(self, field_name, pairs)
        own = frozenset(h for h, _ in (*self.delays, *self.resets))
        object.__setattr__(self, "own", own)
        object.__setattr__(self, "relevant", (*_RELEVANT_PREFIXES, *sorted(own)))
        object.__setattr__(self, "roles", {})
        object.__setattr__(self, "plans", {})


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
DEFAULT_HEADER_RULES = HeaderRules()
"""The generic header dialect: ``retry-after-ms`` then ``retry-after``; resets read ``auto``."""
"""What a response without rate-limit or retry headers says: nothing."""
