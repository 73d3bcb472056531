"""Observations and their classification by a provider profile.

An attempt produces one :data:`Observation`: a response the provider sent
(:class:`ResponseSeen`) or a failure to get one (:class:`FailureSeen`).
:func:`classify` turns it into a :class:`Classified` using the profile in force,
following each provider's published documentation.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache

from ._values import fast_init
from .headers import (
    MAX_HINT_SECONDS,
    NO_RATE_LIMIT_INFO,
    HeaderInput,
    Hint,
    RateLimitInfo,
    normalize_headers,
    parse_duration,
    parse_rate_limit_headers,
)
from .profiles import BODY_LIMIT, SCOPES, BodySignal, Profile

__all__ = [
    "Classified",
    "FailureKind",
    "FailureSeen",
    "Kind",
    "Observation",
    "ResponseSeen",
    "classify",
    "ok_unread",
]

MESSAGE_LIMIT = BODY_LIMIT
"""How much of a provider's body the classifier may read (each profile reads at most its
``body_limit`` of it)."""


class Kind(str, enum.Enum):
    """What an observation means for retrying."""

    OK = "ok"
    NOT_FOUND = "not_found"
    REJECTED = "rejected"
    RATE_LIMITED = "rate_limited"
    TRANSIENT = "transient"
    UNEXPECTED = "unexpected"
    INVALID_PAYLOAD = "invalid_payload"

    def __str__(self) -> str:
        return self.value


class FailureKind(str, enum.Enum):
    """Ways an attempt can fail to produce a response."""

    CONNECT = "connect"
    """The connection was never made: the request was not sent (safe to retry for any method)."""
    TIMEOUT = "timeout"
    """No answer in time: the request may have reached the provider."""
    NETWORK = "network"
    """The connection broke after the request may have been sent."""
    PROTOCOL = "protocol"
    """The provider answered with something that is not valid HTTP."""
    ERROR = "error"
    """The call raised an error that is not a network failure: unexpected, never retried."""

    def __str__(self) -> str:
        return self.value


@fast_init
@dataclass(frozen=True, slots=True)
class ResponseSeen:
    """A response the provider sent.

    Attributes:
        status: the HTTP status code.
        headers: the response headers (a mapping or ``(name, value)`` pairs).
        message: the provider's error message or body text (only read for classification).
        payload_error: why a 2xx payload failed validation; empty when it passed.
        method: the request method the response answered, when the reader knows it (an
            exception that carries its request): the decision uses it when the operation's
            own request named none.
    """

    status: int
    headers: tuple[tuple[str, str], ...] = ()
    message: str = field(default="", repr=False)
    payload_error: str = ""
    method: str | None = None

    @classmethod
    def of(
        cls,
        status: int,
        headers: HeaderInput | None = None,
        *,
        message: str = "",
        payload_error: str = "",
        method: str | None = None,
    ) -> ResponseSeen:
        """Build one from any header container; the message is truncated to what is read."""
        return cls(
            status=int(status),
            headers=normalize_headers(headers or ()),
            message=message[:MESSAGE_LIMIT],
            payload_error=payload_error,
            method=method,
        )


@fast_init
@dataclass(frozen=True, slots=True)
class FailureSeen:
    """An attempt that got no usable response.

    Attributes:
        kind: what went wrong.
        error: the exception's class name (never its message, which may hold secrets).
        method: the request method, when the exception carried its request (as for
            :attr:`ResponseSeen.method`).
    """

    kind: FailureKind
    error: str
    method: str | None = None

    @property
    def sent(self) -> bool:
        """Whether the request may have reached the provider."""
        return self.kind is not FailureKind.CONNECT


Observation = ResponseSeen | FailureSeen
"""What one attempt produced."""


@fast_init
@dataclass(frozen=True, slots=True)
class Classified:
    """An observation read through a profile.

    Attributes:
        kind: what it means for retrying.
        detail: a short human reason (no secrets: never the provider's message).
        status: the HTTP status, or None for a failure.
        rate: what the rate-limit headers said.
        scope: for rate limits, the scope the provider named (``"global"``, ``"shared"``,
            ``"user"``: Discord's), else ``"primary"`` (quota exhausted), ``"secondary"`` or
            ``""``.
        sent: whether the request may have reached the provider.
        failure: the failure kind, for failures.
        conflicts: disagreeing evidence, for review.
    """

    kind: Kind
    detail: str
    status: int | None = None
    rate: RateLimitInfo = NO_RATE_LIMIT_INFO
    scope: str = ""
    sent: bool = True
    failure: FailureKind | None = None
    conflicts: tuple[str, ...] = ()

    @property
    def hint(self) -> Hint | None:
        """The earliest time the provider named for the next attempt, if any.

        A Retry-After (or the profile's delay header, or a delay in the body) always counts.
        A quota reset is a reason to wait only when the quota is spent (remaining 0) or the
        response is a rate limit whose remaining is not given: GitHub sends its hourly reset
        on every response, and a 503 with 4999 requests left is no reason to wait an hour.
        """
        rate = self.rate
        if rate.retry_after is not None:
            return rate.retry_after
        if rate.reset is not None and (
            rate.remaining == 0 or (self.kind is Kind.RATE_LIMITED and rate.remaining is None)
        ):
            return rate.reset
        return None


@lru_cache(maxsize=64)
def _pattern(source: str) -> re.Pattern[str]:
    return re.compile(source, re.IGNORECASE)


def _matches(patterns: Iterable[str], message: str) -> bool:
    return bool(message) and any(_pattern(p).search(message) for p in patterns)


OK_DETAIL = "ok"
"""The detail of a 2xx read as ``ok``: the same whatever its headers (conflicting evidence
is recorded in ``conflicts``), so a success is known ok before its headers are read."""

_PLAIN_OK = {status: Classified(Kind.OK, OK_DETAIL, status) for status in range(200, 300)}
"""The classification of a header-less 2xx, per status: frozen values, made once."""


def ok_unread(profile: Profile) -> bool:
    """Whether every 2xx whose body nobody reads classifies as ``ok`` under ``profile``, with
    :data:`OK_DETAIL` whatever its headers (they add only evidence): the profile names no 2xx
    among its failure statuses. The first-attempt fast path then knows such a success ok
    before it reads the headers."""
    failures = (profile.rate_limited | profile.conditional_rate_limited | profile.not_found
                | profile.rejected | profile.transient)
    return not any(200 <= status < 300 for status in failures)


def classify(profile: Profile, observation: Observation, now_wall: float) -> Classified:
    """Classify one observation by ``profile``.

    Args:
        profile: the provider profile in force.
        observation: what the attempt produced.
        now_wall: wall-clock epoch seconds when it was received (to read reset timestamps).

    Returns:
        The classification; never raises on provider input.
    """
    if isinstance(observation, FailureSeen):
        if observation.kind is FailureKind.ERROR:
            return Classified(
                Kind.UNEXPECTED,
                f"the call raised {observation.error}",
                sent=True,
                failure=observation.kind,
            )
        if observation.kind is FailureKind.PROTOCOL:
            return Classified(
                Kind.INVALID_PAYLOAD,
                f"protocol error ({observation.error})",
                sent=True,
                failure=observation.kind,
            )
        return Classified(
            Kind.TRANSIENT,
            f"{observation.kind.value} failure ({observation.error})",
            sent=observation.sent,
            failure=observation.kind,
        )

    profile = profile.resolve(None) if profile.routes else profile
    status = observation.status
    headers = observation.headers
    rate = (parse_rate_limit_headers(headers, now_wall, profile.header_rules) if headers
            else NO_RATE_LIMIT_INFO)
    message = observation.message[: profile.body_limit] if observation.message else ""
    signals = _signals(profile, status, message) if message and profile.body_signals else ()
    if (200 <= status < 300 and not observation.payload_error and not rate.conflicts
            and not signals and not (message and profile.graphql_cost)):
        if rate is NO_RATE_LIMIT_INFO:
            return _PLAIN_OK[status]
        return Classified(Kind.OK, OK_DETAIL, status, rate)
    rate = _with_body(profile, rate, headers, signals, message)
    kind, detail, scope, extra = _read_status(profile, observation, status, rate, message, signals)
    if kind is Kind.RATE_LIMITED and (profile.scope_headers or signals):
        scope = _named_scope(profile, headers, signals) or scope
    if profile.retry_hint_headers and not 200 <= status < 300:
        kind, detail = _retry_hint(profile, headers, status, kind, detail)
    conflicts = tuple(f"{'+'.join(c.fields)}: {c.detail}" for c in rate.conflicts) + extra
    return Classified(kind, detail, status, rate, scope, True, None, conflicts)


def _signals(profile: Profile, status: int, message: str) -> tuple[BodySignal, ...]:
    """The profile's body signals for ``status`` that the (bounded) body matches."""
    return tuple(s for s in profile.body_signals
                 if status in s.statuses and _pattern(s.pattern).search(message))


_FIELD_RE = re.compile(r'"([A-Za-z_]+)"')
_SIGNAL_KINDS = {"rate_limited": Kind.RATE_LIMITED, "rejected": Kind.REJECTED,
                 "transient": Kind.TRANSIENT}
_UNITS = {"seconds": 1.0, "ms": 1000.0}


def _body_delay(signal: BodySignal, message: str) -> Hint | None:
    match = _pattern(signal.delay).search(message)
    if match is None:
        return None
    raw = match.group(1)
    if signal.unit == "duration":
        seconds = parse_duration(raw)
    else:
        try:
            seconds = float(raw) / _UNITS[signal.unit]
        except ValueError:
            seconds = None
    if seconds is None or not 0 <= seconds <= 7 * 24 * 3600:
        return None
    named = _FIELD_RE.search(signal.delay)
    return Hint(seconds, f"body:{named.group(1) if named else 'delay'}", raw[:200])


def _with_body(
    profile: Profile,
    rate: RateLimitInfo,
    headers: tuple[tuple[str, str], ...],
    signals: tuple[BodySignal, ...],
    message: str,
) -> RateLimitInfo:
    """The header reading plus what the body and the profile's bucket headers add."""
    changes: dict[str, object] = {}
    if rate.retry_after is None:
        for signal in signals:
            if signal.delay:
                hint = _body_delay(signal, message)
                if hint is not None:
                    changes["retry_after"] = hint
                    break
    for name in profile.bucket_headers:
        value = next((v for n, v in headers if n == name and v), None)
        if value is not None:
            changes["resource"] = value[:200]
            break
    if profile.graphql_cost and message:
        throttled = any(s.kind == "rate_limited" for s in signals)
        for field_name, read in _graphql_cost(message, throttled).items():
            if getattr(rate, field_name) is None and field_name not in changes:
                changes[field_name] = read
    return dataclasses.replace(rate, **changes) if changes else rate  # type: ignore[arg-type]


def _named_scope(
    profile: Profile, headers: tuple[tuple[str, str], ...], signals: tuple[BodySignal, ...]
) -> str:
    """The scope the provider named for a rate limit (``global``, ``shared``, ``user``), or "".

    A scope header names it (``X-RateLimit-Scope: shared``) or flags the global limit
    (``X-RateLimit-Global: true``); a ``global`` body signal says the limit is global.
    """
    for name in profile.scope_headers:
        value = next((v.strip().lower() for n, v in headers if n == name), "")
        if value in SCOPES:
            return value
        if value == "true":
            return "global"
    return "global" if any(s.kind == "global" for s in signals) else ""


_COST_FIELDS = ("requestedQueryCost", "maximumAvailable", "currentlyAvailable", "restoreRate")
_COST_RE = {name: re.compile(rf'"{name}"\s*:\s*([0-9]{{1,12}}(?:\.[0-9]{{1,20}})?(?:[eE][-+]?[0-9]{{1,3}})?)')
            for name in _COST_FIELDS}


def _graphql_cost(message: str, throttled: bool) -> dict[str, object]:
    """What a GraphQL ``extensions.cost`` says (Shopify): the points left and the maximum as
    the remaining quota and its limit, the time to restore all points as the reset, and for a
    throttled query the time until its requested cost is restored as the retry-after.

    Read by pattern from the bounded body (a truncated or non-JSON body is no error): a field
    missing, or a restore rate of 0, leaves what it would give unread.
    """
    found: dict[str, float] = {}
    for name, pattern in _COST_RE.items():
        match = pattern.search(message)
        if match is not None:
            found[name] = float(match.group(1))
    available, maximum = found.get("currentlyAvailable"), found.get("maximumAvailable")
    rate = found.get("restoreRate", 0.0)
    out: dict[str, object] = {}
    if available is None:
        return out
    out["remaining"] = int(available)
    if maximum is not None and maximum >= available:
        out["limit"] = int(maximum)
        if rate > 0 and (maximum - available) / rate <= MAX_HINT_SECONDS:
            full = (maximum - available) / rate
            out["reset"] = Hint(full, "body:throttleStatus", f"{maximum - available:g}/{rate:g}")
    requested = found.get("requestedQueryCost")
    if (throttled and requested is not None and rate > 0
            and (requested - available) / rate <= MAX_HINT_SECONDS):
        wait = max(requested - available, 0.0) / rate
        out["retry_after"] = Hint(wait, "body:requestedQueryCost",
                                  f"{max(requested - available, 0.0):g}/{rate:g}")
    return out


def _retry_hint(
    profile: Profile, headers: tuple[tuple[str, str], ...], status: int, kind: Kind, detail: str
) -> tuple[Kind, str]:
    """The provider's own retry hint (``x-should-retry: true|false``) overrides both ways."""
    for name in profile.retry_hint_headers:
        value = next((v.strip().lower() for n, v in headers if n == name), None)
        if value == "false" and kind in (Kind.TRANSIENT, Kind.RATE_LIMITED, Kind.UNEXPECTED):
            return Kind.REJECTED, f"{status}: the provider says not to retry ({name}: false)"
        if value == "true" and kind in (Kind.REJECTED, Kind.UNEXPECTED, Kind.NOT_FOUND):
            return Kind.TRANSIENT, f"{status}: the provider says to retry ({name}: true)"
        if value in ("true", "false"):
            return kind, detail
    return kind, detail


def _read_status(
    profile: Profile,
    observation: ResponseSeen,
    status: int,
    rate: RateLimitInfo,
    message: str,
    signals: tuple[BodySignal, ...],
) -> tuple[Kind, str, str, tuple[str, ...]]:
    """The profile's table, in order: ``(kind, detail, scope, extra conflicts)``."""
    if status < 100 or status > 599:
        return Kind.INVALID_PAYLOAD, f"status {status} is not an HTTP status", "", ()
    if _matches(profile.quota_patterns, message):
        return Kind.REJECTED, f"{status}: quota or billing limit, not fixed by waiting", "", ()
    for signal in signals:
        signalled = _SIGNAL_KINDS.get(signal.kind)
        if signalled is Kind.RATE_LIMITED:
            scope = "primary" if rate.exhausted else "secondary"
            return signalled, f"{status}: rate limited (the body says so)", scope, ()
        if signalled is not None:
            return signalled, f"{status}: {signalled.value} (the body says so)", "", ()
    if status in profile.rate_limited:
        scope = "primary" if rate.exhausted else _secondary(profile, message, rate)
        return Kind.RATE_LIMITED, f"{status}: rate limited", scope, ()
    if status in profile.conditional_rate_limited:
        if rate.exhausted:
            extra: tuple[str, ...] = ()
            if message and _matches(profile.permission_patterns, message):
                extra = (
                    f"status+x-ratelimit-remaining+message: {status} with remaining 0 "
                    "and a permission message",
                )
            return Kind.RATE_LIMITED, f"{status}: primary rate limit (remaining 0)", "primary", extra
        if rate.retry_after is not None or _matches(profile.secondary_patterns, message):
            return Kind.RATE_LIMITED, f"{status}: secondary rate limit", "secondary", ()
    if status in profile.not_found:
        return Kind.NOT_FOUND, f"{status}: reachable, record missing", "", ()
    if status in profile.rejected:
        return Kind.REJECTED, f"{status}: rejected by the provider", "", ()
    if status in profile.transient:
        return Kind.TRANSIENT, f"{status}: transient provider failure", "", ()
    if 200 <= status < 300:
        if observation.payload_error:
            detail = f"{status}: invalid payload ({observation.payload_error})"
            return Kind.INVALID_PAYLOAD, detail, "", ()
        return Kind.OK, OK_DETAIL, "", ()
    if status in profile.ok:
        return Kind.OK, f"{status}: ok", "", ()
    return Kind.UNEXPECTED, f"{status}: outside the {profile.name} contract", "", ()


def _secondary(profile: Profile, message: str, rate: RateLimitInfo) -> str:
    if _matches(profile.secondary_patterns, message) or rate.retry_after is not None:
        return "secondary"
    return ""

