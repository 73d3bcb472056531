"""Rate-limit and retry headers, parsed by total functions.

Nothing here raises on provider input: a malformed, negative, huge or conflicting
value is ignored with a reason (a :class:`HeaderNote`) or clamped, and every
usable value records the header it came from. All delays are seconds counted
from the moment the response was received (``now_wall``), never negative and
never above :data:`MAX_HINT_SECONDS`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date
from email.utils import parsedate_tz
from typing import Any, TypeVar, cast

from ._values import fast_init

__all__ = [
    "EPOCH_THRESHOLD",
    "EVIDENCE_HEADERS",
    "EVIDENCE_PREFIXES",
    "DEFAULT_HEADER_RULES",
    "MAX_CLOCK_SKEW",
    "MAX_HINT_SECONDS",
    "MAX_VALUE_CHARS",
    "NO_RATE_LIMIT_INFO",
    "Conflict",
    "HeaderNote",
    "HeaderRules",
    "Hint",
    "RateLimitInfo",
    "normalize_headers",
    "parse_duration",
    "parse_rate_limit_headers",
    "parse_reset",
    "parse_retry_after",
    "parse_rfc3339",
]

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


def normalize_headers(headers: HeaderInput) -> tuple[tuple[str, str], ...]:
    """Lower-case names and strip values; accepts a mapping or ``(name, value)`` pairs.

    Duplicates are kept, in order. Objects with ``multi_items()`` (httpx) or ``items()``
    (``http.client.HTTPMessage``) are read pair by pair so repeated headers survive. ``bytes``
    names or values are decoded as latin-1; items that are not pairs are skipped.
    """
    out: list[tuple[str, str]] = []
    for item in _pairs(headers):
        if isinstance(item, (str, bytes, bytearray)):
            continue
        try:
            name, value = cast("tuple[object, object]", item)
        except (TypeError, ValueError):
            continue
        out.append((_as_text(name).strip().lower(), _as_text(value).strip()))
    return tuple(out)


def parse_retry_after(
    value: str, now_wall: float, *, source: str = "retry-after"
) -> Hint | HeaderNote:
    """Parse ``Retry-After``: delay-seconds, fractional seconds, or an HTTP-date (3 RFC 9110 forms).

    Fractional seconds (``1.5``) are accepted although RFC 9110 only allows integers (as the
    OpenAI and Anthropic SDKs do). A date in the past is a delay of 0. A negative, non-finite or
    unparseable value gives a :class:`HeaderNote`; a value above :data:`MAX_HINT_SECONDS` gives
    a :class:`Hint` clamped to it (:func:`parse_rate_limit_headers` also records a note).
    """
    hint, note = _parse_delay(value, source, now_wall, divisor=1.0, allow_date=True)
    return _one(hint, note, source, value)


def parse_duration(value: str) -> float | None:
    """Parse a Go-style duration (``6m0s``, ``1.5s``, ``12ms``, ``1h2m3.5s``) into seconds, or None.

    Units are ``h``, ``m``, ``s``, ``ms``, ``us``/``µs``/``μs`` and ``ns``; a bare ``0`` is
    zero; a leading sign is allowed as in Go, so the result may be negative. Components too
    large for a float give ``inf`` (callers clamp). Anything else is None.
    """
    text = _as_text(value).strip()
    sign = 1.0
    if text[:1] in ("+", "-"):
        sign = -1.0 if text[0] == "-" else 1.0
        text = text[1:]
    if text == "0":
        return 0.0
    if not text or _DURATION_RE.fullmatch(text) is None:
        return None
    total = 0.0
    for match in _DURATION_PART_RE.finditer(text):
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
    return sign * total


def parse_rfc3339(value: str) -> float | None:
    """Parse an RFC 3339 timestamp into epoch seconds, or None.

    Needs a ``T`` (or space) between date and time, seconds, and ``Z`` or a ``±hh:mm`` offset;
    fractional seconds of any length are kept; ``-00:00`` counts as UTC; a leap second ``:60``
    is accepted. Calendar-invalid dates (``02-30``) are None.
    """
    match = _RFC3339_RE.fullmatch(_as_text(value).strip())
    if match is None:
        return None
    y, mo, d, h, mi, sec = (int(match.group(i)) for i in range(1, 7))
    zone = match.group(8)
    offset = 0
    if zone not in ("Z", "z"):
        zone_h, zone_m = int(zone[1:3]), int(zone[4:6])
        if zone_h > 23 or zone_m > 59:
            return None
        offset = (zone_h * 3600 + zone_m * 60) * (-1 if zone[0] == "-" else 1)
    epoch = _epoch((y, mo, d, h, mi, sec), offset)
    if epoch is None:
        return None
    fraction = match.group(7)
    return epoch + (float("0" + fraction) if fraction else 0.0)


def parse_reset(
    value: str, now_wall: float, *, source: str, unit: str = "auto"
) -> Hint | HeaderNote:
    """Parse a reset header the way its provider documents it (``unit``, from :data:`DELAY_UNITS`).

    ``auto`` (the generic profile) guesses: a number at or above :data:`EPOCH_THRESHOLD`
    (1e9, i.e. September 2001 or later) is an epoch timestamp, possibly fractional (Discord),
    a smaller number a delta in seconds (``0`` included); otherwise a Go duration (OpenAI
    ``6m0s``) or an RFC 3339 timestamp (Anthropic) is tried. ``epoch`` reads any number as an
    epoch (GitHub's ``x-ratelimit-reset``: reset ``125`` at now ``100`` is 25 s away);
    ``seconds`` a delta; ``ms`` a delta in milliseconds; ``duration`` a Go duration (or a
    plain number of seconds); ``rfc3339`` a timestamp. A time in the past is a delay of 0.
    Negative, non-finite or unparseable values give a :class:`HeaderNote`; too-large delays
    give a clamped :class:`Hint`. ``Hint.raw`` keeps the value as received.
    """
    hint, note = _parse_reset(value, source, now_wall, unit)
    return _one(hint, note, source, value)


_DERIVED = frozenset({SKEW_EVIDENCE, CLAMP_EVIDENCE})
_RELEVANT_PREFIXES = (*(EVIDENCE_HEADERS - _DERIVED - {"date"}), *EVIDENCE_PREFIXES)
NO_RATE_LIMIT_INFO = RateLimitInfo()
DEFAULT_HEADER_RULES = HeaderRules()
"""The generic header dialect: ``retry-after-ms`` then ``retry-after``; resets read ``auto``."""
"""What a response without rate-limit or retry headers says: nothing."""


def _normalized(pairs: tuple[object, ...]) -> bool:
    """True when ``pairs`` is already what :func:`normalize_headers` returns."""
    for item in pairs:
        if not (isinstance(item, tuple) and len(item) == 2):
            return False
        name, value = item
        if not (isinstance(name, str) and isinstance(value, str)) or name != name.strip().lower():
            return False
        if value != value.strip():
            return False
    return True


def parse_rate_limit_headers(
    headers: HeaderInput, now_wall: float, rules: HeaderRules | None = None
) -> RateLimitInfo:
    """Parse every rate-limit and retry header of one response into a :class:`RateLimitInfo`.

    Never raises. ``now_wall`` is the (local) epoch time the response was received; ``rules``
    is the provider's header dialect (a profile's :attr:`~retrybudget.Profile.header_rules`;
    default: the generic one). ``retry_after`` comes from the first valid of ``rules.delays``
    (generic: ``retry-after-ms`` in float milliseconds, else ``retry-after``). Quota headers
    are read per family (GitHub/Discord ``x-ratelimit-*``, X ``x-rate-limit-*``, OpenAI
    ``x-ratelimit-*-requests|tokens``, Anthropic ``anthropic-ratelimit-*``, Shopify call
    limit, and the IETF ``RateLimit-*`` headers, ``RateLimit``/``RateLimit-Policy`` in the -07
    dictionary and -08..-10 list syntaxes), each reset in the unit ``rules.resets`` gives it.
    With ``rules.provider_clock`` and a valid ``Date`` header, absolute times are measured
    against the provider's clock: a difference under the ``Date``'s one-second resolution is
    no skew, a larger one is corrected (bounded by :data:`MAX_CLOCK_SKEW` and recorded as a
    ``retrybudget-clock-skew`` evidence entry).
    The most restrictive family wins: an exhausted one (remaining 0) with the latest reset,
    else the smallest remaining; ``reset`` is the latest reset of the exhausted families (of
    all, if none is exhausted or none of those has a reset). A header repeated with different
    values is a :class:`Conflict` and its first valid value is used; so are ``remaining`` above
    ``limit`` and a retry-after that disagrees with the reset by more than max(1 s, 10 %) when
    the quota is exhausted or its remaining is unknown. A clamped wait is recorded as a
    ``retrybudget-clamped`` evidence entry.

    The common header set (one vendor family with plain integer values, a ``Date``, headers
    that are no rate-limit headers) is scanned once per :class:`HeaderRules` and read from
    what it was found to say, with the same result; everything else is read in full.
    """
    rules = DEFAULT_HEADER_RULES if rules is None else rules
    if type(headers) is tuple:
        try:
            fast = _read_simple(headers, now_wall, rules)
        except (TypeError, ValueError):  # an unhashable name or an item that is not a pair
            fast = None
        if fast is not None:
            return fast
    return _parse_general(headers, now_wall, rules)


def _parse_general(headers: HeaderInput, now_wall: float, rules: HeaderRules) -> RateLimitInfo:
    """The general reader behind :func:`parse_rate_limit_headers`: every family and form."""
    pairs = headers if isinstance(headers, tuple) and _normalized(headers) else normalize_headers(headers)
    if not any(name.startswith(rules.relevant) for name, _ in pairs):
        return NO_RATE_LIMIT_INFO
    reader = _Reader(pairs, now_wall, dict(rules.resets))
    skew = _skew(reader) if rules.provider_clock else 0.0
    reader.now_wall = now_wall + skew
    retry_after: Hint | None = None
    for name, unit in rules.delays:
        found = reader.pick(name, reader.parse_delay(unit))  # later ones: notes and duplicates
        if retry_after is None:
            retry_after = found
    quotas = [*_vendor_quotas(reader), *_ietf_quotas(reader)]
    info = _combine(quotas)
    if retry_after is not None and info.reset is not None and info.remaining in (None, 0):
        _check_agreement(reader, retry_after, info.reset)
    own = rules.own
    evidence = [
        (name[:MAX_VALUE_CHARS], value[:MAX_VALUE_CHARS])
        for name, value in pairs
        if (_is_evidence(name) or name in own) and name not in _DERIVED
    ]
    if skew:  # a correction, never one under the Date's resolution
        evidence.append(_skew_evidence(skew))
    evidence.extend(
        _clamp_evidence(hint)
        for hint in (retry_after, info.reset)
        if hint is not None and hint.asked is not None
    )
    return RateLimitInfo(
        retry_after=retry_after,
        reset=info.reset,
        limit=info.limit,
        remaining=info.remaining,
        used=info.used,
        window=info.window,
        resource=info.resource,
        notes=tuple(reader.notes),
        conflicts=tuple(reader.conflicts),
        evidence=tuple(evidence),
    )


def _skew_evidence(skew: float) -> tuple[str, str]:
    return SKEW_EVIDENCE, f"{skew:+.0f}s"


def _clamp_evidence(hint: Hint) -> tuple[str, str]:
    return CLAMP_EVIDENCE, f"{hint.source} asked {hint.asked:.0f}s, read as {hint.delay:.0f}s"


def _date_skew(provider_now: float, now_wall: float) -> float:
    """Seconds the provider's clock is ahead of ours, from its ``Date`` (``provider_now``)
    read at our epoch time ``now_wall``; unbounded (the readers bound it).

    A ``Date`` has one-second resolution (RFC 9110 IMF-fixdate, section 5.6.7): it is the
    provider's time rounded down, so a provider whose clock is exact reads up to a second
    behind ours. A difference under :data:`DATE_RESOLUTION` is therefore no evidence of skew
    and reads as 0; a larger one is the provider's clock, corrected in full.
    https://www.rfc-editor.org/rfc/rfc9110#section-5.6.7
    """
    skew = provider_now - now_wall
    return skew if abs(skew) >= DATE_RESOLUTION else 0.0


def _skew(reader: _Reader) -> float:
    """Seconds the provider's clock (its ``Date`` header) is ahead of ours, bounded; 0 if none
    or within the ``Date``'s resolution (:func:`_date_skew`)."""
    values = reader.groups.get("date")
    if not values:
        return 0.0
    provider_now = _http_date(values[0])
    if provider_now is None:
        reader.notes.append(_note("date", values[0], "not an HTTP-date; local clock used"))
        return 0.0
    skew = _date_skew(provider_now, reader.now_wall)
    if abs(skew) > MAX_CLOCK_SKEW:
        reader.notes.append(
            _note("date", values[0], f"clock skew {skew:+.0f}s clamped to {_fmt(MAX_CLOCK_SKEW)}s")
        )
        skew = math.copysign(MAX_CLOCK_SKEW, skew)
    return skew


# --------------------------------------------------------------------------- private helpers

_T = TypeVar("_T")
_V = TypeVar("_V")
_K = TypeVar("_K")
_Parsed = tuple["_T | None", "HeaderNote | None"]

_NUMBER_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_NONFINITE_RE = re.compile(r"[+-]?(?:nan|inf(?:inity)?)", re.IGNORECASE)
_COUNT_RE = re.compile(r"[0-9]{1,18}")
_UNIT = r"(ns|us|\u00b5s|\u03bcs|ms|h|m|s)"
_DURATION_PART_RE = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)" + _UNIT)
_DURATION_RE = re.compile(r"(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)" + _UNIT + r")+")
_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "\u00b5s": 1e-6,  # MICRO SIGN
    "\u03bcs": 1e-6,  # GREEK SMALL LETTER MU
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_RFC3339_RE = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?"
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})"
)
_SHOPIFY_RE = re.compile(r"([0-9]{1,18})\s*/\s*([0-9]{1,18})")
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()


def _as_text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("latin-1")
    try:
        return str(value)
    except Exception:  # a hostile __str__ must not break header parsing
        return ""


def _pairs(headers: object) -> Iterable[object]:
    if isinstance(headers, (str, bytes, bytearray)):
        return ()
    multi_items = getattr(headers, "multi_items", None)
    if callable(multi_items):
        return cast("Iterable[object]", multi_items())
    if isinstance(headers, Mapping):
        return cast("Iterable[object]", headers.items())
    items = getattr(headers, "items", None)
    if callable(items):
        return cast("Iterable[object]", items())
    if isinstance(headers, Iterable):
        return cast("Iterable[object]", headers)
    return ()


def _is_evidence(name: str) -> bool:
    return name in EVIDENCE_HEADERS or name.startswith(EVIDENCE_PREFIXES)


def _note(header: str, value: str, reason: str) -> HeaderNote:
    return HeaderNote(header, value[:MAX_VALUE_CHARS], reason)


def _fmt(seconds: float) -> str:
    return f"{round(seconds, 3):g}"


def _one(
    hint: Hint | None, note: HeaderNote | None, source: str, value: object
) -> Hint | HeaderNote:
    if hint is not None:
        return hint
    if note is not None:
        return note
    return _note(source, _as_text(value), "unparseable")  # not reached: parsers return one


_CLAMPED = f"delay too large, clamped to {_fmt(MAX_HINT_SECONDS)}s"


_CLAMPED_NOTES: dict[tuple[str, str], HeaderNote] = {}


def _clamped_note(source: str, raw: str) -> HeaderNote:
    """The note of a clamped delay (a frozen value: one per header value, remembered)."""
    key = (source, raw)
    found = _CLAMPED_NOTES.get(key)
    if found is None:
        found = _remembered(_CLAMPED_NOTES, key, lambda: _note(source, raw, _CLAMPED))
    return found


def _clamp(delay: float, source: str, raw: str) -> _Parsed[Hint]:
    """Turn a computed delay into a Hint in [0, MAX_HINT_SECONDS]; past (negative) means 0.

    A clamped hint keeps what the provider asked in :attr:`Hint.asked`.
    """
    if math.isnan(delay):
        return None, _note(source, raw, "delay is not a finite number")
    if delay > MAX_HINT_SECONDS:
        return (
            Hint(MAX_HINT_SECONDS, source, raw[:MAX_VALUE_CHARS],
                 delay if math.isfinite(delay) else MAX_HINT_SECONDS),
            _clamped_note(source, raw),
        )
    return Hint(max(delay, 0.0) + 0.0, source, raw[:MAX_VALUE_CHARS]), None


def _number(text: str, source: str) -> float | HeaderNote | None:
    """A non-negative decimal number, a note (negative, nan/inf), or None (not a number)."""
    if _NONFINITE_RE.fullmatch(text):
        return _note(source, text, "not a finite number")
    if _NUMBER_RE.fullmatch(text) is None:
        return None
    number = float(text)  # cannot raise on this syntax; overflow gives +-inf
    if number < 0:
        return _note(source, text, "negative")
    return number


_IMF_FIXDATE_RE = re.compile(
    r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), ([0-9]{2}) ([A-Z][a-z]{2}) ([0-9]{4}) "
    r"([0-9]{2}):([0-9]{2}):([0-9]{2}) GMT"
)
_MONTHS = {m: i for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}


def _http_date(text: str) -> float | None:
    """Epoch seconds of an RFC 9110 HTTP-date (IMF-fixdate, rfc850, asctime), via email.utils.

    The preferred IMF-fixdate (what servers send in ``Date``) is read by a regular expression
    first: it is on every response the provider clock is measured from.
    """
    fixdate = _IMF_FIXDATE_RE.fullmatch(text)
    if fixdate is not None and fixdate.group(2) in _MONTHS:
        day, _, year, hour, minute, second = fixdate.groups()
        return _epoch((int(year), _MONTHS[fixdate.group(2)], int(day), int(hour), int(minute),
                       int(second)), 0)
    try:
        parts = parsedate_tz(text)
    except Exception:  # email.utils is lenient but has raised on odd input in the past
        return None
    if parts is None:
        return None
    return _epoch(parts[:6], parts[9] or 0)


def _epoch(fields: tuple[int, int, int, int, int, int], offset: int) -> float | None:
    """UTC epoch seconds of ``(year, month, day, hour, minute, second)`` at ``offset`` s east."""
    year, month, day, hour, minute, second = fields
    if not (0 <= hour <= 23 and 0 <= minute <= 59 and 0 <= second <= 60):
        return None
    try:
        days = date(year, month, day).toordinal() - _EPOCH_ORDINAL
    except (ValueError, OverflowError, TypeError):
        return None
    return float(days * 86400 + hour * 3600 + minute * 60 + second - offset)


def _parse_delay(
    value: object, source: str, now_wall: float, *, divisor: float, allow_date: bool
) -> _Parsed[Hint]:
    text = _as_text(value).strip()
    if not text:
        return None, _note(source, text, "empty")
    number = _number(text, source)
    if isinstance(number, HeaderNote):
        return None, number
    if number is not None:
        return _clamp(number / divisor, source, text)
    if allow_date:
        epoch = _http_date(text)
        if epoch is not None:
            return _clamp(epoch - now_wall, source, text)
        return None, _note(source, text, "neither delay-seconds nor an HTTP-date")
    return None, _note(source, text, "not a number")


def _parse_reset(value: object, source: str, now_wall: float, unit: str = "auto") -> _Parsed[Hint]:
    text = _as_text(value).strip()
    if not text:
        return None, _note(source, text, "empty")
    if unit == "ms":
        return _parse_delay(text, source, now_wall, divisor=1000.0, allow_date=False)
    if unit == "rfc3339":
        epoch = parse_rfc3339(text)
        if epoch is None:
            return None, _note(source, text, "not an RFC 3339 timestamp")
        return _clamp(epoch - now_wall, source, text)
    number = _number(text, source)
    if isinstance(number, HeaderNote):
        return None, number
    if number is not None:
        is_epoch = unit == "epoch" or (unit == "auto" and number >= EPOCH_THRESHOLD)
        return _clamp(number - now_wall if is_epoch else number, source, text)
    if unit == "epoch":
        return None, _note(source, text, "not an epoch timestamp")
    if unit == "seconds":
        return None, _note(source, text, "not a number of seconds")
    duration = parse_duration(text)
    if duration is not None:
        if duration < 0:
            return None, _note(source, text, "negative")
        return _clamp(duration, source, text)
    if unit == "duration":
        return None, _note(source, text, "not a duration")
    epoch = parse_rfc3339(text)
    if epoch is not None:
        return _clamp(epoch - now_wall, source, text)
    return None, _note(source, text, "not an epoch, delta-seconds, duration or RFC 3339 timestamp")


def _parse_count(value: str, source: str) -> _Parsed[int]:
    text = value.strip()
    if _COUNT_RE.fullmatch(text):
        return int(text), None
    if not text:
        return None, _note(source, text, "empty")
    number = _number(text, source)
    if isinstance(number, HeaderNote):
        return None, number
    if number is None:
        return None, _note(source, text, "not a number")
    if number > 2.0**53:
        return None, _note(source, text, "count too large")
    if not number.is_integer():
        return None, _note(source, text, "not an integer")
    return int(number), None


def _parse_name(value: str, source: str) -> _Parsed[str]:
    text = value.strip()
    if not text:
        return None, _note(source, text, "empty")
    return text[:MAX_VALUE_CHARS], None


class _Reader:
    """The normalised headers of one response, plus the notes and conflicts found reading them."""

    def __init__(
        self,
        pairs: Iterable[tuple[str, str]],
        now_wall: float,
        resets: Mapping[str, str] | None = None,
    ) -> None:
        self.now_wall = now_wall
        self.resets: Mapping[str, str] = resets or {}
        self.groups: dict[str, list[str]] = {}
        for name, value in pairs:
            self.groups.setdefault(name, []).append(value)
        self.notes: list[HeaderNote] = []
        self.conflicts: list[Conflict] = []

    def has(self, *names: str) -> bool:
        return any(name in self.groups for name in names)

    def values(self, name: str) -> list[str]:
        """The values of ``name``; a comma-joined repeat (``5, 7``) is split back apart.

        Only when every piece is non-empty and has no inner whitespace, so an HTTP-date
        (``Sun, 06 Nov 1994 …``) or a trailing comma stays one (noted) value.
        """
        out: list[str] = []
        for value in self.groups.get(name, ()):
            if "," not in value:
                out.append(value)
                continue
            parts = [part.strip() for part in value.split(",")]
            if len(parts) > 1 and all(part and part.split() == [part] for part in parts):
                out.extend(parts)
            else:
                out.append(value)
        return out

    def joined(self, name: str) -> str | None:
        values = self.groups.get(name)
        return None if values is None else ", ".join(values)

    def pick(self, name: str, parse: Callable[[str, str], _Parsed[_T]]) -> _T | None:
        """The first valid value of ``name``; notes for invalid ones; a Conflict if they differ."""
        if name not in self.groups:
            return None
        values = self.values(name)
        chosen: _T | None = None
        for value in values:
            got, note = parse(value, name)
            if note is not None:
                self.notes.append(note)
            if chosen is None and got is not None:
                chosen = got
        distinct = list(dict.fromkeys(values)) if len(values) > 1 else values
        if len(distinct) > 1:
            shown = ", ".join(repr(v[:40]) for v in distinct[:5])
            self.conflicts.append(
                Conflict(
                    (name,),
                    f"{name} appears {len(values)} times with different values ({shown}); "
                    "the first valid one is used",
                )
            )
        return chosen

    def parse_retry_after(self, value: str, source: str) -> _Parsed[Hint]:
        return _parse_delay(value, source, self.now_wall, divisor=1.0, allow_date=True)

    def parse_retry_after_ms(self, value: str, source: str) -> _Parsed[Hint]:
        return _parse_delay(value, source, self.now_wall, divisor=1000.0, allow_date=False)

    def parse_reset(self, value: str, source: str) -> _Parsed[Hint]:
        return _parse_reset(value, source, self.now_wall, self.resets.get(source, "auto"))

    def parse_delay(self, unit: str) -> Callable[[str, str], _Parsed[Hint]]:
        """The parser of a delay header in ``unit`` (``seconds`` also takes an HTTP-date)."""
        if unit == "seconds":
            return self.parse_retry_after
        if unit == "ms":
            return self.parse_retry_after_ms
        return lambda value, source: _parse_reset(value, source, self.now_wall, unit)

    def check_limit(self, quota: _Quota) -> None:
        if (
            quota.limit is not None
            and quota.remaining is not None
            and quota.remaining > quota.limit
        ):
            fields = tuple(dict.fromkeys((quota.remaining_src, quota.limit_src)))
            self.conflicts.append(
                Conflict(
                    fields,
                    f"remaining {quota.remaining} ({quota.remaining_src}) is greater than "
                    f"limit {quota.limit} ({quota.limit_src})",
                )
            )


@dataclass
class _Quota:
    """What one header family says about one quota."""

    limit: int | None = None
    remaining: int | None = None
    used: int | None = None
    reset: Hint | None = None
    window: float | None = None
    resource: str | None = None
    limit_src: str = ""
    remaining_src: str = ""

    def has_data(self) -> bool:
        return any(
            v is not None
            for v in (self.limit, self.remaining, self.used, self.reset, self.window, self.resource)
        )


def _latest(hints: Iterable[Hint | None]) -> Hint | None:
    best: Hint | None = None
    for hint in hints:
        if hint is not None and (best is None or hint.delay > best.delay):
            best = hint
    return best


@dataclass(frozen=True, slots=True)
class _FamilySpec:
    """The header names of one quota family."""

    limit: str
    remaining: str
    resets: tuple[str, ...]
    used: str | None = None
    resources: tuple[str, ...] = ()
    names: frozenset[str] = frozenset()

    @classmethod
    def of(cls, limit: str, remaining: str, resets: tuple[str, ...], used: str | None = None,
           resources: tuple[str, ...] = ()) -> _FamilySpec:
        names = frozenset((limit, remaining, *resets, *resources, *((used,) if used else ())))
        return cls(limit, remaining, resets, used, resources, names)


_VENDOR_FAMILIES = (
    # GitHub and Discord
    _FamilySpec.of("x-ratelimit-limit", "x-ratelimit-remaining",
                   ("x-ratelimit-reset", "x-ratelimit-reset-after"), used="x-ratelimit-used",
                   resources=("x-ratelimit-resource", "x-ratelimit-bucket")),
    # X (Twitter)
    _FamilySpec.of("x-rate-limit-limit", "x-rate-limit-remaining", ("x-rate-limit-reset",)),
    # OpenAI
    *(_FamilySpec.of(f"x-ratelimit-limit-{kind}", f"x-ratelimit-remaining-{kind}",
                     (f"x-ratelimit-reset-{kind}",))
      for kind in ("requests", "tokens")),
    # Anthropic
    *(_FamilySpec.of(f"anthropic-ratelimit-{kind}-limit", f"anthropic-ratelimit-{kind}-remaining",
                     (f"anthropic-ratelimit-{kind}-reset",))
      for kind in ("requests", "tokens", "input-tokens", "output-tokens")),
)
"""The vendor header families, in the order their quotas are combined."""


def _family(reader: _Reader, spec: _FamilySpec) -> _Quota | None:
    if spec.names.isdisjoint(reader.groups):
        return None
    quota = _Quota(limit_src=spec.limit, remaining_src=spec.remaining)
    quota.limit = reader.pick(spec.limit, _parse_count)
    quota.remaining = reader.pick(spec.remaining, _parse_count)
    if spec.used is not None:
        quota.used = reader.pick(spec.used, _parse_count)
    quota.reset = _latest(reader.pick(name, reader.parse_reset) for name in spec.resets)
    for name in spec.resources:
        found = reader.pick(name, _parse_name)
        if quota.resource is None:
            quota.resource = found
    reader.check_limit(quota)
    return quota


def _vendor_quotas(reader: _Reader) -> list[_Quota]:
    families = [_family(reader, spec) for spec in _VENDOR_FAMILIES]
    families.append(_shopify(reader))
    return [quota for quota in families if quota is not None]


def _shopify(reader: _Reader) -> _Quota | None:
    name = "x-shopify-shop-api-call-limit"

    def parse(value: str, source: str) -> _Parsed[tuple[int, int]]:
        match = _SHOPIFY_RE.fullmatch(value.strip())
        if match is None:
            return None, _note(source, value, "not 'used/limit'")
        return (int(match.group(1)), int(match.group(2))), None

    found = reader.pick(name, parse)
    if found is None:
        return None
    used, limit = found
    if used > limit:
        reader.conflicts.append(Conflict((name,), f"{name} says {used} used of a limit of {limit}"))
    return _Quota(
        limit=limit, remaining=max(limit - used, 0), used=used, limit_src=name, remaining_src=name
    )


# ------------------------------------------------------------------------- the fast reader

_LIMIT, _REMAINING, _USED, _RESOURCE, _RESET, _DATE_KIND, _SKIP_KIND, _GENERAL_KIND = range(8)
"""What a header name is to the fast reader (a role's first item): a quota family's limit,
remaining or used count (the three below ``_RESOURCE``), its resource or its reset; the
``Date``; nothing to the reader; or a header only the general reader reads."""
_SKIP: tuple[Any, ...] = (_SKIP_KIND, None)
"""The role of a header name that is nothing to the rate-limit reader."""
_GENERAL: tuple[Any, ...] = (_GENERAL_KIND, None)
"""The role of a header name only the general reader reads (delays, IETF, Shopify, odd names)."""
_DATE: tuple[Any, ...] = (_DATE_KIND, None)
_CACHE_MAX = 256
"""Header names (and header sets) one :class:`HeaderRules` remembers; past it, it starts over."""
_DATES: dict[str, float | None] = {}
"""``Date`` values already read (a provider sends one per second): the epoch each names."""
_UNSEEN = object()

_Reset = tuple[str, str, float, bool]
"""A plain reset header: its name, its value, the number it holds and whether that is an
epoch (else a delay in seconds)."""
_Plan = tuple["int | None", "int | None", "int | None", "str | None", "_Reset | None",
              "float | None", "tuple[tuple[str, str], ...]"]
"""What one header set says apart from the time: limit, remaining, used, resource, the reset,
the provider's ``Date`` (when measured against) and the evidence."""


def _role(rules: HeaderRules, name: object) -> tuple[Any, ...]:
    """What header ``name`` is to :func:`_scan` under ``rules``: its kind and, for a quota
    family's header, the family (and a reset's unit)."""
    if type(name) is not str or name != name.strip().lower():
        return _GENERAL
    if name == "date":
        return _DATE
    if not name.startswith(rules.relevant):
        return _SKIP
    if any(name == delay for delay, _ in rules.delays):
        return _GENERAL
    for index, spec in enumerate(_VENDOR_FAMILIES):
        if name not in spec.names:
            continue
        if name in spec.resets:
            return (_RESET, index, dict(rules.resets).get(name, "auto"))
        if name == spec.limit:
            return (_LIMIT, index)
        if name == spec.remaining:
            return (_REMAINING, index)
        return (_USED, index) if name == spec.used else (_RESOURCE, index)
    return _GENERAL


def _remembered(cache: dict[_K, _V], key: _K, make: Callable[[], _V]) -> _V:
    """``cache[key]``, made by ``make()`` when missing; the cache starts over when full."""
    found = cache.get(key, _UNSEEN)
    if found is _UNSEEN:
        if len(cache) >= _CACHE_MAX:
            cache.clear()
        found = cache[key] = make()
    return cast("_V", found)


def _read_simple(
    pairs: tuple[object, ...], now_wall: float, rules: HeaderRules
) -> RateLimitInfo | None:
    """The common response, read from what its header set was found to say; None when only
    :func:`_parse_general` can read it. The set is scanned once (:func:`_scan`) and
    remembered (:attr:`HeaderRules.plans`); what depends on the time is worked out here."""
    plans = rules.plans
    plan: _Plan | RateLimitInfo | None = plans.get(pairs, _UNSEEN)
    if plan is _UNSEEN:  # a set not seen (a provider's counts change on every response)
        if len(plans) >= _CACHE_MAX:
            plans.clear()
        plan = plans[pairs] = _scan(pairs, rules)
    if plan is None or isinstance(plan, RateLimitInfo):
        return plan
    limit, remaining, used, resource, reset, provider_now, evidence = plan
    if provider_now is None:
        skew = 0.0
    else:
        skew = _date_skew(provider_now, now_wall)
        if abs(skew) > MAX_CLOCK_SKEW:
            return None
        if skew:
            evidence = (*evidence, _skew_evidence(skew))
    if reset is None:
        return RateLimitInfo(None, None, limit, remaining, used, None, resource, (), (), evidence)
    source, text, number, absolute = reset
    delay = number - (now_wall + skew) if absolute else number
    if 0.0 < delay <= MAX_HINT_SECONDS:  # the common reset: the hint _clamp makes of it
        return RateLimitInfo(None, Hint(delay, source, text), limit, remaining, used, None,
                             resource, (), (), evidence)
    hint, note = _clamp(delay, source, text)
    if hint is None:
        return None
    if note is None:
        return RateLimitInfo(None, hint, limit, remaining, used, None, resource, (), (), evidence)
    return RateLimitInfo(None, hint, limit, remaining, used, None, resource, (note,), (),
                         (*evidence, _clamp_evidence(hint)) if hint.asked is not None else evidence)


def _scan(pairs: tuple[object, ...], rules: HeaderRules) -> _Plan | RateLimitInfo | None:
    """What normalised ``pairs`` say apart from the time, if :func:`_read_simple` can read them.

    It can when they hold at most one vendor quota family, each of its headers once, with
    plain integer counts and reset, an optional ``Date`` and anything else that is no
    rate-limit header: :func:`_parse_general` finds no notes or conflicts in them but a
    clamped reset. For anything else (a delay header, IETF fields, a malformed, repeated or
    unnormalised value...) None. Header names are classified once per :class:`HeaderRules`
    (:attr:`HeaderRules.roles`).
    """
    roles = rules.roles
    family: object = None
    found: list[Any] = [None, None, None, None, None]  # by kind: _LIMIT ... _RESET
    date_text: str | None = None
    evidence: list[tuple[str, str]] = []
    for pair in pairs:
        if type(pair) is not tuple:
            return None
        name, value = pair
        role = roles.get(name) or _remembered(roles, name, lambda: _role(rules, name))  # noqa: B023
        kind = role[0]
        if kind == _SKIP_KIND:
            continue
        if type(value) is not str or kind == _GENERAL_KIND:
            return None
        if kind == _DATE_KIND:
            if date_text is not None or len(value) > MAX_VALUE_CHARS or value != value.strip():
                return None
            date_text = value
        else:
            if role[1] != family:
                if family is not None:
                    return None  # a second family: the general reader combines them
                family = role[1]
            if found[kind] is not None:
                return None  # a header repeated
            if kind == _RESOURCE:
                if (not value or len(value) > MAX_VALUE_CHARS or "," in value
                        or value != value.strip()):
                    return None
                found[kind] = value
            elif value.isdigit() and value.isascii() and len(value) <= 18:
                found[kind] = int(value) if kind != _RESET else (name, value, role[2])
            else:
                return None
        evidence.append(pair)
    if family is None:
        return NO_RATE_LIMIT_INFO
    return _plan(rules, found, date_text, evidence)


def _plan(rules: HeaderRules, found: list[Any], date_text: str | None,
          evidence: list[tuple[str, str]]) -> _Plan | None:
    """The plan of a scanned header set (``found``: its limit, remaining, used, resource and
    reset header): its reset read as an epoch or a delay, the provider's clock when it is
    measured against; None when only the general reader reads it (remaining above the limit
    is a conflict it records)."""
    limit, remaining, used, resource, reset = found
    if limit is not None and remaining is not None and remaining > limit:
        return None
    provider_now: float | None = None
    if date_text is not None and rules.provider_clock:
        provider_now = _remembered(_DATES, date_text, lambda: _http_date(date_text))
        if provider_now is None:
            return None
    plain: _Reset | None = None
    if reset is not None:
        source, text, unit = reset
        number = float(text)
        if unit == "epoch" or (unit == "auto" and number >= EPOCH_THRESHOLD):
            plain = (source, text, number, True)
        elif unit == "rfc3339":
            return None
        else:
            plain = (source, text, number / 1000.0 if unit == "ms" else number, False)
    return limit, remaining, used, resource, plain, provider_now, tuple(evidence)


# ----------------------------------------------------------------- IETF structured fields


class _Token(str):
    """An sf-token bare item, told apart from an sf-string."""

    __slots__ = ()


class _Bytes(str):
    """An sf-binary bare item, still base64 (``pk``)."""

    __slots__ = ()


_Bare = bool | int | float | str
_Member = tuple[str | None, _Bare, dict[str, _Bare]]

_SF_KEY_RE = re.compile(r"[a-z*][a-z0-9_.*-]*")
_SF_INT_RE = re.compile(r"-?[0-9]{1,15}")
_SF_DECIMAL_RE = re.compile(r"-?[0-9]{1,12}\.[0-9]{1,3}")
_SF_TOKEN_RE = re.compile(r"[A-Za-z*][A-Za-z0-9:/!#$%&'*+.^_`|~-]*")
_SF_BYTES_RE = re.compile(r":[A-Za-z0-9+/=]*:")
_SF_DICT_START_RE = re.compile(r"\s*[a-z*][a-z0-9_.*-]*\s*=")


_SF_SIMPLE_STRING_RE = re.compile(r'"[^"\\]*"')


def _sf_split(text: str, sep: str) -> list[str] | None:
    """Split on ``sep`` outside double-quoted strings; None if a string is unterminated."""
    if '"' not in text:
        return text.split(sep)
    if "\\" not in text:  # the common case: plain quoted names, none holding ``sep``
        strings = _SF_SIMPLE_STRING_RE.findall(text)
        if text.count('"') == 2 * len(strings) and not any(sep in q for q in strings):
            return text.split(sep)
    parts: list[str] = []
    buf: list[str] = []
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == sep:
            parts.append("".join(buf))
            buf = []
            continue
        buf.append(ch)
    if in_string:
        return None
    parts.append("".join(buf))
    return parts


_SF_PLAIN_STRING_RE = re.compile(r'"([ !#-\[\]-~]*)"')


def _sf_string(text: str) -> str | None:
    plain = _SF_PLAIN_STRING_RE.fullmatch(text)  # no escapes: the usual policy name
    if plain is not None:
        return plain.group(1)
    if len(text) < 2 or not text.endswith('"'):
        return None
    out: list[str] = []
    escaped = False
    for ch in text[1:-1]:
        if escaped:
            if ch not in '"\\':
                return None
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == '"' or not " " <= ch <= "~":
            return None
        else:
            out.append(ch)
    return None if escaped else "".join(out)


def _sf_bare(text: str) -> _Bare | None:
    """One RFC 9651 bare item (no inner lists), or None if malformed."""
    if text.startswith('"'):
        return _sf_string(text)
    if text in ("?0", "?1"):
        return text == "?1"
    if _SF_INT_RE.fullmatch(text):
        return int(text)
    if _SF_DECIMAL_RE.fullmatch(text):
        return float(text)
    if _SF_BYTES_RE.fullmatch(text):
        return _Bytes(text)
    if _SF_TOKEN_RE.fullmatch(text):
        return _Token(text)
    return None


_SF_INT_PARAM_RE = re.compile(r"\s*([a-z*][a-z0-9_.*-]*)=(-?[0-9]{1,15})\s*")


def _sf_key_value(text: str) -> tuple[str, _Bare] | None:
    simple = _SF_INT_PARAM_RE.fullmatch(text)  # ``key=integer``: nearly every parameter
    if simple is not None:
        return simple.group(1), int(simple.group(2))
    key, eq, rest = text.strip().partition("=")
    key = key.strip()
    if _SF_KEY_RE.fullmatch(key) is None:
        return None
    value = _sf_bare(rest.strip()) if eq else True
    return None if value is None else (key, value)


def _sf_parse(text: str, *, dictionary: bool) -> list[_Member] | None:
    """A structured-field list (or dictionary) of items with parameters; None if malformed."""
    members = _sf_split(text, ",")
    if members is None:
        return None
    out: list[_Member] = []
    for member in members:
        parts = _sf_split(member.strip(), ";")
        if parts is None:
            return None
        key: str | None = None
        if dictionary:
            pair = _sf_key_value(parts[0])
            if pair is None:
                return None
            key, value = pair
        else:
            bare = _sf_bare(parts[0].strip())
            if bare is None:
                return None
            value = bare
        params: dict[str, _Bare] = {}
        for part in parts[1:]:
            param = _sf_key_value(part)
            if param is None:
                return None
            params[param[0]] = param[1]
        out.append((key, value, params))
    return out


def _sf_uint(value: _Bare | None) -> int | None:
    """A non-negative sf-integer, or None (booleans are not integers here)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _is_name(value: _Bare) -> bool:
    return isinstance(value, str) and not isinstance(value, _Bytes)


@dataclass(frozen=True)
class _Policy:
    name: str | None
    quota: int | None
    window: float | None


def _parse_policies(text: str) -> list[_Policy] | str:
    """``RateLimit-Policy`` items: old ``100;w=10`` or new ``"burst";q=100;w=60``; or a reason."""
    members = _sf_parse(text, dictionary=False)
    if members is None:
        return "malformed structured-field list"
    policies: list[_Policy] = []
    for _, value, params in members:
        window_param = params.get("w")
        window = _sf_uint(window_param)
        if window_param is not None and not window:
            return "w is not a positive integer"
        if "qu" in params and not isinstance(params["qu"], str):
            return "qu is not a string"
        if _is_name(value):
            quota = _sf_uint(params.get("q"))
            if quota is None:
                return "q is missing or not a non-negative integer"
            policies.append(_Policy(str(value), quota, float(window) if window else None))
        elif _sf_uint(value) is not None:
            policies.append(_Policy(None, _sf_uint(value), float(window) if window else None))
        else:
            return "a policy is neither a name nor a quota"
    return policies


def _policy_for(policies: list[_Policy], *, name: str | None, quota: int | None) -> _Policy | None:
    for policy in policies:
        if name is not None and policy.name == name:
            return policy
    if name is None:
        for policy in policies:
            if quota is not None and policy.quota == quota and policy.window is not None:
                return policy
        windowed = [policy for policy in policies if policy.window is not None]
        if windowed:
            return windowed[0]
    return policies[0] if len(policies) == 1 else None


def _ietf_list(reader: _Reader, members: list[_Member], policies: list[_Policy]) -> _Quota | str:
    """-08..-10 ``RateLimit: "name";r=50;t=30``: the most restrictive item, or a reason."""
    items: list[tuple[int, int | None, str]] = []
    for _, value, params in members:
        if not _is_name(value):
            return "an item is not a policy name"
        remaining = _sf_uint(params.get("r"))
        if remaining is None:
            return "r is missing or not a non-negative integer"
        if "t" in params and _sf_uint(params["t"]) is None:
            return "t is not a non-negative integer"
        items.append((remaining, _sf_uint(params.get("t")), str(value)))
    remaining, delay, name = min(items, key=lambda item: (item[0], -(item[1] or 0)))
    quota = _Quota(remaining=remaining, resource=name, limit_src="ratelimit-policy")
    quota.remaining_src = "ratelimit"
    if delay is not None:
        quota.reset = _clamp(float(delay), "ratelimit", reader.joined("ratelimit") or "")[0]
    policy = _policy_for(policies, name=name, quota=None)
    if policy is not None:
        quota.limit, quota.window = policy.quota, policy.window
    return quota


def _ietf_dict(reader: _Reader, members: list[_Member], policies: list[_Policy]) -> _Quota | str:
    """-07 ``RateLimit: limit=100, remaining=50, reset=5``, or a reason."""
    fields: dict[str, int] = {}
    for key, value, _ in members:
        if key in ("limit", "remaining", "reset"):
            number = _sf_uint(value)
            if number is None:
                return f"{key} is not a non-negative integer"
            fields[key] = number
    if not fields:
        return "no limit, remaining or reset member"
    quota = _Quota(
        limit=fields.get("limit"),
        remaining=fields.get("remaining"),
        limit_src="ratelimit",
        remaining_src="ratelimit",
    )
    if "reset" in fields:
        raw = reader.joined("ratelimit") or ""
        quota.reset = _clamp(float(fields["reset"]), "ratelimit", raw)[0]
    policy = _policy_for(policies, name=None, quota=quota.limit)
    if policy is not None:
        quota.window = policy.window
        if quota.limit is None:
            quota.limit, quota.limit_src = policy.quota, "ratelimit-policy"
    return quota


def _ietf_separate(reader: _Reader, policies: list[_Policy]) -> _Quota | None:
    """-01..-06 ``RateLimit-Limit`` / ``-Remaining`` / ``-Reset`` (reset = delta seconds)."""
    if not reader.has("ratelimit-limit", "ratelimit-remaining", "ratelimit-reset"):
        return None
    quota = _Quota(limit_src="ratelimit-limit", remaining_src="ratelimit-remaining")
    limit_text = reader.joined("ratelimit-limit")
    if limit_text is not None:
        members = _sf_parse(limit_text, dictionary=False)
        first = _sf_uint(members[0][1]) if members else None
        if members is None or first is None:
            reader.notes.append(_note("ratelimit-limit", limit_text, "malformed, ignored"))
        else:
            quota.limit = first
            windows = [_sf_uint(params.get("w")) for _, value, params in members if value == first]
            window = next((w for w in windows if w), None)
            quota.window = float(window) if window else None
    quota.remaining = reader.pick("ratelimit-remaining", _parse_count)
    quota.reset = reader.pick("ratelimit-reset", reader.parse_reset)
    if quota.window is None:
        policy = _policy_for(policies, name=None, quota=quota.limit)
        if policy is not None:
            quota.window = policy.window
    reader.check_limit(quota)
    return quota


def _ietf_quotas(reader: _Reader) -> list[_Quota]:
    policies: list[_Policy] = []
    policy_text = reader.joined("ratelimit-policy")
    if policy_text is not None:
        parsed = _parse_policies(policy_text)
        if isinstance(parsed, str):
            reader.notes.append(_note("ratelimit-policy", policy_text, f"{parsed}; ignored"))
        else:
            policies = parsed
    quotas: list[_Quota] = []
    separate = _ietf_separate(reader, policies)
    if separate is not None:
        quotas.append(separate)
    text = reader.joined("ratelimit")
    if text is None:
        return quotas
    dictionary = _SF_DICT_START_RE.match(text) is not None
    members = _sf_parse(text, dictionary=dictionary)
    found: _Quota | str
    if members is None:
        found = "malformed structured field"
    elif dictionary:
        found = _ietf_dict(reader, members, policies)
    else:
        found = _ietf_list(reader, members, policies)
    if isinstance(found, str):
        reader.notes.append(_note("ratelimit", text, f"{found}; ignored"))
    else:
        reader.check_limit(found)
        quotas.append(found)
    return quotas


def _combine(quotas: list[_Quota]) -> _Quota:
    """The most restrictive quota; see :func:`parse_rate_limit_headers`."""
    quotas = [quota for quota in quotas if quota.has_data()]
    if len(quotas) == 1:  # one family: it is the most restrictive (and latest) of itself
        return quotas[0]
    counted = [quota for quota in quotas if quota.remaining is not None]
    exhausted = [quota for quota in counted if quota.remaining == 0]
    binding: _Quota | None = None
    if exhausted:
        binding = max(exhausted, key=lambda q: q.reset.delay if q.reset else -1.0)
    elif counted:
        binding = min(counted, key=lambda q: q.remaining if q.remaining is not None else 0)
    ordered = ([binding] if binding is not None else []) + quotas

    def first(attr: str) -> object:
        return next((getattr(q, attr) for q in ordered if getattr(q, attr) is not None), None)

    reset = _latest(q.reset for q in exhausted) or _latest(q.reset for q in quotas)
    return _Quota(
        limit=cast("int | None", first("limit")),
        remaining=binding.remaining if binding is not None else None,
        used=cast("int | None", first("used")),
        reset=reset,
        window=cast("float | None", first("window")),
        resource=cast("str | None", first("resource")),
    )


def _check_agreement(reader: _Reader, retry_after: Hint, reset: Hint) -> None:
    a, b = retry_after.delay, reset.delay
    if abs(a - b) > max(1.0, 0.1 * max(a, b)):
        reader.conflicts.append(
            Conflict(
                (retry_after.source, reset.source),
                f"{retry_after.source} says {_fmt(a)}s, {reset.source} says {_fmt(b)}s",
            )
        )
