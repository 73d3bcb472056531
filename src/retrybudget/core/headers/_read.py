"""Reading one response's headers: the entry, the general reader, the clock skew, the verdict."""

from __future__ import annotations

import math
from typing import cast

from .._dialect import DEFAULT_HEADER_RULES, HeaderRules
from ._families import _ietf_quotas, _vendor_quotas
from ._fast import _read_simple
from ._model import (
    _DERIVED,
    _RELEVANT_PREFIXES,
    MAX_CLOCK_SKEW,
    MAX_VALUE_CHARS,
    NO_RATE_LIMIT_INFO,
    Conflict,
    HeaderInput,
    Hint,
    RateLimitInfo,
)
from ._parsers import (
    _clamp_evidence,
    _date_skew,
    _fmt,
    _http_date,
    _is_evidence,
    _note,
    _skew_evidence,
    normalize_headers,
)
from ._reader import _latest, _Quota, _Reader


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
    relevant = rules.relevant
    if not any(name.startswith(_RELEVANT_PREFIXES) or name.startswith(relevant)  # noqa: PIE810 - two tuples
               for name, _ in pairs):
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
