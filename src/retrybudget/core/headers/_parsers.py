"""One header value at a time: delays, resets, counts, durations, dates; total functions."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import date
from email.utils import parsedate_tz
from typing import TypeVar, cast

from ._model import (
    CLAMP_EVIDENCE,
    DATE_RESOLUTION,
    EPOCH_THRESHOLD,
    EVIDENCE_HEADERS,
    EVIDENCE_PREFIXES,
    MAX_HINT_SECONDS,
    MAX_VALUE_CHARS,
    SKEW_EVIDENCE,
    HeaderInput,
    HeaderNote,
    Hint,
)


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


_CACHE_MAX = 256
"""Header names (and header sets) one :class:`HeaderRules` remembers; past it, it starts over."""


_UNSEEN = object()


def _remembered(cache: dict[_K, _V], key: _K, make: Callable[[], _V]) -> _V:
    """``cache[key]``, made by ``make()`` when missing; the cache starts over when full."""
    found = cache.get(key, _UNSEEN)
    if found is _UNSEEN:
        if len(cache) >= _CACHE_MAX:
            cache.clear()
        found = cache[key] = make()
    return cast("_V", found)
