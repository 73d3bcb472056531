"""Policies: frozen values that say how an operation may spend its budget.

Units are normalised at the edge: every duration accepts ``float`` seconds or a
:class:`datetime.timedelta` and is stored as float seconds. Derive variants with
:meth:`Policy.replace` (never copy field lists by hand).
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import Any

from .profiles import GENERIC, Profile, get_profile

__all__ = [
    "PRESETS",
    "SAFE_METHODS",
    "Backoff",
    "Jitter",
    "Policy",
    "PolicyError",
    "RateLimitMode",
    "Validator",
    "background",
    "interactive",
]

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods retried by default: they do not change the provider's state."""

Validator = Callable[[Any], object]
"""A payload check: return False, or raise, to reject a 2xx payload as invalid."""

Duration = float | int | timedelta


class PolicyError(ValueError):
    """A policy (or profile) was given values it cannot work with."""


class RateLimitMode(str, enum.Enum):
    """What to do when the provider throttles."""

    WAIT = "wait"
    """Wait until the provider's time if it fits in the remaining budget, else stop now."""
    FAIL_FAST = "fail_fast"
    """Stop at once with ``rate_limited`` and ``retry_at``, whatever Retry-After says."""

    def __str__(self) -> str:
        return self.value


class Jitter(str, enum.Enum):
    """How backoff delays are randomised (a random source is always injected)."""

    NONE = "none"
    """Exactly ``base * multiplier ** n``, capped."""
    FULL = "full"
    """Uniform between 0 and the capped exponential delay (AWS "full jitter")."""
    EQUAL = "equal"
    """Half the capped delay plus a uniform share of the other half."""

    def __str__(self) -> str:
        return self.value


def seconds(value: Duration | None, name: str, *, allow_none: bool = False) -> float | None:
    """Normalise a duration to float seconds, refusing negative, NaN and infinite values."""
    if value is None:
        if allow_none:
            return None
        raise PolicyError(f"{name} is required")
    if isinstance(value, timedelta):
        out = value.total_seconds()
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PolicyError(f"{name} must be seconds (float) or a timedelta, got {type(value).__name__}")
    else:
        out = float(value)
    if math.isnan(out) or math.isinf(out) or out < 0:
        raise PolicyError(f"{name} must be a finite, non-negative duration, got {value!r}")
    return out


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff between transient failures.

    The n-th retry (n = 0 for the first) waits ``min(cap, base * multiplier ** n)``,
    then jitter is applied with a uniform sample drawn once by the driver.

    Attributes:
        base: the first delay, in seconds.
        cap: the largest delay, in seconds.
        multiplier: growth per retry.
        jitter: how the delay is randomised.
    """

    base: float = 0.1
    cap: float = 5.0
    multiplier: float = 2.0
    jitter: Jitter = Jitter.FULL

    def __post_init__(self) -> None:
        object.__setattr__(self, "base", seconds(self.base, "backoff.base"))
        object.__setattr__(self, "cap", seconds(self.cap, "backoff.cap"))
        if isinstance(self.multiplier, bool) or not isinstance(self.multiplier, (int, float)):
            raise PolicyError("backoff.multiplier must be a number")
        if not 1.0 <= float(self.multiplier) <= 100.0:
            raise PolicyError("backoff.multiplier must be between 1 and 100")
        object.__setattr__(self, "multiplier", float(self.multiplier))
        try:
            object.__setattr__(self, "jitter", Jitter(self.jitter))
        except ValueError:
            raise PolicyError(f"unknown jitter {self.jitter!r}") from None

    def delay(self, retry: int, sample: float) -> float:
        """The delay before retry number ``retry`` (0-based), given a uniform ``sample`` in [0, 1)."""
        exponent = min(max(retry, 0), 64)
        raw = min(self.cap, self.base * self.multiplier**exponent)
        u = min(max(sample, 0.0), 1.0)
        if self.jitter is Jitter.FULL:
            return raw * u
        if self.jitter is Jitter.EQUAL:
            return raw / 2 + (raw / 2) * u
        return raw


def _methods(values: Iterable[str], name: str) -> frozenset[str]:
    if isinstance(values, str):
        raise PolicyError(f"{name} must be a collection of method names, not one string")
    out = frozenset(str(m).upper() for m in values)
    for m in out:
        if not m.isalpha():
            raise PolicyError(f"{name}: {m!r} is not an HTTP method")
    return out


@dataclass(frozen=True, slots=True)
class Policy:
    """How one logical operation may spend its budget.

    Attributes:
        name: shown in stats and audit records.
        max_attempts: outbound attempts at most (default 3, from 1 to 100).
        deadline: the end-to-end budget in seconds for the whole operation, waits included;
            None means bounded by attempts alone (not recommended).
        backoff: delays between transient failures.
        rate_limit: ``wait`` (background) or ``fail_fast`` (interactive).
        max_server_wait: the longest single wait a provider may ask for; a longer one stops the
            operation at once with ``rate_limited`` and ``retry_at``. None: the deadline decides.
        min_attempt_time: a wait is only taken if at least this much of the deadline remains
            after it for the next attempt.
        attempt_timeout: a cap on each attempt's timeout (always clipped to what is left).
        idempotent_methods: methods retried automatically (GET/HEAD/OPTIONS by default; add PUT
            or DELETE only where they are idempotent for this provider).
        retry_writes_with_key: retry other methods when the request carries an idempotency key.
        profile: the provider profile that classifies responses.
        validator: a payload check for 2xx responses (False or an exception: invalid payload).
    """

    name: str = "default"
    max_attempts: int = 3
    deadline: float | None = 10.0
    backoff: Backoff = field(default_factory=Backoff)
    rate_limit: RateLimitMode = RateLimitMode.WAIT
    max_server_wait: float | None = None
    min_attempt_time: float = 0.01
    attempt_timeout: float | None = None
    idempotent_methods: frozenset[str] = SAFE_METHODS
    retry_writes_with_key: bool = False
    profile: Profile = GENERIC
    validator: Validator | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise PolicyError("a policy needs a non-empty name")
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int):
            raise PolicyError("max_attempts must be an integer")
        if not 1 <= self.max_attempts <= 100:
            raise PolicyError(f"max_attempts must be between 1 and 100, got {self.max_attempts}")
        object.__setattr__(self, "deadline", seconds(self.deadline, "deadline", allow_none=True))
        if self.deadline is not None and self.deadline <= 0:
            raise PolicyError("deadline must be positive")
        object.__setattr__(
            self, "max_server_wait", seconds(self.max_server_wait, "max_server_wait", allow_none=True)
        )
        object.__setattr__(self, "min_attempt_time", seconds(self.min_attempt_time, "min_attempt_time"))
        object.__setattr__(
            self, "attempt_timeout", seconds(self.attempt_timeout, "attempt_timeout", allow_none=True)
        )
        if not isinstance(self.backoff, Backoff):
            raise PolicyError("backoff must be a Backoff")
        try:
            object.__setattr__(self, "rate_limit", RateLimitMode(self.rate_limit))
        except ValueError:
            raise PolicyError(
                f"rate_limit must be 'wait' or 'fail_fast', got {self.rate_limit!r}"
            ) from None
        object.__setattr__(
            self, "idempotent_methods", _methods(self.idempotent_methods, "idempotent_methods")
        )
        if not isinstance(self.retry_writes_with_key, bool):
            raise PolicyError("retry_writes_with_key must be a bool")
        try:
            object.__setattr__(self, "profile", get_profile(self.profile))
        except ValueError as exc:
            raise PolicyError(str(exc)) from None
        if self.validator is not None and not callable(self.validator):
            raise PolicyError("validator must be callable")

    def replace(self, **changes: Any) -> Policy:
        """A copy with ``changes`` applied and validated (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)

    def may_retry(self, method: str | None, *, has_idempotency_key: bool, sent: bool) -> bool:
        """Whether a failed attempt of ``method`` may be sent again.

        A request that was never sent (connect failure) is safe for any method; otherwise the
        method must be idempotent, or carry an idempotency key with ``retry_writes_with_key``.
        """
        if not sent:
            return True
        m = (method or "GET").upper()
        if m in self.idempotent_methods:
            return True
        return has_idempotency_key and self.retry_writes_with_key

    def retried_statuses(self) -> frozenset[int]:
        """The statuses an attempt may be retried after under this policy.

        The profile's transient statuses, and its (conditional) rate-limit statuses when the
        policy waits on rate limits (``fail_fast`` never retries one). The integrations read
        such a response's body at once, so its connection goes back to the pool before a wait;
        with :meth:`Profile.body_statuses` this is every non-2xx body they read.
        """
        profile = self.profile
        if self.rate_limit is not RateLimitMode.WAIT:
            return profile.transient
        return profile.transient | profile.rate_limited | profile.conditional_rate_limited


def interactive(**changes: Any) -> Policy:
    """The interactive gateway contract (docs/design.md).

    ``fail_fast`` on rate limits, 3 attempts inside a 2 s deadline, short bounded
    backoff (50 ms doubling, capped at 250 ms, equal jitter), and no server wait longer than 1 s.
    The profile is ``generic`` unless given (``interactive(profile="auto")`` picks by host).
    """
    base = Policy(
        name="interactive",
        max_attempts=3,
        deadline=2.0,
        backoff=Backoff(base=0.05, cap=0.25, multiplier=2.0, jitter=Jitter.EQUAL),
        rate_limit=RateLimitMode.FAIL_FAST,
        max_server_wait=1.0,
    )
    return base.replace(**changes) if changes else base


def background(profile: Profile | str = "auto", **changes: Any) -> Policy:
    """Worker jobs: wait out rate limits within budget, with provider minimums.

    5 attempts inside 15 minutes, backoff from 1 s doubling to 60 s with full jitter.

    The profile is ``"auto"`` by default: each request is classified by the profile of its
    host when that is a well-known API host (``api.github.com`` → ``github``, with its 60 s
    floor for a rate limit that names no time; ``api.stripe.com`` → ``stripe``…), and by
    ``generic`` for any other host. Name a profile (``background("github")``), pass one, or
    map your own hosts with :func:`~retrybudget.auto` (``auto({"api.internal": my_profile})``).
    A plain callable (no URL) is classified by ``generic`` under ``auto``.
    """
    base = Policy(
        name="background",
        max_attempts=5,
        deadline=900.0,
        backoff=Backoff(base=1.0, cap=60.0, multiplier=2.0, jitter=Jitter.FULL),
        rate_limit=RateLimitMode.WAIT,
        profile=get_profile(profile),
    )
    return base.replace(**changes) if changes else base


PRESETS: Mapping[str, Callable[[], Policy]] = MappingProxyType({
    "interactive": interactive, "background": background, "default": Policy,
})
"""The built-in policies by name (a command's ``--policy NAME``, a policy file's ``base``)."""
