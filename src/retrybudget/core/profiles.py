"""Provider profiles: how each provider signals rate limits and failures, as data.

A :class:`Profile` is a frozen value. Derive your own from an existing one with
:meth:`Profile.derive` instead of touching internals::

    internal = GENERIC.derive("internal", transient=GENERIC.transient | {500})

The figures come from each provider's published documentation and the
behaviour of its official SDK.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "ANTHROPIC",
    "DISCORD",
    "GENERIC",
    "GITHUB",
    "OPENAI",
    "PROFILES",
    "SLACK",
    "STRIPE",
    "Profile",
    "get_profile",
]


def _statuses(values: Iterable[int]) -> frozenset[int]:
    out = frozenset(int(v) for v in values)
    for v in out:
        if not 100 <= v <= 599:
            raise ValueError(f"{v} is not an HTTP status code")
    return out


@dataclass(frozen=True, slots=True)
class Profile:
    """How one provider's responses are classified.

    Status sets are checked in this order: quota messages, ``rate_limited``,
    ``conditional_rate_limited`` (a rate limit only with evidence), ``not_found``,
    ``rejected``, ``transient``, then any 2xx (or a status in ``ok``) is ok and every other
    status is unexpected.

    Attributes:
        name: the profile's name.
        rate_limited: statuses that always mean a rate limit.
        conditional_rate_limited: statuses that are a rate limit only with evidence (remaining 0,
            a Retry-After, or a secondary-limit message), and otherwise fall through.
        not_found: statuses meaning a reachable, missing record.
        rejected: statuses meaning the provider rejected the request (not retried).
        transient: statuses retried while budget remains.
        secondary_patterns: regular expressions on the error message that mark a secondary limit.
        permission_patterns: messages that read as a permission error (flagged when they
            contradict rate-limit headers).
        quota_patterns: messages meaning a quota or billing limit that waiting cannot fix.
        rate_limit_floor: seconds to wait for a rate limit that names no time, doubled on each
            repeat by ``rate_limit_multiplier``.
        rate_limit_multiplier: growth of the no-hint rate-limit wait.
        reset_slack: seconds added after a reset time, so the retry lands after the reset.
        transient_hints: whether a Retry-After on a transient status (503) is honoured.
        ok: statuses besides 2xx that end an operation as ok, unvalidated (the HTTP
            integrations add 3xx: the client above them follows redirects).
    """

    name: str
    rate_limited: frozenset[int] = frozenset({429})
    conditional_rate_limited: frozenset[int] = frozenset()
    not_found: frozenset[int] = frozenset({404})
    rejected: frozenset[int] = frozenset({400, 401, 403})
    transient: frozenset[int] = frozenset({502, 503, 504})
    secondary_patterns: tuple[str, ...] = ()
    permission_patterns: tuple[str, ...] = ()
    quota_patterns: tuple[str, ...] = ()
    rate_limit_floor: float = 1.0
    rate_limit_multiplier: float = 2.0
    reset_slack: float = 0.0
    transient_hints: bool = True
    ok: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("a profile needs a non-empty name")
        for f in ("rate_limited", "conditional_rate_limited", "not_found", "rejected", "transient",
                  "ok"):
            object.__setattr__(self, f, _statuses(getattr(self, f)))
        for f in ("secondary_patterns", "permission_patterns", "quota_patterns"):
            patterns = tuple(getattr(self, f))
            try:
                for p in patterns:
                    re.compile(p)
            except re.error as exc:
                raise ValueError(f"{f}: invalid pattern: {exc}") from exc
            object.__setattr__(self, f, patterns)
        for f in ("rate_limit_floor", "reset_slack"):
            v = float(getattr(self, f))
            if not 0 <= v <= 3600:
                raise ValueError(f"{f} must be between 0 and 3600 seconds, got {v}")
            object.__setattr__(self, f, v)
        if not 1.0 <= float(self.rate_limit_multiplier) <= 10.0:
            raise ValueError("rate_limit_multiplier must be between 1 and 10")

    def derive(self, name: str, **changes: object) -> Profile:
        """A new profile based on this one, with ``changes`` applied (validated again)."""
        return dataclasses.replace(self, name=name, **changes)  # type: ignore[arg-type]


GENERIC = Profile("generic")
"""The default contract: 429 rate limit; 502/503/504 transient; 400/401/403 rejected; 404 not found."""

GITHUB = Profile(
    "github",
    rate_limited=frozenset({429}),
    conditional_rate_limited=frozenset({403}),
    secondary_patterns=(r"\bsecondary rate\b",),
    permission_patterns=(r"not accessible", r"permission", r"forbidden", r"must have"),
    rate_limit_floor=60.0,
    rate_limit_multiplier=2.0,
    reset_slack=1.0,
)
"""GitHub REST: 403/429 with remaining 0 is the primary limit (wait for the reset, plus 1 s);
403/429 with Retry-After or a "secondary rate limit" message is a secondary limit (Retry-After,
else at least 60 s, doubling); any other 403 is a permission rejection."""

OPENAI = Profile(
    "openai",
    transient=frozenset({408, 409, 500, 502, 503, 504}),
    quota_patterns=(r"insufficient_quota", r"exceeded your current quota"),
)
"""OpenAI: 429 rate limit (but ``insufficient_quota`` is billing: rejected); 408/409/5xx retried."""

ANTHROPIC = Profile(
    "anthropic",
    transient=frozenset({408, 409, 500, 502, 503, 504, 529}),
    quota_patterns=(r"enforced_spend_limit_reached",),
)
"""Anthropic: 429 ``rate_limit_error``; 529 ``overloaded_error`` is transient; spend caps rejected."""

SLACK = Profile("slack", transient=frozenset({500, 502, 503, 504}))
"""Slack Web API: 429 with Retry-After in seconds."""

DISCORD = Profile("discord")
"""Discord: 429 with Retry-After and ``X-RateLimit-Reset-After``; 401/403 rejected (they count
toward Discord's invalid-request ban, so they are never retried)."""

STRIPE = Profile("stripe", transient=frozenset({409, 500, 502, 503, 504}))
"""Stripe: 429 (rate, concurrency and lock timeouts); 409 and 5xx retried (stripe-python)."""

PROFILES: dict[str, Profile] = {
    p.name: p for p in (GENERIC, GITHUB, OPENAI, ANTHROPIC, SLACK, DISCORD, STRIPE)
}
"""The built-in profiles by name."""


def get_profile(name: str | Profile) -> Profile:
    """Look a built-in profile up by name (a :class:`Profile` is returned as it is).

    Raises:
        ValueError: for an unknown name, listing the known ones.
    """
    if isinstance(name, Profile):
        return name
    try:
        return PROFILES[name]
    except (KeyError, TypeError):
        known = ", ".join(sorted(PROFILES))
        raise ValueError(f"unknown provider profile {name!r} (known: {known})") from None
