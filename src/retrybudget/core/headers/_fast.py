"""The fast reader: a common header set, scanned once per rules and read from its plan."""

from __future__ import annotations

from typing import Any

from .._dialect import HeaderRules
from ._families import _VENDOR_FAMILIES
from ._model import (
    _RELEVANT_PREFIXES,
    EPOCH_THRESHOLD,
    MAX_CLOCK_SKEW,
    MAX_HINT_SECONDS,
    MAX_VALUE_CHARS,
    NO_RATE_LIMIT_INFO,
    Hint,
    RateLimitInfo,
)
from ._parsers import (
    _CACHE_MAX,
    _UNSEEN,
    _clamp,
    _clamp_evidence,
    _date_skew,
    _http_date,
    _remembered,
    _skew_evidence,
)

_LIMIT, _REMAINING, _USED, _RESOURCE, _RESET, _DATE_KIND, _SKIP_KIND, _GENERAL_KIND = range(8)
"""What a header name is to the fast reader (a role's first item): a quota family's limit,
remaining or used count (the three below ``_RESOURCE``), its resource or its reset; the
``Date``; nothing to the reader; or a header only the general reader reads."""
_SKIP: tuple[Any, ...] = (_SKIP_KIND, None)
"""The role of a header name that is nothing to the rate-limit reader."""
_GENERAL: tuple[Any, ...] = (_GENERAL_KIND, None)
"""The role of a header name only the general reader reads (delays, IETF, Shopify, odd names)."""
_DATE: tuple[Any, ...] = (_DATE_KIND, None)


_DATES: dict[str, float | None] = {}
"""``Date`` values already read (a provider sends one per second): the epoch each names."""


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
    if not (name.startswith(_RELEVANT_PREFIXES) or name.startswith(rules.relevant)):  # noqa: PIE810 - two tuples
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
